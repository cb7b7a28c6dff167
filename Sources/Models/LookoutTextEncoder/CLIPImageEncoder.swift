import LookoutTensor
import LookoutWeights

/// Sizes of a CLIP image tower (OpenAI `VisionTransformer`), all read from the weights.
public struct CLIPImageConfiguration: Sendable, Equatable {
    public let width: Int
    public let layers: Int
    /// `width / 64`, as OpenAI's `build_model` derives it (open_clip: `width / head_width`).
    public let heads: Int
    public let patchSize: Int
    /// Patches per side: the input is `patchSize · grid` pixels square.
    public let grid: Int
    public let embeddingSize: Int
    public let layerNormEpsilon: Float = 1e-5
    /// The MLP's activation: OpenAI's QuickGELU, or exact GELU (open_clip's default without `quick_gelu`).
    public var activation: SequenceActivation = .quickGELU

    /// `visual.input_resolution`: the side of the square the preprocessing crops to.
    public var inputResolution: Int { patchSize * grid }
    /// Tokens per photo: the class token and one per patch.
    public var tokens: Int { grid * grid + 1 }
}

/// The image tower's tensors (OpenAI names, `visual.*`), converted to Float32 and checked at load.
struct CLIPImageWeights: Sendable {
    let configuration: CLIPImageConfiguration
    /// `conv1` as a linear layer over flattened patches (channel, row, column), no bias.
    let patchEmbedding: Linear
    /// What is added to each photo's rows after the patch projection: the class embedding plus position 0 (its
    /// row of the projection is zero), then positions 1… (`tokens × width`).
    let tokenTable: [Float]
    let preNorm: LayerNormWeights
    let layers: [CLIPLayer]
    let postNorm: LayerNormWeights
    /// width × embedding, multiplied on the right.
    let projection: [Float]

    /// `activation` and `headWidth`: what an open_clip config says (the weights do not show them).
    init(
        _ weights: WeightFile, precision: Precision = .fp32, activation: SequenceActivation = .quickGELU,
        headWidth: Int = 64
    ) throws(WeightsError) {
        let file = WeightBinding(weights, precision: precision)
        guard file.has("visual.conv1.weight") else {
            throw WeightsError(
                path: file.path, kind: .wrongModel,
                problem: "no CLIP image tower (visual.conv1.weight is absent; OpenAI's ViT-B-32.pt holds one)")
        }
        let conv = try file.view("visual.conv1.weight")
        let positions = try file.view("visual.positional_embedding")
        let projectionView = try file.view("visual.proj")
        guard conv.shape.count == 4, conv.shape[1] == 3, conv.shape[2] == conv.shape[3], conv.shape[2] > 0,
            positions.shape.count == 2, projectionView.shape.count == 2
        else {
            throw WeightsError(
                path: file.path,
                problem:
                    "visual.conv1.weight \(conv.shape), visual.positional_embedding \(positions.shape), visual.proj \(projectionView.shape) are not a CLIP image tower's shapes"
            )
        }
        let width = conv.shape[0]
        let patch = conv.shape[2]
        let tokens = positions.shape[0]
        let grid = Int(Double(tokens - 1).squareRoot().rounded())
        guard width >= headWidth, headWidth > 0, width % headWidth == 0, grid > 0, grid * grid + 1 == tokens,
            positions.shape[1] == width,
            projectionView.shape[0] == width
        else {
            throw WeightsError(
                path: file.path,
                problem: "the image tower's width \(width) or its \(tokens) positions do not fit a square patch grid")
        }
        let embedding = projectionView.shape[1]
        var layerCount = 0
        while weights.tensors.keys.contains(where: { $0.hasPrefix("visual.transformer.resblocks.\(layerCount).") }) {
            layerCount += 1
        }
        guard layerCount > 0 else {
            throw WeightsError(path: file.path, problem: "no visual.transformer.resblocks.0.*")
        }
        configuration = CLIPImageConfiguration(
            width: width, layers: layerCount, heads: width / headWidth, patchSize: patch, grid: grid,
            embeddingSize: embedding, activation: activation)
        let inputs = 3 * patch * patch
        patchEmbedding = try Linear(
            file, weight: "visual.conv1.weight", shape: [width, 3, patch, patch],
            bias: [Float](repeating: 0, count: width), inputs: inputs, outputs: width)
        let classEmbedding = try file.floats("visual.class_embedding", shape: [width])
        var table = try file.floats("visual.positional_embedding", shape: [tokens, width])
        for d in 0..<width { table[d] += classEmbedding[d] }
        tokenTable = table
        func norm(_ name: String) throws(WeightsError) -> LayerNormWeights {
            LayerNormWeights(
                gamma: try file.floats(name + ".weight", shape: [width]),
                beta: try file.floats(name + ".bias", shape: [width]))
        }
        preNorm = try norm("visual.ln_pre")
        postNorm = try norm("visual.ln_post")
        projection = try file.floats("visual.proj", shape: [width, embedding])
        var layers: [CLIPLayer] = []
        for index in 0..<layerCount {
            let p = "visual.transformer.resblocks.\(index)."
            func linear(_ name: String, inputs: Int, outputs: Int) throws(WeightsError) -> Linear {
                try Linear(
                    file, weight: p + name + ".weight", shape: [outputs, inputs],
                    bias: try file.floats(p + name + ".bias", shape: [outputs]), inputs: inputs, outputs: outputs)
            }
            layers.append(
                CLIPLayer(
                    ln1: try norm(p + "ln_1"),
                    inProjection: try Linear(
                        file, weight: p + "attn.in_proj_weight", shape: [3 * width, width],
                        bias: try file.floats(p + "attn.in_proj_bias", shape: [3 * width]), inputs: width,
                        outputs: 3 * width),
                    outProjection: try linear("attn.out_proj", inputs: width, outputs: width),
                    ln2: try norm(p + "ln_2"),
                    fc: try linear("mlp.c_fc", inputs: width, outputs: 4 * width),
                    projection: try linear("mlp.c_proj", inputs: 4 * width, outputs: width)))
            file.file.dropResidentPages()  // this layer is packed: its file pages need not stay resident
        }
        self.layers = layers
    }
}

/// The CLIP image tower (OpenAI `VisionTransformer`, `CLIP.encode_image`), followed by `x / ‖x‖`.
///
/// Forward pass: the photo (preprocessed, channels first, `inputResolution` square) cut into patches, each
/// projected by `conv1` (a linear layer over the flattened patch); the class embedding prepended; positional
/// embeddings added; `ln_pre`; `layers` residual blocks with full attention (``CLIPTransformer``);
/// `ln_post` on the class token; the projection; division by the norm. Several photos run as one batch.
public final class CLIPImageEncoder: Sendable {
    public let configuration: CLIPImageConfiguration
    /// The weight file the tower was loaded from.
    public let path: String
    /// Identity of the weights, for caches and indexes (``WeightFile/fingerprint()``).
    public let fingerprint: String
    /// Calibration recorded in the file's metadata by the tool that trained and measured the tower
    /// (`lookout.scene_center`, `lookout.scene_slope`, `lookout.duplicate_threshold`: Lookout's demo tower
    /// has them); nil where the file has none (OpenAI's checkpoints).
    public let sceneCenter: Float?
    public let sceneSlope: Float?
    public let duplicateThreshold: Float?
    let weights: CLIPImageWeights
    /// The linear layers' arithmetic: fp32, or bf16 (where the CPU has AVX-512 BF16).
    public let precision: Precision

    /// `activation` and `headWidth` as the model's configuration gives them (OpenAI's: QuickGELU, 64).
    public init(
        weights file: WeightFile, precision: Precision = .fp32, activation: SequenceActivation = .quickGELU,
        headWidth: Int = 64
    ) throws(WeightsError) {
        let weights = try CLIPImageWeights(file, precision: precision, activation: activation, headWidth: headWidth)
        self.precision = precision
        self.weights = weights
        self.configuration = weights.configuration
        self.path = file.path
        self.fingerprint = file.fingerprint()
        func number(_ key: String, _ range: ClosedRange<Float>) -> Float? {
            file.metadata[key].flatMap { Float($0) }.flatMap { range.contains($0) ? $0 : nil }
        }
        sceneCenter = number("lookout.scene_center", -1...1)
        sceneSlope = number("lookout.scene_slope", 0.001...10_000)
        duplicateThreshold = number("lookout.duplicate_threshold", -1...1)
    }

    public convenience init(contentsOf path: String, precision: Precision = .fp32) throws(WeightsError) {
        try self.init(weights: WeightFile.open(path), precision: precision)
    }

    /// L2-normalised embeddings of preprocessed photos (each `3 × inputResolution²` values, channels first, as
    /// `CLIPPreprocessing.tensor` makes them).
    public func encode(_ photos: [[Float]], backend: any ComputeBackend = CPUBackend.shared) -> [[Float]] {
        guard !photos.isEmpty else { return [] }
        let c = configuration
        let side = c.inputResolution
        precondition(photos.allSatisfy { $0.count == 3 * side * side }, "photos must be 3 × \(side) × \(side)")
        return encode(patches: backend.patchRows(photos, channels: 3, side: side, patch: c.patchSize), backend: backend)
    }

    /// The same of 8-bit RGB photos (`inputResolution² × 3`, interleaved: `CLIPPreprocessing.resized`'s pixels),
    /// normalised by the backend with `mean` and `std` (the transform's): the same embeddings as
    /// ``encode(_:backend:)`` of ``CLIPPreprocessing/tensor(_:mean:std:)``'s values.
    public func encode(
        pixels: [[UInt8]], mean: [Float], std: [Float], backend: any ComputeBackend = CPUBackend.shared
    ) -> [[Float]] {
        guard !pixels.isEmpty else { return [] }
        let side = configuration.inputResolution
        precondition(pixels.allSatisfy { $0.count == 3 * side * side }, "photos must be \(side) × \(side) × 3")
        return encode(
            patches: backend.patchRows(
                pixels: pixels, side: side, patch: configuration.patchSize, mean: mean, std: std),
            backend: backend)
    }

    /// The tower from its patch rows (``ComputeBackend/patchRows(_:channels:side:patch:)``).
    func encode(patches: RowMatrix, backend: any ComputeBackend) -> [[Float]] {
        let c = configuration
        let tokens = c.tokens
        let count = patches.rows / tokens
        // Each photo's patches after a row of zeros: projected (conv1, no bias), its rows are zero where the class
        // token goes, so one table adds the class embedding and every position.
        var x = backend.linear(patches, layer: weights.patchEmbedding.packed)
        backend.addRepeating(&x, weights.tokenTable)
        x = backend.layerNorm(
            x, gamma: weights.preNorm.gamma, beta: weights.preNorm.beta, epsilon: c.layerNormEpsilon)
        let lengths = [Int](repeating: tokens, count: count)
        let starts = (0..<count).map { $0 * tokens }
        let transformer = CLIPTransformer(
            width: c.width, heads: c.heads, epsilon: c.layerNormEpsilon, causal: false, activation: c.activation)
        transformer.apply(weights.layers, to: &x, lengths: lengths, starts: starts, backend: backend)
        return project(x, starts: starts, backend: backend)
    }

    /// `ln_post` on each photo's class token, the projection (each photo's alone: its embedding must not depend on
    /// the photos beside it in a batch), L2 normalisation.
    func project(_ x: RowMatrix, starts: [Int], backend: any ComputeBackend) -> [[Float]] {
        let c = configuration
        let pooled = backend.layerNorm(
            backend.rows(x, at: starts), gamma: weights.postNorm.gamma, beta: weights.postNorm.beta,
            epsilon: c.layerNormEpsilon)
        let features = backend.rowProducts(pooled, weights.projection, columns: c.embeddingSize)
        return (0..<starts.count).map { n in
            normalized(Array(features[(n * c.embeddingSize)..<((n + 1) * c.embeddingSize)]))
        }
    }
}
