import LookoutTensor
import LookoutWeights

/// ultralytics' YOLOE (`cfg/models/{v8,11,26}/yoloe-{v8,11,26}[-seg].yaml`, ultralytics 8.4.190; THU-MIG, "YOLOE:
/// Real-Time Seeing Anything"), every width and repeat count read from the weights, BatchNorm folded at load.
///
/// Unlike YOLO-World the text does not enter the neck: ``backbone(_:backend:)`` and the neck depend on the
/// image alone, and a query set only meets the head. The text tower's output goes through the head's
/// auxiliary network (`reprta`, ``TextProjection``) as `get_tpe` does before `set_classes`; the head's
/// contrastive scoring is YOLO-World's. The `-seg` models add mask coefficients per anchor and a `Proto`
/// branch on the P3 map.
///
/// - YOLOE-v8: YOLOv8's C2f backbone and neck, the head of YOLO-World v2 (3×3 convolutions in its
///   embedding branch).
/// - YOLOE-11: YOLO11's C3k2 blocks, C2PSA (position-sensitive attention) after SPPF, and depthwise
///   separable convolutions in the head's embedding branch.
/// - YOLOE-26: YOLO11's graph with a residual SPPF (no activation after its first convolution), C3k2 with
///   attention in the last neck stage, box distances without DFL (`reg_max=1`), ``Proto26`` fed by all three
///   maps, and a one-to-one twin of each head branch (`one2one_*`). ultralytics predicts with the one-to-many
///   branch and NMS by default; ``run(_:classEmbeddings:classes:oneToOne:backend:)`` runs the twin instead, whose
///   output is kept by top-k (``NonMaxSuppression/topK(_:classes:options:)``) instead of NMS.
///
/// A prompt-free file (`-pf`: `lrpc` in the head, no `reprta`) runs its own vocabulary (``PromptFreeHead``,
/// ``promptFreeNames``) and takes no text. A file's `savpe` (``VisualPromptEncoder``) turns boxes drawn on a photo
/// into class embeddings (``visualPromptEmbeddings(_:masks:backend:)``).
public final class YOLOENetwork: Sendable {
    public enum Family: String, Sendable {
        case v8 = "YOLOE-v8"
        case v11 = "YOLOE-11"
        case v26 = "YOLOE-26"
    }

    public let path: String
    public let family: Family
    /// The model's scale letter as ultralytics names it (from the stem's width), e.g. `s`.
    public let scale: String
    public let embeddingSize: Int
    /// The text tower whose embeddings the head was trained on: the family's MobileCLIP, unless the file
    /// names another (``TextTower/metadataKey``; the YOLOE demo model's is the demo CLIP text encoder).
    public let textTower: TextTower
    public let strides: [Int]
    /// Channels of the backbone's three outputs (P3, P4, P5).
    public let featureChannels: [Int]
    public let precision: Precision
    public let arithmetic: String
    /// Whether the head has a mask branch (a `-seg` model).
    public var segments: Bool { proto != nil }

    let layers: Backbone  // layers 0–9, and 10 (C2PSA) in YOLOE-11
    let neckUp1: C2f, neckUp2: C2f, neckDown1: C2f, neckDown2: C2f
    let down1: Convolution, down2: Convolution
    /// The text-prompt head and its text network (nil in a prompt-free file).
    let detectHead: ContrastiveHead?
    /// YOLOE-26's one-to-one twin of the head (`one2one_cv2`, …), used instead of NMS when asked for.
    let oneToOneHead: ContrastiveHead?
    /// Whether the file has the one-to-one head (YOLOE-26): ``run(_:classEmbeddings:classes:oneToOne:backend:)``
    /// can use it.
    public var hasOneToOneHead: Bool { oneToOneHead != nil }
    /// Whether this network runs the one-to-one head by default, its output kept by top-k instead of NMS
    /// (ultralytics' `nms=False`): chosen at load (`oneToOne`).
    public let keepsTopK: Bool
    let textProjection: TextProjection?
    /// A prompt-free file's head (`lrpc`), and the names of its vocabulary (the checkpoint's `names`).
    let promptFreeHead: PromptFreeHead?
    public let promptFreeNames: [String]?
    /// The visual prompt encoder (`savpe`), when the file has one.
    let visualPromptEncoder: VisualPromptEncoder?
    /// Whether the file can be asked with boxes drawn on a photo (it has SAVPE).
    public var acceptsVisualPrompts: Bool { visualPromptEncoder != nil }
    let proto: PrototypeBranch?
    /// Index of the head layer (22 for YOLOE-v8, 23 for YOLOE-11 and YOLOE-26).
    let headIndex: Int

    /// Binds the network to `weights` strictly, as ``YOLOWorldNetwork/init(weights:precision:recorder:)`` does.
    /// `oneToOne`: run YOLOE-26's one-to-one head by default (``keepsTopK``); a file without one is refused.
    public init(
        weights: WeightFile, precision: Precision = .fp32, recorder: ActivationRecorder? = nil, oneToOne: Bool = false,
        kernels: KernelSettings = .environment
    )
        throws(WeightsError)
    {
        let file = WeightBinding(weights, precision: precision, recorder: recorder, kernels: kernels)
        path = weights.path
        self.precision = precision
        arithmetic = try file.arithmetic()
        guard let head = DetectorFamilies.headIndex(weights.tensors), file.has("model.0.conv.weight"),
            file.has("model.\(head).reprta.m.w12.weight") || file.has("model.\(head).lrpc.0.vocab.weight")
        else {
            throw WeightsError(
                path: file.path, kind: .wrongModel,
                problem: "not a YOLOE model: expected model.0.conv.weight and a YOLOE head with reprta (text) weights")
        }
        switch head {
        case 22: family = .v8
        case 23 where file.has("model.10.m.0.attn.qkv.conv.weight"):
            // YOLO26's last neck stage is a C3k2 with attention blocks (`m.0.1.attn`); YOLO11's has none.
            family = file.has("model.22.m.0.1.attn.qkv.conv.weight") ? .v26 : .v11
        default:
            throw WeightsError(
                path: file.path, kind: .wrongModel,
                problem:
                    "a YOLOE head at model.\(head) with this layout is not supported: Lookout runs YOLOE-v8 (head 22), YOLOE-11 and YOLOE-26 (head 23 after C2PSA)"
            )
        }
        headIndex = head
        textTower = try TextTower.declared(by: weights) ?? (family == .v26 ? .mobileCLIP2 : .mobileCLIP)
        let stemWidth = try file.view("model.0.conv.weight").shape.first ?? 0
        scale = [16: "n", 32: "s", 48: "m", 64: "l", 80: "x"][stemWidth] ?? "custom (\(stemWidth) stem channels)"
        layers = try Backbone(in: file, attention: family != .v8, yolo26: family == .v26)
        // YOLOE-v8's neck C2f have no shortcut (args [512]); YOLO11's C3k2 keep theirs (shortcut=True).
        let (first, shortcut) = family == .v8 ? (12, false) : (13, true)
        neckUp1 = try C2f("model.\(first)", shortcut: shortcut, attention: false, in: file)
        neckUp2 = try C2f("model.\(first + 3)", shortcut: shortcut, attention: false, in: file)
        down1 = try Convolution(conv: "model.\(first + 4)", stride: 2, in: file)
        neckDown1 = try C2f("model.\(first + 6)", shortcut: shortcut, attention: false, in: file)
        down2 = try Convolution(conv: "model.\(first + 7)", stride: 2, in: file)
        neckDown2 = try C2f("model.\(first + 9)", shortcut: shortcut, attention: false, in: file)
        let prefix = "model.\(head)"
        let segments = file.has(prefix + ".proto.cv1.conv.weight")
        oneToOneHead =
            file.has(prefix + ".one2one_cv2.0.0.conv.weight") && !file.has(prefix + ".lrpc.0.vocab.weight")
            ? try ContrastiveHead(prefix, branch: "one2one_", masks: segments, in: file) : nil
        if file.has(prefix + ".lrpc.0.vocab.weight") {
            // On the one-to-one twin when the one-to-many branches were fused away (YOLOE-26 made end to end).
            let twin = file.has(prefix + ".one2one_cv2.0.0.conv.weight") && !file.has(prefix + ".cv2.0.0.conv.weight")
            let promptFree = try PromptFreeHead(
                prefix, branch: twin ? "one2one_" : "", masks: segments, in: file)
            let names = weights.classNames
            guard names.count == promptFree.names else {
                throw WeightsError(
                    path: file.path,
                    problem:
                        "a prompt-free head of \(promptFree.names) classes, but the checkpoint names \(names.count) (model.names)"
                )
            }
            (promptFreeHead, promptFreeNames) = (promptFree, names)
            (detectHead, textProjection) = (nil, nil)
            // No text enters a prompt-free model; its "embeddings" are one number, so no text tower fits it.
            embeddingSize = 1
        } else {
            let detectHead = try ContrastiveHead(prefix, masks: segments, in: file)
            (promptFreeHead, promptFreeNames) = (nil, nil)
            self.detectHead = detectHead
            embeddingSize = detectHead.embeddingSize
            textProjection = try TextProjection(prefix + ".reprta.m", in: file)
        }
        if !segments {
            proto = nil
        } else if file.has(prefix + ".proto.feat_fuse.conv.weight") {
            proto = .proto26(try Proto26(prefix + ".proto", in: file))
        } else {
            proto = .proto(try Proto(prefix + ".proto", in: file))
        }
        visualPromptEncoder =
            file.has(prefix + ".savpe.cv3.weight") ? try VisualPromptEncoder(prefix + ".savpe", in: file) : nil
        featureChannels = layers.outputChannels
        if let stride = file.attributes["\(prefix).stride"], stride.count == 3 {
            let values = stride.floats()
            guard values.allSatisfy({ $0.isFinite && $0 >= 1 && $0 <= 1024 && $0.rounded() == $0 }) else {
                throw WeightsError(
                    path: file.path,
                    problem: "\(prefix).stride holds \(values): expected three whole numbers from 1 to 1024"
                )
            }
            strides = values.map { Int($0) }
        } else {
            strides = [8, 16, 32]
        }
        // A prompt-free head on the one-to-one twin is kept by top-k whatever was asked, as ultralytics keeps it.
        let promptFreeOneToOne = promptFreeHead?.branch == "one2one_"
        keepsTopK = oneToOne || promptFreeOneToOne
        if oneToOne && oneToOneHead == nil && !promptFreeOneToOne {
            throw WeightsError(
                path: file.path,
                problem:
                    "this \(family.rawValue) file has no one-to-one head (one2one_cv2, …): only YOLOE-26 text-prompt files have one; leave out --end-to-end"
            )
        }
        try checkConnections(path: file.path)
        // Proto26's `semseg` is a training-only branch (ultralytics' `fuse()` deletes it before predicting).
        let training = prefix + ".proto.semseg."
        try file.requireEverythingTaken(
            ignoring: { $0.hasSuffix(".num_batches_tracked") || $0.hasPrefix(training) },
            model: "\(family.rawValue) model")
    }

    /// Layers 0–9 (and 10, C2PSA, in YOLOE-11): P3, P4, P5.
    public func backbone(_ image: FeatureMap, backend: any ComputeBackend = CPUBackend.shared) -> [FeatureMap] {
        layers(image, backend: backend)
    }

    /// The neck (no text in YOLOE): the head's three inputs.
    public func neck(_ features: [FeatureMap], backend: any ComputeBackend = CPUBackend.shared) -> [FeatureMap] {
        let (p3, p4, p5) = (features[0], features[1], features[2])
        let up1 = neckUp1(StackedMaps([backend.upsample(p5), p4]), backend: backend)
        let small = neckUp2(StackedMaps([backend.upsample(up1), p3]), backend: backend)
        let medium = neckDown1(StackedMaps([down1(small, backend: backend), up1]), backend: backend)
        let large = neckDown2(StackedMaps([down2(medium, backend: backend), p5]), backend: backend)
        return [small, medium, large]
    }

    /// The class embeddings the head dots with, from the text tower's output (`classes × embeddingSize`):
    /// ultralytics' `get_tpe`, `normalize(t + reprta(t))`.
    public func classEmbeddings(_ text: [Float], classes: Int) -> [Float] {
        guard let textProjection else { return text }
        return textProjection(text, rows: classes)
    }

    /// Neck and head from backbone outputs, for text-tower embeddings `text` (`classes × embeddingSize`).
    public func run(
        _ features: [FeatureMap], text: [Float], classes: Int, backend: any ComputeBackend = CPUBackend.shared
    ) -> HeadOutput {
        run(features, classEmbeddings: classEmbeddings(text, classes: classes), classes: classes, backend: backend)
    }

    /// Neck and head for class embeddings already through ``classEmbeddings(_:classes:)``. `oneToOne`: YOLOE-26's
    /// one-to-one head instead of the one-to-many one (ultralytics' `nms=False`; the file must have it); by
    /// default the head chosen at load (``keepsTopK``).
    public func run(
        _ features: [FeatureMap], classEmbeddings: [Float], classes: Int, oneToOne: Bool? = nil,
        backend: any ComputeBackend = CPUBackend.shared
    )
        -> HeadOutput
    {
        let maps = neck(features, backend: backend)
        var unused: [[Float]]? = nil
        let oneToOne = oneToOne ?? keepsTopK
        precondition(!oneToOne || oneToOneHead != nil || promptFreeHead != nil, "\(path) has no one-to-one head")
        let head = oneToOne ? oneToOneHead : detectHead
        let (output, coefficients) =
            promptFreeHead?.run(maps, strides: strides, backend: backend)
            ?? head!.run(
                maps, text: classEmbeddings, classes: classes, strides: strides, embeddings: &unused, backend: backend)
        guard let proto, let coefficients else { return HeadOutput(output: output, masks: nil) }
        return HeadOutput(
            output: output, masks: MaskPrototypes(coefficients: coefficients, prototypes: proto(maps, backend: backend))
        )
    }

    /// Visual prompt embeddings (ultralytics `get_vpe`): for a prompt photo's backbone outputs and one mask per
    /// prompt on its P3 grid (``VisualPromptMasks``), `masks.count × embeddingSize` class embeddings for
    /// ``run(_:classEmbeddings:classes:backend:)`` (they do not go through `reprta`).
    public func visualPromptEmbeddings(
        _ features: [FeatureMap], masks: [[UInt8]], backend: any ComputeBackend = CPUBackend.shared
    ) -> [Float] {
        guard let visualPromptEncoder else { preconditionFailure("\(path) has no visual prompt encoder (savpe)") }
        return visualPromptEncoder(neck(features, backend: backend), masks: masks, backend: backend)
    }

    /// Per level, the contrastive head's `(logitScale, bias)`.
    public var scoreParameters: [(logitScale: Float, bias: Float)] {
        detectHead?.levels.map { ($0.logitScale, $0.bias) } ?? []
    }

    func checkConnections(path: String) throws(WeightsError) {
        let check = ConnectionCheck(path: path)
        let outputs = try check.check(layers)
        let (p3, p4, p5) = (outputs[0], outputs[1], outputs[2])
        let first = family == .v8 ? 12 : 13
        let up1 = try check.check(neckUp1, "model.\(first)", receives: p5 + p4)
        let small = try check.check(neckUp2, "model.\(first + 3)", receives: up1 + p3)
        let d1 = try check.check(down1, "model.\(first + 4)", receives: small)
        let medium = try check.check(neckDown1, "model.\(first + 6)", receives: d1 + up1)
        let d2 = try check.check(down2, "model.\(first + 7)", receives: medium)
        let large = try check.check(neckDown2, "model.\(first + 9)", receives: d2 + p5)
        let maskCoefficients: Int
        if let promptFreeHead {
            try check.check(promptFreeHead, "model.\(headIndex)", receives: [small, medium, large])
            maskCoefficients = promptFreeHead.maskCoefficients
        } else if let detectHead, let textProjection {
            try check.check(detectHead, "model.\(headIndex)", receives: [small, medium, large])
            maskCoefficients = detectHead.maskCoefficients
            if let twin = oneToOneHead {
                try check.check(twin, "model.\(headIndex)", receives: [small, medium, large])
                guard twin.embeddingSize == embeddingSize, twin.bins == detectHead.bins,
                    twin.maskCoefficients == maskCoefficients
                else {
                    throw check.fail(
                        "model.\(headIndex).one2one_* differ from the one-to-many head in embedding size, box bins or mask coefficients"
                    )
                }
            }
            guard textProjection.size == embeddingSize else {
                throw check.fail(
                    "model.\(headIndex).reprta takes \(textProjection.size)-d text, the head's embeddings are \(embeddingSize)-d"
                )
            }
        } else {
            preconditionFailure("a YOLOE network has a text-prompt or a prompt-free head")
        }
        if let encoder = visualPromptEncoder {
            let name = "model.\(headIndex).savpe"
            var featureChannels = 0, contextChannels = 0
            for (i, channels) in [small, medium, large].enumerated() {
                let hidden = try check.check(encoder.features[i][0], "\(name).cv1.\(i).0", receives: channels)
                featureChannels += try check.check(encoder.features[i][1], "\(name).cv1.\(i).1", receives: hidden)
                contextChannels += try check.check(encoder.context[i], "\(name).cv2.\(i).0", receives: channels)
            }
            let embedding = try check.check(encoder.project, name + ".cv3", receives: featureChannels)
            let spatial = try check.check(encoder.contextMix, name + ".cv4", receives: contextChannels)
            let prompt = try check.check(encoder.maskConvolution, name + ".cv5", receives: 1)
            let joined = try check.check(encoder.join[0], name + ".cv6.0", receives: spatial + prompt)
            _ = try check.check(encoder.join[1], name + ".cv6.1", receives: joined)
            guard embedding == embeddingSize || promptFreeHead != nil else {
                throw check.fail(
                    "\(name).cv3 gives \(embedding)-d prompt embeddings, the head's are \(embeddingSize)-d")
            }
        }
        if let branch = proto {
            let name = "model.\(headIndex).proto"
            let proto: Proto
            var first = small
            switch branch {
            case .proto(let plain): proto = plain
            case .proto26(let proto26):
                for (index, channels) in [medium, large].enumerated() {
                    let refined = try check.check(
                        proto26.refine[index], "\(name).feat_refine.\(index)", receives: channels)
                    guard refined == small else {
                        throw check.fail("\(name).feat_refine.\(index) gives \(refined) channels, P3 has \(small)")
                    }
                }
                first = try check.check(proto26.fuse, name + ".feat_fuse", receives: small)
                proto = proto26.proto
            }
            let hidden = try check.check(proto.cv1, "model.\(headIndex).proto.cv1", receives: first)
            try check.expect("model.\(headIndex).proto.upsample", inputs: proto.upsample.inputs, receives: hidden)
            let up = try check.check(proto.cv2, "model.\(headIndex).proto.cv2", receives: proto.upsample.outputs)
            let count = try check.check(proto.cv3, "model.\(headIndex).proto.cv3", receives: up)
            guard count == maskCoefficients else {
                throw check.fail(
                    "model.\(headIndex).proto gives \(count) prototypes but cv5 gives \(maskCoefficients) coefficients"
                )
            }
        }
        assert(outputs == featureChannels)
    }
}

extension ConnectionCheck {
    func check(_ block: C2PSA, _ name: String, receives channels: Int) throws(WeightsError) -> Int {
        let hidden = try check(block.cv1, name + ".cv1", receives: channels)
        guard hidden % 2 == 0 else { throw fail("\(name).cv1 gives \(hidden) channels, which do not split in halves") }
        let half = hidden / 2
        for (index, psa) in block.blocks.enumerated() {
            _ = try check(psa, "\(name).m.\(index)", receives: half)
        }
        return try check(block.cv2, name + ".cv2", receives: hidden)
    }

    /// A `PSABlock` receiving `channels`; its residual sums need every part to give them back.
    func check(_ psa: PositionAttentionBlock, _ prefix: String, receives channels: Int) throws(WeightsError) -> Int {
        let attention = psa.attention
        try expect(prefix + ".attn.qkv", inputs: attention.qkv.inputs, receives: channels)
        _ = try check(attention.qkv, prefix + ".attn.qkv", receives: channels)
        try expect(
            prefix + ".attn.pe", inputs: attention.positional.inputs, receives: attention.heads * attention.headSize)
        let out = try check(attention.projection, prefix + ".attn.proj", receives: attention.positional.outputs)
        let expanded = try check(psa.expand, prefix + ".ffn.0", receives: out)
        let back = try check(psa.contract, prefix + ".ffn.1", receives: expanded)
        guard out == channels, back == channels else {
            throw fail("\(prefix) gives \(back) channels, expected \(channels)")
        }
        return channels
    }
}
