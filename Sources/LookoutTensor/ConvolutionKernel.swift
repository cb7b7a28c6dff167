import CLookoutKernels

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The arithmetic convolutions run in. fp32: exact to the reference. bf16: weights and activations rounded to
/// bfloat16, products summed in fp32 (AVX-512 BF16's VDPBF16PS), about twice the multiply rate. int8: weights
/// quantised per output channel, each convolution's input per map with the range calibration recorded
/// (``ActivationRanges``), exact integer sums (AVX-512 VNNI's VPDPBUSD), four times the multiply rate.
public enum Precision: String, Sendable, CaseIterable {
    case fp32
    case bf16
    case int8

    /// Whether this CPU runs `self` natively (bf16: AVX512_BF16, and not turned off by LOOKOUT_NO_BF16; int8:
    /// AVX-512BW — with VNNI 8-bit weights, without it 7-bit ones — and not turned off by LOOKOUT_NO_AVX512).
    public var isNative: Bool {
        switch self {
        case .fp32: return true
        case .bf16: return lookout_gemm_bf16_available() != 0 && ConvolutionGEMM.available
        case .int8: return lookout_int8_level() >= 1 && ConvolutionGEMM.available
        }
    }
}

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
    /// The GEMM's A operand packed for ``ConvolutionGEMM`` (the weights as `outputs × inputs·k·k`, or for
    /// Winograd the 36 transformed matrices one after another), or empty: the kernels then use OpenBLAS.
    public var packed: [Float] = []
    /// The same operand in bf16 (``ConvolutionGEMM/packBF16(_:m:k:matrices:)``) when the kernel runs in bf16,
    /// or empty.
    public var packedBF16: [UInt32] = []
    /// The range calibration saw at this convolution's input (int8 quantises the input to it), or nil.
    public var inputRange: ClosedRange<Float>?
    /// The weights in int8 (``ConvolutionGEMM/packInt8(_:m:k:input:)``) when the kernel runs in int8, or nil.
    public var int8: Int8Weights?

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

    /// The weights `outputs × inputs × kernel × kernel`: `weight`, or read back from the packed GEMM operand
    /// where the lowered kernel keeps only that (for int8 the quantised values, dequantised).
    public var denseWeight: [Float] {
        let depth = inputs * kernel * kernel
        if weight.isEmpty, let int8 {
            guard int8.direct else { return int8.dequantised(m: outputs, k: depth) }
            return Int8Convolution.standardOrder(
                int8.dequantised(m: outputs, k: 36 * ((inputs + 3) / 4)), inputs: inputs, outputs: outputs)
        }
        guard weight.isEmpty && packed.count == ConvolutionGEMM.packedCount(m: outputs, k: depth) else { return weight }
        return [Float](unsafeUninitializedCapacity: outputs * depth) { buffer, count in
            packed.withUnsafeBufferPointer {
                lookout_gemm_unpack($0.baseAddress!, Int32(outputs), Int32(depth), buffer.baseAddress!)
            }
            count = outputs * depth
        }
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
    /// The convolution of maps stacked along channels: the same floats as of their concatenation, read where
    /// they lie by the kernels that can.
    func convolve(_ x: StackedMaps, _ weights: ConvolutionWeights, pool: ComputePool) -> FeatureMap
}

extension ConvolutionKernel {
    public func prepare(_ weights: ConvolutionWeights) -> ConvolutionWeights { weights }

    /// The concatenation, convolved.
    public func convolve(_ x: StackedMaps, _ weights: ConvolutionWeights, pool: ComputePool) -> FeatureMap {
        convolve(x.joined(), weights, pool: pool)
    }
}

public enum ConvolutionKernels {
    /// What models use: Winograd F(4×4, 3×3) for stride-1 3×3 convolutions where the CPU has AVX2/FMA, the
    /// lowered GEMM for the rest. `LOOKOUT_CONVOLUTION=lowered` runs every layer lowered (for comparisons).
    public static let `default`: any ConvolutionKernel = kernel(precision: .fp32)

    /// The kernels of a precision (bf16 and int8 where the packed GEMM runs; fp32 otherwise). int8: every
    /// convolution with a calibrated input range in int8 (``Int8Convolution``), the others in fp32.
    public static func kernel(precision: Precision) -> any ConvolutionKernel {
        let lowered = getenv("LOOKOUT_CONVOLUTION").map { String(cString: $0) } == "lowered"
        let precision = ConvolutionGEMM.available ? precision : .fp32
        if precision == .int8 { return Int8Convolution(fallback: kernel(precision: .fp32)) }
        return lowered
            ? LoweredConvolution(precision: precision) : WinogradConvolution(precision: precision)
    }
}

/// Lookout's own GEMM for convolutions (`gemm.c`): the weights packed once at load into panels of eight
/// rows, the other operand read where it lies (an im2col tile, the feature map itself, Winograd's transformed
/// tiles), AVX-512 register blocks of 8 × 48, bias and SiLU applied before the store. Each output is one chain
/// of fused multiply-adds in the order of the inner dimension, so the result does not depend on how the work
/// is split among threads. Used where the CPU has AVX-512 (OpenBLAS otherwise, and with `LOOKOUT_GEMM=openblas`
/// for comparisons).
public enum ConvolutionGEMM {
    public static let available =
        lookout_gemm_available() != 0 && getenv("LOOKOUT_GEMM").map { String(cString: $0) } != "openblas"

    /// `matrices` matrices `m × k` (row-major, one after another) → their panels, one after another
    /// (``packedCount(m:k:)`` floats each).
    public static func pack(_ a: UnsafePointer<Float>, m: Int, k: Int, matrices: Int = 1) -> [Float] {
        let each = packedCount(m: m, k: k)
        return [Float](unsafeUninitializedCapacity: each * matrices) { buffer, count in
            for index in 0..<matrices {
                lookout_gemm_pack(a + index * m * k, Int32(m), Int32(k), k, buffer.baseAddress! + index * each)
            }
            count = each * matrices
        }
    }

    public static func packedCount(m: Int, k: Int) -> Int { lookout_gemm_packed_count(Int32(m), Int32(k)) }

    /// `matrices` matrices `m × k` → their bf16 panels (``packedCountBF16(m:k:)`` words each).
    public static func packBF16(_ a: UnsafePointer<Float>, m: Int, k: Int, matrices: Int = 1) -> [UInt32] {
        let each = packedCountBF16(m: m, k: k)
        return [UInt32](unsafeUninitializedCapacity: each * matrices) { buffer, count in
            for index in 0..<matrices {
                lookout_gemm_bf16_pack(
                    a + index * m * k, Int32(m), Int32(k), k, buffer.baseAddress! + index * each)
            }
            count = each * matrices
        }
    }

    public static func packedCountBF16(m: Int, k: Int) -> Int { lookout_gemm_bf16_packed_count(Int32(m), Int32(k)) }

    /// A multiply's rows (all `m` when `nil`), checked to start at a panel of eight; `nil` when there is nothing
    /// to compute.
    private static func panelRows(_ rows: Range<Int>?, m: Int, n: Int) -> Range<Int>? {
        let rows = rows ?? 0..<m
        guard !rows.isEmpty && n > 0 else { return nil }
        precondition(rows.lowerBound % 8 == 0 && rows.upperBound <= m)
        return rows
    }

    /// Rows `rows` (whole panels of eight: the lower bound a multiple of 8) of `C = A·B (+ bias, SiLU)`, for
    /// `n` columns; `b` is `k × n` with row stride `ldb`, `c` has row stride `ldc`; `c` and `bias` point at row
    /// 0.
    public static func multiply(
        packed: UnsafePointer<Float>, m: Int, k: Int, rows: Range<Int>? = nil, b: UnsafePointer<Float>, ldb: Int,
        n: Int, c: UnsafeMutablePointer<Float>, ldc: Int, bias: UnsafePointer<Float>? = nil, activation: Bool = false
    ) {
        guard let rows = panelRows(rows, m: m, n: n) else { return }
        lookout_gemm(
            packed + (rows.lowerBound / 8) * 8 * k, Int32(rows.count), Int32(k), b, ldb, Int32(n),
            c + rows.lowerBound * ldc, ldc, bias.map { $0 + rows.lowerBound }, activation ? 1 : 0)
    }

    /// ``multiply(packed:m:k:rows:b:ldb:n:c:ldc:bias:activation:)`` with `b`'s row p at `table[p] + offset`
    /// (``StackedMaps/withRows(_:)``): the same operations in the same order.
    public static func multiply(
        packed: UnsafePointer<Float>, m: Int, k: Int, rows: Range<Int>? = nil,
        table: UnsafePointer<UnsafePointer<Float>?>,
        offset: Int, n: Int, c: UnsafeMutablePointer<Float>, ldc: Int, bias: UnsafePointer<Float>? = nil,
        activation: Bool = false
    ) {
        guard let rows = panelRows(rows, m: m, n: n) else { return }
        lookout_gemm_rows(
            packed + (rows.lowerBound / 8) * 8 * k, Int32(rows.count), Int32(k), table, offset, Int32(n),
            c + rows.lowerBound * ldc, ldc, bias.map { $0 + rows.lowerBound }, activation ? 1 : 0)
    }

    /// ``multiply(bf16:m:k:rows:b:ldb:n:c:ldc:bias:activation:portable:)`` with `b`'s row p at `table[p] + offset`.
    public static func multiply(
        bf16 packed: UnsafePointer<UInt32>, m: Int, k: Int, rows: Range<Int>? = nil,
        table: UnsafePointer<UnsafePointer<Float>?>, offset: Int, n: Int, c: UnsafeMutablePointer<Float>, ldc: Int,
        bias: UnsafePointer<Float>? = nil, activation: Bool = false, portable: Bool = false
    ) {
        guard let rows = panelRows(rows, m: m, n: n) else { return }
        lookout_gemm_bf16_rows(
            packed + (rows.lowerBound / 8) * 8 * ((k + 1) / 2), Int32(rows.count), Int32(k), table, offset, Int32(n),
            c + rows.lowerBound * ldc, ldc, bias.map { $0 + rows.lowerBound }, activation ? 1 : 0, portable ? 1 : 0)
    }

    /// ``multiply(packed:m:k:rows:b:ldb:n:c:ldc:bias:activation:)`` in bf16: `b` rounded to bf16 as it is read.
    /// `portable`: the C path whatever the CPU (for tests).
    public static func multiply(
        bf16 packed: UnsafePointer<UInt32>, m: Int, k: Int, rows: Range<Int>? = nil, b: UnsafePointer<Float>,
        ldb: Int, n: Int, c: UnsafeMutablePointer<Float>, ldc: Int, bias: UnsafePointer<Float>? = nil,
        activation: Bool = false, portable: Bool = false
    ) {
        guard let rows = panelRows(rows, m: m, n: n) else { return }
        let run = portable ? lookout_gemm_bf16_portable : lookout_gemm_bf16
        run(
            packed + (rows.lowerBound / 8) * 8 * ((k + 1) / 2), Int32(rows.count), Int32(k), b, ldb, Int32(n),
            c + rows.lowerBound * ldc, ldc, bias.map { $0 + rows.lowerBound }, activation ? 1 : 0)
    }

    /// A float rounded to bfloat16 (nearest even) and back.
    public static func roundedToBF16(_ value: Float) -> Float { lookout_bf16_round(value) }

    /// A matrix `m × k` (row-major) quantised and packed for the int8 GEMM, its input quantised to `input`:
    /// weights to ±`limit` per row (127 where the CPU has VNNI, 63 where VPMADDUBSW must not saturate).
    public static func packInt8(
        _ a: UnsafePointer<Float>, m: Int, k: Int, input: ActivationQuantization,
        limit: Int = Int(lookout_gemm_int8_limit())
    ) -> Int8Weights {
        var sums = [Int32](repeating: 0, count: m)
        var scales = [Float](repeating: 0, count: m)
        let packed = [UInt32](unsafeUninitializedCapacity: Int(lookout_gemm_int8_packed_count(Int32(m), Int32(k)))) {
            buffer, count in
            lookout_gemm_int8_pack(a, Int32(m), Int32(k), k, Int32(limit), buffer.baseAddress!, &scales, &sums)
            count = buffer.count
        }
        return Int8Weights(
            packed: packed, weightScales: scales, scales: scales.map { $0 * input.scale },
            corrections: sums.map { $0 * input.zero }, input: input, direct: false)
    }

    /// Rows `rows` (whole panels of eight) of the int8 GEMM: `b` is `k × n` bytes, row stride `ldb`, quantised
    /// to `weights.input`. `level`: 2 VNNI, 1 AVX-512BW, 0 portable C; nil the best this CPU has (for tests).
    public static func multiply(
        int8 weights: Int8Weights, m: Int, k: Int, rows: Range<Int>? = nil, b: UnsafePointer<UInt8>, ldb: Int, n: Int,
        c: UnsafeMutablePointer<Float>, ldc: Int, bias: UnsafePointer<Float>? = nil, activation: Bool = false,
        level: Int? = nil
    ) {
        guard let rows = panelRows(rows, m: m, n: n) else { return }
        let quads = (k + 3) / 4
        weights.packed.withUnsafeBufferPointer { packed in
            weights.scales.withUnsafeBufferPointer { scales in
                weights.corrections.withUnsafeBufferPointer { corrections in
                    lookout_gemm_int8_at(
                        Int32(level ?? Int(lookout_int8_level())),
                        packed.baseAddress! + (rows.lowerBound / 8) * 8 * quads,
                        scales.baseAddress! + rows.lowerBound, corrections.baseAddress! + rows.lowerBound,
                        Int32(rows.count), Int32(k), b, ldb, Int32(n), c + rows.lowerBound * ldc, ldc,
                        bias.map { $0 + rows.lowerBound }, activation ? 1 : 0)
                }
            }
        }
    }
}

/// How a map is quantised to u8: `q = clamp(round(x / scale) + zero, 0, 255)` (round half to even), so
/// `x ≈ (q − zero) · scale`; the range is widened to hold 0, which is then exact (padding quantises to `zero`).
public struct ActivationQuantization: Sendable, Equatable {
    public let scale: Float
    public let zero: Int32

    public init(range: ClosedRange<Float>) {
        let low = min(range.lowerBound, 0), high = max(range.upperBound, 0)
        guard high > low, (high - low).isFinite else {
            scale = 1
            zero = 0
            return
        }
        scale = (high - low) / 255
        zero = Int32(min(max((-low / scale).rounded(.toNearestOrEven), 0), 255))
    }

    /// `count` values of `x` → bytes.
    public func quantize(
        _ x: UnsafePointer<Float>, count: Int, into out: UnsafeMutablePointer<UInt8>, portable: Bool = false
    ) {
        (portable ? lookout_quantize_u8_portable : lookout_quantize_u8)(x, count, 1 / scale, zero, out)
    }
}

/// A convolution's weights as the int8 GEMM takes them: quantised and packed, each output channel's scale,
/// the products' scales (`weightScales[i] · input.scale`) and the zero point's share (`input.zero · Σ q`).
public struct Int8Weights: Sendable {
    public let packed: [UInt32]
    public let weightScales: [Float]
    public let scales: [Float]
    public let corrections: [Int32]
    public let input: ActivationQuantization
    /// Packed for the direct 3×3 kernel (k ordered tap, channel quad, channel: ``Int8Convolution``), not as
    /// `outputs × inputs·k·k`.
    public var direct: Bool

    /// The quantised weights as floats, `m × k`.
    public func dequantised(m: Int, k: Int) -> [Float] {
        [Float](unsafeUninitializedCapacity: m * k) { buffer, count in
            lookout_gemm_int8_unpack(packed, weightScales, Int32(m), Int32(k), buffer.baseAddress!)
            count = m * k
        }
    }
}

/// The reference: the convolution's definition as loops, in Double. Slow; for tests.
public struct DirectConvolution: ConvolutionKernel {
    public init() {}

    public func convolve(_ x: FeatureMap, _ w: ConvolutionWeights, pool: ComputePool) -> FeatureMap {
        precondition(x.channels == w.inputs)
        let (outHeight, outWidth) = w.outputSize(height: x.height, width: x.width)
        let padding = w.kernel / 2
        let dense = w.denseWeight
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
                                let weight = dense[((o * w.inputs + c) * w.kernel + ky) * w.kernel + kx]
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
    let fallback: LoweredConvolution
    let packs: Bool
    public let precision: Precision

    /// `packed`: the products through ``ConvolutionGEMM`` (false: OpenBLAS, for comparisons); `precision`:
    /// bf16 multiplies the transformed tiles by the transformed weights in bf16 (the transforms stay fp32).
    public init(packed: Bool = ConvolutionGEMM.available, precision: Precision = .fp32) {
        packs = packed
        self.precision = packed ? precision : .fp32
        fallback = LoweredConvolution(packed: packed, precision: precision)
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
                        ldb: tiles, n: tiles, c: m + xi * outputs * tiles, ldc: tiles)
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

/// im2col and GEMM per tile of output pixels in the compute pool (the lowered tile stays in cache between
/// the copy and the GEMM that reads it), bias and SiLU on the hot tile; 1×1 stride-1 convolutions are GEMMs
/// on the input itself.
public struct LoweredConvolution: ConvolutionKernel {
    let packs: Bool
    public let precision: Precision

    /// `packed`: the products through ``ConvolutionGEMM`` (false: OpenBLAS, for comparisons); `precision`:
    /// bf16 packs the weights in bf16 and rounds each lowered tile to bf16 as the GEMM reads it. Convolutions
    /// with fewer than 16 inputs (the stem's first) stay fp32.
    public init(packed: Bool = ConvolutionGEMM.available, precision: Precision = .fp32) {
        packs = packed
        self.precision = packed ? precision : .fp32
    }

    public func prepare(_ weights: ConvolutionWeights) -> ConvolutionWeights {
        guard packs else { return weights }
        var prepared = weights
        let depth = weights.inputs * weights.kernel * weights.kernel
        if precision == .bf16 && weights.inputs >= 16 {
            prepared.packedBF16 = weights.weight.withUnsafeBufferPointer {
                ConvolutionGEMM.packBF16($0.baseAddress!, m: weights.outputs, k: depth)
            }
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
                                            activation: activation)
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
                                            c: c.pointer + p0, ldc: columns, bias: bias.pointer, activation: activation)
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
