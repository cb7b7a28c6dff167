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

    func callAsFunction(_ x: FeatureMap, pool: ComputePool) -> FeatureMap {
        switch self {
        case .conv(let layer): layer(x, pool: pool)
        case .depthwise(let layer): layer(x, pool: pool)
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
        masks: Bool = true, pool: ComputePool
    ) -> (output: [Float], coefficients: [Float]?) {
        let normalized = normalizedRows(text, rows: classes, size: embeddingSize)
        let anchors = inputs.reduce(0) { $0 + $1.plane }
        var output = [Float](repeating: 0, count: (4 + classes) * anchors)
        // The branches (embedding, box and mask of three levels) are independent: each runs on one thread
        // (their convolutions inline), the largest first, so that both threads stay busy without a barrier
        // after every small convolution. The arithmetic is the same as one branch at a time.
        let kinds = masks && maskCoefficients > 0 ? 3 : 2
        let branches = UnsafeMutableBufferPointer<FeatureMap?>.allocate(capacity: kinds * levels.count)
        branches.initialize(repeating: nil)
        defer {
            _ = branches.deinitialize()  // the branches' maps are released here
            branches.deallocate()
        }
        let order = (0..<(kinds * levels.count)).sorted { a, b in
            let (la, lb) = (a / kinds, b / kinds)
            let costA = inputs[la].plane * inputs[la].channels * (a % kinds == 0 ? 2 : 1)
            let costB = inputs[lb].plane * inputs[lb].channels * (b % kinds == 0 ? 2 : 1)
            return costA > costB
        }
        let (slots, levels) = (UnsafeSendable(branches.baseAddress!), self.levels)
        pool.parallelFor(order.count, chunk: 1) { range in
            for task in range {
                let branch = order[task]
                let (level, x) = (levels[branch / kinds], inputs[branch / kinds])
                let layers = branch % kinds == 1 ? level.box : level.mask
                slots.pointer[branch] =
                    branch % kinds == 0
                    ? level.hidden.reduce(x) { $1($0, pool: pool) }
                    : layers[2](layers[1](layers[0](x, pool: pool), pool: pool), pool: pool)
            }
        }
        var coefficients: [Float]? = nil
        if kinds == 3 {
            let count = maskCoefficients
            var values = [Float](repeating: 0, count: count * anchors)
            var offset = 0
            for index in levels.indices {
                let map = branches[kinds * index + 2]!
                for c in 0..<count {
                    for p in 0..<map.plane { values[c * anchors + offset + p] = map.data[c * map.plane + p] }
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
            let weights: [Float], depth: Int, constants: [Float], source: [Float]
            if kept == nil {
                (weights, depth, constants) = foldedText(normalized, classes: classes, level: level)
                source = hidden.data
            } else {
                let embedding = regionEmbeddings(hidden, level: level, pool: pool)
                kept?.append(embedding)
                (weights, depth, constants, source) =
                    (normalized, embeddingSize, [Float](repeating: 0, count: classes), embedding)
            }
            let geometry = LevelGeometry(
                plane: x.plane, width: x.width, anchors: anchors, offset: offset, stride: Float(strides[index]),
                bins: bins, classes: classes)
            decode(
                box: box.data, weights: weights, depth: depth, source: source, constants: constants,
                scale: expf(level.logitScale), bias: level.bias, geometry: geometry, into: &output, pool: pool)
            offset += x.plane
        }
        return (output, coefficients)
    }

    /// Each level's region embeddings (channel-major, as ``run`` keeps them) as one anchors × size matrix.
    static func anchorMajor(_ kept: [[Float]], maps: [FeatureMap], size: Int) -> [Float] {
        let anchors = maps.reduce(0) { $0 + $1.plane }
        var embeddings = [Float](repeating: 0, count: anchors * size)
        var offset = 0
        for (map, data) in zip(maps, kept) {
            let plane = map.plane
            for p in 0..<plane {
                for c in 0..<size { embeddings[(offset + p) * size + c] = data[c * plane + p] }
            }
            offset += plane
        }
        return embeddings
    }

    /// Each anchor's level.
    static func levels(_ maps: [FeatureMap]) -> [UInt8] {
        maps.enumerated().flatMap { level, map in [UInt8](repeating: UInt8(level), count: map.plane) }
    }

    /// The class logits are t̂·BN(W·h + b) for the embedding branch's last 1×1 convolution W, b. Without a
    /// request for the embeddings, that is folded into the text side: logits = A·h + c with
    /// A = (t̂ ⊙ s)·W (classes × depth) and c = (t̂ ⊙ s)·b + t̂·shift; no 512-d map is formed.
    func foldedText(
        _ normalized: [Float], classes: Int, level: Level
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
        var weights = [Float](repeating: 0, count: classes * depth)
        scaled.withUnsafeBufferPointer { a in
            last.weight.withUnsafeBufferPointer { b in
                weights.withUnsafeMutableBufferPointer { c in
                    BLAS.gemm(
                        m: classes, n: depth, k: embeddingSize, a: a.baseAddress!, b: b.baseAddress!, c: c.baseAddress!)
                }
            }
        }
        return (weights, depth, constants)
    }

    /// The batch-normalised region embeddings of a level (`embeddingSize × plane`): the last 1×1 convolution,
    /// then PyTorch's eval BatchNorm.
    func regionEmbeddings(_ hidden: FeatureMap, level: Level, pool: ComputePool) -> [Float] {
        var embedding = level.last(hidden, pool: pool)
        let plane = embedding.plane
        level.normScale.withUnsafeBufferPointer { scale in
            level.normShift.withUnsafeBufferPointer { shift in
                embedding.data.withUnsafeMutableBufferPointer { e in
                    let scale = UnsafeSendable(scale.baseAddress!), shift = UnsafeSendable(shift.baseAddress!)
                    let e = UnsafeSendable(e.baseAddress!)
                    pool.parallelFor(embeddingSize, chunk: 16) { range in
                        for c in range {
                            let (a, b) = (scale.pointer[c], shift.pointer[c])
                            let row = e.pointer + c * plane
                            for p in 0..<plane { row[p] = b.addingProduct(row[p], a) }
                        }
                    }
                }
            }
        }
        return embedding.data
    }

    /// Where a level's anchors go in the output.
    struct LevelGeometry: Sendable {
        let plane: Int
        let width: Int
        let anchors: Int
        let offset: Int
        let stride: Float
        let bins: Int
        let classes: Int
    }

    /// logits[k, p] = Σ_c w[k, c]·x[c, p], columns split across the pool; then per anchor the DFL box and the
    /// class scores, written into the output at the level's anchors.
    func decode(
        box: [Float], weights: [Float], depth: Int, source: [Float], constants: [Float], scale: Float, bias: Float,
        geometry g: LevelGeometry, into output: inout [Float], pool: ComputePool
    ) {
        var logits = [Float](repeating: 0, count: g.classes * g.plane)
        weights.withUnsafeBufferPointer { w in
            source.withUnsafeBufferPointer { e in
                logits.withUnsafeMutableBufferPointer { l in
                    box.withUnsafeBufferPointer { boxData in
                        output.withUnsafeMutableBufferPointer { out in
                            let w = UnsafeSendable(w.baseAddress!), e = UnsafeSendable(e.baseAddress!)
                            let l = UnsafeSendable(l.baseAddress!), boxData = UnsafeSendable(boxData.baseAddress!)
                            let out = UnsafeSendable(out.baseAddress!)
                            pool.parallelFor(g.plane, chunk: 256) { range in
                                BLAS.gemm(
                                    m: g.classes, n: range.count, k: depth, a: w.pointer,
                                    b: e.pointer + range.lowerBound, c: l.pointer + range.lowerBound,
                                    lda: depth, ldb: g.plane, ldc: g.plane)
                                Self.decodeAnchors(
                                    range, box: boxData.pointer, logits: l.pointer, constants: constants, scale: scale,
                                    bias: bias, geometry: g, into: out.pointer)
                            }
                        }
                    }
                }
            }
        }
    }

    /// ``decodeAnchor(_:box:logits:constants:scale:bias:geometry:into:)`` for a run of anchors, the loops turned
    /// inside out: each bin's row is read along the run (a channel of the map) instead of 64 rows per anchor, eight
    /// anchors at a time with a vector exp (``Kernels/distributionExpectations(_:plane:first:count:bins:into:)``).
    static func decodeAnchors(
        _ range: Range<Int>, box: UnsafePointer<Float>, logits: UnsafePointer<Float>, constants: [Float],
        scale: Float, bias: Float, geometry g: LevelGeometry, into out: UnsafeMutablePointer<Float>
    ) {
        let (bins, plane, n, first) = (g.bins, g.plane, range.count, range.lowerBound)
        guard bins > 1 else {
            for p in range {
                decodeAnchor(
                    p, box: box, logits: logits, constants: constants, scale: scale, bias: bias, geometry: g, into: out)
            }
            return
        }
        let distances = UnsafeMutablePointer<Float>.allocate(capacity: 4 * n)
        defer { distances.deallocate() }
        Kernels.distributionExpectations(box, plane: plane, first: first, count: n, bins: bins, into: distances)
        for (i, p) in range.enumerated() {
            store(
                p, distances: (distances[i], distances[n + i], distances[2 * n + i], distances[3 * n + i]),
                logits: logits, constants: constants, scale: scale, bias: bias, geometry: g, into: out)
        }
    }

    /// An anchor's box (centre, size) in input pixels from its four side distances in grid units, and its sigmoid
    /// class scores, into the output.
    @inline(__always)
    static func store(
        _ p: Int, distances d: (Float, Float, Float, Float), logits: UnsafePointer<Float>, constants: [Float],
        scale: Float, bias: Float, geometry g: LevelGeometry, into out: UnsafeMutablePointer<Float>
    ) {
        let anchorX = Float(p % g.width) + 0.5
        let anchorY = Float(p / g.width) + 0.5
        let x1 = anchorX - d.0, y1 = anchorY - d.1
        let x2 = anchorX + d.2, y2 = anchorY + d.3
        let anchor = g.offset + p
        let anchors = g.anchors
        out[0 * anchors + anchor] = (x1 + x2) / 2 * g.stride
        out[1 * anchors + anchor] = (y1 + y2) / 2 * g.stride
        out[2 * anchors + anchor] = (x2 - x1) * g.stride
        out[3 * anchors + anchor] = (y2 - y1) * g.stride
        for k in 0..<g.classes {
            out[(4 + k) * anchors + anchor] = sigmoid((logits[k * g.plane + p] + constants[k]) * scale + bias)
        }
    }

    /// One anchor: DFL expectation of each side's distance bins (the one channel itself with one bin; the same
    /// kernel as ``decodeAnchors(_:box:logits:constants:scale:bias:geometry:into:)``), the box (centre, size) in
    /// input pixels, and the sigmoid class scores.
    @inline(__always)
    static func decodeAnchor(
        _ p: Int, box: UnsafePointer<Float>, logits: UnsafePointer<Float>, constants: [Float], scale: Float,
        bias: Float, geometry g: LevelGeometry, into out: UnsafeMutablePointer<Float>
    ) {
        withUnsafeTemporaryAllocation(of: Float.self, capacity: 4) { d in
            if g.bins > 1 {
                Kernels.distributionExpectations(
                    box, plane: g.plane, first: p, count: 1, bins: g.bins, into: d.baseAddress!)
            } else {
                for side in 0..<4 { d[side] = box[side * g.plane + p] }
            }
            store(
                p, distances: (d[0], d[1], d[2], d[3]), logits: logits, constants: constants, scale: scale, bias: bias,
                geometry: g, into: out)
        }
    }
}
