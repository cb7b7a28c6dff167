/// A dense, row-major tensor of 32-bit floats.
public struct Tensor: Sendable, Equatable {
    public private(set) var shape: [Int]
    public var storage: [Float]

    public init(shape: [Int], storage: [Float]) {
        precondition(shape.allSatisfy { $0 >= 0 }, "negative dimension in \(shape)")
        precondition(shape.reduce(1, *) == storage.count, "shape \(shape) does not hold \(storage.count) values")
        self.shape = shape
        self.storage = storage
    }

    public init(zeros shape: [Int]) {
        self.init(shape: shape, storage: [Float](repeating: 0, count: shape.reduce(1, *)))
    }

    public var count: Int { storage.count }
    public var rank: Int { shape.count }

    /// The same values under another shape with the same number of elements.
    public func reshaped(_ newShape: [Int]) -> Tensor {
        Tensor(shape: newShape, storage: storage)
    }
}
