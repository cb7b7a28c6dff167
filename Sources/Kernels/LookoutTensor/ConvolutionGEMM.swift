import CLookoutKernels

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

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

    /// `matrices` matrices `m × k` → their bf16 panels (16 rows by 32 values of k, AMX's tile layout;
    /// ``packedCountBF16(m:k:)`` words each).
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

    /// ``multiply(bf16:m:k:rows:b:ldb:n:c:ldc:bias:activation:path:)`` with `b`'s row p at `table[p] + offset`.
    public static func multiply(
        bf16 packed: UnsafePointer<UInt32>, m: Int, k: Int, rows: Range<Int>? = nil,
        table: UnsafePointer<UnsafePointer<Float>?>, offset: Int, n: Int, c: UnsafeMutablePointer<Float>, ldc: Int,
        bias: UnsafePointer<Float>? = nil, activation: Bool = false, path: BF16Path = .best
    ) {
        guard let rows = panelRows(rows, m: m, n: n) else { return }
        lookout_gemm_bf16_at(
            path.rawValue, packed, Int32(rows.lowerBound), Int32(rows.count), Int32(k), nil, 0, table, offset,
            Int32(n), c + rows.lowerBound * ldc, ldc, bias.map { $0 + rows.lowerBound }, activation ? 1 : 0)
    }

    /// ``multiply(packed:m:k:rows:b:ldb:n:c:ldc:bias:activation:)`` in bf16: `b` rounded to bf16 as it is read;
    /// `packed` is the whole matrix (``packBF16(_:m:k:matrices:)``). `path`: which instructions (the best this
    /// CPU has unless a test or a measured layer choice says otherwise; a path the CPU lacks falls to the next).
    public static func multiply(
        bf16 packed: UnsafePointer<UInt32>, m: Int, k: Int, rows: Range<Int>? = nil, b: UnsafePointer<Float>,
        ldb: Int, n: Int, c: UnsafeMutablePointer<Float>, ldc: Int, bias: UnsafePointer<Float>? = nil,
        activation: Bool = false, path: BF16Path = .best
    ) {
        guard let rows = panelRows(rows, m: m, n: n) else { return }
        lookout_gemm_bf16_at(
            path.rawValue, packed, Int32(rows.lowerBound), Int32(rows.count), Int32(k), b, ldb, nil, 0, Int32(n),
            c + rows.lowerBound * ldc, ldc, bias.map { $0 + rows.lowerBound }, activation ? 1 : 0)
    }

    /// A float rounded to bfloat16 (nearest even) and back.
    public static func roundedToBF16(_ value: Float) -> Float { lookout_bf16_round(value) }

    /// A matrix `m × k` (row-major) quantised and packed for the int8 GEMM, its input quantised to `input`:
    /// weights to ±`limit` per row (127 where the CPU has VNNI, 63 where VPMADDUBSW must not saturate). Where the
    /// CPU has AMX also in its tile layout, k cut into `segments` runs (9 taps for the direct 3×3 kernel).
    public static func packInt8(
        _ a: UnsafePointer<Float>, m: Int, k: Int, input: ActivationQuantization,
        limit: Int = Int(lookout_gemm_int8_limit()), segments: Int = 1
    ) -> Int8Weights {
        var sums = [Int32](repeating: 0, count: m)
        var scales = [Float](repeating: 0, count: m)
        let packed = [UInt32](unsafeUninitializedCapacity: Int(lookout_gemm_int8_packed_count(Int32(m), Int32(k)))) {
            buffer, count in
            lookout_gemm_int8_pack(a, Int32(m), Int32(k), k, Int32(limit), buffer.baseAddress!, &scales, &sums)
            count = buffer.count
        }
        var weights = Int8Weights(
            packed: packed, weightScales: scales, scales: scales.map { $0 * input.scale },
            corrections: sums.map { $0 * input.zero }, input: input, direct: false)
        if lookout_int8_level() >= 4 && limit == 127 {
            let count = Int(lookout_gemm_int8_tiles_count(Int32(m), Int32(k), Int32(segments)))
            weights.tiles = [UInt32](unsafeUninitializedCapacity: count) { buffer, done in
                lookout_gemm_int8_tiles(packed, Int32(m), Int32(k), Int32(segments), buffer.baseAddress!)
                done = count
            }
        }
        return weights
    }

    /// Rows `rows` (whole panels of eight) of the int8 GEMM: `b` is `k × n` bytes, row stride `ldb`, quantised
    /// to `weights.input`. `level`: 4 AMX (where the weights have their tiles), 3 VNNI, 2 AVX-512BW, 1 AVX2, 0
    /// portable C;
    /// nil the best this CPU has (for tests). All give the same floats.
    public static func multiply(
        int8 weights: Int8Weights, m: Int, k: Int, rows: Range<Int>? = nil, b: UnsafePointer<UInt8>, ldb: Int, n: Int,
        c: UnsafeMutablePointer<Float>, ldc: Int, bias: UnsafePointer<Float>? = nil, activation: Bool = false,
        level: Int? = nil
    ) {
        guard let rows = panelRows(rows, m: m, n: n) else { return }
        let quads = (k + 3) / 4
        if (level ?? Int(lookout_int8_level())) >= 4 && lookout_int8_level() >= 4 && !weights.tiles.isEmpty {
            weights.tiles.withUnsafeBufferPointer { tiles in
                weights.scales.withUnsafeBufferPointer { scales in
                    weights.corrections.withUnsafeBufferPointer { corrections in
                        lookout_gemm_int8_tiled(
                            tiles.baseAddress!, Int32(rows.lowerBound), Int32(rows.count), Int32(k),
                            scales.baseAddress! + rows.lowerBound, corrections.baseAddress! + rows.lowerBound, b, ldb,
                            Int32(n), c + rows.lowerBound * ldc, ldc, bias.map { $0 + rows.lowerBound },
                            activation ? 1 : 0)
                    }
                }
            }
            return
        }
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

/// Which instructions compute a bf16 product (`gemm_bf16.c`). All round both factors to bf16 and sum the exact
/// products in fp32, each output in an order fixed by the inner dimension alone; the orders differ between paths.
public enum BF16Path: Int32, Sendable, CaseIterable {
    /// C, on any CPU (for tests).
    case portable = 0
    /// AVX-512 BF16's VDPBF16PS, register blocks of 8 × 48.
    case vector = 1
    /// AMX's TDPBF16PS, four 16 × 16 accumulator tiles (`LOOKOUT_NO_AMX` turns it off).
    case tiles = 2

    /// The fastest this CPU has.
    public static var best: BF16Path { BF16Path(rawValue: lookout_gemm_bf16_best_path()) ?? .portable }

    /// Whether this CPU has it (a path it lacks runs the next below).
    public var isAvailable: Bool {
        switch self {
        case .portable: return true
        case .vector: return lookout_gemm_bf16_available() != 0
        case .tiles: return lookout_gemm_bf16_tiles_available() != 0
        }
    }
}
