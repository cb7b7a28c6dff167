/// Why a weight file could not be read or used. Every case names the file.
public struct WeightsError: Error, CustomStringConvertible, Sendable {
    public let path: String
    public let problem: String

    public init(path: String, problem: String) {
        self.path = path
        self.problem = problem
    }

    public var description: String { "\(path): \(problem)" }
}
