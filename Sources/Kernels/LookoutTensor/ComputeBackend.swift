/// The operations the models' layers compute with: the seam between the layers (which say what to compute) and
/// a backend (which computes it, on the CPU today, on a GPU behind the same protocol). Layers hold shapes and
/// weights and call these; they never touch a map's floats or a pointer. Every operation is checked against a
/// plain reference by `ComputeBackendTests`, so a second backend is proved by running the same suite.
///
/// Maps are ``FeatureMap``s (channel-major, one image) and ``StackedMaps`` (channel ranges of maps read where
/// they lie). Small results the layers decide on (per-anchor logits, the text side's products) come back as
/// `[Float]`; the attention weights and the head's output are maps, left where the backend computes.
public protocol ComputeBackend: Sendable {
    /// What the backend is, in words (`cpu (2 threads)`).
    var name: String { get }

    /// Called by a network before its first layer on an image (the CPU backend keeps freed memory for reuse
    /// from the first image on, after loading, when its settings say so).
    func beginImage()

    /// Waits until the work this thread issued is done (a GPU's, which runs behind the thread): called when a
    /// photo's features are ready, so that another thread may use them. Nothing to wait for on the CPU.
    func settle()

    /// Runs `body` on `inputs`, where the backend can as recorded work replayed: a GPU records the operations
    /// `body` issues for `key` once and replays them for later inputs of the same shapes (CUDA graphs), so `body`
    /// must issue the same operations for the same key, reading only `inputs` and what the key names (the
    /// weights, a query set). The CPU runs `body`.
    func replay(_ key: AnyHashable, _ inputs: [FeatureMap], _ body: ([FeatureMap]) -> [FeatureMap]) -> [FeatureMap]

    /// The letterboxed network input (3 planes of `plan.width × plan.height`, RGB, each byte / 255) from decoded
    /// 8-bit pixels (`channels` per pixel, BGR first), computed where the backend computes, so that only the
    /// photo's bytes cross to it; the same floats as the host's letterbox. nil where the backend leaves it to the
    /// host (the CPU's C does it in bands).
    func letterbox(_ pixels: [UInt8], width: Int, height: Int, channels: Int, plan: LetterboxPlan) -> FeatureMap?

    // MARK: Batches

    /// The most images ``batched(_:_:)`` takes (1: the backend computes one image at a time, the CPU).
    var batchLimit: Int { get }
    /// Runs `body` (a network's layers, on this thread) on maps that each hold `images` images of one size stacked
    /// as one tall map (``stack(_:)``): image n's rows after image n − 1's, so each channel's values are the images'
    /// planes in turn (NCHW with N moved between C and H). Operations on single pixels or whole channels need
    /// nothing more; convolutions, pooling and the head's anchors keep to each image's own rows. At most
    /// ``batchLimit`` images.
    func batched<T>(_ images: Int, _ body: () -> T) -> T
    /// Maps of one shape as one tall map of `maps.count` images (``batched(_:_:)``), where the backend keeps them.
    func stack(_ maps: [FeatureMap]) -> FeatureMap
    /// A tall map of `images` images (``stack(_:)``) as a map per image, where the backend keeps them.
    func unstack(_ x: FeatureMap, images: Int) -> [FeatureMap]

    /// Runs `count` independent tasks (a head's branches), side by side where the backend can; the operations a
    /// task calls run within it. Their results, in task order.
    func tasks(_ count: Int, _ body: @escaping @Sendable (Int) -> FeatureMap) -> [FeatureMap]

    /// A map's values, channel-major (what the head hands back: region embeddings, mask coefficients).
    func floats(_ x: FeatureMap) -> [Float]

    // MARK: Convolutions

    /// A convolution prepared at load (``ConvolutionKernel/prepare(_:)``): BatchNorm folded in, optional SiLU.
    func convolve(_ x: StackedMaps, _ weights: ConvolutionWeights, kernel: any ConvolutionKernel) -> FeatureMap
    /// The same of one whole map.
    func convolve(_ x: FeatureMap, _ weights: ConvolutionWeights, kernel: any ConvolutionKernel) -> FeatureMap
    /// One `kernel`×`kernel` filter per channel, stride 1, padding `kernel / 2`, bias, optional SiLU.
    func depthwiseConvolution(
        _ x: FeatureMap, weight: [Float], bias: [Float], kernel: Int, activation: Bool
    ) -> FeatureMap
    /// `ConvTranspose2d(k=2, s=2)` with bias: `taps[dy·2 + dx]` is `outputs × inputs`.
    func transposedConvolution2x2(_ x: FeatureMap, taps: [[Float]], bias: [Float]) -> FeatureMap

    // MARK: Maps

    /// Max pooling, stride 1, padding `size / 2` that never wins.
    func maxPool(_ x: FeatureMap, size: Int) -> FeatureMap
    /// Nearest-neighbour upsampling by 2.
    func upsample(_ x: FeatureMap) -> FeatureMap
    /// `torch.cat(maps, dim=1)`.
    func concatenate(_ maps: [FeatureMap]) -> FeatureMap
    /// Channels `range` of a map, as a map of their own.
    func slice(_ x: FeatureMap, channels range: Range<Int>) -> FeatureMap
    /// `x += y`.
    func add(_ x: inout FeatureMap, _ y: StackedMaps)
    /// `x[c] = x[c]·scale[c] + shift[c]` (an eval BatchNorm), as `shift + x·scale` with one rounding (fma).
    func channelAffine(_ x: inout FeatureMap, scale: [Float], shift: [Float])
    /// The listed pixels' values, `channels × columns.count`.
    func gather(_ x: FeatureMap, columns: [Int]) -> [Float]
    /// `Σ_c weights[c]·x[c, p]` per pixel, summed in channel order.
    func weightedChannelSum(_ x: FeatureMap, weights: [Float]) -> [Float]

    // MARK: Dense

    /// `y = x·Wᵀ + b` for `rows` rows (`weight` outputs × inputs, a Linear layer's layout).
    func linear(_ x: [Float], rows: Int, inputs: Int, weight: [Float], bias: [Float]?, outputs: Int) -> [Float]
    /// `C = A·B` (`a` m×k, `b` k×n, row-major).
    func matmul(_ a: [Float], _ b: [Float], m: Int, n: Int, k: Int) -> [Float]

    // MARK: Attention

    /// YOLO-World's max-sigmoid attention weights: per head m and pixel,
    /// `sigmoid(max_k Σ_j x[m·hc + j]·g[k, m·hc + j] / √hc + bias[m])` (`guide` classes × channels): a map of
    /// `heads` channels (kept where the backend computes, for ``scaleHeads(_:by:heads:)``).
    func maxSigmoidAttention(_ x: StackedMaps, guide: [Float], classes: Int, heads: Int, bias: [Float]) -> FeatureMap
    /// Each channel scaled by its head's weight at each pixel (`weights` a map of `heads` channels).
    func scaleHeads(_ x: StackedMaps, by weights: FeatureMap, heads: Int) -> FeatureMap
    /// YOLO11's position-sensitive attention on a `qkv` map (per head `keySize` query, `keySize` key and
    /// `headSize` value channels): per head `softmax((q/√keySize)ᵀ k)` over the pixels weighting the values.
    /// Returns the values and the attended values, `heads·headSize` channels each.
    func spatialAttention(
        _ qkv: FeatureMap, heads: Int, keySize: Int, headSize: Int
    ) -> (values: FeatureMap, attended: FeatureMap)
    /// YOLOE's visual-prompt pooling: per group of channels, a softmax over the pixels the mask holds of that
    /// group's `scores` channel, weighting `x`'s channels of the group. `x.channels` values.
    func maskedSoftmaxPool(_ x: FeatureMap, scores: FeatureMap, mask: [UInt8], groups: Int) -> [Float]

    // MARK: Sequences (the CLIP towers): row-major matrices, one row per token

    /// LayerNorm of each row (γ, β over the row, `x.columns` values), as PyTorch computes it.
    func layerNorm(_ x: RowMatrix, gamma: [Float], beta: [Float], epsilon: Float) -> RowMatrix
    /// A Linear layer whose weight was packed at load (``PackedLinear``): `x·Wᵀ + b`, `x.rows × outputs`, then
    /// `activation` where there is one (the same values as ``activate(_:_:)`` after it).
    func linear(_ x: RowMatrix, layer: PackedLinear, activation: SequenceActivation?) -> RowMatrix
    /// `x += y·Wᵀ + b`: a residual branch's last layer (the same values as ``add(_:_:)`` of its ``linear``).
    func addLinear(_ x: inout RowMatrix, _ y: RowMatrix, layer: PackedLinear)
    /// Multi-head attention within each sequence (`lengths[s]` rows from row `starts[s]`) of a `qkv` matrix
    /// (rows × 3·width: queries, keys, values), causal (the text tower) or full (the image tower); rows × width,
    /// zero in rows no sequence covers.
    func sequenceAttention(_ qkv: RowMatrix, lengths: [Int], starts: [Int], heads: Int, causal: Bool) -> RowMatrix
    /// A pre-norm attention sublayer, `x += attention(layerNorm(x)·Qᵀ + q)·Oᵀ + o`: ``layerNorm(_:gamma:beta:epsilon:)``,
    /// ``linear(_:layer:activation:)``, ``sequenceAttention(_:lengths:starts:heads:causal:)`` and
    /// ``addLinear(_:_:layer:)`` one after another (``composedResidualAttention(_:norm:qkv:output:lengths:starts:heads:causal:)``,
    /// the CPU's), or fused where a backend can keep the intermediates in its own precision. `next`: the LayerNorm
    /// of the sublayer after it, which a backend may compute as it writes `x` (the result is the same).
    func residualAttention(
        _ x: inout RowMatrix, norm: SequenceNorm, qkv: PackedLinear, output: PackedLinear, lengths: [Int],
        starts: [Int], heads: Int, causal: Bool, next: SequenceNorm?)
    /// A pre-norm MLP sublayer, `x += f(layerNorm(x)·Uᵀ + u)·Dᵀ + d`: as ``composedResidualMLP(_:norm:up:activation:down:)``,
    /// or fused; `next` as for attention.
    func residualMLP(
        _ x: inout RowMatrix, norm: SequenceNorm, up: PackedLinear, activation: SequenceActivation?, down: PackedLinear,
        next: SequenceNorm?)
    /// An activation in place.
    func activate(_ x: inout RowMatrix, _ activation: SequenceActivation)
    /// `x += y`.
    func add(_ x: inout RowMatrix, _ y: RowMatrix)
    /// `x[r] += table[r mod p]`, `table` being `p` rows of `x.columns` (a layer's, kept where the backend keeps
    /// weights): positional embeddings added to every sequence of a batch.
    func addRepeating(_ x: inout RowMatrix, _ table: [Float])
    /// Rows `indices` of `x`, in that order (each sequence's pooled token).
    func rows(_ x: RowMatrix, at indices: [Int]) -> RowMatrix
    /// A vision transformer's input rows: each image (`channels × side × side`, channel-major) cut into
    /// `patch × patch` squares, one row each (flattened channel, row, column, as the patch convolution's weight
    /// is), row-major over the grid, after one row of zeros per image where its class token goes:
    /// `images.count × ((side / patch)² + 1)` rows of `channels · patch²`.
    func patchRows(_ images: [[Float]], channels: Int, side: Int, patch: Int) -> RowMatrix
    /// The same of 8-bit RGB images (`side × side × 3`, interleaved, as decoded), each value first normalised as
    /// `ToTensor` and `Normalize` do, `(v / 255 − mean[c]) / std[c]` in Float32: a GPU receives a quarter of the
    /// bytes.
    func patchRows(pixels: [[UInt8]], side: Int, patch: Int, mean: [Float], std: [Float]) -> RowMatrix
    /// `x · b` on the host (`b`: `x.columns × columns`, row-major, a layer's), each row's product computed as if
    /// alone: an embedding must not depend on the others in its batch.
    func rowProducts(_ x: RowMatrix, _ b: [Float], columns: Int) -> [Float]

    // MARK: The head

    /// The contrastive head's level: class logits `weights · source + constants` (weights `classes × depth`,
    /// `source` depth channels), scaled, biased and through a sigmoid, and the DFL boxes from `box`, written
    /// into `output` (`(4 + classes) × 1 × anchors`) at the level's anchors, where the backend keeps it (a GPU's
    /// levels come back in one copy, when the output is read).
    func contrastiveDecode(
        box: FeatureMap, weights: [Float], depth: Int, source: FeatureMap, constants: [Float], scale: Float,
        bias: Float, geometry: AnchorGeometry, into output: inout FeatureMap)
    /// The boxes (centre x, centre y, width, height in input pixels) of the listed anchors of a level, `4 × n`.
    func decodeBoxes(_ box: FeatureMap, anchors: [Int], geometry: AnchorGeometry) -> [Float]

    // MARK: Suppression

    /// NMS's overlaps of `count` boxes (corners, `count × 4`, in descending score order; `areas` theirs): bit
    /// `j % 64` of word `i · ⌈count/64⌉ + j / 64` set when `j > i` and their IoU, computed as
    /// ``NonMaxSuppression`` computes it, is above `threshold`. nil where the backend leaves NMS to the host's
    /// loop (the CPU's: it stops early where boxes are already suppressed).
    func overlaps(_ boxes: [Float], areas: [Float], count: Int, threshold: Double) -> [UInt64]?
    /// NMS past its thresholds on the backend: `count` candidates (corners `count × 4`, their scores, and the
    /// offset each one's corners move by: its query's, 0 where agnostic) sorted by descending score (index order
    /// among equal scores, −0 equal to +0), the first `candidates` of them moved by their offsets, their overlaps
    /// as ``overlaps(_:areas:count:threshold:)`` computes them, and the greedy pass over those (a box is kept
    /// unless a kept box before it overlaps it): the indices of the candidates kept, in order, at most `maximum`;
    /// only they come back. nil where the backend leaves NMS to the host.
    func suppress(
        corners: [Float], scores: [Float], offsets: [Float], count: Int, candidates: Int, threshold: Double,
        maximum: Int
    ) -> [Int]?
}

extension ComputeBackend {
    /// ``linear(_:layer:activation:)`` without an activation.
    public func linear(_ x: RowMatrix, layer: PackedLinear) -> RowMatrix { linear(x, layer: layer, activation: nil) }

    public func residualAttention(
        _ x: inout RowMatrix, norm: SequenceNorm, qkv: PackedLinear, output: PackedLinear, lengths: [Int],
        starts: [Int], heads: Int, causal: Bool, next: SequenceNorm?
    ) {
        composedResidualAttention(
            &x, norm: norm, qkv: qkv, output: output, lengths: lengths, starts: starts, heads: heads, causal: causal)
    }

    public func residualMLP(
        _ x: inout RowMatrix, norm: SequenceNorm, up: PackedLinear, activation: SequenceActivation?, down: PackedLinear,
        next: SequenceNorm?
    ) {
        composedResidualMLP(&x, norm: norm, up: up, activation: activation, down: down)
    }

    /// ``residualAttention(_:norm:qkv:output:lengths:starts:heads:causal:)`` as its operations one after another.
    public func composedResidualAttention(
        _ x: inout RowMatrix, norm: SequenceNorm, qkv: PackedLinear, output: PackedLinear, lengths: [Int],
        starts: [Int], heads: Int, causal: Bool
    ) {
        let normed = layerNorm(x, gamma: norm.gamma, beta: norm.beta, epsilon: norm.epsilon)
        let projected = linear(normed, layer: qkv)
        let attention = sequenceAttention(projected, lengths: lengths, starts: starts, heads: heads, causal: causal)
        addLinear(&x, attention, layer: output)
    }

    /// ``residualMLP(_:norm:up:activation:down:)`` as its operations one after another.
    public func composedResidualMLP(
        _ x: inout RowMatrix, norm: SequenceNorm, up: PackedLinear, activation: SequenceActivation?, down: PackedLinear
    ) {
        let normed = layerNorm(x, gamma: norm.gamma, beta: norm.beta, epsilon: norm.epsilon)
        let hidden = linear(normed, layer: up, activation: activation)
        addLinear(&x, hidden, layer: down)
    }
}

/// A pre-norm sublayer's LayerNorm: γ and β over each row, and ε.
public struct SequenceNorm: Sendable {
    public let gamma: [Float]
    public let beta: [Float]
    public let epsilon: Float

    public init(gamma: [Float], beta: [Float], epsilon: Float) {
        precondition(gamma.count == beta.count)
        (self.gamma, self.beta, self.epsilon) = (gamma, beta, epsilon)
    }
}

/// The sequence operations on host arrays (`rows × width`), for callers that hold their matrices there.
extension ComputeBackend {
    public func layerNorm(_ x: [Float], rows: Int, gamma: [Float], beta: [Float], epsilon: Float) -> [Float] {
        layerNorm(RowMatrix(rows: rows, columns: gamma.count, data: x), gamma: gamma, beta: beta, epsilon: epsilon)
            .data
    }

    public func linear(_ x: [Float], rows: Int, layer: PackedLinear) -> [Float] {
        linear(RowMatrix(rows: rows, columns: layer.inputs, data: x), layer: layer).data
    }

    public func sequenceAttention(
        _ qkv: [Float], lengths: [Int], starts: [Int], width: Int, heads: Int, causal: Bool
    ) -> [Float] {
        sequenceAttention(
            RowMatrix(rows: qkv.count / (3 * width), columns: 3 * width, data: qkv), lengths: lengths, starts: starts,
            heads: heads, causal: causal
        ).data
    }

    public func activate(_ x: inout [Float], _ activation: SequenceActivation) {
        var matrix = RowMatrix(rows: 1, columns: x.count, data: x)
        x = []
        activate(&matrix, activation)
        x = matrix.data
    }

    public func add(_ x: inout [Float], _ y: [Float]) {
        precondition(x.count == y.count)
        var matrix = RowMatrix(rows: 1, columns: x.count, data: x)
        x = []
        add(&matrix, RowMatrix(rows: 1, columns: y.count, data: y))
        x = matrix.data
    }
}

extension ComputeBackend {
    public var batchLimit: Int { 1 }
    public func batched<T>(_ images: Int, _ body: () -> T) -> T {
        precondition(images <= batchLimit, "\(name) computes at most \(batchLimit) images at once, given \(images)")
        return body()
    }
    /// On the host: each channel's planes copied in turn.
    public func stack(_ maps: [FeatureMap]) -> FeatureMap {
        precondition(!maps.isEmpty && maps.allSatisfy { $0.channels == maps[0].channels && $0.plane == maps[0].plane })
        guard maps.count > 1 else { return maps[0] }
        let (channels, plane) = (maps[0].channels, maps[0].plane)
        let sources = maps.map(\.data)
        var data = [Float](repeating: 0, count: maps.count * channels * plane)
        for c in 0..<channels {
            for (n, source) in sources.enumerated() {
                let at = (c * maps.count + n) * plane
                data[at..<(at + plane)] = source[(c * plane)..<((c + 1) * plane)]
            }
        }
        return FeatureMap(channels: channels, height: maps.count * maps[0].height, width: maps[0].width, data: data)
    }
    public func unstack(_ x: FeatureMap, images: Int) -> [FeatureMap] {
        precondition(images > 0 && x.height % images == 0, "a map of \(x.height) rows is not \(images) images")
        guard images > 1 else { return [x] }
        let (data, height) = (x.data, x.height / images)
        let plane = height * x.width
        return (0..<images).map { n in
            var values = [Float](repeating: 0, count: x.channels * plane)
            for c in 0..<x.channels {
                let at = (c * images + n) * plane
                values[(c * plane)..<((c + 1) * plane)] = data[at..<(at + plane)]
            }
            return FeatureMap(channels: x.channels, height: height, width: x.width, data: values)
        }
    }

    public func settle() {}
    public func letterbox(
        _ pixels: [UInt8], width: Int, height: Int, channels: Int, plan: LetterboxPlan
    ) -> FeatureMap? { nil }
    public func replay(
        _ key: AnyHashable, _ inputs: [FeatureMap], _ body: ([FeatureMap]) -> [FeatureMap]
    ) -> [FeatureMap] { body(inputs) }
    public func overlaps(_ boxes: [Float], areas: [Float], count: Int, threshold: Double) -> [UInt64]? { nil }
    public func suppress(
        corners: [Float], scores: [Float], offsets: [Float], count: Int, candidates: Int, threshold: Double,
        maximum: Int
    ) -> [Int]? { nil }
}

/// Where a level's anchors go in the head's output, and how its boxes are read.
public struct AnchorGeometry: Sendable {
    public let plane: Int
    public let width: Int
    /// Anchors of the whole output, and where this level's start.
    public let anchors: Int
    public let offset: Int
    public let stride: Float
    /// Distribution bins per side (16; 1 for YOLO26's head, whose channels are the distances).
    public let bins: Int
    public let classes: Int

    public init(plane: Int, width: Int, anchors: Int, offset: Int, stride: Float, bins: Int, classes: Int) {
        self.plane = plane
        self.width = width
        self.anchors = anchors
        self.offset = offset
        self.stride = stride
        self.bins = bins
        self.classes = classes
    }
}

/// The MLP activations of the CLIP towers: OpenAI's QuickGELU `x·σ(1.702x)`, or exact GELU (MobileCLIP).
public enum SequenceActivation: Sendable, CaseIterable {
    case quickGELU
    case gelu
    /// GELU with the tanh approximation (`gelu_pytorch_tanh`, SigLIP's): `x/2 · (1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
    case geluTanh
}

/// Where a photo goes in the letterboxed network input and how it is resized (ultralytics' `LetterBox` with
/// OpenCV's fixed-point INTER_LINEAR tables: per target column its source column and 11-bit weights, columns from
/// `xmax` on taking the border pixel, per target row its two source rows and weights; no tables where the photo
/// keeps its size).
public struct LetterboxPlan: Sendable {
    public var width: Int, height: Int
    public var resizedWidth: Int, resizedHeight: Int
    public var top: Int, left: Int
    public var padding: UInt8
    public var sourceX: [Int32], alpha0: [Int32], alpha1: [Int32], xmax: Int
    public var rowTop: [Int32], rowBottom: [Int32], beta0: [Int32], beta1: [Int32]

    public var resizes: Bool { !sourceX.isEmpty }

    public init(
        width: Int, height: Int, resizedWidth: Int, resizedHeight: Int, top: Int, left: Int, padding: UInt8,
        sourceX: [Int32] = [], alpha0: [Int32] = [], alpha1: [Int32] = [], xmax: Int = 0, rowTop: [Int32] = [],
        rowBottom: [Int32] = [], beta0: [Int32] = [], beta1: [Int32] = []
    ) {
        (self.width, self.height, self.resizedWidth, self.resizedHeight) = (width, height, resizedWidth, resizedHeight)
        (self.top, self.left, self.padding) = (top, left, padding)
        (self.sourceX, self.alpha0, self.alpha1, self.xmax) = (sourceX, alpha0, alpha1, xmax)
        (self.rowTop, self.rowBottom, self.beta0, self.beta1) = (rowTop, rowBottom, beta0, beta1)
    }
}
