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
    /// `torch.nn.utils.fusion.fuse_conv_bn_weights` does (ultralytics 8.4.190): `rs = 1/√(var + eps)`,
    /// `W' = W·(γ·rs)`, `b' = ((0 − μ)·rs)·γ + β`.
    init(conv prefix: String, stride: Int, activation: Bool = true, in file: WeightBinding) throws(WeightsError) {
        let view = try file.view(prefix + ".conv.weight")
        guard view.shape.count == 4, view.shape[2] == view.shape[3] else {
            throw WeightsError(
                path: file.path,
                problem: "tensor \(prefix).conv.weight has shape \(view.shape), expected [out, in, k, k]")
        }
        let (outputs, inputs, kernel) = (view.shape[0], view.shape[1], view.shape[2])
        var weight = view.floats()
        let bn = try BatchNormStatistics(prefix + ".bn", channels: outputs, in: file)
        var bias = [Float](repeating: 0, count: outputs)
        let perOutput = inputs * kernel * kernel
        for o in 0..<outputs {
            let rs = 1 / (bn.variance[o] + bn.epsilon).squareRoot()
            let scale = bn.gamma[o] * rs
            for index in (o * perOutput)..<((o + 1) * perOutput) { weight[index] *= scale }
            bias[o] = ((0 - bn.mean[o]) * rs) * bn.gamma[o] + bn.beta[o]
        }
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
        var implementation =
            precision == .fp32 ? ConvolutionKernels.default : ConvolutionKernels.kernel(precision: precision)
        if let name, let recorder = file?.recorder {
            implementation = ObservedConvolution(implementation, name: name, recorder: recorder)
        }
        self.implementation = implementation
        self.weights = implementation.prepare(weights)
    }

    func callAsFunction(_ x: FeatureMap, pool: ComputePool) -> FeatureMap {
        implementation.convolve(x, weights, pool: pool)
    }
}
