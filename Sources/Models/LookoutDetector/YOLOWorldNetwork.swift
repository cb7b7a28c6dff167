import LookoutTensor
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The ultralytics YOLO-World v2 network (`cfg/models/v8/yolov8{n,s,m,l,x}-worldv2.yaml`), every width and
/// repeat count read from the weights, BatchNorm folded into the convolutions at load as `fuse()` does.
///
/// The pass is split where the text enters: ``backbone(_:)`` (layers 0–9) and most of layer 12 depend on the
/// image alone, so ``imageFeatures(_:backend:)`` keeps them and a new query set runs only the rest of
/// ``head(_:text:classes:)`` (layer 12's attention and `cv2`, layers 13–22).
public final class YOLOWorldNetwork: Sendable {
    /// The weight file the network was loaded from.
    public let path: String
    /// Size of the text embeddings the neck and head consume (512 for CLIP ViT-B/32).
    public let embeddingSize: Int
    /// Strides of the three output levels.
    public let strides: [Int]
    /// Channels of the backbone's three outputs (P3, P4, P5), at strides 8, 16 and 32 of the input.
    public let featureChannels: [Int]
    /// The class names and text features stored in the checkpoint (ultralytics `names`, `txt_feats`), if any.
    public let builtinText: [Float]?
    public let builtinClassCount: Int

    let layers: Backbone  // layers 0–9
    let neck12: C2f, neck15: C2f, neck18: C2f, neck21: C2f
    let down16: Convolution, down19: Convolution
    let detectHead: ContrastiveHead
    /// The arithmetic of its convolutions.
    public let precision: Precision
    /// ``precision`` in words that tell apart every arithmetic whose results differ: `fp32`, `bf16`, or for int8
    /// the weights' width on this CPU (8 bits with VNNI, 7 without) and which calibration (``ActivationRanges/digest``),
    /// e.g. `int8 (8-bit weights, calibration 3f2a9c1e)`. What caches and indexes key results by.
    public let arithmetic: String

    /// Binds the network to `weights` strictly: every tensor it takes has the shape the layers around it
    /// imply (a file whose layers do not fit together is an error naming them, never a read out of bounds),
    /// and a tensor it does not take is an error too (BatchNorm's `num_batches_tracked` aside).
    /// `precision`: the arithmetic of the convolutions (bf16 where the CPU has it; see ``Precision``); int8 needs
    /// the input ranges `lookout models calibrate` stores in the file. `recorder`: records every convolution's
    /// input range as the network runs (calibration).
    public init(
        weights: WeightFile, precision: Precision = .fp32, recorder: ActivationRecorder? = nil,
        kernels: KernelSettings = .environment
    )
        throws(WeightsError)
    {
        let file = WeightBinding(weights, precision: precision, recorder: recorder, kernels: kernels)
        self.precision = precision
        path = weights.path
        arithmetic = try file.arithmetic()
        guard file.has("model.0.conv.weight"), DetectorFamilies.headIndex(weights.tensors) == 22 else {
            throw WeightsError(
                path: file.path, kind: .wrongModel,
                problem:
                    "not a YOLO-World v2 detector: expected model.0.conv.weight and a WorldDetect head with BNContrastiveHead at model.22"
            )
        }
        layers = try Backbone(in: file, attention: false)
        featureChannels = layers.outputChannels
        neck12 = try C2f("model.12", shortcut: false, attention: true, in: file)
        neck15 = try C2f("model.15", shortcut: false, attention: true, in: file)
        down16 = try Convolution(conv: "model.16", stride: 2, in: file)
        neck18 = try C2f("model.18", shortcut: false, attention: true, in: file)
        down19 = try Convolution(conv: "model.19", stride: 2, in: file)
        neck21 = try C2f("model.21", shortcut: false, attention: true, in: file)
        detectHead = try ContrastiveHead("model.22", in: file)
        embeddingSize = detectHead.embeddingSize
        guard neck12.attention?.guideChannels == embeddingSize else {
            throw WeightsError(
                path: file.path,
                problem:
                    "the neck's text size (model.12.attn.gl) differs from the head's embedding size \(embeddingSize)")
        }
        if let stride = file.attributes["model.22.stride"], stride.count == 3 {
            let values = stride.floats()
            guard values.allSatisfy({ $0.isFinite && $0 >= 1 && $0 <= 1024 && $0.rounded() == $0 }) else {
                throw WeightsError(
                    path: file.path,
                    problem: "model.22.stride holds \(values): expected three whole numbers from 1 to 1024")
            }
            strides = values.map { Int($0) }
        } else {
            strides = [8, 16, 32]
        }
        if let text = file.attributes["txt_feats"], text.shape.count == 3, text.shape[2] == embeddingSize {
            builtinText = text.floats()
            builtinClassCount = text.shape[1]
        } else {
            builtinText = nil
            builtinClassCount = 0
        }
        let connected = try checkConnections(path: file.path)
        assert(connected == featureChannels)
        try file.requireEverythingTaken(
            ignoring: { $0.hasSuffix(".num_batches_tracked") }, model: "YOLO-World v2 detector")
    }

    /// Layers 0–9. Returns the maps the rest of the network reads: P3 (layer 4), P4 (layer 6), P5 (layer 9).
    public func backbone(_ image: FeatureMap, backend: any ComputeBackend = CPUBackend.shared) -> [FeatureMap] {
        layers(image, backend: backend)
    }

    /// What a prepared image keeps (``DetectorNetwork/imageFeatures(_:backend:)``): P3, P4, P5 and layer 12's
    /// text-free part (``C2f/textFree(_:backend:)``: its input is P4 and P5 alone), so that a new query set starts
    /// at the attention of layer 12. s at 640: 6.6 of the neck's ~40 ms in fp32.
    public func imageFeatures(_ image: FeatureMap, backend: any ComputeBackend = CPUBackend.shared) -> [FeatureMap] {
        let features = backbone(image, backend: backend)
        return features + [textFree(features, backend: backend)]
    }

    func textFree(_ features: [FeatureMap], backend: any ComputeBackend) -> FeatureMap {
        neck12.textFree(StackedMaps([backend.upsample(features[2]), features[1]]), backend: backend)
    }

    /// Channels and stride of each map ``imageFeatures(_:backend:)`` gives.
    public var keptMaps: [(channels: Int, stride: Int)] {
        backboneMaps + [(neck12.textFreeChannels, 16)]
    }

    /// Layers 10–21: the text-guided neck, from ``backbone(_:backend:)``'s maps or ``imageFeatures(_:backend:)``'s.
    /// Returns the three head inputs (layers 15, 18, 21).
    public func neck(
        _ features: [FeatureMap], text: [Float], classes: Int, backend: any ComputeBackend = CPUBackend.shared
    ) -> [FeatureMap] {
        let (p3, p5) = (features[0], features[2])
        let kept = features.count > 3 ? features[3] : textFree(features, backend: backend)
        let x12 = neck12(kept: kept, guide: text, classes: classes, backend: backend)
        let x15 = neck15(StackedMaps([backend.upsample(x12), p3]), guide: text, classes: classes, backend: backend)
        let x18 = neck18(
            StackedMaps([down16(x15, backend: backend), x12]), guide: text, classes: classes, backend: backend)
        let x21 = neck21(
            StackedMaps([down19(x18, backend: backend), p5]), guide: text, classes: classes, backend: backend)
        return [x15, x18, x21]
    }

    /// Neck and head from backbone outputs: `(4 + classes) × anchors` values, row-major, as ultralytics'
    /// inference output `(1, 4 + nc, A)`: box centre x, centre y, width, height in input pixels, then
    /// one sigmoid score per class. `text` is `classes × embeddingSize`.
    public func head(
        _ features: [FeatureMap], text: [Float], classes: Int, backend: any ComputeBackend = CPUBackend.shared
    ) -> [Float] {
        var unused: [[Float]]? = nil
        return detectHead.run(
            neck(features, text: text, classes: classes, backend: backend), text: text, classes: classes,
            strides: strides,
            embeddings: &unused, backend: backend
        ).output
    }

    /// `head`, plus the region embeddings of every anchor as the head keeps them (per level `embeddingSize ×
    /// plane`, channel-major). A region's score for any text t is
    /// `sigmoid(⟨e, t/‖t‖⟩·exp(logitScale) + bias)` with its level's `scoreParameters`: exact for the
    /// query set that conditioned the neck, an approximation for others.
    public func headWithRegionMaps(
        _ features: [FeatureMap], text: [Float], classes: Int, backend: any ComputeBackend = CPUBackend.shared
    ) -> (output: [Float], embeddings: [[Float]]) {
        let neckOutputs = neck(features, text: text, classes: classes, backend: backend)
        var kept: [[Float]]? = []
        let output = detectHead.run(
            neckOutputs, text: text, classes: classes, strides: strides, embeddings: &kept, backend: backend
        ).output
        return (output, kept!)
    }

    /// Per level, the contrastive head's `(logitScale, bias)`: score = sigmoid(similarity·exp(logitScale) + bias).
    public var scoreParameters: [(logitScale: Float, bias: Float)] {
        detectHead.levels.map { ($0.logitScale, $0.bias) }
    }
}
