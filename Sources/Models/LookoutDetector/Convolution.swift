import LookoutTensor
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

/// A `BatchNorm2d`'s parameters and running statistics, and its `eps` as the checkpoint records it
/// (1e-3, ultralytics' setting, where it does not).
struct BatchNormStatistics {
    let gamma: [Float]
    let beta: [Float]
    let mean: [Float]
    let variance: [Float]
    let epsilon: Float

    init(_ prefix: String, channels: Int, in file: WeightBinding) throws(WeightsError) {
        gamma = try file.floats(prefix + ".weight", shape: [channels])
        beta = try file.floats(prefix + ".bias", shape: [channels])
        mean = try file.floats(prefix + ".running_mean", shape: [channels])
        variance = try file.floats(prefix + ".running_var", shape: [channels])
        epsilon = Float(file.batchNormEpsilon[prefix] ?? 1e-3)
    }

    /// Folds these statistics into a convolution's weights (`perOutput` values per output channel) as
    /// `torch.nn.utils.fusion.fuse_conv_bn_weights` does (ultralytics 8.4.190): `rs = 1/√(var + eps)`,
    /// `W' = W·(γ·rs)`; returns the bias `b' = ((0 − μ)·rs)·γ + β`.
    func fold(into weight: inout [Float], perOutput: Int) -> [Float] {
        var bias = [Float](repeating: 0, count: gamma.count)
        for o in gamma.indices {
            let rs = 1 / (variance[o] + epsilon).squareRoot()
            let scale = gamma[o] * rs
            for index in (o * perOutput)..<((o + 1) * perOutput) { weight[index] *= scale }
            bias[o] = ((0 - mean[o]) * rs) * gamma[o] + beta[o]
        }
        return bias
    }
}

/// A 2-D convolution with bias (BatchNorm already folded in), square kernel, padding `kernel / 2`,
/// optionally followed by SiLU: ultralytics' `Conv` after `fuse()`, or a plain `nn.Conv2d`.
struct Convolution: Sendable {
    let weights: ConvolutionWeights
    let implementation: any ConvolutionKernel

    var inputs: Int { weights.inputs }
    var outputs: Int { weights.outputs }
    var kernel: Int { weights.kernel }
    var stride: Int { weights.stride }
    var weight: [Float] { weights.denseWeight }
    var bias: [Float] { weights.bias }

    /// ultralytics `Conv` named `prefix` (`prefix.conv.weight`, `prefix.bn.*`), with BatchNorm folded as
    /// `fuse()` folds it (``BatchNormStatistics/fold(into:perOutput:)``).
    init(conv prefix: String, stride: Int, activation: Bool = true, in file: WeightBinding) throws(WeightsError) {
        let view = try file.view(prefix + ".conv.weight")
        guard view.shape.count == 4, view.shape[2] == view.shape[3] else {
            throw WeightsError(
                path: file.path,
                problem: "tensor \(prefix).conv.weight has shape \(view.shape), expected [out, in, k, k]")
        }
        let (outputs, inputs, kernel) = (view.shape[0], view.shape[1], view.shape[2])
        var weight = view.floats()
        let bias = try BatchNormStatistics(prefix + ".bn", channels: outputs, in: file).fold(
            into: &weight, perOutput: inputs * kernel * kernel)
        self.init(
            weight: weight, bias: bias, inputs: inputs, outputs: outputs, kernel: kernel, stride: stride,
            activation: activation, precision: file.precision, name: prefix, file: file)
    }

    /// A plain `nn.Conv2d` with bias named `prefix` (`.weight`, `.bias`), no activation.
    init(plain prefix: String, in file: WeightBinding) throws(WeightsError) {
        let view = try file.view(prefix + ".weight")
        guard view.shape.count == 4 else {
            throw WeightsError(
                path: file.path, problem: "tensor \(prefix).weight has shape \(view.shape), expected [out, in, k, k]")
        }
        self.init(
            weight: view.floats(), bias: try file.floats(prefix + ".bias", shape: [view.shape[0]]),
            inputs: view.shape[1],
            outputs: view.shape[0], kernel: view.shape[2], stride: 1, activation: false, precision: file.precision,
            name: prefix, file: file)
    }

    /// `name` and `file`: the convolution's name in the weight file, under which int8 finds its input's range
    /// (``WeightBinding/inputRanges``) and calibration records it (``WeightBinding/recorder``).
    init(
        weight: [Float], bias: [Float], inputs: Int, outputs: Int, kernel: Int, stride: Int, activation: Bool,
        precision: Precision = .fp32, name: String? = nil, file: WeightBinding? = nil
    ) {
        var weights = ConvolutionWeights(
            weight: weight, bias: bias, inputs: inputs, outputs: outputs, kernel: kernel, stride: stride,
            activation: activation)
        if precision == .int8, let name { weights.inputRange = file?.inputRanges?.ranges[name] }
        let settings = file?.kernels ?? .environment
        var implementation =
            precision == .fp32 && settings == .environment
            ? ConvolutionKernels.default : ConvolutionKernels.kernel(precision: precision, settings: settings)
        if let name, let recorder = file?.recorder {
            implementation = ObservedConvolution(implementation, name: name, recorder: recorder)
        }
        self.implementation = implementation
        self.weights = implementation.prepare(weights)
    }

    func callAsFunction(_ x: FeatureMap, backend: any ComputeBackend) -> FeatureMap {
        backend.convolve(x, weights, kernel: implementation)
    }

    /// Of maps stacked along channels (a concatenation, or channels of a map), read where they lie where the
    /// kernel can: the same floats as of ``StackedMaps/joined()``.
    func callAsFunction(_ x: StackedMaps, backend: any ComputeBackend) -> FeatureMap {
        backend.convolve(x, weights, kernel: implementation)
    }
}

extension WeightBinding {
    /// The arithmetic of a network bound through this binding, in words that tell apart every arithmetic whose
    /// results differ (``YOLOWorldNetwork/arithmetic``). int8 needs the input ranges calibration stores in the
    /// file: without them, or with them damaged, an error saying so.
    func arithmetic() throws(WeightsError) -> String {
        guard precision == .int8 else { return precision.rawValue }
        guard let ranges = inputRanges else {
            let damaged = metadata[ActivationRanges.metadataKey] != nil
            throw WeightsError(
                path: path,
                problem: damaged
                    ? "its int8 calibration (metadata \(ActivationRanges.metadataKey)) is damaged; calibrate again"
                    : "int8 needs the input ranges calibration records, which this file lacks: make a calibrated "
                        + "copy with `lookout models calibrate MODEL PHOTOS... -o MODEL-int8.safetensors` and run that")
        }
        return "int8 (\(Int8Convolution.weightBits)-bit weights, calibration \(ranges.digest))"
    }
}
