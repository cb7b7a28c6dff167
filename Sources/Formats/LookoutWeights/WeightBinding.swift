import LookoutTensor

/// A weight file as one model binds to it: every tensor the model takes is recorded, so that at the end
/// of loading the tensors it left can be named (``requireEverythingTaken(ignoring:model:)``). A file with
/// tensors a model does not understand is then an error rather than silently half-used.
public final class WeightBinding {
    public let file: WeightFile
    /// The arithmetic the layers bound from this file run in.
    public let precision: Precision
    /// Where the convolutions bound from this file record their inputs' ranges while they run (calibration), or
    /// nil.
    public let recorder: ActivationRecorder?
    /// The input ranges calibration stored in the file (``ActivationRanges``), or nil.
    public let inputRanges: ActivationRanges?
    /// The kernels the layers bound from this file choose (``KernelSettings``).
    public let kernels: KernelSettings
    private var taken: Set<String> = []

    public init(
        _ file: WeightFile, precision: Precision = .fp32, recorder: ActivationRecorder? = nil,
        kernels: KernelSettings = .environment
    ) {
        self.file = file
        self.precision = precision
        self.recorder = recorder
        self.kernels = kernels
        inputRanges = file.metadata[ActivationRanges.metadataKey].flatMap { ActivationRanges(serialized: $0) }
    }

    public var path: String { file.path }
    public var attributes: [String: TensorView] { file.attributes }
    public var batchNormEpsilon: [String: Double] { file.batchNormEpsilon }
    public var metadata: [String: String] { file.metadata }

    /// Whether the file holds a tensor `name` (looking does not take it).
    public func has(_ name: String) -> Bool { file.tensors[name] != nil }

    /// Takes the tensor `name`, or an error naming the key.
    public func view(_ name: String) throws(WeightsError) -> TensorView {
        let view = try file.view(name)
        taken.insert(name)
        return view
    }

    /// Takes the tensor `name` as Float32 values, checking its shape.
    public func floats(_ name: String, shape expected: [Int]? = nil) throws(WeightsError) -> [Float] {
        let values = try file.floats(name, shape: expected)
        taken.insert(name)
        return values
    }

    /// The tensors not taken, in file order, except those `ignoring` accepts.
    public func untaken(ignoring: (String) -> Bool = { _ in false }) -> [String] {
        file.names.filter { !taken.contains($0) && !ignoring($0) }
    }

    /// An error naming the tensors the model did not take (the first few, and how many), if any.
    public func requireEverythingTaken(ignoring: (String) -> Bool = { _ in false }, model: String) throws(WeightsError)
    {
        let left = untaken(ignoring: ignoring)
        guard !left.isEmpty else { return }
        let shown = left.prefix(5).joined(separator: ", ")
        throw WeightsError(
            path: path, kind: .unusedTensors(left),
            problem:
                "\(left.count) tensor\(left.count == 1 ? "" : "s") that a \(model) does not use: \(shown)\(left.count > 5 ? ", …" : "")"
        )
    }
}
