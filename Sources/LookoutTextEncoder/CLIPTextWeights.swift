import LookoutTensor
import LookoutWeights

/// Sizes of a CLIP text transformer, all read from the weights.
public struct CLIPTextConfiguration: Sendable, Equatable {
    public enum Layout: String, Sendable {
        /// OpenAI names (`ViT-B-32.pt`, open_clip): `transformer.resblocks.N.attn.in_proj_weight`, …
        case openAI = "openai"
        /// Hugging Face names (`text_model.encoder.layers.N.self_attn.q_proj.weight`, …).
        case huggingFace = "huggingface"
    }

    public let layout: Layout
    public let width: Int
    public let layers: Int
    /// `width / 64`, as OpenAI's `build_model` derives it (head size 64).
    public let heads: Int
    public let contextLength: Int
    public let vocabularySize: Int
    public let embeddingSize: Int
    public let layerNormEpsilon: Float = 1e-5
}

/// A Linear layer: weight `outputs × inputs` (PyTorch layout), bias `outputs`, packed at load for Lookout's
/// GEMM kernel (``PackedLinear``). When the file stores the weight as fp16 (OpenAI's `ViT-B-32.pt` does),
/// the half values are what is packed: the products are those of PyTorch on the widened weights, from half
/// the bytes.
struct Linear: Sendable {
    let packed: PackedLinear
    let inputs: Int
    let outputs: Int

    /// `weight` is only read when the file's weight is not fp16. `precision` bf16: the weight rounded to bf16
    /// (from its halves where it has them) and the products in bf16 (``PackedLinear/init(bf16Weight:bias:inputs:outputs:)``).
    init(
        weight: () throws(WeightsError) -> [Float], halfWeight: [UInt16]?, bias: [Float], inputs: Int, outputs: Int,
        precision: Precision = .fp32
    ) throws(WeightsError) {
        if precision == .bf16 {
            let floats: [Float]
            if let halfWeight {
                floats = halfWeight.map { Float(Float16(bitPattern: $0)) }
            } else {
                floats = try weight()
            }
            packed = PackedLinear(bf16Weight: floats, bias: bias, inputs: inputs, outputs: outputs)
        } else if let halfWeight {
            packed = PackedLinear(halfWeight: halfWeight, bias: bias, inputs: inputs, outputs: outputs)
        } else {
            packed = PackedLinear(weight: try weight(), bias: bias, inputs: inputs, outputs: outputs)
        }
        self.inputs = inputs
        self.outputs = outputs
    }

    /// The weight tensor `weight` of `file` (shape checked), packed from its halves when it is fp16.
    init(
        _ file: WeightBinding, weight: String, shape: [Int], bias: [Float], inputs: Int, outputs: Int
    ) throws(WeightsError) {
        let view = try file.view(weight)
        guard view.shape == shape else {
            throw WeightsError(path: file.path, problem: "tensor \(weight) has shape \(view.shape), expected \(shape)")
        }
        try self.init(
            weight: { () throws(WeightsError) in try file.floats(weight, shape: shape) }, halfWeight: view.halfBits(),
            bias: bias, inputs: inputs, outputs: outputs, precision: file.precision)
    }

    func linear(_ x: UnsafePointer<Float>, rows: Int, into y: UnsafeMutablePointer<Float>, pool: ComputePool) {
        packed.apply(x, rows: rows, into: y, pool: pool)
    }
}

/// LayerNorm weights (γ, β) over the last dimension.
struct LayerNormWeights: Sendable {
    let gamma: [Float]
    let beta: [Float]

    func apply(_ x: UnsafePointer<Float>, rows: Int, epsilon: Float, into y: UnsafeMutablePointer<Float>) {
        gamma.withUnsafeBufferPointer { g in
            beta.withUnsafeBufferPointer { b in
                Kernels.layerNorm(
                    x, rows: rows, width: gamma.count, gamma: g.baseAddress!, beta: b.baseAddress!, epsilon: epsilon,
                    into: y)
            }
        }
    }
}

struct CLIPLayer: Sendable {
    let ln1: LayerNormWeights
    let inProjection: Linear
    let outProjection: Linear
    let ln2: LayerNormWeights
    let fc: Linear
    let projection: Linear
}

/// The text encoder's tensors under Swift names, converted to Float32 and checked at load.
///
/// Key mapping, OpenAI → Hugging Face (transformers `convert_clip_original_pytorch_to_hf.py`):
/// `token_embedding.weight` → `text_model.embeddings.token_embedding.weight`;
/// `positional_embedding` → `text_model.embeddings.position_embedding.weight`;
/// `transformer.resblocks.N.attn.in_proj_{weight,bias}` → `…layers.N.self_attn.{q,k,v}_proj.*` stacked in
/// q, k, v order; `attn.out_proj` → `self_attn.out_proj`; `ln_1`/`ln_2` → `layer_norm1`/`layer_norm2`;
/// `mlp.c_fc`/`mlp.c_proj` → `mlp.fc1`/`mlp.fc2`; `ln_final` → `text_model.final_layer_norm`;
/// `text_projection` (width × embedding, used as `x·P`) → `text_projection.weight` (embedding × width,
/// transposed here). Other tensors in the file (the vision tower, `logit_scale`) are not used.
struct CLIPTextWeights: Sendable {
    let configuration: CLIPTextConfiguration
    let tokenEmbedding: TokenTable
    let positionalEmbedding: [Float]
    let layers: [CLIPLayer]
    let finalNorm: LayerNormWeights
    /// width × embedding, multiplied on the right.
    let projection: [Float]

    init(_ weights: WeightFile, precision: Precision = .fp32) throws(WeightsError) {
        let file = WeightBinding(weights, precision: precision)
        /// A tensor's fp16 bit patterns with its shape checked (nil when it is not fp16); marks it taken.
        func halves(_ name: String, shape: [Int]) throws(WeightsError) -> [UInt16]? {
            let view = try file.view(name)
            guard view.shape == shape else {
                throw WeightsError(
                    path: file.path, problem: "tensor \(name) has shape \(view.shape), expected \(shape)")
            }
            guard let bits = view.halfBits() else { return nil }
            return bits
        }
        let layout: CLIPTextConfiguration.Layout
        if file.has("ln_final.weight") {
            layout = .openAI
        } else if file.has("text_model.final_layer_norm.weight") {
            layout = .huggingFace
        } else {
            throw WeightsError(
                path: file.path, kind: .wrongModel,
                problem: "not a CLIP text encoder: neither ln_final.weight (OpenAI names) nor "
                    + "text_model.final_layer_norm.weight (Hugging Face names) is present")
        }
        let hf = layout == .huggingFace
        let finalName = hf ? "text_model.final_layer_norm" : "ln_final"
        let width = try file.view(finalName + ".weight").shape.first ?? 0
        let tokenName = hf ? "text_model.embeddings.token_embedding.weight" : "token_embedding.weight"
        let positionName = hf ? "text_model.embeddings.position_embedding.weight" : "positional_embedding"
        let tokenView = try file.view(tokenName)
        let positionView = try file.view(positionName)
        guard width >= 64, width % 64 == 0, tokenView.shape.count == 2, positionView.shape.count == 2 else {
            throw WeightsError(path: file.path, problem: "\(finalName).weight width \(width) is not a multiple of 64")
        }
        let vocabulary = tokenView.shape[0]
        let context = positionView.shape[0]
        let projectionName = hf ? "text_projection.weight" : "text_projection"
        let projectionView = try file.view(projectionName)
        guard projectionView.shape.count == 2 else {
            throw WeightsError(path: file.path, problem: "tensor \(projectionName) has shape \(projectionView.shape)")
        }
        let embedding = hf ? projectionView.shape[0] : projectionView.shape[1]
        let layerPrefix = hf ? "text_model.encoder.layers." : "transformer.resblocks."
        var layerCount = 0
        while weights.tensors.keys.contains(where: { $0.hasPrefix("\(layerPrefix)\(layerCount).") }) { layerCount += 1 }
        guard layerCount > 0 else { throw WeightsError(path: file.path, problem: "no \(layerPrefix)0.* tensors") }

        configuration = CLIPTextConfiguration(
            layout: layout, width: width, layers: layerCount, heads: width / 64, contextLength: context,
            vocabularySize: vocabulary, embeddingSize: embedding)
        // One copy of the token table, in the file's precision (49,408 × 512 halves are 51 MB; as floats 101).
        if let bits = try halves(tokenName, shape: [vocabulary, width]) {
            tokenEmbedding = .halves(bits)
        } else {
            tokenEmbedding = .floats(try file.floats(tokenName, shape: [vocabulary, width]))
        }
        positionalEmbedding = try file.floats(positionName, shape: [context, width])
        func norm(_ name: String) throws(WeightsError) -> LayerNormWeights {
            LayerNormWeights(
                gamma: try file.floats(name + ".weight", shape: [width]),
                beta: try file.floats(name + ".bias", shape: [width]))
        }
        finalNorm = try norm(finalName)
        let projectionValues = try file.floats(projectionName, shape: hf ? [embedding, width] : [width, embedding])
        if hf {
            var transposed = [Float](repeating: 0, count: width * embedding)
            for row in 0..<embedding {
                for column in 0..<width {
                    transposed[column * embedding + row] = projectionValues[row * width + column]
                }
            }
            projection = transposed
        } else {
            projection = projectionValues
        }

        func linear(_ name: String, inputs: Int, outputs: Int) throws(WeightsError) -> Linear {
            try Linear(
                file, weight: name + ".weight", shape: [outputs, inputs],
                bias: try file.floats(name + ".bias", shape: [outputs]), inputs: inputs, outputs: outputs)
        }
        var layers: [CLIPLayer] = []
        for index in 0..<layerCount {
            let p = layerPrefix + "\(index)."
            let inProjection: Linear
            if hf {
                let parts = ["q_proj", "k_proj", "v_proj"].map { p + "self_attn.\($0)" }
                var half: [UInt16]? = []
                var bias: [Float] = []
                for part in parts {
                    let bits = try halves(part + ".weight", shape: [width, width])
                    half = bits.flatMap { bits in half.map { $0 + bits } }
                    bias += try file.floats(part + ".bias", shape: [width])
                }
                inProjection = try Linear(
                    weight: { () throws(WeightsError) in
                        var weight: [Float] = []
                        for part in parts { weight += try file.floats(part + ".weight", shape: [width, width]) }
                        return weight
                    }, halfWeight: half, bias: bias, inputs: width, outputs: 3 * width, precision: file.precision)
            } else {
                inProjection = try Linear(
                    file, weight: p + "attn.in_proj_weight", shape: [3 * width, width],
                    bias: try file.floats(p + "attn.in_proj_bias", shape: [3 * width]), inputs: width,
                    outputs: 3 * width)
            }
            let (ln1, ln2) = hf ? ("layer_norm1", "layer_norm2") : ("ln_1", "ln_2")
            layers.append(
                CLIPLayer(
                    ln1: try norm(p + ln1),
                    inProjection: inProjection,
                    outProjection: try linear(
                        p + (hf ? "self_attn.out_proj" : "attn.out_proj"), inputs: width, outputs: width),
                    ln2: try norm(p + ln2),
                    fc: try linear(p + (hf ? "mlp.fc1" : "mlp.c_fc"), inputs: width, outputs: 4 * width),
                    projection: try linear(p + (hf ? "mlp.fc2" : "mlp.c_proj"), inputs: 4 * width, outputs: width)))
            weights.dropResidentPages()  // this layer is packed: its file pages need not stay resident
        }
        self.layers = layers
        weights.dropResidentPages()  // everything is copied: the file's pages need not stay resident
        // The rest of a full CLIP file (the image tower, the logit scale, OpenAI's size buffers) is not the
        // text encoder's; anything else is a tensor this encoder does not understand.
        let otherTowers =
            hf
            ? ["vision_model.", "visual_projection.", "logit_scale", "text_model.embeddings.position_ids"]
            : ["visual.", "logit_scale", "input_resolution", "context_length", "vocab_size"]
        try file.requireEverythingTaken(
            ignoring: { name in otherTowers.contains { name == $0 || ($0.hasSuffix(".") && name.hasPrefix($0)) } },
            model: "CLIP text encoder")
    }
}

/// The token embedding table, `vocabulary × width`, as the file stores it.
enum TokenTable: Sendable {
    case floats([Float])
    case halves([UInt16])

    /// Row `id` widened into `target` (`width` floats).
    func row(_ id: Int, width: Int, into target: UnsafeMutablePointer<Float>) {
        switch self {
        case .floats(let values):
            values.withUnsafeBufferPointer { target.update(from: $0.baseAddress! + id * width, count: width) }
        case .halves(let bits):
            bits.withUnsafeBufferPointer { Kernels.halfToFloat($0.baseAddress! + id * width, target, count: width) }
        }
    }
}
