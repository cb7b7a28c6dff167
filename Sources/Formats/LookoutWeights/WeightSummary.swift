/// What a weight file holds as a file: its tensors, their values and dtypes. What the tensors make (a detector, a
/// text encoder) is told by the models' own modules (`DetectorFamilies`, `TextEncoderDescription`).
public struct WeightSummary: Sendable {
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
    }
}
