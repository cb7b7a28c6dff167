import LookoutTensor
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// ultralytics `Conv(c, c, k, g=c)` after `fuse()`: a depthwise convolution (one k×k filter per channel,
/// stride 1, padding k/2) with BatchNorm folded in (``BatchNormStatistics/fold(into:perOutput:)``), optionally followed by SiLU. `DWConv(c, c, 3)` in YOLOE-11's head and `Attention.pe` are this.
struct DepthwiseConvolution: Sendable {
    let channels: Int
    let kernel: Int
    let weight: [Float]  // channels × kernel × kernel
    let bias: [Float]
    let activation: Bool

    var inputs: Int { channels }
    var outputs: Int { channels }

    init(conv prefix: String, activation: Bool = true, in file: WeightBinding) throws(WeightsError) {
        let view = try file.view(prefix + ".conv.weight")
        guard view.shape.count == 4, view.shape[1] == 1, view.shape[2] == view.shape[3], view.shape[2] % 2 == 1,
            view.shape[2] <= 15, view.shape[0] > 0
        else {
            throw WeightsError(
                path: file.path,
                problem:
                    "tensor \(prefix).conv.weight has shape \(view.shape), expected a depthwise [c, 1, k, k], k odd")
        }
        channels = view.shape[0]
        kernel = view.shape[2]
        var weight = view.floats()
        bias = try BatchNormStatistics(prefix + ".bn", channels: channels, in: file).fold(
            into: &weight, perOutput: kernel * kernel)
        self.weight = weight
        self.activation = activation
    }

    func callAsFunction(_ x: FeatureMap, backend: any ComputeBackend) -> FeatureMap {
        precondition(x.channels == channels, "depthwise convolution of \(x.channels) channels, expected \(channels)")
        return backend.depthwiseConvolution(x, weight: weight, bias: bias, kernel: kernel, activation: activation)
    }
}

/// `C3k(c1, c2, n=2, shortcut=True, e=0.5, k=3)`: `cv3(cat(m(cv1(x)), cv2(x)))`, `m` a chain of Bottlenecks
/// (the inner block of YOLO11's `C3k2` when `c3k=True`).
struct C3k: Sendable {
    let cv1: Convolution
    let cv2: Convolution
    let blocks: [Bottleneck]
    let cv3: Convolution

    init(_ prefix: String, in file: WeightBinding) throws(WeightsError) {
        cv1 = try Convolution(conv: prefix + ".cv1", stride: 1, in: file)
        cv2 = try Convolution(conv: prefix + ".cv2", stride: 1, in: file)
        var blocks: [Bottleneck] = []
        for index in 0..<repeatCount(prefix, in: file) {
            blocks.append(try Bottleneck("\(prefix).m.\(index)", shortcut: true, in: file))
        }
        guard !blocks.isEmpty else {
            throw WeightsError(path: file.path, problem: "missing tensor \(prefix).m.0.cv1.conv.weight")
        }
        self.blocks = blocks
        cv3 = try Convolution(conv: prefix + ".cv3", stride: 1, in: file)
    }

    func callAsFunction(_ x: FeatureMap, backend: any ComputeBackend) -> FeatureMap {
        var y = cv1(x, backend: backend)
        for block in blocks { y = block(y, backend: backend) }
        return cv3(StackedMaps([y, cv2(x, backend: backend)]), backend: backend)
    }
}

/// YOLO11's `Attention(dim, heads, attn_ratio=0.5)` (ultralytics `nn/modules/block.py`): `qkv` a 1×1 conv
/// giving per head `key` query channels, `key` key channels and `dim/heads` value channels, in that order;
/// per head `softmax((q·key^-½)ᵀ k)` over the positions, the values weighted by it, plus `pe` (a depthwise 3×3
/// conv of the values), through `proj` (1×1). No activations.
struct PositionAttention: Sendable {
    let qkv: Convolution
    let positional: DepthwiseConvolution
    let projection: Convolution
    let heads: Int
    let keySize: Int
    let headSize: Int

    init(_ prefix: String, in file: WeightBinding) throws(WeightsError) {
        qkv = try Convolution(conv: prefix + ".qkv", stride: 1, activation: false, in: file)
        positional = try DepthwiseConvolution(conv: prefix + ".pe", activation: false, in: file)
        projection = try Convolution(conv: prefix + ".proj", stride: 1, activation: false, in: file)
        let dim = qkv.inputs
        // ultralytics: num_heads = dim // 64 (at least 1), key_dim = int(head_dim · 0.5).
        heads = max(dim / 64, 1)
        headSize = dim / heads
        keySize = headSize / 2
        guard dim % heads == 0, keySize > 0, qkv.outputs == dim + 2 * heads * keySize else {
            throw WeightsError(
                path: file.path, kind: .layersDoNotConnect,
                problem:
                    "\(prefix).qkv gives \(qkv.outputs) channels for \(dim) inputs: expected \(dim + 2 * heads * keySize) (\(heads) heads)"
            )
        }
    }

    func callAsFunction(_ x: FeatureMap, backend: any ComputeBackend) -> FeatureMap {
        let t = qkv(x, backend: backend)
        var (values, attended) = backend.spatialAttention(t, heads: heads, keySize: keySize, headSize: headSize)
        values = positional(values, backend: backend)
        backend.add(&attended, StackedMaps(values))
        return projection(attended, backend: backend)
    }
}

/// `PSABlock(c, 0.5, heads, shortcut=True)`: `x + attn(x)`, then `x + ffn(x)` with `ffn` a 1×1 conv to 2c (SiLU)
/// and a 1×1 conv back (no activation).
struct PositionAttentionBlock: Sendable {
    let attention: PositionAttention
    let expand: Convolution
    let contract: Convolution

    init(_ prefix: String, in file: WeightBinding) throws(WeightsError) {
        attention = try PositionAttention(prefix + ".attn", in: file)
        expand = try Convolution(conv: prefix + ".ffn.0", stride: 1, in: file)
        contract = try Convolution(conv: prefix + ".ffn.1", stride: 1, activation: false, in: file)
    }

    func callAsFunction(_ x: FeatureMap, backend: any ComputeBackend) -> FeatureMap {
        var y = attention(x, backend: backend)
        backend.add(&y, StackedMaps(x))
        var z = contract(expand(y, backend: backend), backend: backend)
        backend.add(&z, StackedMaps(y))
        return z
    }
}

/// `C2PSA(c1, c2, n, e=0.5)`: `cv1` 1×1 to 2c, split in halves a, b; b through n ``PositionAttentionBlock``s;
/// `cv2` 1×1 over `cat(a, b)`.
struct C2PSA: Sendable {
    let cv1: Convolution
    let blocks: [PositionAttentionBlock]
    let cv2: Convolution

    init(_ prefix: String, in file: WeightBinding) throws(WeightsError) {
        cv1 = try Convolution(conv: prefix + ".cv1", stride: 1, in: file)
        var blocks: [PositionAttentionBlock] = []
        while file.has("\(prefix).m.\(blocks.count).attn.qkv.conv.weight") {
            blocks.append(try PositionAttentionBlock("\(prefix).m.\(blocks.count)", in: file))
        }
        guard !blocks.isEmpty else {
            throw WeightsError(path: file.path, problem: "missing tensor \(prefix).m.0.attn.qkv.conv.weight")
        }
        self.blocks = blocks
        cv2 = try Convolution(conv: prefix + ".cv2", stride: 1, in: file)
    }

    func callAsFunction(_ x: FeatureMap, backend: any ComputeBackend) -> FeatureMap {
        let y = cv1(x, backend: backend)
        let half = y.channels / 2
        var b = backend.slice(y, channels: half..<y.channels)
        for block in blocks { b = block(b, backend: backend) }
        return cv2(StackedMaps(parts: [.init(map: y, channels: 0..<half), .init(map: b)]), backend: backend)
    }
}

/// `nn.ConvTranspose2d(c, c, 2, 2)` with bias: every input pixel spreads to a 2×2 output block,
/// `out[o, 2y + dy, 2x + dx] = b[o] + Σ_i W[i, o, dy, dx]·x[i, y, x]`.
struct TransposedConvolution2x2: Sendable {
    let inputs: Int
    let outputs: Int
    let taps: [[Float]]  // per (dy, dx): outputs × inputs
    let bias: [Float]

    init(_ prefix: String, in file: WeightBinding) throws(WeightsError) {
        let view = try file.view(prefix + ".weight")
        guard view.shape.count == 4, view.shape[2] == 2, view.shape[3] == 2 else {
            throw WeightsError(
                path: file.path, problem: "tensor \(prefix).weight has shape \(view.shape), expected [in, out, 2, 2]")
        }
        (inputs, outputs) = (view.shape[0], view.shape[1])
        let weight = view.floats()
        var taps = [[Float]](repeating: [Float](repeating: 0, count: inputs * outputs), count: 4)
        for i in 0..<inputs {
            for o in 0..<outputs {
                for tap in 0..<4 { taps[tap][o * inputs + i] = weight[(i * outputs + o) * 4 + tap] }
            }
        }
        self.taps = taps
        bias = try file.floats(prefix + ".bias", shape: [outputs])
    }

    func callAsFunction(_ x: FeatureMap, backend: any ComputeBackend) -> FeatureMap {
        precondition(x.channels == inputs, "a transposed convolution of \(x.channels) channels, expected \(inputs)")
        return backend.transposedConvolution2x2(x, taps: taps, bias: bias)
    }
}

/// `Proto(c1, c_, 32)`: `cv1` 3×3, ``TransposedConvolution2x2`` (×2), `cv2` 3×3, `cv3` 1×1 to the 32 mask
/// prototypes at a quarter of the input's resolution (twice P3's).
struct Proto: Sendable {
    let cv1: Convolution
    let upsample: TransposedConvolution2x2
    let cv2: Convolution
    let cv3: Convolution

    init(_ prefix: String, in file: WeightBinding) throws(WeightsError) {
        cv1 = try Convolution(conv: prefix + ".cv1", stride: 1, in: file)
        upsample = try TransposedConvolution2x2(prefix + ".upsample", in: file)
        cv2 = try Convolution(conv: prefix + ".cv2", stride: 1, in: file)
        cv3 = try Convolution(conv: prefix + ".cv3", stride: 1, in: file)
    }

    func callAsFunction(_ x: FeatureMap, backend: any ComputeBackend) -> FeatureMap {
        cv3(cv2(upsample(cv1(x, backend: backend), backend: backend), backend: backend), backend: backend)
    }
}

/// YOLO26's `Proto26(ch, c_, 32)`: P4 and P5 brought to P3's channels (`feat_refine`, 1×1 `Conv`s) and size
/// (nearest ×2, ×4), added to P3 in that order, `feat_fuse` (3×3 `Conv` to c_), then ``Proto``'s layers. Its
/// `semseg` branch is for training only (ultralytics' `fuse()` deletes it), so it is not read.
struct Proto26: Sendable {
    let refine: [Convolution]
    let fuse: Convolution
    let proto: Proto

    init(_ prefix: String, in file: WeightBinding) throws(WeightsError) {
        refine = try [0, 1].map { index throws(WeightsError) in
            try Convolution(conv: "\(prefix).feat_refine.\(index)", stride: 1, in: file)
        }
        fuse = try Convolution(conv: prefix + ".feat_fuse", stride: 1, in: file)
        proto = try Proto(prefix, in: file)
    }

    func callAsFunction(_ maps: [FeatureMap], backend: any ComputeBackend) -> FeatureMap {
        var feature = maps[0]
        backend.add(&feature, StackedMaps(backend.upsample(refine[0](maps[1], backend: backend))))
        backend.add(&feature, StackedMaps(backend.upsample(backend.upsample(refine[1](maps[2], backend: backend)))))
        return proto(fuse(feature, backend: backend), backend: backend)
    }
}

/// A segmentation head's prototype branch: `Proto` on P3 (YOLOE-v8, YOLOE-11) or ``Proto26`` on all three maps.
enum PrototypeBranch: Sendable {
    case proto(Proto)
    case proto26(Proto26)

    func callAsFunction(_ maps: [FeatureMap], backend: any ComputeBackend) -> FeatureMap {
        switch self {
        case .proto(let proto): proto(maps[0], backend: backend)
        case .proto26(let proto): proto(maps, backend: backend)
        }
    }
}

/// YOLOE's auxiliary text network `reprta = Residual(SwiGLUFFN(e, e))` and the normalisation `get_tpe` applies:
/// `normalize(t + w3(silu(a) ⊙ b))` with `[a, b] = w12·t + b12` split in halves. What turns the text tower's
/// output into the class embeddings the head dots with.
struct TextProjection: Sendable {
    let w12: [Float]
    let b12: [Float]
    let w3: [Float]
    let b3: [Float]
    let size: Int
    let hidden: Int

    init(_ prefix: String, in file: WeightBinding) throws(WeightsError) {
        let w12View = try file.view(prefix + ".w12.weight")
        guard w12View.shape.count == 2, w12View.shape[0] % 2 == 0 else {
            throw WeightsError(path: file.path, problem: "tensor \(prefix).w12.weight has shape \(w12View.shape)")
        }
        size = w12View.shape[1]
        hidden = w12View.shape[0] / 2
        w12 = w12View.floats()
        b12 = try file.floats(prefix + ".w12.bias", shape: [2 * hidden])
        w3 = try file.floats(prefix + ".w3.weight", shape: [size, hidden])
        b3 = try file.floats(prefix + ".w3.bias", shape: [size])
    }

    /// `text` is rows × size.
    func callAsFunction(_ text: [Float], rows: Int, backend: any ComputeBackend = CPUBackend.shared) -> [Float] {
        precondition(text.count == rows * size, "text features of the wrong size")
        let expanded = backend.linear(text, rows: rows, inputs: size, weight: w12, bias: b12, outputs: 2 * hidden)
        var gated = [Float](repeating: 0, count: rows * hidden)
        for r in 0..<rows {
            for j in 0..<hidden {
                let a = expanded[r * 2 * hidden + j], b = expanded[r * 2 * hidden + hidden + j]
                gated[r * hidden + j] = a / (1 + expf(-a)) * b
            }
        }
        var out = backend.linear(gated, rows: rows, inputs: hidden, weight: w3, bias: b3, outputs: size)
        for index in out.indices { out[index] += text[index] }
        return normalizedRows(out, rows: rows, size: size)
    }
}
