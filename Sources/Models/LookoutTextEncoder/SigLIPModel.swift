import LookoutJSON
import LookoutSupport
import LookoutTensor
import LookoutTokenizer
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

/// A SigLIP model's configuration as `transformers` saves it (`config.json`, `model_type` `siglip`: SigLIP's
/// checkpoints and SigLIP 2's fixed-resolution ones), with its image processor's (`preprocessor_config.json`).
/// Settings absent from the files take transformers' defaults (`SiglipTextConfig`, `SiglipVisionConfig`,
/// `SiglipImageProcessor`), as its loader does; what Lookout does not compute (NaFlex, a tower without the
/// attention-pooling head, an activation or resize it does not have) is refused by name.
public struct SigLIPConfiguration: Sendable, Equatable {
    /// One tower's transformer.
    public struct Tower: Sendable, Equatable {
        public let width: Int
        public let layers: Int
        public let heads: Int
        public let intermediate: Int
        public let epsilon: Float
        public let activation: SequenceActivation
    }

    public let vision: Tower
    public let text: Tower
    public let imageSize: Int
    public let patchSize: Int
    /// Text positions (`max_position_embeddings`): every text is padded to this many ids.
    public let contextLength: Int
    public let vocabularySize: Int
    /// The text head's output (`projection_size`, the vision width in every SigLIP).
    public let projectionSize: Int
    /// The image processor: both sides resized to `resizeHeight × resizeWidth` (no crop), PIL's `resample`
    /// (`bilinear` false: bicubic), `convert("RGB")` first where `convertFirst`, then `(v/255 − mean)/std`.
    public let resizeHeight: Int
    public let resizeWidth: Int
    public let bilinear: Bool
    public let convertFirst: Bool
    public let mean: [Float]
    public let std: [Float]
    /// The cosine above which two photos are duplicates, where a Lookout-trained tower's `config.json` records one
    /// (`lookout_duplicate_threshold`, measured on held-out scenes and their edited copies).
    public let duplicateThreshold: Float?
    /// A scene-score calibration a Lookout-trained tower's `config.json` records (`lookout_scene_center`,
    /// `lookout_scene_slope`: `σ((cos − center) · slope)` fitted on held-out scenes), used in place of the
    /// model's own logit scale and bias, which a small tower trained briefly leaves overconfident.
    public let sceneCenter: Float?
    public let sceneSlope: Float?

    static let activations: [String: SequenceActivation] = [
        "gelu_pytorch_tanh": .geluTanh, "gelu_new": .geluTanh, "gelu": .gelu, "quick_gelu": .quickGELU,
    ]

    /// `model`: `config.json`'s bytes; `processor`: `preprocessor_config.json`'s, nil where the folder has none
    /// (SigLIP's defaults: the model's image size, bicubic, mean and std 0.5).
    public init(
        model bytes: [UInt8], path: String, processor: [UInt8]?, processorPath: String
    ) throws(WeightsError) {
        func fail(_ problem: String, _ at: String = path) -> WeightsError { WeightsError(path: at, problem: problem) }
        let document: JSONDocument
        do { document = try JSONDocument(bytes: bytes) } catch { throw fail("not JSON: \(error)") }
        let root = document.root
        let type = root["model_type"]?.string ?? "none"
        guard type == "siglip" else {
            throw WeightsError(
                path: path, kind: .wrongModel,
                problem: type == "siglip2"
                    ? "model_type siglip2 is SigLIP 2's NaFlex model, which Lookout does not compute; SigLIP 2's fixed-resolution checkpoints (model_type siglip) are read"
                    : "model_type \(type): not a SigLIP image–text model (model_type siglip)")
        }
        guard let vision = root["vision_config"], let text = root["text_config"] else {
            throw fail("config.json needs vision_config and text_config")
        }
        if let threshold = root["lookout_duplicate_threshold"] {
            guard let value = threshold.number, (-1...1).contains(value) else {
                throw fail("lookout_duplicate_threshold must be a cosine, between -1 and 1")
            }
            duplicateThreshold = Float(value)
        } else {
            duplicateThreshold = nil
        }
        switch (root["lookout_scene_center"]?.number, root["lookout_scene_slope"]?.number) {
        case (nil, nil): (sceneCenter, sceneSlope) = (nil, nil)
        case (let center?, let slope?) where (-1...1).contains(center) && slope > 0 && slope < 1e4:
            (sceneCenter, sceneSlope) = (Float(center), Float(slope))
        default:
            throw fail("lookout_scene_center and lookout_scene_slope go together: a cosine and a positive slope")
        }
        func integer(_ node: JSONNode, _ key: String, _ scope: String, _ value: Int) throws(WeightsError) -> Int {
            guard let found = node[key], found.kind != .null else { return value }
            guard let number = found.int, number > 0, number < 1 << 20 else {
                throw fail("\(scope).\(key) must be a positive whole number")
            }
            return Int(number)
        }
        func tower(_ node: JSONNode, _ scope: String) throws(WeightsError) -> Tower {
            let act = node["hidden_act"]?.string ?? "gelu_pytorch_tanh"
            guard let activation = Self.activations[act] else {
                throw fail(
                    "\(scope).hidden_act \(act): Lookout computes \(Self.activations.keys.sorted().joined(separator: ", "))"
                )
            }
            let epsilon = node["layer_norm_eps"]?.number ?? 1e-6
            guard epsilon > 0, epsilon < 1 else { throw fail("\(scope).layer_norm_eps must be between 0 and 1") }
            let width = try integer(node, "hidden_size", scope, 768)
            let heads = try integer(node, "num_attention_heads", scope, 12)
            guard width % heads == 0 else { throw fail("\(scope): \(heads) heads do not divide the width \(width)") }
            return Tower(
                width: width, layers: try integer(node, "num_hidden_layers", scope, 12), heads: heads,
                intermediate: try integer(node, "intermediate_size", scope, 3072), epsilon: Float(epsilon),
                activation: activation)
        }
        self.vision = try tower(vision, "vision_config")
        self.text = try tower(text, "text_config")
        if vision["vision_use_head"]?.bool == false {
            throw fail("vision_config.vision_use_head is false: Lookout computes SigLIP's attention-pooling head")
        }
        if let channels = vision["num_channels"]?.int, channels != 3 {
            throw fail("vision_config.num_channels \(channels): Lookout's photos have 3 channels")
        }
        imageSize = try integer(vision, "image_size", "vision_config", 224)
        patchSize = try integer(vision, "patch_size", "vision_config", 16)
        guard imageSize % patchSize == 0 else {
            throw fail("vision_config.image_size \(imageSize) is not a whole number of patches of \(patchSize)")
        }
        contextLength = try integer(text, "max_position_embeddings", "text_config", 64)
        vocabularySize = try integer(text, "vocab_size", "text_config", 32000)
        projectionSize = try integer(text, "projection_size", "text_config", self.text.width)

        // The image processor (transformers' SiglipImageProcessor, PIL backend).
        var (height, width, bilinear, convertFirst) = (imageSize, imageSize, false, false)
        var (mean, std): ([Float], [Float]) = ([0.5, 0.5, 0.5], [0.5, 0.5, 0.5])
        if let processor {
            func bad(_ problem: String) -> WeightsError { fail(problem, processorPath) }
            let settings: JSONDocument
            do { settings = try JSONDocument(bytes: processor) } catch { throw bad("not JSON: \(error)") }
            let p = settings.root
            if let kind = p["image_processor_type"]?.string, !kind.hasPrefix("SiglipImageProcessor") {
                throw bad("image_processor_type \(kind): Lookout preprocesses as SiglipImageProcessor")
            }
            for key in ["do_resize", "do_rescale", "do_normalize"] where p[key]?.bool == false {
                throw bad("\(key) is false: Lookout resizes, rescales and normalises as SigLIP does")
            }
            if let factor = p["rescale_factor"]?.number, abs(factor - 1.0 / 255) > 1e-12 {
                throw bad("rescale_factor \(factor): Lookout rescales by 1/255")
            }
            if let size = p["size"] {
                guard let h = size["height"]?.int, let w = size["width"]?.int, h > 0, w > 0, h < 1 << 16, w < 1 << 16
                else { throw bad("size must give height and width (a shortest_edge resize is not SigLIP's)") }
                (height, width) = (Int(h), Int(w))
            }
            switch p["resample"]?.int ?? 3 {
            case 3: bilinear = false
            case 2: bilinear = true
            case let other: throw bad("resample \(other): Lookout resizes bicubic (3) or bilinear (2), as PIL does")
            }
            convertFirst = p["do_convert_rgb"]?.bool ?? false
            func triple(_ key: String, _ value: [Float]) throws(WeightsError) -> [Float] {
                guard let node = p[key], node.kind != .null else { return value }
                let values = (0..<node.count).compactMap { node[$0].number.map(Float.init) }
                guard node.count == 3, values.count == 3, key == "image_mean" || values.allSatisfy({ $0 > 0 }) else {
                    throw bad("\(key) must be three numbers\(key == "image_std" ? " above 0" : "")")
                }
                return values
            }
            mean = try triple("image_mean", mean)
            std = try triple("image_std", std)
        }
        guard height == imageSize, width == imageSize else {
            throw fail(
                "the image processor resizes to \(width)×\(height), the vision tower takes \(imageSize)×\(imageSize)",
                processorPath)
        }
        (resizeHeight, resizeWidth, self.bilinear, self.convertFirst, self.mean, self.std) = (
            height, width, bilinear, convertFirst, mean, std
        )
    }
}

/// One pre-LayerNorm encoder layer in transformers' names (`…layers.N.layer_norm1`, `self_attn.{q,k,v}_proj`
/// stacked in that order, `self_attn.out_proj`, `layer_norm2`, `mlp.fc1`, `mlp.fc2`).
private func huggingFaceLayer(
    _ file: WeightBinding, _ p: String, width: Int, intermediate: Int
) throws(WeightsError) -> CLIPLayer {
    func norm(_ name: String) throws(WeightsError) -> LayerNormWeights {
        LayerNormWeights(
            gamma: try file.floats(name + ".weight", shape: [width]),
            beta: try file.floats(name + ".bias", shape: [width]))
    }
    func linear(_ name: String, inputs: Int, outputs: Int) throws(WeightsError) -> Linear {
        try Linear(
            file, weight: name + ".weight", shape: [outputs, inputs],
            bias: try file.floats(name + ".bias", shape: [outputs]), inputs: inputs, outputs: outputs)
    }
    let inProjection = try Linear(
        stacking: ["q_proj", "k_proj", "v_proj"].map { p + "self_attn.\($0)" }, file, width: width)
    return CLIPLayer(
        ln1: try norm(p + "layer_norm1"), inProjection: inProjection,
        outProjection: try linear(p + "self_attn.out_proj", inputs: width, outputs: width),
        ln2: try norm(p + "layer_norm2"), fc: try linear(p + "mlp.fc1", inputs: width, outputs: intermediate),
        projection: try linear(p + "mlp.fc2", inputs: intermediate, outputs: width))
}

/// How many `prefix` + `N.` layers the file holds.
private func layerCount(_ weights: WeightFile, _ prefix: String) -> Int {
    var count = 0
    while weights.tensors.keys.contains(where: { $0.hasPrefix("\(prefix)\(count).") }) { count += 1 }
    return count
}

/// SigLIP's vision tower (transformers `SiglipVisionTransformer` with `SiglipMultiheadAttentionPoolingHead`),
/// followed by `x / ‖x‖`.
///
/// Forward pass: the photo (preprocessed, channels first, `imageSize` square) cut into patches, each projected by
/// the patch embedding (a linear layer over the flattened patch, with bias); position embeddings added (no class
/// token); `layers` pre-LayerNorm encoder layers with full attention; `post_layernorm` on every token; then the
/// head: one learned query (`probe`) attends over the tokens (`nn.MultiheadAttention`), its output is kept as a
/// residual, LayerNorm, MLP, residual added. Its one row is the image embedding (no projection), normalised.
public final class SigLIPImageEncoder: Sendable {
    public let configuration: SigLIPConfiguration
    public let fingerprint: String
    let patchEmbedding: Linear
    let positions: [Float]
    let layers: [CLIPLayer]
    let postNorm: LayerNormWeights
    /// The head's query after its projection (`probe · W_qᵀ + b_q`: the same for every photo).
    let query: [Float]
    /// The head's key and value projections (`in_proj` rows `width..<3·width`).
    let keysValues: Linear
    let outProjection: Linear
    let headNorm: LayerNormWeights
    let fc1: Linear
    let fc2: Linear

    var grid: Int { configuration.imageSize / configuration.patchSize }

    init(_ file: WeightBinding, _ configuration: SigLIPConfiguration, fingerprint: String) throws(WeightsError) {
        let t = configuration.vision
        let (width, patch) = (t.width, configuration.patchSize)
        let grid = configuration.imageSize / patch
        let inputs = 3 * patch * patch
        patchEmbedding = try Linear(
            file, weight: "vision_model.embeddings.patch_embedding.weight", shape: [width, 3, patch, patch],
            bias: try file.floats("vision_model.embeddings.patch_embedding.bias", shape: [width]), inputs: inputs,
            outputs: width)
        positions = try file.floats("vision_model.embeddings.position_embedding.weight", shape: [grid * grid, width])
        var layers: [CLIPLayer] = []
        for index in 0..<t.layers {
            layers.append(
                try huggingFaceLayer(
                    file, "vision_model.encoder.layers.\(index).", width: width, intermediate: t.intermediate))
        }
        self.layers = layers
        func norm(_ name: String) throws(WeightsError) -> LayerNormWeights {
            LayerNormWeights(
                gamma: try file.floats(name + ".weight", shape: [width]),
                beta: try file.floats(name + ".bias", shape: [width]))
        }
        postNorm = try norm("vision_model.post_layernorm")
        let h = "vision_model.head."
        let probe = try file.floats(h + "probe", shape: [1, 1, width])
        let inWeight = try file.floats(h + "attention.in_proj_weight", shape: [3 * width, width])
        let inBias = try file.floats(h + "attention.in_proj_bias", shape: [3 * width])
        let queryLayer = PackedLinear(
            weight: Array(inWeight[0..<(width * width)]), bias: Array(inBias[0..<width]), inputs: width,
            outputs: width)
        query = CPUBackend.shared.linear(probe, rows: 1, layer: queryLayer)
        keysValues = try Linear(
            weight: { Array(inWeight[(width * width)...]) }, halfWeight: nil, bias: Array(inBias[width...]),
            inputs: width, outputs: 2 * width, precision: file.precision)
        outProjection = try Linear(
            file, weight: h + "attention.out_proj.weight", shape: [width, width],
            bias: try file.floats(h + "attention.out_proj.bias", shape: [width]), inputs: width, outputs: width)
        headNorm = try norm(h + "layernorm")
        fc1 = try Linear(
            file, weight: h + "mlp.fc1.weight", shape: [t.intermediate, width],
            bias: try file.floats(h + "mlp.fc1.bias", shape: [t.intermediate]), inputs: width,
            outputs: t.intermediate)
        fc2 = try Linear(
            file, weight: h + "mlp.fc2.weight", shape: [width, t.intermediate],
            bias: try file.floats(h + "mlp.fc2.bias", shape: [width]), inputs: t.intermediate, outputs: width)
        self.configuration = configuration
        self.fingerprint = fingerprint
    }

    /// L2-normalised embeddings of preprocessed photos (each `3 × imageSize²` values, channels first).
    public func encode(_ photos: [[Float]], backend: any ComputeBackend = CPUBackend.shared) -> [[Float]] {
        guard !photos.isEmpty else { return [] }
        let t = configuration.vision
        let (side, patch, grid, width) = (configuration.imageSize, configuration.patchSize, grid, t.width)
        precondition(photos.allSatisfy { $0.count == 3 * side * side }, "photos must be 3 × \(side) × \(side)")
        let tokens = grid * grid
        let patchInputs = 3 * patch * patch
        // Patches row-major over the grid, each flattened (channel, row, column) like the convolution's weight.
        var patches = [Float](repeating: 0, count: photos.count * tokens * patchInputs)
        for (n, photo) in photos.enumerated() {
            for gy in 0..<grid {
                for gx in 0..<grid {
                    let base = (n * tokens + gy * grid + gx) * patchInputs
                    for channel in 0..<3 {
                        for row in 0..<patch {
                            let source = channel * side * side + (gy * patch + row) * side + gx * patch
                            let target = base + (channel * patch + row) * patch
                            for column in 0..<patch { patches[target + column] = photo[source + column] }
                        }
                    }
                }
            }
        }
        var x = backend.linear(patches, rows: photos.count * tokens, layer: patchEmbedding.packed)
        for n in 0..<photos.count {
            for index in 0..<(tokens * width) { x[n * tokens * width + index] += positions[index] }
        }
        let lengths = [Int](repeating: tokens, count: photos.count)
        let starts = (0..<photos.count).map { $0 * tokens }
        let transformer = CLIPTransformer(
            width: width, heads: t.heads, epsilon: t.epsilon, causal: false, activation: t.activation)
        for layer in layers { transformer.apply(layer, to: &x, lengths: lengths, starts: starts, backend: backend) }
        x = backend.layerNorm(
            x, rows: photos.count * tokens, gamma: postNorm.gamma, beta: postNorm.beta, epsilon: t.epsilon)
        let kv = backend.linear(x, rows: photos.count * tokens, layer: keysValues.packed)
        return (0..<photos.count).map { n in
            normalized(pool(kv, photo: n, tokens: tokens, backend: backend))
        }
    }

    /// The attention-pooling head on one photo's keys and values (`kv` rows `[k | v]`, `2·width` wide).
    func pool(_ kv: [Float], photo n: Int, tokens: Int, backend: any ComputeBackend) -> [Float] {
        let t = configuration.vision
        let width = t.width
        let size = width / t.heads
        let scale = 1 / Float(size).squareRoot()
        var attended = [Float](repeating: 0, count: width)
        var weights = [Float](repeating: 0, count: tokens)
        kv.withUnsafeBufferPointer { kv in
            let first = kv.baseAddress! + n * tokens * 2 * width
            for head in 0..<t.heads {
                let offset = head * size
                var largest = -Float.infinity
                for token in 0..<tokens {
                    let key = first + token * 2 * width + offset
                    var dot: Float = 0
                    for d in 0..<size { dot += query[offset + d] * scale * key[d] }
                    weights[token] = dot
                    largest = max(largest, dot)
                }
                var total: Float = 0
                for token in 0..<tokens {
                    weights[token] = expf(weights[token] - largest)
                    total += weights[token]
                }
                for token in 0..<tokens {
                    let value = first + token * 2 * width + width + offset
                    let weight = weights[token] / total
                    for d in 0..<size { attended[offset + d] += weight * value[d] }
                }
            }
        }
        var hidden = backend.linear(attended, rows: 1, layer: outProjection.packed)
        let normed = backend.layerNorm(
            hidden, rows: 1, gamma: headNorm.gamma, beta: headNorm.beta, epsilon: t.epsilon)
        var inner = backend.linear(normed, rows: 1, layer: fc1.packed)
        backend.activate(&inner, t.activation)
        backend.add(&hidden, backend.linear(inner, rows: 1, layer: fc2.packed))
        return hidden
    }
}

/// SigLIP's text tower (transformers `SiglipTextTransformer`), followed by `x / ‖x‖`.
///
/// Forward pass: token plus position embeddings of all `contextLength` ids (SigLIP pads with `</s>` and passes no
/// attention mask: every position attends to every other, padding included); `layers` pre-LayerNorm encoder
/// layers; `final_layer_norm`; the last position's row through the head (a linear layer with bias); normalised.
public final class SigLIPTextEncoder: Sendable {
    public let configuration: SigLIPConfiguration
    public let fingerprint: String
    let tokens: TokenTable
    let positions: [Float]
    let layers: [CLIPLayer]
    let finalNorm: LayerNormWeights
    let head: Linear

    init(_ file: WeightBinding, _ configuration: SigLIPConfiguration, fingerprint: String) throws(WeightsError) {
        let t = configuration.text
        let width = t.width
        let p = "text_model."
        tokens = .floats(
            try file.floats(p + "embeddings.token_embedding.weight", shape: [configuration.vocabularySize, width]))
        positions = try file.floats(
            p + "embeddings.position_embedding.weight", shape: [configuration.contextLength, width])
        var layers: [CLIPLayer] = []
        for index in 0..<t.layers {
            layers.append(
                try huggingFaceLayer(file, p + "encoder.layers.\(index).", width: width, intermediate: t.intermediate))
        }
        self.layers = layers
        finalNorm = LayerNormWeights(
            gamma: try file.floats(p + "final_layer_norm.weight", shape: [width]),
            beta: try file.floats(p + "final_layer_norm.bias", shape: [width]))
        head = try Linear(
            file, weight: p + "head.weight", shape: [configuration.projectionSize, width],
            bias: try file.floats(p + "head.bias", shape: [configuration.projectionSize]), inputs: width,
            outputs: configuration.projectionSize)
        self.configuration = configuration
        self.fingerprint = fingerprint
    }

    /// L2-normalised embeddings of tokenised texts (each `contextLength` ids, as ``SigLIPTokenizer`` gives).
    public func encode(_ rows: [[Int]], backend: any ComputeBackend = CPUBackend.shared) -> [[Float]] {
        guard !rows.isEmpty else { return [] }
        let t = configuration.text
        let (width, length) = (t.width, configuration.contextLength)
        precondition(rows.allSatisfy { $0.count == length }, "each text must be \(length) ids")
        var x = [Float](repeating: 0, count: rows.count * length * width)
        x.withUnsafeMutableBufferPointer { x in
            for (n, ids) in rows.enumerated() {
                for (position, id) in ids.enumerated() {
                    let target = x.baseAddress! + (n * length + position) * width
                    tokens.row(id >= 0 && id < configuration.vocabularySize ? id : 0, width: width, into: target)
                    for d in 0..<width { target[d] += positions[position * width + d] }
                }
            }
        }
        let lengths = [Int](repeating: length, count: rows.count)
        let starts = (0..<rows.count).map { $0 * length }
        let transformer = CLIPTransformer(
            width: width, heads: t.heads, epsilon: t.epsilon, causal: false, activation: t.activation)
        for layer in layers { transformer.apply(layer, to: &x, lengths: lengths, starts: starts, backend: backend) }
        return (0..<rows.count).map { n in
            let row = (n * length + length - 1) * width
            let pooled = backend.layerNorm(
                Array(x[row..<(row + width)]), rows: 1, gamma: finalNorm.gamma, beta: finalNorm.beta,
                epsilon: t.epsilon)
            return normalized(backend.linear(pooled, rows: 1, layer: head.packed))
        }
    }
}

/// A SigLIP image–text model read from its `transformers` folder (issue 52): `config.json`, `model.safetensors`
/// (or `pytorch_model.bin`), `preprocessor_config.json` and the tokenizer (`spiece.model`). Every tensor is bound:
/// one the configuration does not explain, or a missing one, refuses the folder. Scores are SigLIP's sigmoid
/// probabilities: `σ(exp(logit_scale) · cos + logit_bias)`.
public final class SigLIPModel: Sendable {
    public let configuration: SigLIPConfiguration
    public let image: SigLIPImageEncoder
    public let text: SigLIPTextEncoder
    /// The folder's tokenizer: SigLIP's SentencePiece `spiece.model`, or SigLIP 2's Gemma `tokenizer.json`; nil
    /// where it has neither.
    public let tokenizer: (any TextTokenizer)?
    public let logitScale: Float
    public let logitBias: Float
    public let folder: String
    public let weightsPath: String

    public static let configurationName = "config.json"
    public static let weightNames = ["model.safetensors", "pytorch_model.bin"]

    /// The folder of `path` (the folder itself, or one of its files) where it holds a SigLIP configuration, else nil.
    public static func folder(_ path: String) -> String? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        var folder = path
        if (status.st_mode & S_IFMT) != S_IFDIR {
            let name = path.split(separator: "/").last.map(String.init) ?? path
            guard name == configurationName || weightNames.contains(name) else { return nil }
            folder = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        }
        let configuration = folder + "/" + configurationName
        guard access(configuration, R_OK) == 0,
            let bytes = try? FileContents.read(configuration, maximumSize: 1 << 20),
            let document = try? JSONDocument(bytes: bytes),
            let type = document.root["model_type"]?.string, type.hasPrefix("siglip")
        else { return nil }
        return folder
    }

    /// Whether `path` names a SigLIP model's folder (its `config.json` says `model_type` siglip…).
    public static func isModel(_ path: String) -> Bool { folder(path) != nil }

    /// Whether the SigLIP folder at `path` records a scene-score calibration of its own (`lookout_scene_center`
    /// in its `config.json`), which its scene scores then follow instead of the model's logit scale and bias.
    public static func recordsSceneCalibration(_ path: String) -> Bool {
        guard let folder = folder(path),
            let bytes = try? FileContents.read(folder + "/" + configurationName, maximumSize: 1 << 20),
            let document = try? JSONDocument(bytes: bytes)
        else { return false }
        return document.root["lookout_scene_center"] != nil
    }

    public init(contentsOf path: String, precision: Precision = .fp32) throws(WeightsError) {
        let (configuration, folder, weightsPath, weights, file) = try Self.open(path, precision: precision)
        image = try SigLIPImageEncoder(file, configuration, fingerprint: weights.fingerprint())
        text = try SigLIPTextEncoder(file, configuration, fingerprint: weights.fingerprint())
        logitScale = try file.floats("logit_scale", shape: [1])[0]
        logitBias = try file.floats("logit_bias", shape: [1])[0]
        weights.dropResidentPages()
        try file.requireEverythingTaken(ignoring: { $0.hasSuffix("position_ids") }, model: "SigLIP model")
        tokenizer = try Self.tokenizer(folder, length: configuration.contextLength)
        self.configuration = configuration
        self.folder = folder
        self.weightsPath = weightsPath
    }

    /// The text tower and its tokenizer alone (what a query needs), checked as ``init(contentsOf:precision:)``
    /// checks them, without the vision tower.
    public static func textTower(
        contentsOf path: String, precision: Precision = .fp32
    ) throws(WeightsError) -> (any TextTokenizer, SigLIPTextEncoder) {
        let (configuration, folder, _, weights, file) = try open(path, precision: precision)
        let text = try SigLIPTextEncoder(file, configuration, fingerprint: weights.fingerprint())
        weights.dropResidentPages()
        try file.requireEverythingTaken(
            ignoring: { $0.hasSuffix("position_ids") || $0.hasPrefix("vision_model.") || $0.hasPrefix("logit_") },
            model: "SigLIP text tower")
        guard let tokenizer = try tokenizer(folder, length: configuration.contextLength) else {
            throw WeightsError(
                path: folder,
                problem: "has neither spiece.model nor tokenizer.json: the text tower's tokenizer is missing")
        }
        return (tokenizer, text)
    }

    /// The folder's `spiece.model` (SigLIP) or `tokenizer.json` (SigLIP 2), nil where it has neither.
    static func tokenizer(_ folder: String, length: Int) throws(WeightsError) -> (any TextTokenizer)? {
        let spiece = folder + "/spiece.model"
        if access(spiece, F_OK) == 0 {
            do { return try SigLIPTokenizer(contentsOf: spiece, length: length) } catch {
                throw WeightsError(path: spiece, problem: "not a SentencePiece model: \(error)")
            }
        }
        guard access(folder + "/tokenizer.json", F_OK) == 0 else { return nil }
        do { return try PaddedBPETokenizer(folder: folder, length: length) } catch {
            throw WeightsError(path: folder + "/tokenizer.json", problem: "not a tokenizer Lookout reads: \(error)")
        }
    }

    /// The configuration read, the weight file opened, and its tensors' sizes checked against the configuration.
    private static func open(
        _ path: String, precision: Precision
    ) throws(WeightsError) -> (SigLIPConfiguration, String, String, WeightFile, WeightBinding) {
        guard let folder = folder(path) else {
            throw WeightsError(
                path: path, kind: .wrongModel,
                problem: "not a SigLIP model: no config.json with model_type siglip in it or beside it")
        }
        func read(_ name: String) throws(WeightsError) -> [UInt8]? {
            let file = folder + "/" + name
            guard access(file, F_OK) == 0 else { return nil }
            do { return try FileContents.read(file, maximumSize: 1 << 20) } catch {
                throw WeightsError(path: file, problem: "cannot be read: \(error)")
            }
        }
        let configuration = try SigLIPConfiguration(
            model: try read(configurationName) ?? [], path: folder + "/" + configurationName,
            processor: try read("preprocessor_config.json"), processorPath: folder + "/preprocessor_config.json")
        guard let weightsPath = weightNames.map({ folder + "/" + $0 }).first(where: { access($0, R_OK) == 0 })
        else {
            let sharded = access(folder + "/model.safetensors.index.json", F_OK) == 0
            throw WeightsError(
                path: folder,
                problem: sharded
                    ? "its weights are sharded (model.safetensors.index.json): Lookout reads one model.safetensors"
                    : "no weights: a SigLIP folder holds \(weightNames.joined(separator: " or "))")
        }
        let weights = try WeightFile.open(weightsPath)
        let file = WeightBinding(weights, precision: precision)
        guard file.has("vision_model.embeddings.patch_embedding.weight"), file.has("text_model.head.weight") else {
            throw WeightsError(
                path: weightsPath, kind: .wrongModel,
                problem: "not SigLIP's tensors (vision_model.embeddings.patch_embedding.weight, text_model.head.weight)"
            )
        }
        // What the tensors hold, against what the configuration says.
        let c = configuration
        let grid = c.imageSize / c.patchSize
        let found: [(String, Int, Int)] = [
            ("vision_config.hidden_size", c.vision.width, try file.view("vision_model.post_layernorm.weight").shape[0]),
            ("vision_config.num_hidden_layers", c.vision.layers, layerCount(weights, "vision_model.encoder.layers.")),
            (
                "vision_config.intermediate_size", c.vision.intermediate,
                try file.view("vision_model.encoder.layers.0.mlp.fc1.weight").shape[0]
            ),
            (
                "vision_config.patch_size", c.patchSize,
                try file.view("vision_model.embeddings.patch_embedding.weight").shape.last ?? 0
            ),
            (
                "vision_config.image_size (positions)", grid * grid,
                try file.view("vision_model.embeddings.position_embedding.weight").shape[0]
            ),
            ("text_config.hidden_size", c.text.width, try file.view("text_model.final_layer_norm.weight").shape[0]),
            ("text_config.num_hidden_layers", c.text.layers, layerCount(weights, "text_model.encoder.layers.")),
            (
                "text_config.intermediate_size", c.text.intermediate,
                try file.view("text_model.encoder.layers.0.mlp.fc1.weight").shape[0]
            ),
            (
                "text_config.vocab_size", c.vocabularySize,
                try file.view("text_model.embeddings.token_embedding.weight").shape[0]
            ),
            (
                "text_config.max_position_embeddings", c.contextLength,
                try file.view("text_model.embeddings.position_embedding.weight").shape[0]
            ),
            ("text_config.projection_size", c.projectionSize, try file.view("text_model.head.weight").shape[0]),
            ("the image width (text projection)", c.vision.width, c.projectionSize),
        ]
        if let (name, said, held) = found.first(where: { $0.1 != $0.2 }) {
            throw WeightsError(
                path: weightsPath,
                problem: "does not fit \(folder)/config.json: \(name) is \(said) there, the tensors say \(held)")
        }
        return (configuration, folder, weightsPath, weights, file)
    }

    /// SigLIP's probability that a text describes a photo, from their normalised embeddings' cosine:
    /// `σ(exp(logit_scale) · cos + logit_bias)`.
    public func probability(cosine: Float) -> Float {
        1 / (1 + expf(-(expf(logitScale) * cosine + logitBias)))
    }

    /// The logit before the sigmoid (`logits_per_text`).
    public func logit(cosine: Float) -> Float { cosine * expf(logitScale) + logitBias }
}
