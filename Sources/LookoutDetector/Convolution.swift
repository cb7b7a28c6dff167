import LookoutTensor
import LookoutWeights

/// A `BatchNorm2d`'s parameters and running statistics, and its `eps` as the checkpoint records it
/// (1e-3, ultralytics' setting, where it does not).
struct BatchNormStatistics {
    let gamma: [Float]
    let beta: [Float]
    let mean: [Float]
    let variance: [Float]
    let epsilon: Float

    init(_ prefix: String, channels: Int, in file: WeightFile) throws(WeightsError) {
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
    let weight: [Float]  // out × in × k × k
    let bias: [Float]
    let inputs: Int
    let outputs: Int
    let kernel: Int
    let stride: Int
    let activation: Bool

    /// ultralytics `Conv` named `prefix` (`prefix.conv.weight`, `prefix.bn.*`), with BatchNorm folded as
    /// `torch.nn.utils.fusion.fuse_conv_bn_weights` does (ultralytics 8.4.190): `rs = 1/√(var + eps)`,
    /// `W' = W·(γ·rs)`, `b' = ((0 − μ)·rs)·γ + β`.
    init(conv prefix: String, stride: Int, activation: Bool = true, in file: WeightFile) throws(WeightsError) {
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
            activation: activation)
    }

    /// A plain `nn.Conv2d` with bias named `prefix` (`.weight`, `.bias`), no activation.
    init(plain prefix: String, in file: WeightFile) throws(WeightsError) {
        let view = try file.view(prefix + ".weight")
        guard view.shape.count == 4 else {
            throw WeightsError(
                path: file.path, problem: "tensor \(prefix).weight has shape \(view.shape), expected [out, in, k, k]")
        }
        self.init(
            weight: view.floats(), bias: try file.floats(prefix + ".bias", shape: [view.shape[0]]),
            inputs: view.shape[1],
            outputs: view.shape[0], kernel: view.shape[2], stride: 1, activation: false)
    }

    init(weight: [Float], bias: [Float], inputs: Int, outputs: Int, kernel: Int, stride: Int, activation: Bool) {
        self.weight = weight
        self.bias = bias
        self.inputs = inputs
        self.outputs = outputs
        self.kernel = kernel
        self.stride = stride
        self.activation = activation
    }

    func callAsFunction(_ x: FeatureMap, pool: ComputePool = .shared) -> FeatureMap {
        precondition(x.channels == inputs, "convolution expects \(inputs) channels, got \(x.channels)")
        let padding = kernel / 2
        let outHeight = (x.height + 2 * padding - kernel) / stride + 1
        let outWidth = (x.width + 2 * padding - kernel) / stride + 1
        let columns = outHeight * outWidth
        let depth = inputs * kernel * kernel
        var out = FeatureMap(channels: outputs, height: outHeight, width: outWidth)
        // Lowered input: depth × columns (for 1×1 stride 1, the input itself).
        let lowered: [Float]
        if kernel == 1 && stride == 1 {
            lowered = x.data
        } else {
            var buffer = [Float](repeating: 0, count: depth * columns)
            buffer.withUnsafeMutableBufferPointer { target in
                x.data.withUnsafeBufferPointer { source in
                    let target = UnsafeSendable(target.baseAddress!), source = UnsafeSendable(source.baseAddress!)
                    let (height, width, kernel, stride) = (x.height, x.width, kernel, stride)
                    pool.parallelFor(inputs, chunk: 1) { range in
                        for c in range {
                            for ky in 0..<kernel {
                                for kx in 0..<kernel {
                                    let row = target.pointer + ((c * kernel + ky) * kernel + kx) * columns
                                    for oy in 0..<outHeight {
                                        let iy = oy * stride - padding + ky
                                        for ox in 0..<outWidth {
                                            let ix = ox * stride - padding + kx
                                            row[oy * outWidth + ox] =
                                                iy >= 0 && iy < height && ix >= 0 && ix < width
                                                ? source.pointer[(c * height + iy) * width + ix] : 0
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            lowered = buffer
        }
        // out[o, :] = bias[o] + W[o, :]·lowered, split by output columns across the pool.
        for o in 0..<outputs {
            for p in 0..<columns { out.data[o * columns + p] = bias[o] }
        }
        weight.withUnsafeBufferPointer { w in
            lowered.withUnsafeBufferPointer { b in
                out.data.withUnsafeMutableBufferPointer { c in
                    let w = UnsafeSendable(w.baseAddress!), b = UnsafeSendable(b.baseAddress!),
                        c = UnsafeSendable(c.baseAddress!)
                    let chunk = max(256, (columns + pool.threadCount - 1) / pool.threadCount)
                    pool.parallelFor(columns, chunk: chunk) { range in
                        BLAS.gemm(
                            m: outputs, n: range.count, k: depth, a: w.pointer, b: b.pointer + range.lowerBound,
                            c: c.pointer + range.lowerBound, lda: depth, ldb: columns, ldc: columns, beta: 1)
                    }
                }
            }
        }
        if activation { silu(&out.data) }
        return out
    }
}
