import CLookoutKernels

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A 2-D convolution's parameters as the kernels take them: weights `outputs × inputs × kernel × kernel`
/// (BatchNorm already folded in), bias, square kernel with padding `kernel / 2`, stride, and whether SiLU
/// follows.
public struct ConvolutionWeights: Sendable {
    public var weight: [Float]
    public var bias: [Float]
    public let inputs: Int
    public let outputs: Int
    public let kernel: Int
    public let stride: Int
    public let activation: Bool
    /// The weights in a kernel's own form (``ConvolutionKernel/prepare(_:)``), or empty.
    public var transformed: [Float] = []

    public init(weight: [Float], bias: [Float], inputs: Int, outputs: Int, kernel: Int, stride: Int, activation: Bool) {
        precondition(weight.count == outputs * inputs * kernel * kernel && bias.count == outputs)
        self.weight = weight
        self.bias = bias
        self.inputs = inputs
        self.outputs = outputs
        self.kernel = kernel
        self.stride = stride
        self.activation = activation
    }

    public func outputSize(height: Int, width: Int) -> (height: Int, width: Int) {
        let padding = kernel / 2
        return ((height + 2 * padding - kernel) / stride + 1, (width + 2 * padding - kernel) / stride + 1)
    }
}

/// How a convolution is computed: the seam where other algorithms and layouts (direct blocked kernels,
/// Winograd, library kernels) come in without touching model code. Inputs and outputs are ``FeatureMap``s;
/// what a kernel does inside, and how it lays out its weights (``prepare(_:)``, once at load), is its own.
public protocol ConvolutionKernel: Sendable {
    /// The weights in the form this kernel runs from (called once per layer at load).
    func prepare(_ weights: ConvolutionWeights) -> ConvolutionWeights
    func convolve(_ x: FeatureMap, _ weights: ConvolutionWeights, pool: ComputePool) -> FeatureMap
}

extension ConvolutionKernel {
    public func prepare(_ weights: ConvolutionWeights) -> ConvolutionWeights { weights }
}

public enum ConvolutionKernels {
    /// What models use: Winograd F(4×4, 3×3) for stride-1 3×3 convolutions where the CPU has AVX2/FMA, the
    /// lowered GEMM for the rest. `LOOKOUT_CONVOLUTION=lowered` runs every layer lowered (for comparisons).
    public static let `default`: any ConvolutionKernel =
        getenv("LOOKOUT_CONVOLUTION").map { String(cString: $0) } == "lowered"
        ? LoweredConvolution() : WinogradConvolution()
}

/// The reference: the convolution's definition as loops, in Double. Slow; for tests.
public struct DirectConvolution: ConvolutionKernel {
    public init() {}

    public func convolve(_ x: FeatureMap, _ w: ConvolutionWeights, pool: ComputePool) -> FeatureMap {
        precondition(x.channels == w.inputs)
        let (outHeight, outWidth) = w.outputSize(height: x.height, width: x.width)
        let padding = w.kernel / 2
        var out = FeatureMap(channels: w.outputs, height: outHeight, width: outWidth)
        for o in 0..<w.outputs {
            for oy in 0..<outHeight {
                for ox in 0..<outWidth {
                    var sum = Double(w.bias[o])
                    for c in 0..<w.inputs {
                        for ky in 0..<w.kernel {
                            let iy = oy * w.stride - padding + ky
                            guard iy >= 0 && iy < x.height else { continue }
                            for kx in 0..<w.kernel {
                                let ix = ox * w.stride - padding + kx
                                guard ix >= 0 && ix < x.width else { continue }
                                let weight = w.weight[((o * w.inputs + c) * w.kernel + ky) * w.kernel + kx]
                                sum += Double(weight) * Double(x.data[(c * x.height + iy) * x.width + ix])
                            }
                        }
                    }
                    let value = Float(sum)
                    out.data[(o * outHeight + oy) * outWidth + ox] = w.activation ? value / (1 + expf(-value)) : value
                }
            }
        }
        return out
    }
}

/// Winograd F(4×4, 3×3) (Lavin and Gray) for stride-1 3×3 convolutions: 6×6 input tiles overlapping by two
/// are transformed (`Bᵀ d B`, eight tiles at a time in AVX2 registers), multiplied by the transformed weights
/// (`G g Gᵀ`, made once at load) as 36 GEMMs over all tiles, and transformed back (`Aᵀ m A`) with bias and
/// SiLU. 36 multiplies per four-by-four outputs instead of 144. Other convolutions, and CPUs without AVX2/FMA,
/// go to ``LoweredConvolution``.
public struct WinogradConvolution: ConvolutionKernel {
    let fallback = LoweredConvolution()

    public init() {}

    /// Whether this CPU runs it (AVX2 and FMA).
    public static let available = lookout_winograd_available() != 0

    static func applies(_ w: ConvolutionWeights) -> Bool {
        w.kernel == 3 && w.stride == 1 && w.inputs >= 8 && available
    }

    public func prepare(_ weights: ConvolutionWeights) -> ConvolutionWeights {
        guard Self.applies(weights) else { return weights }
        var prepared = weights
        prepared.transformed = [Float](unsafeUninitializedCapacity: 36 * weights.outputs * weights.inputs) {
            buffer, count in
            weights.weight.withUnsafeBufferPointer { w in
                lookout_winograd_weights(
                    w.baseAddress!, Int32(weights.inputs), Int32(weights.outputs), buffer.baseAddress!)
            }
            count = buffer.count
        }
        return prepared
    }

    public func convolve(_ x: FeatureMap, _ w: ConvolutionWeights, pool: ComputePool) -> FeatureMap {
        guard Self.applies(w), w.transformed.count == 36 * w.outputs * w.inputs else {
            return fallback.convolve(x, w, pool: pool)
        }
        precondition(x.channels == w.inputs, "convolution expects \(w.inputs) channels, got \(x.channels)")
        let (height, width, inputs, outputs) = (x.height, x.width, w.inputs, w.outputs)
        let tiles = ((height + 3) / 4) * ((width + 3) / 4)
        // Every value is written below (each tile's rows; every output row of every tile).
        var out = FeatureMap(unfilledChannels: outputs, height: height, width: width)
        let profileStart = LoweredConvolution.profiling ? LoweredConvolution.clock() : 0
        defer {
            if LoweredConvolution.profiling {
                LoweredConvolution.report(w, height: height, width: width, since: profileStart, note: " (winograd)")
            }
        }
        let transformedInput = UnsafeMutablePointer<Float>.allocate(capacity: 36 * inputs * tiles)
        let products = UnsafeMutablePointer<Float>.allocate(capacity: 36 * outputs * tiles)
        defer {
            transformedInput.deallocate()
            products.deallocate()
        }
        let scratchCount = lookout_winograd_scratch(Int32(width))
        let v = UnsafeSendable(transformedInput), m = UnsafeSendable(products)
        x.data.withUnsafeBufferPointer { source in
            let source = UnsafeSendable(UnsafeMutablePointer(mutating: source.baseAddress!))
            let chunk = max(1, inputs / (4 * pool.threadCount))
            pool.parallelFor(inputs, chunk: chunk) { range in
                let scratch = UnsafeMutablePointer<Float>.allocate(capacity: scratchCount)
                defer { scratch.deallocate() }
                lookout_winograd_input(
                    source.pointer, Int32(inputs), Int32(height), Int32(width), Int32(range.lowerBound),
                    Int32(range.upperBound), v.pointer, scratch)
            }
        }
        w.transformed.withUnsafeBufferPointer { u in
            let u = UnsafeSendable(UnsafeMutablePointer(mutating: u.baseAddress!))
            pool.parallelFor(36, chunk: 1) { range in
                for xi in range {
                    BLAS.gemm(
                        m: outputs, n: tiles, k: inputs, a: u.pointer + xi * outputs * inputs,
                        b: v.pointer + xi * inputs * tiles, c: m.pointer + xi * outputs * tiles)
                }
            }
        }
        w.bias.withUnsafeBufferPointer { bias in
            out.data.withUnsafeMutableBufferPointer { y in
                let bias = UnsafeSendable(UnsafeMutablePointer(mutating: bias.baseAddress!))
                let y = UnsafeSendable(y.baseAddress!)
                let chunk = max(1, outputs / (4 * pool.threadCount))
                pool.parallelFor(outputs, chunk: chunk) { range in
                    let scratch = UnsafeMutablePointer<Float>.allocate(capacity: scratchCount)
                    defer { scratch.deallocate() }
                    lookout_winograd_output(
                        m.pointer, bias.pointer, Int32(outputs), Int32(height), Int32(width), w.activation ? 1 : 0,
                        Int32(range.lowerBound), Int32(range.upperBound), y.pointer, scratch)
                }
            }
        }
        return out
    }
}

/// im2col and GEMM per tile of output pixels in the compute pool (the lowered tile stays in cache between
/// the copy and the GEMM that reads it), bias and SiLU on the hot tile; 1×1 stride-1 convolutions are GEMMs
/// on the input itself.
public struct LoweredConvolution: ConvolutionKernel {
    public init() {}

    /// `LOOKOUT_PROFILE=1`: every convolution prints its shape, time and GFLOP/s (counted as a direct
    /// convolution) on standard error.
    static let profiling = getenv("LOOKOUT_PROFILE") != nil
    static func clock() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) * 1e-9
    }

    /// The profile line of a convolution that made a `height × width` map and started at `start`.
    static func report(_ w: ConvolutionWeights, height: Int, width: Int, since start: Double, note: String = "") {
        let seconds = clock() - start
        let flops = 2.0 * Double(w.outputs * w.inputs * w.kernel * w.kernel) * Double(height * width)
        var line =
            "conv \(w.inputs)->\(w.outputs) k\(w.kernel) s\(w.stride) \(height)x\(width): \(Int(seconds * 1e6)) us, \(Int(flops / seconds / 1e9)) GFLOP/s, \(Int(flops / 1e6)) MFLOP\(note)\n"
        line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }

    /// Output pixels lowered and multiplied at a time: a tile's lowered input (depth × tile) stays in cache
    /// between im2col and the GEMM that reads it.
    static let tileColumns = 192

    public func convolve(_ x: FeatureMap, _ w: ConvolutionWeights, pool: ComputePool) -> FeatureMap {
        precondition(x.channels == w.inputs, "convolution expects \(w.inputs) channels, got \(x.channels)")
        let (weight, bias, inputs, outputs, kernel, stride, activation) =
            (w.weight, w.bias, w.inputs, w.outputs, w.kernel, w.stride, w.activation)
        let padding = kernel / 2
        let outHeight = (x.height + 2 * padding - kernel) / stride + 1
        let outWidth = (x.width + 2 * padding - kernel) / stride + 1
        let columns = outHeight * outWidth
        let depth = inputs * kernel * kernel
        // Every value is written below (each tile starts its rows with the bias).
        var out = FeatureMap(unfilledChannels: outputs, height: outHeight, width: outWidth)
        let profileStart = Self.profiling ? Self.clock() : 0
        defer { if Self.profiling { Self.report(w, height: outHeight, width: outWidth, since: profileStart) } }
        let pointwise = kernel == 1 && stride == 1
        // The tiles do not depend on the pool's threads: a GEMM's rounding depends on its shape (OpenBLAS takes
        // another kernel for small products), and an engine with one thread (a lane of `lookout index`) must
        // compute what one with two does. 1×1: halves of the map, at least 256 pixels each.
        let tile = pointwise ? max(256, (columns + 1) / 2) : Self.tileColumns
        let tiles = (columns + tile - 1) / tile
        let (height, width) = (x.height, x.width)
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
