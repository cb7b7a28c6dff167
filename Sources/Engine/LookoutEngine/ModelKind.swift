import LookoutDetector
import LookoutTextEncoder
import LookoutWeights

/// What a weight file is: a detector of a family Lookout runs (``DetectorFamilies``), a text encoder, a CLIP
/// image tower, or none of these. Recognised from tensor names and shapes; nothing is loaded.
public enum ModelKind: Sendable, Equatable, CustomStringConvertible {
    case detector(DetectorDescription)
    case textEncoder(TextEncoderDescription)
    case imageEncoder(ImageEncoderDescription)
    case unknown

    public init(_ weights: WeightFile) {
        if let (_, detector) = DetectorFamilies.recognise(weights) {
            self = .detector(detector)
        } else if let text = TextEncoderDescription.recognise(weights) {
            self = .textEncoder(text)
        } else if let image = ImageEncoderDescription.recognise(weights) {
            self = .imageEncoder(image)
        } else {
            self = .unknown
        }
    }

    public var description: String {
        switch self {
        case .detector(let detector): detector.description
        case .textEncoder(let text): text.description
        case .imageEncoder(let image): image.description
        case .unknown: "not a detector, text encoder or image tower Lookout recognises by its tensors"
        }
    }
}
