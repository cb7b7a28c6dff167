/// An index model as the key–value settings a store keeps (SQLite's and PostgreSQL's `meta` tables).
extension IndexModel {
    /// The settings to store, by key.
    public var settings: [(key: String, value: String)] {
        [
            ("detector", detectorFingerprint), ("text_encoder", textEncoderFingerprint), ("vocabulary", vocabulary),
            ("imgsz", String(imageSize)), ("max_regions", String(maximumRegions)),
            ("embedding_size", String(embeddingSize)), ("score_parameters", encodedParameters),
            ("region_rule", regionRule), ("image_tower", imageTower ?? ""), ("image_tower_path", imageTowerPath ?? ""),
            ("scene_center", String(sceneScore.center)), ("scene_slope", String(sceneScore.slope)),
            ("duplicate_threshold", duplicateThreshold.map { String($0) } ?? ""), ("precision", precision),
            ("prompt_free", promptFree ?? ""), ("prompt_free_conf", String(promptFreeConfidence)),
            ("model_arguments", modelArguments ?? ""), ("slicing", slicing ?? ""),
            ("image_embedding_size", imageEmbeddingSize.map { String($0) } ?? ""),
        ]
    }

    /// The model the stored settings describe; nil when they hold none (nothing indexed yet). Damaged
    /// values are an error naming `location`.
    public init?(settings values: [String: String], location: String) throws(IndexError) {
        guard let detector = values["detector"], let text = values["text_encoder"],
            let vocabulary = values["vocabulary"], let size = values["imgsz"].flatMap({ Int($0) }),
            let regions = values["max_regions"].flatMap({ Int($0) }),
            let embedding = values["embedding_size"].flatMap({ Int($0) }),
            let parameters = values["score_parameters"]
        else { return nil }
        guard (32...4096).contains(size), (1...1000).contains(regions), (1...65536).contains(embedding) else {
            throw IndexError(
                path: location,
                problem:
                    "the index's settings are damaged (imgsz \(size), max_regions \(regions), embedding_size \(embedding))"
            )
        }
        self.init(
            detectorFingerprint: detector, textEncoderFingerprint: text, vocabulary: vocabulary, imageSize: size,
            maximumRegions: regions, embeddingSize: embedding, scoreParameters: IndexModel.decodeParameters(parameters))
        imageTower = values["image_tower"].flatMap { $0.isEmpty ? nil : $0 }
        imageTowerPath = values["image_tower_path"].flatMap { $0.isEmpty ? nil : $0 }
        if let center = values["scene_center"].flatMap(Float.init),
            let slope = values["scene_slope"].flatMap(Float.init),
            center.isFinite, slope.isFinite
        {
            sceneScore = SceneScore(center: center, slope: slope)
        }
        duplicateThreshold = values["duplicate_threshold"].flatMap(Float.init)
        // Indexes made before the rule was recorded hold 16-bit regions chosen the first way.
        regionRule = values["region_rule"] ?? "f16-v1"
        precision = values["precision"].flatMap { $0.isEmpty ? nil : $0 } ?? "fp32"
        promptFree = values["prompt_free"].flatMap { $0.isEmpty ? nil : $0 }
        modelArguments = values["model_arguments"].flatMap { $0.isEmpty ? nil : $0 }
        slicing = values["slicing"].flatMap { $0.isEmpty ? nil : $0 }
        imageEmbeddingSize = values["image_embedding_size"].flatMap { Int($0) }.flatMap {
            (1...65536).contains($0) && $0 != embedding ? $0 : nil
        }
        if let conf = values["prompt_free_conf"].flatMap(Float.init), conf.isFinite { promptFreeConfidence = conf }
    }
}
