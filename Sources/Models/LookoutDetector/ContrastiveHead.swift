import LookoutTensor
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The mask side of a segmentation head's output for one image: per anchor `count` coefficients, and the
/// prototypes they weight (`count × height × width`, a quarter of the input's resolution).
public struct MaskPrototypes: Sendable {
    /// `count × anchors`, row-major, in the output's anchor order.
    public let coefficients: [Float]
    public let prototypes: FeatureMap
    public var count: Int { prototypes.channels }
}

/// What the neck and head give for one image and one query set.
public struct HeadOutput: Sendable {
    /// `(4 + classes) × anchors`, row-major, as ultralytics' inference output: box centre x, centre y, width,
    /// height in input pixels, then one sigmoid score per class.
    public var output: [Float]
    /// With a segmentation head: the mask coefficients and prototypes.
    public var masks: MaskPrototypes?
}

/// `F.normalize` of each of `rows` rows of `size` values: x / max(‖x‖, 1e-12).
func normalizedRows(_ values: [Float], rows: Int, size: Int) -> [Float] {
    var normalized = values
    for k in 0..<rows {
        var squares: Float = 0
        for d in 0..<size { squares += values[k * size + d] * values[k * size + d] }
        let norm = max(squares.squareRoot(), 1e-12)
        for d in 0..<size { normalized[k * size + d] = values[k * size + d] / norm }
    }
    return normalized
}

/// A layer of the head's embedding branch before its last 1×1 convolution: a `Conv`, or in YOLOE-11 a
/// depthwise `DWConv`.
enum HeadLayer: Sendable {
    case conv(Convolution)
    case depthwise(DepthwiseConvolution)

    var inputs: Int {
        switch self {
        case .conv(let layer): layer.inputs
        case .depthwise(let layer): layer.inputs
        }
    }

    func callAsFunction(_ x: FeatureMap, backend: any ComputeBackend) -> FeatureMap {
        switch self {
        case .conv(let layer): layer(x, backend: backend)
        case .depthwise(let layer): layer(x, backend: backend)
        }
    }
}

/// The contrastive detection head both families share: ultralytics' `WorldDetect` with `BNContrastiveHead` in
/// YOLO-World v2, and YOLOE's `YOLOEDetect`, the same head. Per level a box branch
/// (`cv2`: two 3×3 convs and a 1×1 conv to 4×16 distribution bins) and an embedding branch (`cv3`: two 3×3
/// convs — in YOLOE-11 each a depthwise 3×3 and a 1×1 — and a 1×1 conv to the embedding size) whose output,
/// batch-normalised, is dotted with each L2-normalised text feature, times `exp(logit_scale)` plus a bias;
/// DFL turns the bins into distances, anchors and strides into boxes. YOLOE's segmentation head adds per
/// level a mask branch (`cv5`: two 3×3 convs and a 1×1 conv to the 32 mask coefficients). YOLOE-26's head
/// has one bin per side (`reg_max=1`, no DFL: the four channels are the distances) and a one-to-one twin of
/// every branch, named `one2one_cv2`, … (`branch`).
struct ContrastiveHead: Sendable {
    struct Level: Sendable {
        let box: [Convolution]
        let hidden: [HeadLayer]
        let last: Convolution
        let mask: [Convolution]
        let normScale: [Float]  // BN as y = x·scale + shift, per channel
        let normShift: [Float]
        let logitScale: Float
        let bias: Float
    }

    let levels: [Level]
    /// The branches' name prefix: empty, or `one2one_` for YOLOE-26's one-to-one twin.
    let branch: String
    let embeddingSize: Int
    /// Distribution bins per box side (16; 1 in YOLOE-26, whose box channels are the distances).
    let bins: Int
    /// Mask coefficients per anchor (0 without a mask branch).
    let maskCoefficients: Int

    init(_ prefix: String, branch: String = "", masks: Bool = false, in file: WeightBinding) throws(WeightsError) {
        var levels: [Level] = []
        var index = 0
        let named = prefix + "." + branch
        while file.has("\(named)cv2.\(index).0.conv.weight") {
            let p2 = "\(named)cv2.\(index)", p3 = "\(named)cv3.\(index)", p4 = "\(named)cv4.\(index)"
            let box = [
                try Convolution(conv: p2 + ".0", stride: 1, in: file),
                try Convolution(conv: p2 + ".1", stride: 1, in: file),
                try Convolution(plain: p2 + ".2", in: file),
            ]
            let hidden = try Self.hiddenLayers(p3, in: file)
            let last = try Convolution(plain: p3 + ".2", in: file)
            let mask = masks ? try Self.maskBranch("\(named)cv5.\(index)", in: file) : []
            let width = last.outputs
            let bn = try BatchNormStatistics(p4 + ".norm", channels: width, in: file)
            // PyTorch's eval BatchNorm (ATen `batch_norm_cpu` inference): α = (1/√(var + eps))·γ, y = fma(x, α, fma(−μ, α, β)).
            var scale = [Float](repeating: 0, count: width)
            var shift = [Float](repeating: 0, count: width)
            for c in 0..<width {
                scale[c] = 1 / (bn.variance[c] + bn.epsilon).squareRoot() * bn.gamma[c]
                shift[c] = bn.beta[c].addingProduct(-bn.mean[c], scale[c])
            }
            levels.append(
                Level(
                    box: box, hidden: hidden, last: last, mask: mask, normScale: scale, normShift: shift,
                    logitScale: try file.floats(p4 + ".logit_scale", shape: []).first ?? 0,
                    bias: try file.floats(p4 + ".bias", shape: [1]).first ?? 0))
            index += 1
        }
        guard levels.count == 3 else {
            throw WeightsError(
                path: file.path, problem: "\(named)cv2 has \(levels.count) output levels, expected 3")
        }
        self.levels = levels
        self.branch = branch
        embeddingSize = levels[0].last.outputs
        bins = levels[0].box[2].outputs / 4
        maskCoefficients = levels[0].mask.last?.outputs ?? 0
        // With one bin per side ultralytics' `dfl` is an Identity, without weights; the one-to-one twin shares it.
        if bins > 1 && branch.isEmpty {
            let dfl = try file.floats(prefix + ".dfl.conv.weight", shape: [1, bins, 1, 1])
            guard dfl == (0..<bins).map(Float.init) else {
                throw WeightsError(path: file.path, problem: "\(prefix).dfl.conv.weight is not 0, 1, …, \(bins - 1)")
            }
        }
    }

    /// A segmentation head level's mask branch `cv5.N`: two 3×3 `Conv`s and a 1×1 conv to the coefficients.
    static func maskBranch(_ prefix: String, in file: WeightBinding) throws(WeightsError) -> [Convolution] {
        [
            try Convolution(conv: prefix + ".0", stride: 1, in: file),
            try Convolution(conv: prefix + ".1", stride: 1, in: file),
            try Convolution(plain: prefix + ".2", in: file),
        ]
    }

    /// The embedding branch `cv3.N` before its last convolution: two 3×3 convs, or (YOLOE-11) two depthwise
    /// 3×3 and 1×1 pairs.
    static func hiddenLayers(_ p3: String, in file: WeightBinding) throws(WeightsError) -> [HeadLayer] {
        file.has(p3 + ".0.0.conv.weight")
            ? [
                .depthwise(try DepthwiseConvolution(conv: p3 + ".0.0", in: file)),
                .conv(try Convolution(conv: p3 + ".0.1", stride: 1, in: file)),
                .depthwise(try DepthwiseConvolution(conv: p3 + ".1.0", in: file)),
                .conv(try Convolution(conv: p3 + ".1.1", stride: 1, in: file)),
            ]
            : [
                .conv(try Convolution(conv: p3 + ".0", stride: 1, in: file)),
                .conv(try Convolution(conv: p3 + ".1", stride: 1, in: file)),
            ]
    }

    /// The head's output for the neck's maps; when `embeddings` is non-nil on entry it receives each level's
    /// batch-normalised region embeddings (`embeddingSize × plane`, channel-major): what the contrastive head
    /// dots with text. With a mask branch and `masks`, it also returns the mask coefficients
    /// (`maskCoefficients × anchors`, row-major, in the output's anchor order).
    func run(
        _ inputs: [FeatureMap], text: [Float], classes: Int, strides: [Int], embeddings kept: inout [[Float]]?,
        masks: Bool = true, backend: any ComputeBackend
    ) -> (output: [Float], coefficients: [Float]?) {
        let result = runMap(
            inputs, text: text, classes: classes, strides: strides, embeddings: &kept, masks: masks, backend: backend)
        return (backend.floats(result.output), result.coefficients)
    }

    /// ``run(_:text:classes:strides:embeddings:masks:backend:)`` with the output left as a map
    /// (`(4 + classes) × 1 × anchors`) where the backend computed it.
    func runMap(
        _ inputs: [FeatureMap], text: [Float], classes: Int, strides: [Int], embeddings kept: inout [[Float]]?,
        masks: Bool = true, backend: any ComputeBackend
    ) -> (output: FeatureMap, coefficients: [Float]?) {
        let normalized = normalizedRows(text, rows: classes, size: embeddingSize)
        let anchors = inputs.reduce(0) { $0 + $1.plane }
        var output = FeatureMap(channels: 4 + classes, height: 1, width: anchors)
        // The branches (embedding, box and mask of three levels) are independent: each runs on one thread
        // (their convolutions inline), the largest first, so that both threads stay busy without a barrier
        // after every small convolution. The arithmetic is the same as one branch at a time.
        let kinds = masks && maskCoefficients > 0 ? 3 : 2
        let order = (0..<(kinds * levels.count)).sorted { a, b in
            let (la, lb) = (a / kinds, b / kinds)
            let costA = inputs[la].plane * inputs[la].channels * (a % kinds == 0 ? 2 : 1)
            let costB = inputs[lb].plane * inputs[lb].channels * (b % kinds == 0 ? 2 : 1)
            return costA > costB
        }
        let levels = self.levels
        let computed = backend.tasks(order.count) { task in
            let branch = order[task]
            let (level, x) = (levels[branch / kinds], inputs[branch / kinds])
            let layers = branch % kinds == 1 ? level.box : level.mask
            return branch % kinds == 0
                ? level.hidden.reduce(x) { $1($0, backend: backend) }
                : layers[2](layers[1](layers[0](x, backend: backend), backend: backend), backend: backend)
        }
        var branches = [FeatureMap?](repeating: nil, count: order.count)
        for (task, branch) in order.enumerated() { branches[branch] = computed[task] }
        var coefficients: [Float]? = nil
        if kinds == 3 {
            let count = maskCoefficients
            var values = [Float](repeating: 0, count: count * anchors)
            var offset = 0
            for index in levels.indices {
                let map = branches[kinds * index + 2]!
                let floats = backend.floats(map)
                for c in 0..<count {
                    for p in 0..<map.plane { values[c * anchors + offset + p] = floats[c * map.plane + p] }
                }
                offset += map.plane
            }
            coefficients = values
        }
        var offset = 0
        for (index, (level, x)) in zip(levels, inputs).enumerated() {
            let box = branches[kinds * index + 1]!
            let hidden = branches[kinds * index]!
            // Class logits = weights · source + constants, per anchor.
            let weights: [Float], depth: Int, constants: [Float], source: FeatureMap
            if kept == nil {
                (weights, depth, constants) = foldedText(normalized, classes: classes, level: level, backend: backend)
                source = hidden
            } else {
                let embedding = regionEmbeddings(hidden, level: level, backend: backend)
                kept?.append(backend.floats(embedding))
                (weights, depth, constants, source) =
                    (normalized, embeddingSize, [Float](repeating: 0, count: classes), embedding)
            }
            let geometry = AnchorGeometry(
                plane: x.plane, width: x.width, anchors: anchors, offset: offset, stride: Float(strides[index]),
                bins: bins, classes: classes)
            backend.contrastiveDecode(
                box: box, weights: weights, depth: depth, source: source, constants: constants,
                scale: expf(level.logitScale), bias: level.bias, geometry: geometry, into: &output)
            offset += x.plane
        }
        return (output, coefficients)
    }

    /// The class logits are t̂·BN(W·h + b) for the embedding branch's last 1×1 convolution W, b. Without a
    /// request for the embeddings, that is folded into the text side: logits = A·h + c with
    /// A = (t̂ ⊙ s)·W (classes × depth) and c = (t̂ ⊙ s)·b + t̂·shift; no 512-d map is formed.
    func foldedText(
        _ normalized: [Float], classes: Int, level: Level, backend: any ComputeBackend
    ) -> (weights: [Float], depth: Int, constants: [Float]) {
        let last = level.last
        let depth = last.inputs
        var constants = [Float](repeating: 0, count: classes)
        var scaled = normalized
        for k in 0..<classes {
            var constant: Float = 0
            for c in 0..<embeddingSize {
                let t = normalized[k * embeddingSize + c]
                scaled[k * embeddingSize + c] = t * level.normScale[c]
                constant += scaled[k * embeddingSize + c] * last.bias[c] + t * level.normShift[c]
            }
            constants[k] = constant
        }
        let weights = backend.matmul(scaled, last.weight, m: classes, n: depth, k: embeddingSize)
        return (weights, depth, constants)
    }

    /// The batch-normalised region embeddings of a level (`embeddingSize × plane`): the last 1×1 convolution,
    /// then PyTorch's eval BatchNorm.
    func regionEmbeddings(_ hidden: FeatureMap, level: Level, backend: any ComputeBackend) -> FeatureMap {
        var embedding = level.last(hidden, backend: backend)
        backend.channelAffine(&embedding, scale: level.normScale, shift: level.normShift)
        return embedding
    }
}
