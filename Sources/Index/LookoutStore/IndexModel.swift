import LookoutSupport

/// What the stored regions depend on. A different key means stale regions, recomputed on the next update.
public struct IndexModel: Sendable, Equatable {
    public var detectorFingerprint: String
    public var textEncoderFingerprint: String
    /// Where the index vocabulary came from ("built-in" or a digest of a query file's embeddings).
    public var vocabulary: String
    public var imageSize: Int
    public var maximumRegions: Int
    public var embeddingSize: Int
    public var scoreParameters: [(logitScale: Float, bias: Float)]
    /// How regions are chosen and stored (``currentRegionRule`` for what this version computes;
    /// "f16-v1" for indexes made before 8-bit regions).
    public var regionRule = IndexModel.currentRegionRule
    /// The CLIP image tower whose whole-photo embeddings the index stores (its fingerprint), if any.
    public var imageTower: String?
    /// Where that tower's weights were when the index was made (`lookout similar` loads it from there).
    public var imageTowerPath: String?
    /// The size of that tower's embeddings, when it differs from the regions' (``embeddingSize``): an open_clip
    /// or SigLIP tower embeds in its own space (the demo's multilingual tower in 256 dimensions).
    public var imageEmbeddingSize: Int?

    /// The dimension of the whole-photo embeddings (the regions' unless the tower's differs).
    public var wholePhotoSize: Int { imageEmbeddingSize ?? embeddingSize }
    /// How that tower's cosines become scene scores (from the tower's file, else ``SceneScore/standard``).
    public var sceneScore = SceneScore.standard
    /// The `lookout duplicates` threshold measured for that tower, when its file records one.
    public var duplicateThreshold: Float?
    /// The arithmetic the detector computed the regions in (`fp32`, `bf16`, `int8`; indexes made before it was
    /// recorded are fp32's).
    public var precision = "fp32"

    /// The `--precision` word (`fp32`, `bf16`, `int8`) of an arithmetic as indexes record it and
    /// `Engine.arithmetic` gives it (`int8 (8-bit weights, calibration …, towers bf16)`).
    public static func precisionOption(_ arithmetic: String) -> String {
        String(arithmetic.prefix { $0.isLetter || $0.isNumber })
    }
    /// The prompt-free detector (YOLOE `-pf`) whose labels the index stores beside the regions (its file's
    /// fingerprint), and the score a label needed; nil when it stores none.
    public var promptFree: String?
    public var promptFreeConfidence: Float = 0.25
    /// The model options the index was made with, as a command line repeats them (`--model demo-yoloe`), so that
    /// a search with another model can say which to give; nil for the default model, and in older indexes.
    /// Not part of ``key``: the fingerprints decide whether regions are stale.
    public var modelArguments: String?
    /// Sliced regions (`index --slice`): how each photo was cut into tiles (`SliceOptions.tiling`, e.g.
    /// `640x640@0.2,0.2`); nil when the regions come from the whole photo alone.
    public var slicing: String?

    /// No score floor, near-duplicate suppression at IoU 0.95, 8-bit embeddings.
    public static let currentRegionRule = "q8-v2"

    public init(
        detectorFingerprint: String, textEncoderFingerprint: String, vocabulary: String, imageSize: Int,
        maximumRegions: Int, embeddingSize: Int, scoreParameters: [(logitScale: Float, bias: Float)]
    ) {
        self.detectorFingerprint = detectorFingerprint
        self.textEncoderFingerprint = textEncoderFingerprint
        self.vocabulary = vocabulary
        self.imageSize = imageSize
        self.maximumRegions = maximumRegions
        self.embeddingSize = embeddingSize
        self.scoreParameters = scoreParameters
    }

    public var key: String { key(withTower: true) }

    /// The key without the whole-photo tower: two models with the same one compute the same regions (and
    /// labels), so a change of tower alone recomputes only the photos' embeddings.
    public var regionsKey: String { key(withTower: false) }

    private func key(withTower: Bool) -> String {
        var hash = SHA256()
        let settings =
            "\(detectorFingerprint)|\(textEncoderFingerprint)|\(vocabulary)|\(imageSize)|\(maximumRegions)|\(regionRule)"
        // fp32 adds nothing, so that the indexes made before precisions were recorded keep their key.
        let arithmetic = precision == "fp32" ? "" : "|precision:\(precision)"
        // Nor does an index without prompt-free labels.
        let labels = promptFree.map { "|prompt-free:\($0)@\(promptFreeConfidence.bitPattern)" } ?? ""
        // Nor does one of whole-photo regions.
        let tiles = slicing.map { "|slicing:\($0)" } ?? ""
        hash.update(
            Array(
                (settings + (withTower ? imageTower.map { "|image:\($0)" } ?? "" : "") + arithmetic + labels + tiles)
                    .utf8))
        return String(hash.finalize().prefix(32))
    }

    var encodedParameters: String {
        scoreParameters.map { "\($0.logitScale.bitPattern),\($0.bias.bitPattern)" }.joined(separator: ";")
    }

    static func decodeParameters(_ text: String) -> [(logitScale: Float, bias: Float)] {
        text.split(separator: ";").compactMap { pair in
            let parts = pair.split(separator: ",").compactMap { UInt32($0) }
            return parts.count == 2 ? (Float(bitPattern: parts[0]), Float(bitPattern: parts[1])) : nil
        }
    }

    public static func == (a: IndexModel, b: IndexModel) -> Bool { a.key == b.key }

    /// What differs from `other`, in words ("regions 32 → 16, imgsz 640 → 480").
    public func differences(from other: IndexModel) -> String {
        var parts: [String] = []
        if detectorFingerprint != other.detectorFingerprint { parts.append("another detector") }
        if textEncoderFingerprint != other.textEncoderFingerprint { parts.append("another text encoder") }
        if vocabulary != other.vocabulary { parts.append("vocabulary \(vocabulary) → \(other.vocabulary)") }
        if imageSize != other.imageSize { parts.append("imgsz \(imageSize) → \(other.imageSize)") }
        if maximumRegions != other.maximumRegions {
            parts.append("regions \(maximumRegions) → \(other.maximumRegions)")
        }
        if precision != other.precision { parts.append("precision \(precision) → \(other.precision)") }
        if regionRule != other.regionRule { parts.append("region format \(regionRule) → \(other.regionRule)") }
        if slicing != other.slicing {
            parts.append("slicing \(slicing ?? "none") → \(other.slicing ?? "none")")
        }
        if promptFree != other.promptFree {
            parts.append(
                promptFree == nil
                    ? "prompt-free labels added"
                    : other.promptFree == nil ? "no prompt-free labels" : "another prompt-free detector")
        } else if promptFreeConfidence != other.promptFreeConfidence {
            parts.append("prompt-free threshold \(promptFreeConfidence) → \(other.promptFreeConfidence)")
        }
        if imageTower != other.imageTower {
            parts.append(
                imageTower == nil
                    ? "an image tower added" : other.imageTower == nil ? "no image tower" : "another image tower")
        }
        return parts.isEmpty ? "other settings" : parts.joined(separator: ", ")
    }
}
