import CLookoutKernels

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Winograd F(4×4, 3×3) (Lavin and Gray) for stride-1 3×3 convolutions: 6×6 input tiles overlapping by two
/// are transformed (`Bᵀ d B`, eight tiles at a time in AVX2 registers), multiplied by the transformed weights
/// (`G g Gᵀ`, made once at load) as 36 GEMMs over all tiles, and transformed back (`Aᵀ m A`) with bias and
/// SiLU. 36 multiplies per four-by-four outputs instead of 144. Other convolutions, and CPUs without AVX2/FMA,
/// go to ``LoweredConvolution``.
public struct WinogradConvolution: ConvolutionKernel {
    let fallback: LoweredConvolution
    let packs: Bool
    public let precision: Precision

    /// `packed`: the products through ``ConvolutionGEMM`` (false: OpenBLAS, for comparisons); `precision`:
    /// bf16 multiplies the transformed tiles by the transformed weights in bf16 (the transforms stay fp32).
    public init(packed: Bool = ConvolutionGEMM.available, precision: Precision = .fp32, bf16Path: BF16Path = .best) {
        packs = packed
        self.precision = packed ? precision : .fp32
        fallback = LoweredConvolution(packed: packed, precision: precision, bf16Path: bf16Path)
    }

    /// Whether this CPU runs it (AVX2 and FMA).
    public static let available = lookout_winograd_available() != 0

    static func applies(_ w: ConvolutionWeights) -> Bool {
        w.kernel == 3 && w.stride == 1 && w.inputs >= 8 && available
    }

    public func prepare(_ weights: ConvolutionWeights) -> ConvolutionWeights {
        guard Self.applies(weights) else { return fallback.prepare(weights) }
        var prepared = weights
        prepared.transformed = [Float](unsafeUninitializedCapacity: 36 * weights.outputs * weights.inputs) {
            buffer, count in
            weights.weight.withUnsafeBufferPointer { w in
                lookout_winograd_weights(
                    w.baseAddress!, Int32(weights.inputs), Int32(weights.outputs), buffer.baseAddress!)
            }
            count = buffer.count
        }
        // With 32 inputs (and thousands of tiles) OpenBLAS measured faster (1.8 against 2.7 ms for the 36
        // products of 32→32 at 160×160, one thread); from 64 on, the packed GEMM.
        if packs && precision == .bf16 {
            prepared.packedBF16 = prepared.transformed.withUnsafeBufferPointer {
                ConvolutionGEMM.packBF16($0.baseAddress!, m: weights.outputs, k: weights.inputs, matrices: 36)
            }
            prepared.bf16Path = fallback.bf16Path
            prepared.transformed = []
        } else if packs && weights.inputs >= 64 {
            prepared.packed = prepared.transformed.withUnsafeBufferPointer {
                ConvolutionGEMM.pack($0.baseAddress!, m: weights.outputs, k: weights.inputs, matrices: 36)
            }
            prepared.transformed = []  // one copy of the transformed weights: the packed one
        }
        return prepared
    }

    public func convolve(_ x: FeatureMap, _ w: ConvolutionWeights, pool: ComputePool) -> FeatureMap {
        convolve(StackedMaps(x), w, pool: pool)
    }

    /// One part (a map, or channels of one) is read where it lies; more are joined first.
    public func convolve(_ x: StackedMaps, _ w: ConvolutionWeights, pool: ComputePool) -> FeatureMap {
        let packedCount = ConvolutionGEMM.packedCount(m: w.outputs, k: w.inputs)
        let bf16Count = ConvolutionGEMM.packedCountBF16(m: w.outputs, k: w.inputs)
        guard Self.applies(w),
            w.transformed.count == 36 * w.outputs * w.inputs || w.packed.count == 36 * packedCount
                || w.packedBF16.count == 36 * bf16Count
        else {
            return fallback.convolve(x, w, pool: pool)
        }
        guard x.parts.count == 1 else { return convolve(x.joined(), w, pool: pool) }
        precondition(x.channels == w.inputs, "convolution expects \(w.inputs) channels, got \(x.channels)")
        let (height, width, inputs, outputs) = (x.height, x.width, w.inputs, w.outputs)
        let tiles = ((height + 3) / 4) * ((width + 3) / 4)
        // Every value is written below (each tile's rows; every output row of every tile).
        var out = FeatureMap(unfilledChannels: outputs, height: height, width: width)
        let profileStart = LoweredConvolution.profiling ? LoweredConvolution.clock() : 0
        var t1 = 0.0, t2 = 0.0  // the transforms' and products' ends, for the profile
        defer {
            if LoweredConvolution.profiling {
                LoweredConvolution.report(
                    w, height: height, width: width, since: profileStart,
                    note:
                        " (winograd: input transform \(Int((t1 - profileStart) * 1e6)) us, products \(Int((t2 - t1) * 1e6)) us)"
                )
            }
        }
        let tilesX = (width + 3) / 4, tilesY = (height + 3) / 4
        // Blocks of tile rows (about 48 tiles each) through transform, products and inverse transform while they
        // are in cache, where there are enough blocks to share out: a map's whole 36 matrices would not fit (80×80
        // with 64 channels: 3.7 MB), and their transforms were bound by memory, not arithmetic. The choice hangs
        // on the map alone, never on the threads, so that one-thread engines (the index's lanes) compute the same
        // bits as two-thread ones.
        let rowsPerBlock = max(1, Self.blockTiles / tilesX)
        let blocks = (tilesY + rowsPerBlock - 1) / rowsPerBlock
        if Self.blocking && blocks >= Self.fewestBlocks {
            convolveInBlocks(
                x, w, into: &out, rowsPerBlock: rowsPerBlock, blocks: blocks, pool: pool, timings: &t1)
            t2 = t1
            return out
        }
        let transformedInput = UnsafeMutablePointer<Float>.allocate(capacity: 36 * inputs * tiles)
        let products = UnsafeMutablePointer<Float>.allocate(capacity: 36 * outputs * tiles)
        defer {
            transformedInput.deallocate()
            products.deallocate()
        }
        let scratchCount = lookout_winograd_scratch(Int32(width))
        let v = UnsafeSendable(transformedInput), m = UnsafeSendable(products)
        x.withParts { bases in
            let source = UnsafeSendable(UnsafeMutablePointer(mutating: bases[0]))
            let chunk = max(1, inputs / (4 * pool.threadCount))
            pool.parallelFor(inputs, chunk: chunk) { range in
                let scratch = UnsafeMutablePointer<Float>.allocate(capacity: scratchCount)
                defer { scratch.deallocate() }
                lookout_winograd_input(
                    source.pointer, Int32(inputs), Int32(height), Int32(width), Int32(range.lowerBound),
                    Int32(range.upperBound), v.pointer, scratch)
            }
        }
        if LoweredConvolution.profiling { t1 = LoweredConvolution.clock() }
        // The 36 products: through the packed GEMM where the weights were packed for it (in bf16 or fp32),
        // OpenBLAS otherwise. One of the three operands holds the weights; the others are empty.
        pool.parallelFor(36, chunk: 1) { range in
            Self.products(w, range, v: v.pointer, m: m.pointer, tiles: tiles)
        }
        if LoweredConvolution.profiling { t2 = LoweredConvolution.clock() }
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

extension WinogradConvolution {
    /// Tiles per block of the blocked path: one column block of the packed GEMM (48).
    static let blockTiles = 48
    /// Blocks a map must make for the blocked path (80×80: 10; 40×40 makes 3 and keeps the whole-map path).
    static let fewestBlocks = 8

    /// Whether the blocked path is taken where it applies: `LOOKOUT_NO_WINOGRAD_BLOCKS` set turns it off (the
    /// tests run both paths; benchmarks compare them).
    static let blocking = getenv("LOOKOUT_NO_WINOGRAD_BLOCKS") == nil

    /// Products `matrices` of the 36: `m[xi] = U[xi] · v[xi]` over `tiles` columns, through the packed GEMM
    /// where the weights were packed for it (in bf16 or fp32), OpenBLAS otherwise.
    static func products(
        _ w: ConvolutionWeights, _ matrices: Range<Int>, v: UnsafeMutablePointer<Float>, m: UnsafeMutablePointer<Float>,
        tiles: Int
    ) {
        let (inputs, outputs) = (w.inputs, w.outputs)
        let packedCount = ConvolutionGEMM.packedCount(m: outputs, k: inputs)
        let bf16Count = ConvolutionGEMM.packedCountBF16(m: outputs, k: inputs)
        if w.packedBF16.count == 36 * bf16Count {
            w.packedBF16.withUnsafeBufferPointer { u in
                for xi in matrices {
                    ConvolutionGEMM.multiply(
                        bf16: u.baseAddress! + xi * bf16Count, m: outputs, k: inputs, b: v + xi * inputs * tiles,
                        ldb: tiles, n: tiles, c: m + xi * outputs * tiles, ldc: tiles, path: w.bf16Path)
                }
            }
        } else if w.packed.count == 36 * packedCount {
            w.packed.withUnsafeBufferPointer { u in
                for xi in matrices {
                    ConvolutionGEMM.multiply(
                        packed: u.baseAddress! + xi * packedCount, m: outputs, k: inputs, b: v + xi * inputs * tiles,
                        ldb: tiles, n: tiles, c: m + xi * outputs * tiles, ldc: tiles)
                }
            }
        } else {
            w.transformed.withUnsafeBufferPointer { u in
                for xi in matrices {
                    BLAS.gemm(
                        m: outputs, n: tiles, k: inputs, a: u.baseAddress! + xi * outputs * inputs,
                        b: v + xi * inputs * tiles, c: m + xi * outputs * tiles)
                }
            }
        }
    }

    /// The blocked path: each thread takes blocks of `rowsPerBlock` tile rows and runs the input transform, the
    /// 36 products and the output transform on one block before the next. `timings`: when it ended, for the profile.
    func convolveInBlocks(
        _ x: StackedMaps, _ w: ConvolutionWeights, into out: inout FeatureMap, rowsPerBlock: Int, blocks: Int,
        pool: ComputePool, timings: inout Double
    ) {
        let (height, width, inputs, outputs) = (x.height, x.width, w.inputs, w.outputs)
        let tilesX = (width + 3) / 4, tilesY = (height + 3) / 4
        let scratchCount = lookout_winograd_scratch(Int32(width))
        let most = rowsPerBlock * tilesX
        x.withParts { bases in
            w.bias.withUnsafeBufferPointer { bias in
                out.data.withUnsafeMutableBufferPointer { y in
                    let source = UnsafeSendable(UnsafeMutablePointer(mutating: bases[0]))
                    let bias = UnsafeSendable(UnsafeMutablePointer(mutating: bias.baseAddress!))
                    let y = UnsafeSendable(y.baseAddress!)
                    pool.parallelFor(blocks, chunk: 1) { range in
                        let v = UnsafeMutablePointer<Float>.allocate(capacity: 36 * inputs * most)
                        let m = UnsafeMutablePointer<Float>.allocate(capacity: 36 * outputs * most)
                        let scratch = UnsafeMutablePointer<Float>.allocate(capacity: scratchCount)
                        defer {
                            v.deallocate()
                            m.deallocate()
                            scratch.deallocate()
                        }
                        for block in range {
                            let first = block * rowsPerBlock, end = min(tilesY, first + rowsPerBlock)
                            let tiles = (end - first) * tilesX
                            lookout_winograd_input_rows(
                                source.pointer, Int32(inputs), Int32(height), Int32(width), Int32(first),
                                Int32(end), v, scratch)
                            Self.products(w, 0..<36, v: v, m: m, tiles: tiles)
                            lookout_winograd_output_rows(
                                m, bias.pointer, Int32(outputs), Int32(height), Int32(width), w.activation ? 1 : 0,
                                Int32(first), Int32(end), y.pointer, scratch)
                        }
                    }
                }
            }
        }
        if LoweredConvolution.profiling { timings = LoweredConvolution.clock() }
    }
}
