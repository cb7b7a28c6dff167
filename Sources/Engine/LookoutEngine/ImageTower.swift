import LookoutImage
import LookoutSupport
import LookoutTensor
import LookoutTextEncoder
import LookoutWeights

/// A whole-photo image tower with its preprocessing, and where it has one its own text tower: OpenAI CLIP's
/// (a file with `visual.*` tensors: `clip._transform`, and queries scored in the detector's CLIP text space), or an
/// open_clip model's folder (its `preprocess_cfg`, and its own text tower for queries: issue 52). The one place
/// that tells them apart, for `index`, `search`, `similar` and `embed`.
public struct ImageTower: Sendable {
    public let encoder: CLIPImageEncoder
    public let transform: CLIPPreprocessing.Transform
    /// The tower's own text encoder (open_clip), or nil where queries come from the detector's CLIP text encoder.
    public let text: CLIPTextEncoder?
    public let path: String

    /// Identity of the tower's weights (what an index records).
    public var fingerprint: String { encoder.fingerprint }

    /// Whether `path` names a model with its own text tower (an open_clip folder), without loading it.
    public static func hasOwnText(_ path: String) -> Bool { OpenCLIPModel.isModel(path) }

    /// The own text tower of the tower at `path` (an open_clip folder's), loaded without the image tower; nil where
    /// its queries come from the detector's text encoder.
    public static func ownText(_ path: String, precision: Precision = .fp32) throws(WeightsError) -> CLIPTextEncoder? {
        hasOwnText(path) ? try OpenCLIPModel.textEncoder(contentsOf: path, precision: precision) : nil
    }

    public init(contentsOf path: String, precision: Precision = .fp32) throws(WeightsError) {
        if OpenCLIPModel.isModel(path) {
            let model = try OpenCLIPModel(contentsOf: path, precision: precision)
            let c = model.configuration
            encoder = model.image
            text = model.text
            transform = CLIPPreprocessing.Transform(
                size: c.imageSize, mean: c.mean, std: c.std, resize: c.resizeMode == "squash" ? .squash : .shortest)
        } else {
            encoder = try CLIPImageEncoder(contentsOf: path, precision: precision)
            text = nil
            transform = .openAI(size: encoder.configuration.inputResolution)
        }
        self.path = path
    }

    /// The preprocessed input of a photo file's bytes.
    public func input(_ bytes: [UInt8], name: String) throws(ImageError) -> [Float] {
        try CLIPPreprocessing.input(bytes, name: name, transform: transform)
    }

    /// The L2-normalised embedding of a photo file's bytes.
    public func embedding(
        _ bytes: [UInt8], name: String, backend: any ComputeBackend = CPUBackend.shared
    ) throws(ImageError) -> [Float] {
        encoder.encode([try input(bytes, name: name)], backend: backend)[0]
    }
}
