import LookoutJSON
import LookoutSupport
import LookoutTensor
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

/// An open_clip model's configuration as its Hugging Face folder holds it (`open_clip_config.json`: `model_cfg` and
/// `preprocess_cfg`; a bare model config as open_clip's `model_configs/*.json` is read too). Only what Lookout
/// computes is accepted: the ViT image tower with a class token (`VisionTransformer`) and the causal text
/// transformer pooled at the end-of-text token, exact GELU or `quick_gelu`, and the resize modes `shortest` and
/// `squash` with bicubic interpolation. Any other setting is refused by name, so that a model Lookout would
/// compute otherwise than open_clip is never loaded.
public struct OpenCLIPConfiguration: Sendable, Equatable {
    public let embeddingSize: Int
    public let quickGELU: Bool
    public let imageSize: Int
    public let patchSize: Int
    public let visionWidth: Int
    public let visionLayers: Int
    public let visionHeadWidth: Int
    public let contextLength: Int
    public let vocabularySize: Int
    public let textWidth: Int
    public let textHeads: Int
    public let textLayers: Int
    /// `preprocess_cfg` (open_clip's defaults where absent: OpenAI's mean and std, bicubic, `shortest`).
    public let mean: [Float]
    public let std: [Float]
    /// `shortest` (the short side to `imageSize`, then a centre crop) or `squash` (both sides, no crop).
    public let resizeMode: String

    static let visionKeys: Set<String> = ["image_size", "layers", "width", "patch_size", "head_width", "mlp_ratio"]
    static let textKeys: Set<String> = ["context_length", "vocab_size", "width", "heads", "layers", "mlp_ratio"]
    static let modelKeys: Set<String> = ["embed_dim", "quick_gelu", "vision_cfg", "text_cfg"]

    /// `bytes`: the JSON file's contents; `path`: its name, for errors.
    public init(json bytes: [UInt8], path: String) throws(WeightsError) {
        func fail(_ problem: String) -> WeightsError { WeightsError(path: path, problem: problem) }
        let document: JSONDocument
        do { document = try JSONDocument(bytes: bytes) } catch { throw fail("not JSON: \(error)") }
        let root = document.root
        guard let model = root["model_cfg"] ?? (root["vision_cfg"] != nil ? root : nil) else {
            throw fail("no model_cfg (an open_clip_config.json holds model_cfg and preprocess_cfg)")
        }
        guard let vision = model["vision_cfg"], let text = model["text_cfg"] else {
            throw fail("model_cfg needs vision_cfg and text_cfg")
        }
        func keys(_ node: JSONNode) -> [String] {
            var names: [String] = []
            node.forEachMember { name, _ in names.append(String(decoding: name, as: UTF8.self)) }
            return names
        }
        // Settings Lookout does not compute (a timm or Hugging Face tower, attention pooling, layer scale, another
        // pooling, …) are refused by name.
        for (node, known, scope) in [
            (model, Self.modelKeys, "model_cfg"), (vision, Self.visionKeys, "vision_cfg"),
            (text, Self.textKeys, "text_cfg"),
        ] {
            if let other = keys(node).sorted().first(where: { !known.contains($0) }) {
                throw fail(
                    "\(scope).\(other) is set: Lookout computes open_clip's plain ViT towers (\(known.sorted().joined(separator: ", "))), not this model"
                )
            }
        }
        func integer(
            _ node: JSONNode, _ key: String, _ scope: String, default value: Int? = nil
        ) throws(WeightsError)
            -> Int
        {
            if let number = node[key]?.int, number > 0, number < 1 << 20 { return Int(number) }
            if node[key] == nil, let value { return value }
            throw fail("\(scope).\(key) must be a positive whole number")
        }
        embeddingSize = try integer(model, "embed_dim", "model_cfg")
        quickGELU = model["quick_gelu"]?.bool ?? false
        imageSize = try integer(vision, "image_size", "vision_cfg")
        patchSize = try integer(vision, "patch_size", "vision_cfg")
        visionWidth = try integer(vision, "width", "vision_cfg")
        visionLayers = try integer(vision, "layers", "vision_cfg")
        visionHeadWidth = try integer(vision, "head_width", "vision_cfg", default: 64)
        contextLength = try integer(text, "context_length", "text_cfg", default: 77)
        vocabularySize = try integer(text, "vocab_size", "text_cfg", default: 49408)
        textWidth = try integer(text, "width", "text_cfg", default: 512)
        textHeads = try integer(text, "heads", "text_cfg", default: 8)
        textLayers = try integer(text, "layers", "text_cfg", default: 12)
        for (node, scope) in [(vision, "vision_cfg"), (text, "text_cfg")] {
            if let ratio = node["mlp_ratio"], ratio.number != 4 {
                throw fail(
                    "\(scope).mlp_ratio \(ratio.number.map { "\($0)" } ?? "?"): Lookout's towers have MLPs 4 wide")
            }
        }
        guard imageSize % patchSize == 0 else {
            throw fail("vision_cfg.image_size \(imageSize) is not a whole number of patches of \(patchSize)")
        }
        let preprocess = root["preprocess_cfg"]
        func triple(_ key: String, _ value: [Float]) throws(WeightsError) -> [Float] {
            guard let node = preprocess?[key] else { return value }
            let values = (0..<node.count).compactMap { node[$0].number.map(Float.init) }
            guard node.count == 3, values.count == 3, key == "mean" || values.allSatisfy({ $0 > 0 }) else {
                throw fail("preprocess_cfg.\(key) must be three numbers\(key == "std" ? " above 0" : "")")
            }
            return values
        }
        mean = try triple("mean", [0.48145466, 0.4578275, 0.40821073])
        std = try triple("std", [0.26862954, 0.26130258, 0.27577711])
        let interpolation = preprocess?["interpolation"]?.string ?? "bicubic"
        guard interpolation == "bicubic" else {
            throw fail("preprocess_cfg.interpolation \(interpolation): Lookout resizes as PIL's bicubic only")
        }
        resizeMode = preprocess?["resize_mode"]?.string ?? "shortest"
        guard resizeMode == "shortest" || resizeMode == "squash" else {
            throw fail("preprocess_cfg.resize_mode \(resizeMode): Lookout resizes `shortest` or `squash`")
        }
    }
}

/// An open_clip image–text model read from its own files (issue 52): `open_clip_config.json` with
/// `open_clip_model.safetensors` (or `open_clip_pytorch_model.bin`) in one folder, as open_clip's
/// `create_model_and_transforms("hf-hub:…")` or `"local-dir:…"` reads them. Both towers use OpenAI's tensor names
/// (open_clip's `CLIP` class); the configuration gives what the tensors do not show: the activation (exact GELU
/// unless `quick_gelu`), the heads, the preprocessing. The tensors' shapes are checked against it.
public final class OpenCLIPModel: Sendable {
    public let configuration: OpenCLIPConfiguration
    public let image: CLIPImageEncoder
    public let text: CLIPTextEncoder
    /// The configuration file and the weight file.
    public let configurationPath: String
    public let weightsPath: String

    public static let configurationName = "open_clip_config.json"
    public static let weightNames = ["open_clip_model.safetensors", "open_clip_pytorch_model.bin"]

    /// The configuration and weight files of `path` — a folder holding them, the configuration, or one of the
    /// weight files beside it — or nil where `path` is none of these.
    public static func files(_ path: String) -> (configuration: String, weights: String)? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        let folder: String
        if (status.st_mode & S_IFMT) == S_IFDIR {
            folder = path
        } else {
            let name = path.split(separator: "/").last.map(String.init) ?? path
            guard name == configurationName || weightNames.contains(name) else { return nil }
            folder = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        }
        let configuration = folder + "/" + configurationName
        guard access(configuration, R_OK) == 0 else { return nil }
        for name in weightNames where access(folder + "/" + name, R_OK) == 0 {
            return (configuration, folder + "/" + name)
        }
        return (configuration, folder + "/" + weightNames[0])
    }

    /// Whether `path` names an open_clip model (its configuration is there).
    public static func isModel(_ path: String) -> Bool { files(path) != nil }

    public init(contentsOf path: String, precision: Precision = .fp32) throws(WeightsError) {
        let (configuration, configurationPath, weightsPath, weights) = try Self.open(path)
        image = try CLIPImageEncoder(
            weights: weights, precision: precision, activation: configuration.quickGELU ? .quickGELU : .gelu,
            headWidth: configuration.visionHeadWidth)
        let i = image.configuration
        try Self.check(
            [
                ("vision_cfg.width", configuration.visionWidth, i.width),
                ("vision_cfg.layers", configuration.visionLayers, i.layers),
                ("vision_cfg.patch_size", configuration.patchSize, i.patchSize),
                ("vision_cfg.image_size", configuration.imageSize, i.inputResolution),
                ("embed_dim (image)", configuration.embeddingSize, i.embeddingSize),
            ], weightsPath: weightsPath, configurationPath: configurationPath)
        text = try Self.text(weights, configuration, precision: precision, paths: (configurationPath, weightsPath))
        (self.configuration, self.configurationPath, self.weightsPath) = (configuration, configurationPath, weightsPath)
    }

    /// The text tower alone, checked against the configuration as ``init(contentsOf:precision:)`` checks it: what
    /// a query needs, without loading the image tower.
    public static func textEncoder(
        contentsOf path: String, precision: Precision = .fp32
    ) throws(WeightsError)
        -> CLIPTextEncoder
    {
        let (configuration, configurationPath, weightsPath, weights) = try open(path)
        return try text(weights, configuration, precision: precision, paths: (configurationPath, weightsPath))
    }

    /// The configuration read and the weight file opened.
    private static func open(
        _ path: String
    ) throws(WeightsError) -> (
        OpenCLIPConfiguration, configurationPath: String, weightsPath: String, WeightFile
    ) {
        guard let (configurationPath, weightsPath) = files(path) else {
            throw WeightsError(
                path: path, kind: .wrongModel,
                problem: "not an open_clip model: no \(configurationName) in it or beside it")
        }
        let bytes: [UInt8]
        do { bytes = try FileContents.read(configurationPath, maximumSize: 1 << 20) } catch {
            throw WeightsError(path: configurationPath, problem: "cannot be read: \(error)")
        }
        let configuration = try OpenCLIPConfiguration(json: bytes, path: configurationPath)
        guard access(weightsPath, R_OK) == 0 else {
            throw WeightsError(
                path: weightsPath,
                problem: "missing: an open_clip model's folder holds \(weightNames.joined(separator: " or "))")
        }
        return (configuration, configurationPath, weightsPath, try WeightFile.open(weightsPath))
    }

    /// The text tower with the configuration's activation and heads, its tensors checked against it.
    private static func text(
        _ weights: WeightFile, _ configuration: OpenCLIPConfiguration, precision: Precision,
        paths: (configuration: String, weights: String)
    ) throws(WeightsError) -> CLIPTextEncoder {
        let text = try CLIPTextEncoder(
            weights: weights, precision: precision, exactGELU: !configuration.quickGELU, heads: configuration.textHeads)
        let t = text.configuration
        try check(
            [
                ("text_cfg.width", configuration.textWidth, t.width),
                ("text_cfg.layers", configuration.textLayers, t.layers),
                ("text_cfg.context_length", configuration.contextLength, t.contextLength),
                ("text_cfg.vocab_size", configuration.vocabularySize, t.vocabularySize),
                ("embed_dim (text)", configuration.embeddingSize, t.embeddingSize),
            ], weightsPath: paths.weights, configurationPath: paths.configuration)
        guard t.layout == .openAI else {
            throw WeightsError(
                path: paths.weights, problem: "the text tower's tensors are not open_clip's CLIP names (ln_final, …)")
        }
        return text
    }

    /// Each (setting, configured value, value the tensors hold): the first that differs refused.
    private static func check(
        _ found: [(String, Int, Int)], weightsPath: String, configurationPath: String
    ) throws(WeightsError) {
        if let (name, said, held) = found.first(where: { $0.1 != $0.2 }) {
            throw WeightsError(
                path: weightsPath,
                problem: "does not fit \(configurationPath): \(name) is \(said) there, the tensors say \(held)")
        }
    }
}
