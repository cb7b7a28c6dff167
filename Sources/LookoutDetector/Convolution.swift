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
            activation: activation)
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

    /// Output pixels lowered and multiplied at a time: a tile's lowered input (depth × tile) stays in cache
    /// between im2col and the GEMM that reads it.
    /// `LOOKOUT_PROFILE=1`: every convolution prints its shape, time and GFLOP/s on standard error.
    static let profiling = getenv("LOOKOUT_PROFILE") != nil
    static func clock() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) * 1e-9
    }

    static let tileColumns = 192

    func callAsFunction(_ x: FeatureMap, pool: ComputePool = .shared) -> FeatureMap {
        precondition(x.channels == inputs, "convolution expects \(inputs) channels, got \(x.channels)")
        let padding = kernel / 2
        let outHeight = (x.height + 2 * padding - kernel) / stride + 1
        let outWidth = (x.width + 2 * padding - kernel) / stride + 1
        let columns = outHeight * outWidth
        let depth = inputs * kernel * kernel
        var out = FeatureMap(channels: outputs, height: outHeight, width: outWidth)
        let profileStart = Self.profiling ? Self.clock() : 0
        defer {
            if Self.profiling {
                let seconds = Self.clock() - profileStart
                let flops = 2.0 * Double(outputs) * Double(depth) * Double(columns)
                var line =
                    "conv \(inputs)->\(outputs) k\(kernel) s\(stride) \(outHeight)x\(outWidth): \(Int(seconds * 1e6)) us, \(Int(flops / seconds / 1e9)) GFLOP/s, \(Int(flops / 1e6)) MFLOP\n"
                line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
            }
        }
        let pointwise = kernel == 1 && stride == 1
        let tile = pointwise ? max(256, (columns + pool.threadCount - 1) / pool.threadCount) : Self.tileColumns
        let tiles = (columns + tile - 1) / tile
        let (height, width, kernel, stride, inputs, outputs, activation) =
            (x.height, x.width, kernel, stride, inputs, outputs, activation)
        weight.withUnsafeBufferPointer { w in
            bias.withUnsafeBufferPointer { bias in
                x.data.withUnsafeBufferPointer { source in
                    out.data.withUnsafeMutableBufferPointer { c in
                        let w = UnsafeSendable(w.baseAddress!), bias = UnsafeSendable(bias.baseAddress!)
                        let source = UnsafeSendable(source.baseAddress!), c = UnsafeSendable(c.baseAddress!)
                        pool.parallelFor(tiles, chunk: 1) { range in
                            let buffer = pointwise ? nil : UnsafeMutablePointer<Float>.allocate(capacity: depth * tile)
                            defer { buffer?.deallocate() }
                            for t in range {
                                let p0 = t * tile
                                let n = min(tile, columns - p0)
                                let b: UnsafePointer<Float>
                                let ldb: Int
                                if let buffer {
                                    Self.lower(
                                        source.pointer, channels: inputs, height: height, width: width, kernel: kernel,
                                        stride: stride, padding: padding, outWidth: outWidth, first: p0, count: n,
                                        into: buffer)
                                    b = UnsafePointer(buffer)
                                    ldb = n
                                } else {
                                    b = source.pointer + p0
                                    ldb = columns
                                }
                                for o in 0..<outputs {
                                    let row = c.pointer + o * columns + p0
                                    row.update(repeating: bias.pointer[o], count: n)
                                }
                                BLAS.gemm(
                                    m: outputs, n: n, k: depth, a: w.pointer, b: b, c: c.pointer + p0, lda: depth,
                                    ldb: ldb, ldc: columns, beta: 1)
                                if activation {
                                    for o in 0..<outputs { Kernels.silu(c.pointer + o * columns + p0, count: n) }
                                }
                            }
                        }
                    }
                }
            }
        }
        return out
    }

    /// im2col of output pixels `first ..< first + count` (row-major over the output): row
    /// `(c·k + ky)·k + kx` of `target` (`count` wide) holds input `(c, oy·s − pad + ky, ox·s − pad + kx)`, 0
    /// outside the image.
    static func lower(
        _ source: UnsafePointer<Float>, channels: Int, height: Int, width: Int, kernel: Int, stride: Int,
        padding: Int, outWidth: Int, first: Int, count: Int, into target: UnsafeMutablePointer<Float>
    ) {
        for c in 0..<channels {
            let plane = source + c * height * width
            for ky in 0..<kernel {
                for kx in 0..<kernel {
                    var row = target + ((c * kernel + ky) * kernel + kx) * count
                    var p = first
                    let end = first + count
                    while p < end {
                        let oy = p / outWidth
                        let ox0 = p - oy * outWidth
                        let ox1 = min(outWidth, ox0 + (end - p))
                        let segment = ox1 - ox0
                        let iy = oy * stride - padding + ky
                        if iy < 0 || iy >= height {
                            row.update(repeating: 0, count: segment)
                        } else {
                            let line = plane + iy * width
                            if stride == 1 {
                                // ix = ox − pad + kx is inside [0, width) for ox in [lo, hi).
                                let lo = min(max(ox0, padding - kx), ox1)
                                let hi = max(min(ox1, width + padding - kx), lo)
                                if lo > ox0 { row.update(repeating: 0, count: lo - ox0) }
                                if hi > lo {
                                    (row + (lo - ox0)).update(from: line + (lo - padding + kx), count: hi - lo)
                                }
                                if ox1 > hi { (row + (hi - ox0)).update(repeating: 0, count: ox1 - hi) }
                            } else {
                                // ix = ox·s − pad + kx is inside [0, width) for ox in [lo, hi).
                                let shift = kx - padding
                                let first = shift >= 0 ? 0 : (-shift + stride - 1) / stride
                                let last = width - 1 - shift < 0 ? -1 : (width - 1 - shift) / stride
                                let lo = min(max(ox0, first), ox1)
                                let hi = max(min(ox1, last + 1), lo)
                                if lo > ox0 { row.update(repeating: 0, count: lo - ox0) }
                                var ix = lo * stride + shift
                                var ox = lo
                                if stride == 2 {
                                    // Eight outputs from sixteen contiguous inputs: their even lanes.
                                    while ox + 8 <= hi && ix + 16 <= width {
                                        let wide = UnsafeRawPointer(line + ix).loadUnaligned(as: SIMD16<Float>.self)
                                        UnsafeMutableRawPointer(row + (ox - ox0)).storeBytes(
                                            of: wide.evenHalf, as: SIMD8<Float>.self)
                                        ox += 8
                                        ix += 16
                                    }
                                }
                                while ox < hi {
                                    row[ox - ox0] = line[ix]
                                    ix += stride
                                    ox += 1
                                }
                                if ox1 > hi { (row + (hi - ox0)).update(repeating: 0, count: ox1 - hi) }
                            }
                        }
                        row += segment
                        p += segment
                    }
                }
            }
        }
    }
}
