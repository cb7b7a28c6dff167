import CLookoutKernels

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// im2col and GEMM per tile of output pixels in the compute pool (the lowered tile stays in cache between
/// the copy and the GEMM that reads it), bias and SiLU on the hot tile; 1×1 stride-1 convolutions are GEMMs
/// on the input itself.
public struct LoweredConvolution: ConvolutionKernel {
    let packs: Bool
    public let precision: Precision
    /// The instructions of bf16's products.
    public let bf16Path: BF16Path

    /// `packed`: the products through ``ConvolutionGEMM`` (false: OpenBLAS, for comparisons); `precision`:
    /// bf16 packs the weights in bf16 and rounds each lowered tile to bf16 as the GEMM reads it, through
    /// `bf16Path`. Convolutions with fewer than 16 inputs (the stem's first) stay fp32.
    public init(packed: Bool = ConvolutionGEMM.available, precision: Precision = .fp32, bf16Path: BF16Path = .best) {
        packs = packed
        self.precision = packed ? precision : .fp32
        self.bf16Path = bf16Path
    }

    public func prepare(_ weights: ConvolutionWeights) -> ConvolutionWeights {
        guard packs else { return weights }
        var prepared = weights
        let depth = weights.inputs * weights.kernel * weights.kernel
        if precision == .bf16 && weights.inputs >= 16 {
            prepared.packedBF16 = weights.weight.withUnsafeBufferPointer {
                ConvolutionGEMM.packBF16($0.baseAddress!, m: weights.outputs, k: depth)
            }
            prepared.bf16Path = bf16Path
            return prepared  // keeps `weight` (``ConvolutionWeights/denseWeight``)
        }
        prepared.packed = weights.weight.withUnsafeBufferPointer {
            ConvolutionGEMM.pack($0.baseAddress!, m: weights.outputs, k: depth)
        }
        prepared.weight = []  // one copy: the packed one (``ConvolutionWeights/denseWeight`` reads it back)
        return prepared
    }

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
        if w.packed.count == ConvolutionGEMM.packedCount(m: outputs, k: depth)
            || w.packedBF16.count == ConvolutionGEMM.packedCountBF16(m: outputs, k: depth)
        {
            convolvePacked(x, w, pointwise: pointwise, into: &out, pool: pool)
            return out
        }
        // The tiles do not depend on the pool's threads: a GEMM's rounding depends on its shape (OpenBLAS takes
        // another kernel for small products), and an engine with one thread (a lane of `lookout index`) must
        // compute what one with two does. 1×1: halves of the map, at least 256 pixels each.
        let tile = pointwise ? max(256, (columns + 1) / 2) : Self.tileColumns
        let tiles = (columns + tile - 1) / tile
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
                                let (b, ldb) = Self.operand(
                                    x, source.pointer, kernel: kernel, stride: stride, outWidth: outWidth, first: p0,
                                    count: n, buffer: buffer)
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

    /// 1×1 stride-1 convolutions through the packed GEMM read the parts where they lie (a table of row pointers:
    /// the same products in the same order); other cases join them first.
    public func convolve(_ x: StackedMaps, _ w: ConvolutionWeights, pool: ComputePool) -> FeatureMap {
        let (inputs, outputs) = (w.inputs, w.outputs)
        guard !x.isWholeMap, w.kernel == 1, w.stride == 1,
            w.packed.count == ConvolutionGEMM.packedCount(m: outputs, k: inputs)
                || w.packedBF16.count == ConvolutionGEMM.packedCountBF16(m: outputs, k: inputs)
        else { return convolve(x.joined(), w, pool: pool) }
        precondition(x.channels == inputs, "convolution expects \(inputs) channels, got \(x.channels)")
        let columns = x.plane
        var out = FeatureMap(unfilledChannels: outputs, height: x.height, width: x.width)
        let profileStart = Self.profiling ? Self.clock() : 0
        defer { if Self.profiling { Self.report(w, height: x.height, width: x.width, since: profileStart) } }
        let split = PackedSplit(columns: columns, outputs: outputs, pointwise: true, pool: pool)
        let activation = w.activation
        let bf16 = !w.packedBF16.isEmpty
        let path = w.bf16Path
        x.withRows { table in
            w.packed.withUnsafeBufferPointer { a32 in
                w.packedBF16.withUnsafeBufferPointer { a16 in
                    w.bias.withUnsafeBufferPointer { bias in
                        out.data.withUnsafeMutableBufferPointer { c in
                            let a = UnsafeSendable(a32.baseAddress), a16 = UnsafeSendable(bf16 ? a16.baseAddress : nil)
                            let bias = UnsafeSendable(UnsafeMutablePointer(mutating: bias.baseAddress!))
                            let table = UnsafeSendable(UnsafeMutablePointer(mutating: table))
                            let c = UnsafeSendable(c.baseAddress!)
                            pool.parallelFor(split.count, chunk: 1) { range in
                                for task in range {
                                    let (p0, n, rows) = split.task(task)
                                    if let packed = a16.pointer {
                                        ConvolutionGEMM.multiply(
                                            bf16: packed, m: outputs, k: inputs, rows: rows, table: table.pointer,
                                            offset: p0, n: n, c: c.pointer + p0, ldc: columns, bias: bias.pointer,
                                            activation: activation, path: path)
                                    } else {
                                        ConvolutionGEMM.multiply(
                                            packed: a.pointer!, m: outputs, k: inputs, rows: rows, table: table.pointer,
                                            offset: p0, n: n, c: c.pointer + p0, ldc: columns, bias: bias.pointer,
                                            activation: activation)
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        return out
    }

    /// Through ``ConvolutionGEMM`` (bias and SiLU in its epilogue). Its results do not depend on the split, so
    /// the work is split for balance: 1×1 convolutions by columns and by panels of outputs (small maps with
    /// many channels), others by tiles of output pixels, each lowered into a buffer of its own.
    func convolvePacked(
        _ x: FeatureMap, _ w: ConvolutionWeights, pointwise: Bool, into out: inout FeatureMap, pool: ComputePool
    ) {
        let (inputs, outputs, kernel, stride) = (w.inputs, w.outputs, w.kernel, w.stride)
        let (outHeight, outWidth) = (out.height, out.width)
        let columns = outHeight * outWidth
        let depth = inputs * kernel * kernel
        let split = PackedSplit(columns: columns, outputs: outputs, pointwise: pointwise, pool: pool)
        let tile = split.tile
        let activation = w.activation
        let bf16 = !w.packedBF16.isEmpty
        let path = w.bf16Path
        w.packed.withUnsafeBufferPointer { a32 in
            w.packedBF16.withUnsafeBufferPointer { a16 in
                w.bias.withUnsafeBufferPointer { bias in
                    x.data.withUnsafeBufferPointer { source in
                        out.data.withUnsafeMutableBufferPointer { c in
                            // One of the two is packed: fp32 panels, or bf16 ones.
                            let a = UnsafeSendable(a32.baseAddress), a16 = UnsafeSendable(bf16 ? a16.baseAddress : nil)
                            let bias = UnsafeSendable(UnsafeMutablePointer(mutating: bias.baseAddress!))
                            let source = UnsafeSendable(UnsafeMutablePointer(mutating: source.baseAddress!))
                            let c = UnsafeSendable(c.baseAddress!)
                            pool.parallelFor(split.count, chunk: 1) { range in
                                let buffer =
                                    pointwise ? nil : UnsafeMutablePointer<Float>.allocate(capacity: depth * tile)
                                defer { buffer?.deallocate() }
                                for task in range {
                                    let (p0, n, rows) = split.task(task)
                                    let (b, ldb) = Self.operand(
                                        x, source.pointer, kernel: kernel, stride: stride, outWidth: outWidth,
                                        first: p0,
                                        count: n, buffer: buffer)
                                    if let packed = a16.pointer {
                                        ConvolutionGEMM.multiply(
                                            bf16: packed, m: outputs, k: depth, rows: rows, b: b, ldb: ldb, n: n,
                                            c: c.pointer + p0, ldc: columns, bias: bias.pointer, activation: activation,
                                            path: path)
                                    } else {
                                        ConvolutionGEMM.multiply(
                                            packed: a.pointer!, m: outputs, k: depth, rows: rows, b: b, ldb: ldb, n: n,
                                            c: c.pointer + p0, ldc: columns, bias: bias.pointer, activation: activation)
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// The GEMM's right operand for output pixels `first ..< first + count` of a convolution of `x` (whose data
    /// `source` points at): the input itself for a 1×1 stride-1 convolution (no `buffer`; row stride the map's
    /// pixels), otherwise those pixels lowered into `buffer` (row stride `count`).
    static func operand(
        _ x: FeatureMap, _ source: UnsafePointer<Float>, kernel: Int, stride: Int, outWidth: Int, first: Int,
        count: Int, buffer: UnsafeMutablePointer<Float>?
    ) -> (b: UnsafePointer<Float>, ldb: Int) {
        guard let buffer else { return (source + first, x.height * x.width) }
        lower(
            source, channels: x.channels, height: x.height, width: x.width, kernel: kernel, stride: stride,
            padding: kernel / 2, outWidth: outWidth, first: first, count: count, zero: 0, into: buffer)
        return (UnsafePointer(buffer), count)
    }

    /// im2col of output pixels `first ..< first + count` (row-major over the output): row
    /// `(c·k + ky)·k + kx` of `target` (`count` wide) holds input `(c, oy·s − pad + ky, ox·s − pad + kx)`, 0
    /// outside the image.
    static func lower<Element>(
        _ source: UnsafePointer<Element>, channels: Int, height: Int, width: Int, kernel: Int, stride: Int,
        padding: Int, outWidth: Int, first: Int, count: Int, zero: Element, into target: UnsafeMutablePointer<Element>
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
                            row.update(repeating: zero, count: segment)
                        } else {
                            let line = plane + iy * width
                            if stride == 1 {
                                // ix = ox − pad + kx is inside [0, width) for ox in [lo, hi).
                                let lo = min(max(ox0, padding - kx), ox1)
                                let hi = max(min(ox1, width + padding - kx), lo)
                                if lo > ox0 { row.update(repeating: zero, count: lo - ox0) }
                                if hi > lo {
                                    (row + (lo - ox0)).update(from: line + (lo - padding + kx), count: hi - lo)
                                }
                                if ox1 > hi { (row + (hi - ox0)).update(repeating: zero, count: ox1 - hi) }
                            } else {
                                // ix = ox·s − pad + kx is inside [0, width) for ox in [lo, hi).
                                let shift = kx - padding
                                let first = shift >= 0 ? 0 : (-shift + stride - 1) / stride
                                let last = width - 1 - shift < 0 ? -1 : (width - 1 - shift) / stride
                                let lo = min(max(ox0, first), ox1)
                                let hi = max(min(ox1, last + 1), lo)
                                if lo > ox0 { row.update(repeating: zero, count: lo - ox0) }
                                var ix = lo * stride + shift
                                var ox = lo
                                if stride == 2 && Element.self == Float.self {
                                    // Eight outputs from sixteen contiguous inputs: their even lanes.
                                    while ox + 8 <= hi && ix + 16 <= width {
                                        let wide = UnsafeRawPointer(line + ix).loadUnaligned(as: SIMD16<Float>.self)
                                        UnsafeMutableRawPointer(row + (ox - ox0)).storeBytes(
                                            of: wide.evenHalf, as: SIMD8<Float>.self)
                                        ox += 8
                                        ix += 16
                                    }
                                } else if stride == 2 && Element.self == UInt8.self {
                                    // Sixteen outputs from thirty-two contiguous bytes.
                                    while ox + 16 <= hi && ix + 32 <= width {
                                        let wide = UnsafeRawPointer(line + ix).loadUnaligned(as: SIMD32<UInt8>.self)
                                        UnsafeMutableRawPointer(row + (ox - ox0)).storeBytes(
                                            of: wide.evenHalf, as: SIMD16<UInt8>.self)
                                        ox += 16
                                        ix += 32
                                    }
                                }
                                while ox < hi {
                                    row[ox - ox0] = line[ix]
                                    ix += stride
                                    ox += 1
                                }
                                if ox1 > hi { (row + (hi - ox0)).update(repeating: zero, count: ox1 - hi) }
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

/// How the packed GEMMs' convolutions share out their work (``LoweredConvolution`` and ``Int8Convolution``): the
/// results do not depend on the split, so it is made for balance — about four tasks per thread, tiles of output
/// pixels in multiples of 48 columns (the kernels' block; at most 192 when lowering, 384 for 1×1), and for 1×1
/// convolutions of small maps with many channels also groups of output panels.
struct PackedSplit {
    let columns: Int
    let outputs: Int
    let tile: Int
    let tiles: Int
    let groups: Int
    let panelsPerGroup: Int

    init(columns: Int, outputs: Int, pointwise: Bool, pool: ComputePool) {
        let wanted = 4 * pool.threadCount
        let balanced = ((columns + wanted - 1) / wanted + 47) / 48 * 48
        tile = max(48, min(pointwise ? 384 : LoweredConvolution.tileColumns, balanced))
        tiles = (columns + tile - 1) / tile
        let panels = (outputs + 7) / 8
        groups = pointwise ? max(1, min(panels, wanted / tiles)) : 1
        panelsPerGroup = (panels + groups - 1) / groups
        (self.columns, self.outputs) = (columns, outputs)
    }

    /// How many tasks.
    var count: Int { tiles * groups }

    /// Task `index`: its first output pixel, how many, and its rows of outputs (whole panels of eight).
    func task(_ index: Int) -> (first: Int, count: Int, rows: Range<Int>) {
        let (t, group) = (index / groups, index % groups)
        let first = t * tile
        let rows = min(outputs, group * panelsPerGroup * 8)..<min(outputs, (group + 1) * panelsPerGroup * 8)
        return (first, min(tile, columns - first), rows)
    }
}
