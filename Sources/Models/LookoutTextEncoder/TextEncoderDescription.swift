import LookoutWeights

/// What a text-encoder file is, recognised from its tensor names and shapes (nothing loaded): the layout of
/// its names, the tower it is, and its sizes; what `models inspect` and `models verify` say about it.
public struct TextEncoderDescription: Sendable, Equatable, CustomStringConvertible {
    /// Whose names it uses: `openai`, `openclip`, `huggingface`, `mobileclip`.
    public var layout: String
    public var tower: TextTower
    public var width: Int
    public var layers: Int
    public var heads: Int
    public var vocabulary: Int
    public var context: Int
    public var embedding: Int

    public init(
        layout: String, tower: TextTower = .clip, width: Int, layers: Int, heads: Int, vocabulary: Int, context: Int,
        embedding: Int
    ) {
        (self.layout, self.tower, self.width, self.layers, self.heads) = (layout, tower, width, layers, heads)
        (self.vocabulary, self.context, self.embedding) = (vocabulary, context, embedding)
    }

    /// The tower in words, with the detectors that read it.
    public var towerName: String {
        switch tower {
        case .mobileCLIP: "MobileCLIP text encoder (YOLOE-v8/11's text tower)"
        case .mobileCLIP2: "MobileCLIP2 text encoder (YOLOE-26's text tower, \(layout) names)"
        case .clip: "CLIP text encoder (\(layout) names)"
        }
    }

    public var description: String {
        "\(towerName): width \(width), \(layers) layers, \(heads) heads, vocabulary \(vocabulary), context \(context), "
            + "embedding \(embedding)"
    }

    /// The file as a CLIP-architecture text encoder (OpenAI's, open_clip's, Hugging Face's or MobileCLIP's names), or
    /// nil.
    public static func recognise(_ weights: WeightFile) -> TextEncoderDescription? {
        let tensors = weights.tensors
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
            // CLIP's names with exact GELU in the text layers' MLP (nn.GELU in a TorchScript module tree):
            // MobileCLIP2.
            let tower =
                layout == "mobileclip"
                ? TextTower.mobileCLIP
                : WeightFile.callsGELU(weights, at: prefix + "transformer.resblocks.0.mlp.gelu")
                    ? TextTower.mobileCLIP2 : TextTower.clip
            return TextEncoderDescription(
                layout: layout, tower: tower, width: width, layers: layers, heads: max(width / 64, 1),
                vocabulary: tokens.shape.first ?? 0, context: context, embedding: embedding)
        }
        return nil
    }
}

/// A CLIP image tower (ViT, OpenAI's `visual.` names) recognised from its tensors: its sizes.
public struct ImageEncoderDescription: Sendable, Equatable, CustomStringConvertible {
    public var width: Int
    public var layers: Int
    public var patch: Int
    public var inputSize: Int
    public var embedding: Int

    public var description: String {
        "CLIP image tower (ViT): width \(width), \(layers) layers, \(patch)×\(patch) patches of a \(inputSize)×\(inputSize) "
            + "input, embedding \(embedding)"
    }

    /// The file as a CLIP ViT image tower, or nil.
    public static func recognise(_ weights: WeightFile) -> ImageEncoderDescription? {
        let tensors = weights.tensors
        guard let patches = tensors["visual.conv1.weight"], patches.shape.count == 4,
            let positions = tensors["visual.positional_embedding"], positions.shape.count == 2,
            let projection = tensors["visual.proj"], projection.shape.count == 2
        else { return nil }
        var layers = 0
        while tensors["visual.transformer.resblocks.\(layers).ln_1.weight"] != nil { layers += 1 }
        let grid = Int(Double(max(positions.shape[0] - 1, 0)).squareRoot().rounded())
        return ImageEncoderDescription(
            width: patches.shape[0], layers: layers, patch: patches.shape[3], inputSize: grid * patches.shape[3],
            embedding: projection.shape[1])
    }
}
