import LookoutTensor
import LookoutWeights

/// `Bottleneck(c, c, shortcut, k=(3, 3), e=1)`: `x + cv2(cv1(x))` with the shortcut, else `cv2(cv1(x))`.
struct Bottleneck: Sendable {
    let cv1: Convolution
    let cv2: Convolution
    let shortcut: Bool

    init(_ prefix: String, shortcut: Bool, in file: WeightBinding) throws(WeightsError) {
        cv1 = try Convolution(conv: prefix + ".cv1", stride: 1, in: file)
        cv2 = try Convolution(conv: prefix + ".cv2", stride: 1, in: file)
        self.shortcut = shortcut && cv1.inputs == cv2.outputs
    }

    func callAsFunction(_ x: StackedMaps, backend: any ComputeBackend) -> FeatureMap {
        var y = cv2(cv1(x, backend: backend), backend: backend)
        if shortcut { backend.add(&y, x) }  // x + y, in y's storage
        return y
    }

    func callAsFunction(_ x: FeatureMap, backend: any ComputeBackend) -> FeatureMap {
        self(StackedMaps(x), backend: backend)
    }
}

/// Counts `prefix.m.0.`, `prefix.m.1.`, … in the file (a block is `m.N.cv1`, or `m.N.0.cv1` when it is a
/// sequence).
func repeatCount(_ prefix: String, in file: WeightBinding) -> Int {
    var count = 0
    while file.has("\(prefix).m.\(count).cv1.conv.weight") || file.has("\(prefix).m.\(count).0.cv1.conv.weight") {
        count += 1
    }
    return count
}

/// One block of a ``C2f`` chain: a `Bottleneck`; in YOLO11's `C3k2(c3k=True)` a ``C3k``; in YOLO26's
/// `C3k2(attn=True)` a Bottleneck followed by a ``PositionAttentionBlock`` (`m.N.0`, `m.N.1`).
enum ChainBlock: Sendable {
    case bottleneck(Bottleneck)
    case c3k(C3k)
    case attention(Bottleneck, PositionAttentionBlock)

    /// `x`: read where it lies by a Bottleneck, joined for the others (by the backend: a GPU's map stays there).
    func callAsFunction(_ x: StackedMaps, backend: any ComputeBackend) -> FeatureMap {
        switch self {
        case .bottleneck(let block): block(x, backend: backend)
        case .c3k(let block): block(Self.joined(x, backend: backend), backend: backend)
        case .attention(let block, let attention): attention(block(x, backend: backend), backend: backend)
        }
    }

    /// The parts as one map: the map itself when whole, else each part's channels sliced (and concatenated).
    static func joined(_ x: StackedMaps, backend: any ComputeBackend) -> FeatureMap {
        if x.isWholeMap { return x.parts[0].map }
        let slices = x.parts.map { backend.slice($0.map, channels: $0.channels) }
        return slices.count == 1 ? slices[0] : backend.concatenate(slices)
    }
}

/// `C2f(c1, c2, n, shortcut)`: `cv1` 1×1 to 2c, split in halves y0, y1, a chain of n Bottlenecks from y1,
/// `cv2` 1×1 over the concatenation of all of them. `C2fAttn` adds the max-sigmoid attention of the last
/// one, guided by the text, before `cv2`. YOLO11's `C3k2` is the same forward (its Bottlenecks halve their
/// width, which the weights say; with `c3k=True` its blocks are ``C3k``s, told by their `cv3`; with YOLO26's
/// `attn=True` each is a Bottleneck and a position-sensitive attention block, told by `m.N.0`).
struct C2f: Sendable {
    let cv1: Convolution
    let blocks: [ChainBlock]
    let attention: MaxSigmoidAttention?
    let cv2: Convolution

    init(_ prefix: String, shortcut: Bool, attention: Bool, in file: WeightBinding) throws(WeightsError) {
        cv1 = try Convolution(conv: prefix + ".cv1", stride: 1, in: file)
        var blocks: [ChainBlock] = []
        for index in 0..<repeatCount(prefix, in: file) {
            let name = "\(prefix).m.\(index)"
            if file.has(name + ".0.cv1.conv.weight") {
                blocks.append(
                    .attention(
                        try Bottleneck(name + ".0", shortcut: shortcut, in: file),
                        try PositionAttentionBlock(name + ".1", in: file)))
            } else {
                blocks.append(
                    file.has(name + ".cv3.conv.weight")
                        ? .c3k(try C3k(name, in: file))
                        : .bottleneck(try Bottleneck(name, shortcut: shortcut, in: file)))
            }
        }
        guard !blocks.isEmpty else {
            throw WeightsError(path: file.path, problem: "missing tensor \(prefix).m.0.cv1.conv.weight")
        }
        self.blocks = blocks
        self.attention = attention ? try MaxSigmoidAttention(prefix + ".attn", in: file) : nil
        cv2 = try Convolution(conv: prefix + ".cv2", stride: 1, in: file)
    }

    func callAsFunction(
        _ x: FeatureMap, guide: [Float]? = nil, classes: Int = 0, backend: any ComputeBackend
    ) -> FeatureMap {
        self(StackedMaps(x), guide: guide, classes: classes, backend: backend)
    }

    /// `x`: the block's input, stacked (the neck's concatenations are never made: `cv1` reads the parts). The
    /// concatenation `cv2` reads is not made either: it is cv1's output and each branch's, stacked.
    func callAsFunction(
        _ x: StackedMaps, guide: [Float]? = nil, classes: Int = 0, backend: any ComputeBackend
    ) -> FeatureMap {
        var parts = chain(x, backend: backend)
        if let attention, let guide {
            parts.append(attention(parts.last!, guide: guide, classes: classes, backend: backend))
        }
        return cv2(StackedMaps(parts), backend: backend)
    }

    /// `cv1`'s output and each block's output in order (the chain starting from cv1's second half).
    func chain(_ x: StackedMaps, backend: any ComputeBackend) -> [FeatureMap] {
        let y = cv1(x, backend: backend)
        var parts = [y]
        var last = StackedMaps(y, channels: (y.channels / 2)..<y.channels)
        for block in blocks {
            let output = block(last, backend: backend)
            parts.append(output)
            last = StackedMaps(output)
        }
        return parts
    }

    /// `C2fAttn`'s work that the text does not enter, as one map: `cv1`'s output, each block's output, then the
    /// attention's projection of the last (``MaxSigmoidAttention/projection``). ``callAsFunction(kept:guide:classes:backend:)``
    /// finishes it for a query set, with the same arithmetic as ``callAsFunction(_:guide:classes:backend:)``.
    func textFree(_ x: StackedMaps, backend: any ComputeBackend) -> FeatureMap {
        guard let attention else { preconditionFailure("textFree is C2fAttn's: this C2f has no attention") }
        var parts = chain(x, backend: backend)
        parts.append(attention.projection(parts.last!, backend: backend))
        return backend.concatenate(parts)
    }

    /// Channels of ``textFree(_:backend:)``'s map.
    var textFreeChannels: Int { cv1.outputs + (blocks.count + 1) * cv1.outputs / 2 }

    /// The rest of `C2fAttn` from ``textFree(_:backend:)``'s map: the attention weights of the chain's last output
    /// for `guide`, its projection scaled by them, and `cv2` over the whole concatenation.
    func callAsFunction(kept: FeatureMap, guide: [Float], classes: Int, backend: any ComputeBackend) -> FeatureMap {
        guard let attention else { preconditionFailure("kept maps are C2fAttn's: this C2f has no attention") }
        let width = cv1.outputs / 2
        let chain = kept.channels - width
        let last = StackedMaps(kept, channels: (chain - width)..<chain)
        let weights = attention.weights(last, guide: guide, classes: classes, backend: backend)
        let scaled = attention.scale(StackedMaps(kept, channels: chain..<kept.channels), by: weights, backend: backend)
        return cv2(StackedMaps(parts: [.init(map: kept, channels: 0..<chain), .init(map: scaled)]), backend: backend)
    }
}

/// `SPPF(c1, c2, 5)`: `cv1` 1×1 (SiLU), three chained 5×5 max pools, `cv2` 1×1 over the four maps.
/// YOLO26's `SPPF(c1, c2, 5, 3, True)` has no activation after `cv1` (ultralytics restores SiLU only for
/// yaml rows of at most three arguments) and adds its input to the output (`shortcut` with `c1 == c2`).
struct SPPF: Sendable {
    let cv1: Convolution
    let cv2: Convolution
    let residual: Bool

    init(_ prefix: String, yolo26: Bool = false, in file: WeightBinding) throws(WeightsError) {
        cv1 = try Convolution(conv: prefix + ".cv1", stride: 1, activation: !yolo26, in: file)
        cv2 = try Convolution(conv: prefix + ".cv2", stride: 1, in: file)
        residual = yolo26 && cv1.inputs == cv2.outputs
    }

    func callAsFunction(_ x: FeatureMap, backend: any ComputeBackend) -> FeatureMap {
        let y0 = cv1(x, backend: backend)
        let y1 = backend.maxPool(y0, size: 5)
        let y2 = backend.maxPool(y1, size: 5)
        let y3 = backend.maxPool(y2, size: 5)
        var y = cv2(StackedMaps([y0, y1, y2, y3]), backend: backend)
        if residual { backend.add(&y, StackedMaps(x)) }
        return y
    }
}

/// `MaxSigmoidAttnBlock(c, c, nh, ec=c, gc)` (ultralytics `nn/modules/block.py`): the guide `g = gl(text)` (K × c, viewed
/// K × nh × hc); per head m and pixel, `aw = max_k Σ_j x[m·hc + j]·g[k, m, j]`, divided by √hc, plus the
/// head's bias, through a sigmoid; the output is `proj_conv(x)` (3×3 conv + BN, no activation) scaled by
/// `aw` per head.
struct MaxSigmoidAttention: Sendable {
    let guideWeight: [Float]  // c × gc
    let guideBias: [Float]
    let bias: [Float]  // nh
    let projection: Convolution
    let heads: Int
    let channels: Int
    let guideChannels: Int

    init(_ prefix: String, in file: WeightBinding) throws(WeightsError) {
        let gl = try file.view(prefix + ".gl.weight")
        guard gl.shape.count == 2 else {
            throw WeightsError(path: file.path, problem: "tensor \(prefix).gl.weight has shape \(gl.shape)")
        }
        channels = gl.shape[0]
        guideChannels = gl.shape[1]
        guideWeight = gl.floats()
        guideBias = try file.floats(prefix + ".gl.bias", shape: [channels])
        let biasView = try file.view(prefix + ".bias")
        heads = biasView.shape.first ?? 0
        guard heads > 0, channels % heads == 0 else {
            throw WeightsError(
                path: file.path, problem: "tensor \(prefix).bias: \(heads) heads do not divide \(channels) channels")
        }
        guard !file.has(prefix + ".ec.conv.weight") else {
            throw WeightsError(
                path: file.path, problem: "\(prefix).ec (an embedding conv) is not supported: YOLO-World v2 has none")
        }
        bias = biasView.floats()
        projection = try Convolution(conv: prefix + ".proj_conv", stride: 1, activation: false, in: file)
    }

    /// `guide` is K × gc, row-major.
    func callAsFunction(_ x: FeatureMap, guide: [Float], classes: Int, backend: any ComputeBackend) -> FeatureMap {
        let weights = weights(StackedMaps(x), guide: guide, classes: classes, backend: backend)
        return scale(projection(x, backend: backend), by: weights, backend: backend)
    }

    /// `aw` of every head and pixel (a map of `heads` channels); `x` one part (a map or channels of one).
    func weights(_ x: StackedMaps, guide: [Float], classes: Int, backend: any ComputeBackend) -> FeatureMap {
        precondition(
            x.parts.count == 1 && x.channels == channels, "the attention reads one map of \(channels) channels")
        // g = guide · glᵀ + b: K × c
        let g = backend.linear(
            guide, rows: classes, inputs: guideChannels, weight: guideWeight, bias: guideBias, outputs: channels)
        return backend.maxSigmoidAttention(x, guide: g, classes: classes, heads: heads, bias: bias)
    }

    /// `projected` (``projection`` of the attention's input) scaled by each head's weights.
    func scale(_ projected: FeatureMap, by weights: FeatureMap, backend: any ComputeBackend) -> FeatureMap {
        scale(StackedMaps(projected), by: weights, backend: backend)
    }

    /// `projected` (one part: a map or channels of one) scaled by each head's weights, into a new map.
    func scale(_ projected: StackedMaps, by weights: FeatureMap, backend: any ComputeBackend) -> FeatureMap {
        precondition(
            projected.parts.count == 1 && projected.channels == channels, "scaling one map of \(channels) channels")
        return backend.scaleHeads(projected, by: weights, heads: heads)
    }
}

/// The backbone YOLO-World v2 and YOLOE share: ultralytics' layers 0–9 (five stride-2 convolutions, four C2f or
/// C3k2 stages, SPPF) and, in YOLO11's graph, C2PSA at layer 10. Gives P3 (layer 4), P4 (layer 6) and P5 (9, or
/// 10 after C2PSA).
struct Backbone: Sendable {
    let stem: [Convolution]  // layers 0, 1, 3, 5, 7
    let stages: [C2f]  // layers 2, 4, 6, 8 (C2f or C3k2)
    let sppf: SPPF  // 9
    let attention: C2PSA?  // 10 in YOLO11's graph

    /// `attention`: C2PSA at layer 10 (YOLO11's and YOLO26's graphs). `yolo26`: YOLO26's SPPF (``SPPF``).
    init(in file: WeightBinding, attention: Bool, yolo26: Bool = false) throws(WeightsError) {
        stem = try [0, 1, 3, 5, 7].map { index throws(WeightsError) in
            try Convolution(conv: "model.\(index)", stride: 2, in: file)
        }
        stages = try [2, 4, 6, 8].map { index throws(WeightsError) in
            try C2f("model.\(index)", shortcut: true, attention: false, in: file)
        }
        sppf = try SPPF("model.9", yolo26: yolo26, in: file)
        self.attention = attention ? try C2PSA("model.10", in: file) : nil
    }

    /// Channels of P3, P4 and P5.
    var outputChannels: [Int] { [stages[1].cv2.outputs, stages[2].cv2.outputs, (attention?.cv2 ?? sppf.cv2).outputs] }

    func callAsFunction(_ image: FeatureMap, backend: any ComputeBackend) -> [FeatureMap] {
        backend.beginImage()
        var x = stem[0](image, backend: backend)
        x = stem[1](x, backend: backend)
        x = stages[0](x, backend: backend)
        x = stem[2](x, backend: backend)
        let p3 = stages[1](x, backend: backend)
        x = stem[3](p3, backend: backend)
        let p4 = stages[2](x, backend: backend)
        x = stem[4](p4, backend: backend)
        var p5 = sppf(stages[3](x, backend: backend), backend: backend)
        if let attention { p5 = attention(p5, backend: backend) }
        return [p3, p4, p5]
    }
}
