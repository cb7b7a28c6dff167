import LookoutImage
import LookoutSupport
import LookoutTextEncoder
import LookoutWeights

/// Photos as queries: the CLIP image embedding of a crop ("this, find more of it") stands in for a text
/// embedding in the detector's contrastive head, as YOLO-World's image prompts do. The image tower must be
/// the text encoder's partner (the same embedding space); the sizes are checked, the pairing cannot be.
///
/// A crop's embedding describes the whole crop (its background, its other objects), so it matches objects
/// less sharply than a text query does: image queries have their own confidence threshold,
/// ``defaultConfidence``, measured on the demo model (BENCHMARKS.md, "Photos as queries").
public struct ImagePrompts: Sendable {
    public let tower: CLIPImageEncoder

    /// The confidence threshold image queries get unless the user names one.
    public static let defaultConfidence: Float = 0.25

    public init(tower: CLIPImageEncoder, engine: Engine) throws(WeightsError) {
        guard tower.configuration.embeddingSize == engine.network.embeddingSize else {
            throw WeightsError(
                path: tower.path, kind: .incompatibleModels,
                problem:
                    "the image tower embeds in \(tower.configuration.embeddingSize) dimensions, the detector's text features have \(engine.network.embeddingSize): they do not fit together"
            )
        }
        self.tower = tower
    }

    /// Loads the image tower that `configuration` names (``EngineConfiguration/imageTowerPath()``) or the one
    /// at `path`.
    public init(path: String? = nil, configuration: EngineConfiguration, engine: Engine) throws {
        guard let file = try path ?? configuration.imageTowerPath() else {
            throw WeightsError(
                path: "image tower", kind: .missingTensor("visual.proj"),
                problem:
                    "photos as queries need a CLIP image tower: --image-model ViT-B-32.pt, or a model whose manifest names an image_encoder"
            )
        }
        try self.init(tower: try CLIPImageEncoder(contentsOf: file), engine: engine)
    }

    /// The query's label: the crop's file name.
    public static func label(_ path: String) -> String {
        String(path.split(separator: "/").last ?? Substring(path))
    }

    /// The L2-normalised embedding of the photo at `path` (the whole photo: crop it to the object first).
    public func embedding(path: String) throws -> [Float] {
        let bytes = try FileContents.read(path, maximumSize: 1 << 30)
        let input = try CLIPPreprocessing.input(bytes, name: path, size: tower.configuration.inputResolution)
        return tower.encode([input])[0]
    }
}
