/// What a weight file holds, recognised from its tensor names and shapes.
public struct ModelSummary: Sendable {
    public enum Kind: Sendable, Equatable {
        /// ultralytics YOLO-World v2 (`WorldDetect` head with `BNContrastiveHead`), scale from the first conv.
        case yoloWorldDetector(scale: String, embedding: Int, classes: Int)
        /// ultralytics YOLOE (`YOLOEDetect`/`YOLOESegment` head): family (`YOLOE-v8`, `YOLOE-11`, `YOLOE-26`),
        /// scale, whether it segments, and the ways it can be asked (`text`, `visual`, `prompt-free`).
        /// `textTower`: the tower the file names (``TextTower/metadataKey``), nil for the family's own.
        case yoloe(family: String, scale: String, segments: Bool, modes: [String], textTower: String?)
        /// CLIP text transformer (OpenAI or Hugging Face names), or MobileCLIP's (YOLOE's text tower).
        case clipTextEncoder(
            layout: String, width: Int, layers: Int, heads: Int, vocabulary: Int, context: Int, embedding: Int)
        case unknown
    }

    public let kind: Kind
    public let tensorCount: Int
    public let parameterCount: Int
    /// Number of tensors of each stored dtype.
    public let dtypes: [DType: Int]

    public init(_ weights: WeightFile) {
        tensorCount = weights.names.count
        parameterCount = weights.tensors.values.reduce(0) { $0 + $1.count }
        var dtypes: [DType: Int] = [:]
        for view in weights.tensors.values { dtypes[view.dtype, default: 0] += 1 }
        self.dtypes = dtypes
        kind = Self.recognise(weights)
    }

    private static func recognise(_ weights: WeightFile) -> Kind {
        let tensors = weights.tensors
        if let first = tensors["model.0.conv.weight"], let head = headIndex(tensors),
            tensors["model.\(head).reprta.m.w12.weight"] != nil || tensors["model.\(head).lrpc.0.vocab.weight"] != nil
        {
            let scales = [16: "n", 32: "s", 48: "m", 64: "l", 80: "x"]
            // YOLO26's last neck stage (layer 22) is a C3k2 with attention blocks; YOLO11's has none.
            let family =
                head == 22
                ? "YOLOE-v8"
                : tensors["model.10.m.0.attn.qkv.conv.weight"] == nil
                    ? "YOLOE (a layout Lookout does not run)"
                    : tensors["model.22.m.0.1.attn.qkv.conv.weight"] != nil ? "YOLOE-26" : "YOLOE-11"
            var modes: [String] = []
            if tensors["model.\(head).reprta.m.w12.weight"] != nil { modes.append("text") }
            if tensors["model.\(head).savpe.cv3.weight"] != nil { modes.append("visual") }
            if tensors["model.\(head).lrpc.0.vocab.weight"] != nil { modes.append("prompt-free") }
            return .yoloe(
                family: family,
                scale: scales[first.shape.first ?? 0] ?? "custom (\(first.shape.first ?? 0) stem channels)",
                segments: tensors["model.\(head).proto.cv1.conv.weight"] != nil, modes: modes,
                textTower: weights.metadata[TextTower.metadataKey])
        }
        if let first = tensors["model.0.conv.weight"], let head = headIndex(tensors) {
            let scales = [16: "n", 32: "s", 48: "m", 64: "l", 80: "x"]
            let embedding = tensors["model.\(head).cv3.0.2.weight"]?.shape.first ?? 0
            var classes = 0
            if let names = weights.metadata["names"] { classes = names.filter { $0 == "," }.count + 1 }
            if let txt = weights.attributes["txt_feats"], txt.shape.count == 3 { classes = txt.shape[1] }
            return .yoloWorldDetector(
                scale: scales[first.shape.first ?? 0] ?? "custom (\(first.shape.first ?? 0) stem channels)",
                embedding: embedding, classes: classes)
        }
        for (layout, prefix, layerPrefix, final, token, position) in [
            (
                "openai", "", "transformer.resblocks.", "ln_final.weight", "token_embedding.weight",
                "positional_embedding"
            ),
            (
                "openclip", "text.", "text.transformer.resblocks.", "text.ln_final.weight",
                "text.token_embedding.weight", "text.positional_embedding"
            ),
            (
                "huggingface", "text_model.", "text_model.encoder.layers.", "text_model.final_layer_norm.weight",
                "text_model.embeddings.token_embedding.weight", "text_model.embeddings.position_embedding.weight"
            ),
            (
                "mobileclip", "text_encoder.", "text_encoder.transformer.", "text_encoder.final_layer_norm.weight",
                "text_encoder.embedding_layer.weight", "text_encoder.positional_embedding.pos_embed.pos_embed"
            ),
        ] {
            _ = prefix
            guard let norm = tensors[final], let tokens = tensors[token], let positions = tensors[position] else {
                continue
            }
            let width = norm.shape.first ?? 0
            var layers = 0
            while tensors.keys.contains(where: { $0.hasPrefix("\(layerPrefix)\(layers).") }) { layers += 1 }
            let projection = tensors[
                [
                    "openai": "text_projection", "openclip": "text.text_projection",
                    "huggingface": "text_projection.weight",
                ][
                    layout] ?? "text_encoder.projection_layer"]
            let embedding = layout == "huggingface" ? projection?.shape.first ?? width : projection?.shape.last ?? width
            // MobileCLIP keeps its positions as [1, 1, context, width].
            let context = layout == "mobileclip" ? positions.shape.dropLast().last ?? 0 : positions.shape.first ?? 0
            return .clipTextEncoder(
                layout: layout, width: width, layers: layers, heads: max(width / 64, 1),
                vocabulary: tokens.shape.first ?? 0, context: context, embedding: embedding)
        }
        return .unknown
    }

    /// Index of the detection head: the layer that has `cv4.0.bias` (BNContrastiveHead).
    public static func headIndex(_ tensors: [String: TensorView]) -> Int? {
        // The contrastive head's bias; a prompt-free YOLOE has fused it away and holds its `lrpc` instead.
        for index in stride(from: 40, through: 0, by: -1)
        where tensors["model.\(index).cv4.0.bias"] != nil || tensors["model.\(index).lrpc.0.vocab.weight"] != nil {
            return index
        }
        return nil
    }
}

extension ModelSummary.Kind: CustomStringConvertible {
    /// What the file is, in words (as `models verify` prints it).
    public var description: String {
        switch self {
        case .yoloWorldDetector(let scale, let embedding, let classes):
            return "YOLO-World v2 detector, scale \(scale), text embedding \(embedding), \(classes) built-in classes"
        case .yoloe(let family, let scale, let segments, let modes, let textTower):
            return "\(family) \(segments ? "segmentation" : "detection") model, scale \(scale), prompts: "
                + modes.joined(separator: ", ") + (textTower.map { ", text tower \($0)" } ?? "")
        case .clipTextEncoder(let layout, let width, let layers, let heads, let vocabulary, let context, let embedding):
            return
                "CLIP-architecture text encoder (\(layout) names): width \(width), \(layers) layers, \(heads) heads, "
                + "vocabulary \(vocabulary), context \(context), embedding \(embedding)"
        case .unknown:
            return "not a detector or text encoder Lookout recognises by its tensors"
        }
    }
}
