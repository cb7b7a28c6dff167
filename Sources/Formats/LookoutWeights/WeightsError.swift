/// Why a weight file could not be read or used. Every error names the file (or files) and says what is
/// wrong in a sentence; ``kind`` says which sort of problem it is, for callers that handle them apart.
public struct WeightsError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Sendable, Equatable {
        /// The file cannot be opened or read (missing, not a regular file, permissions).
        case unreadable
        /// Not a format Lookout reads.
        case unsupportedFormat
        /// The format is right but its structure is damaged or truncated.
        case malformed
        /// A tensor the model needs is not in the file.
        case missingTensor(String)
        /// A tensor's shape is not the one the model needs.
        case shapeMismatch(tensor: String, shape: [Int], expected: [Int])
        /// The file holds tensors the model does not use.
        case unusedTensors([String])
        /// The layers read from the file do not fit together.
        case layersDoNotConnect
        /// A valid weight file of another model (a text encoder where a detector was wanted, …).
        case wrongModel
        /// Two models that do not belong together (embedding sizes, vocabulary).
        case incompatibleModels
    }

    public let path: String
    public let kind: Kind
    public let problem: String

    public init(path: String, kind: Kind = .malformed, problem: String) {
        self.path = path
        self.kind = kind
        self.problem = problem
    }

    public var description: String { "\(path): \(problem)" }
}
