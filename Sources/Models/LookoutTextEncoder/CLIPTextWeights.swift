import LookoutTensor
import LookoutWeights

/// Sizes of a CLIP text transformer, all read from the weights.
public struct CLIPTextConfiguration: Sendable, Equatable {
    public enum Layout: String, Sendable {
        /// OpenAI names (`ViT-B-32.pt`, open_clip): `transformer.resblocks.N.attn.in_proj_weight`, …
        case openAI = "openai"
        /// The same names under a module prefix, as open_clip's `CustomTextCLIP` keeps its `TextTransformer`
        /// (`text.transformer.resblocks.N.…`, `text.attn_mask`): MobileCLIP2-B, YOLOE-26's `mobileclip2_b.ts`.
        case openCLIP = "openclip"
        /// Hugging Face names (`text_model.encoder.layers.N.self_attn.q_proj.weight`, …).
        case huggingFace = "huggingface"
        /// Apple's MobileCLIP text encoder as ultralytics traces it into `mobileclip_blt.ts` (YOLOE's text
        /// tower): `text_encoder.transformer.N.pre_norm_mha.1.qkv_proj.weight`, …
        case mobileCLIP = "mobileclip"
    }

    public let layout: Layout
    public let width: Int
    public let layers: Int
    /// `width / 64`, as OpenAI's `build_model` derives it (head size 64), or an open_clip config's `heads`.
    public let heads: Int
    public let contextLength: Int
    public let vocabularySize: Int
    public let embeddingSize: Int
    public let layerNormEpsilon: Float = 1e-5

    /// Whether the MLP's activation is PyTorch's exact GELU (MobileCLIP's `TransformerEncoder`; open_clip's
    /// default, which a TorchScript file's module tree shows as `nn.GELU` in the text layers' MLP) rather than
    /// OpenAI's QuickGELU.
    public let exactGELU: Bool

    /// Which tower this is: CLIP (YOLO-World's), MobileCLIP (YOLOE-v8/11's) or MobileCLIP2 (YOLOE-26's: CLIP's
    /// names, exact GELU). They share the tokenizer and the transformer's shape and differ in weights, names
    /// and the MLP's activation.
    public var family: TextTower { layout == .mobileCLIP ? .mobileCLIP : exactGELU ? .mobileCLIP2 : .clip }
    var activation: SequenceActivation { exactGELU ? .gelu : .quickGELU }
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
}

extension Linear {
    /// Square `width × width` projections (transformers' `q_proj`, `k_proj`, `v_proj`) stacked in order as one layer
    /// of `parts.count · width` outputs, packed from their halves where the file stores them as fp16.
    init(stacking parts: [String], _ file: WeightBinding, width: Int) throws(WeightsError) {
        var half: [UInt16]? = []
        var bias: [Float] = []
        for part in parts {
            let view = try file.view(part + ".weight")
            guard view.shape == [width, width] else {
                throw WeightsError(
                    path: file.path,
                    problem: "tensor \(part).weight has shape \(view.shape), expected \([width, width])")
            }
            let bits = view.halfBits()
            half = bits.flatMap { bits in half.map { $0 + bits } }
            bias += try file.floats(part + ".bias", shape: [width])
        }
        try self.init(
            weight: { () throws(WeightsError) in
                var weight: [Float] = []
                for part in parts { weight += try file.floats(part + ".weight", shape: [width, width]) }
                return weight
            }, halfWeight: half, bias: bias, inputs: width, outputs: parts.count * width, precision: file.precision)
    }
}

/// An embedding divided by its L2 norm (the towers' last step), summed in order.
func normalized(_ vector: [Float]) -> [Float] {
    var squares: Float = 0
    for value in vector { squares += value * value }
    let norm = squares.squareRoot()
    return vector.map { $0 / norm }
}

/// LayerNorm weights (γ, β) over the last dimension (``ComputeBackend/layerNorm(_:rows:gamma:beta:epsilon:)``).
struct LayerNormWeights: Sendable {
    let gamma: [Float]
    let beta: [Float]
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

    /// `exactGELU` and `heads`: what a model's configuration says where the weights do not show it (open_clip's
    /// `quick_gelu` and `text_cfg.heads`); nil: read from the file (the module tree) or `width / 64`.
    init(
        _ weights: WeightFile, precision: Precision = .fp32, exactGELU: Bool? = nil, heads: Int? = nil
    ) throws(WeightsError) {
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
        // open_clip's text tower under a module prefix (`text.` in a CustomTextCLIP): the one prefix P with
        // P + "ln_final.weight" and P + "token_embedding.weight".
        let prefixed = weights.names.filter { $0.hasSuffix(".ln_final.weight") }.map { String($0.dropLast(15)) }
            .filter { weights.tensors[$0 + "token_embedding.weight"] != nil }
        var prefix = ""
        if file.has("ln_final.weight") {
            layout = .openAI
        } else if prefixed.count == 1 {
            (layout, prefix) = (.openCLIP, prefixed[0])
        } else if file.has("text_model.final_layer_norm.weight") {
            layout = .huggingFace
        } else if file.has("text_encoder.final_layer_norm.weight") {
            layout = .mobileCLIP
        } else {
            throw WeightsError(
                path: file.path, kind: .wrongModel,
                problem: "not a CLIP or MobileCLIP text encoder: none of ln_final.weight (OpenAI names), "
                    + "text.ln_final.weight (open_clip, MobileCLIP2), text_model.final_layer_norm.weight "
                    + "(Hugging Face names) or text_encoder.final_layer_norm.weight (MobileCLIP) is present")
        }
        let names = Names(layout, prefix: prefix)
        let hf = layout == .huggingFace
        let width = try file.view(names.finalNorm + ".weight").shape.first ?? 0
        let tokenView = try file.view(names.token)
        let positionView = try file.view(names.position)
        // MobileCLIP keeps its positions as `[1, 1, context, width]`.
        let positionShape = layout == .mobileCLIP ? Array(positionView.shape.dropFirst(2)) : positionView.shape
        guard width >= 64, width % 64 == 0, tokenView.shape.count == 2, positionShape.count == 2,
            positionView.shape.count == (layout == .mobileCLIP ? 4 : 2),
            layout != .mobileCLIP || positionView.shape.prefix(2) == [1, 1]
        else {
            throw WeightsError(
                path: file.path,
                problem: "\(names.finalNorm).weight width \(width) is not a multiple of 64, or \(names.token) "
                    + "\(tokenView.shape) / \(names.position) \(positionView.shape) are not token and position tables")
        }
        let vocabulary = tokenView.shape[0]
        let context = positionShape[0]
        let projectionView = try file.view(names.projection)
        guard projectionView.shape.count == 2 else {
            throw WeightsError(path: file.path, problem: "tensor \(names.projection) has shape \(projectionView.shape)")
        }
        let embedding = hf ? projectionView.shape[0] : projectionView.shape[1]
        let layerPrefix = names.layers
        var layerCount = 0
        while weights.tensors.keys.contains(where: { $0.hasPrefix("\(layerPrefix)\(layerCount).") }) { layerCount += 1 }
        guard layerCount > 0 else { throw WeightsError(path: file.path, problem: "no \(layerPrefix)0.* tensors") }

        if let heads, heads <= 0 || width % heads != 0 {
            throw WeightsError(path: file.path, problem: "\(heads) heads do not divide the text width \(width)")
        }
        configuration = CLIPTextConfiguration(
            layout: layout, width: width, layers: layerCount, heads: heads ?? width / 64, contextLength: context,
            vocabularySize: vocabulary, embeddingSize: embedding,
            exactGELU: exactGELU
                ?? (layout == .mobileCLIP || WeightFile.callsGELU(weights, at: names.layers + "0.mlp.gelu")))
        // open_clip keeps its causal mask as a buffer (`attn_mask`, −inf above the diagonal): Lookout applies that
        // mask, so a file whose mask is another one is not this model.
        if let mask = names.causalMask, file.has(mask) {
            let values = try file.floats(mask, shape: [context, context])
            for row in 0..<context {
                for column in 0..<context where (values[row * context + column] == -.infinity) != (column > row) {
                    throw WeightsError(
                        path: file.path,
                        problem:
                            "\(mask) is not a causal mask (−inf exactly above the diagonal) at row \(row), column \(column)"
                    )
                }
            }
        }
        // One copy of the token table, in the file's precision (49,408 × 512 halves are 51 MB; as floats 101).
        if let bits = try halves(names.token, shape: [vocabulary, width]) {
            tokenEmbedding = .halves(bits)
        } else {
            tokenEmbedding = .floats(try file.floats(names.token, shape: [vocabulary, width]))
        }
        positionalEmbedding = try file.floats(
            names.position, shape: layout == .mobileCLIP ? [1, 1, context, width] : [context, width])
        func norm(_ name: String) throws(WeightsError) -> LayerNormWeights {
            LayerNormWeights(
                gamma: try file.floats(name + ".weight", shape: [width]),
                beta: try file.floats(name + ".bias", shape: [width]))
        }
        finalNorm = try norm(names.finalNorm)
        let projectionValues = try file.floats(names.projection, shape: hf ? [embedding, width] : [width, embedding])
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
                inProjection = try Linear(
                    stacking: ["q_proj", "k_proj", "v_proj"].map { p + "self_attn.\($0)" }, file, width: width)
            } else {
                // OpenAI's in_proj and MobileCLIP's qkv_proj both stack q, k, v (each heads × head size).
                inProjection = try Linear(
                    file, weight: p + names.inProjectionWeight, shape: [3 * width, width],
                    bias: try file.floats(p + names.inProjectionBias, shape: [3 * width]), inputs: width,
                    outputs: 3 * width)
            }
            layers.append(
                CLIPLayer(
                    ln1: try norm(p + names.ln1),
                    inProjection: inProjection,
                    outProjection: try linear(p + names.outProjection, inputs: width, outputs: width),
                    ln2: try norm(p + names.ln2),
                    fc: try linear(p + names.fc, inputs: width, outputs: 4 * width),
                    projection: try linear(p + names.fcOut, inputs: 4 * width, outputs: width)))
            weights.dropResidentPages()  // this layer is packed: its file pages need not stay resident
        }
        self.layers = layers
        weights.dropResidentPages()  // everything is copied: the file's pages need not stay resident
        // The rest of a full CLIP file (the image tower, the logit scale, OpenAI's size buffers) is not the
        // text encoder's; anything else is a tensor this encoder does not understand.
        let otherTowers = names.otherTowers
        try file.requireEverythingTaken(
            ignoring: { name in otherTowers.contains { name == $0 || ($0.hasSuffix(".") && name.hasPrefix($0)) } },
            model: "\(configuration.family.rawValue) text encoder")
    }

    /// Where each layout keeps the encoder's tensors; per-layer names follow `layers` + `N.`.
    struct Names {
        let finalNorm, token, position, projection, layers: String
        let ln1, ln2, inProjectionWeight, inProjectionBias, outProjection, fc, fcOut: String
        /// Tensors of the rest of a full model file (image tower, logit scale, size buffers), not read.
        let otherTowers: [String]
        /// open_clip's causal mask buffer, checked rather than read.
        var causalMask: String? = nil

        init(_ layout: CLIPTextConfiguration.Layout, prefix: String = "") {
            switch layout {
            case .openAI, .openCLIP:
                let p = prefix
                (finalNorm, token, position) = (
                    p + "ln_final", p + "token_embedding.weight", p + "positional_embedding"
                )
                (projection, layers) = (p + "text_projection", p + "transformer.resblocks.")
                (ln1, ln2, inProjectionWeight, inProjectionBias) = (
                    "ln_1", "ln_2", "attn.in_proj_weight", "attn.in_proj_bias"
                )
                (outProjection, fc, fcOut) = ("attn.out_proj", "mlp.c_fc", "mlp.c_proj")
                if layout == .openCLIP {
                    // A CustomTextCLIP's other parts: its image tower, logit scale and bias.
                    otherTowers = ["visual.", "logit_scale", "logit_bias"]
                    causalMask = p + "attn_mask"
                } else {
                    otherTowers = ["visual.", "logit_scale", "input_resolution", "context_length", "vocab_size"]
                }
            case .huggingFace:
                finalNorm = "text_model.final_layer_norm"
                token = "text_model.embeddings.token_embedding.weight"
                position = "text_model.embeddings.position_embedding.weight"
                (projection, layers) = ("text_projection.weight", "text_model.encoder.layers.")
                (ln1, ln2, inProjectionWeight, inProjectionBias) = ("layer_norm1", "layer_norm2", "", "")
                (outProjection, fc, fcOut) = ("self_attn.out_proj", "mlp.fc1", "mlp.fc2")
                otherTowers = [
                    "vision_model.", "visual_projection.", "logit_scale", "text_model.embeddings.position_ids",
                ]
            case .mobileCLIP:
                // mobileclip/text_encoder.py `TextTransformer` and modules/common/transformer.py
                // `TransformerEncoder`: pre_norm_mha = (LayerNorm, MultiHeadAttention, Dropout), pre_norm_ffn =
                // (LayerNorm, Linear, GELU, Dropout, Linear, Dropout).
                finalNorm = "text_encoder.final_layer_norm"
                token = "text_encoder.embedding_layer.weight"
                position = "text_encoder.positional_embedding.pos_embed.pos_embed"
                (projection, layers) = ("text_encoder.projection_layer", "text_encoder.transformer.")
                (ln1, ln2) = ("pre_norm_mha.0", "pre_norm_ffn.0")
                (inProjectionWeight, inProjectionBias) = (
                    "pre_norm_mha.1.qkv_proj.weight", "pre_norm_mha.1.qkv_proj.bias"
                )
                (outProjection, fc, fcOut) = ("pre_norm_mha.1.out_proj", "pre_norm_ffn.1", "pre_norm_ffn.4")
                otherTowers = ["image_encoder.", "logit_scale"]
            }
        }
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
