import CLookoutKernels

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Row-wise kernels on contiguous row-major float buffers. The arithmetic mirrors PyTorch's CPU
/// kernels where that decides parity (noted on each).
public enum Kernels {
    /// `y = x·Wᵀ + b` for `rows` rows: `x` is rows×inputs, `weight` outputs×inputs (a Linear layer's
    /// layout), `y` rows×outputs. OpenBLAS runs single-threaded inside; the work is split across `pool`
    /// by output columns for a handful of rows (each thread streams its own part of the weight matrix, which is
    /// what limits them), and in 128×128 tiles of the output otherwise. The bits are the same on any thread count.
    public static func linear(
        _ x: UnsafePointer<Float>, rows: Int, inputs: Int, weight: UnsafePointer<Float>, bias: UnsafePointer<Float>?,
        outputs: Int, into y: UnsafeMutablePointer<Float>, pool: ComputePool = .shared
    ) {
        let x = UnsafeSendable(x), weight = UnsafeSendable(weight), y = UnsafeSendable(y)
        let bias = bias.map(UnsafeSendable.init)
        for row in 0..<rows {
            if let bias {
                (y.pointer + row * outputs).update(from: bias.pointer, count: outputs)
            } else {
                (y.pointer + row * outputs).update(repeating: 0, count: outputs)
            }
        }
        let beta: Float = bias == nil ? 0 : 1
        if rows <= 8 {
            let chunk = max(32, (outputs + 8 * pool.threadCount - 1) / (8 * pool.threadCount))
            pool.parallelFor(outputs, chunk: chunk) { range in
                fewRowsLinear(
                    x.pointer, rows: rows, inputs: inputs, weight: weight.pointer, outputs: outputs, columns: range,
                    into: y.pointer)
            }
        } else {
            // Tiles of a fixed size, whatever the thread count: OpenBLAS's sums depend on the shape of each call
            // (its small-matrix and edge kernels), so splitting by the pool's threads would make LOOKOUT_THREADS
            // change the bits. Each call packs its columns of the weight matrix once.
            let rowTile = 128, columnTile = 128
            let rowTiles = (rows + rowTile - 1) / rowTile, columnTiles = (outputs + columnTile - 1) / columnTile
            pool.parallelFor(rowTiles * columnTiles, chunk: 1) { range in
                for tile in range {
                    let firstRow = (tile / columnTiles) * rowTile, firstColumn = (tile % columnTiles) * columnTile
                    let tileRows = min(rowTile, rows - firstRow), tileColumns = min(columnTile, outputs - firstColumn)
                    BLAS.gemm(
                        m: tileRows, n: tileColumns, k: inputs, a: x.pointer + firstRow * inputs,
                        b: weight.pointer + firstColumn * inputs, transposeB: true,
                        c: y.pointer + firstRow * outputs + firstColumn, ldc: outputs, beta: beta)
                }
            }
        }
    }

    /// `linear` for at most 8 rows with IEEE-half weights (`outputs × inputs` bit patterns), widened to
    /// Float32 as they are read: half the bytes to stream, and the values are those an fp16 checkpoint
    /// holds. Columns are split across `pool`.
    public static func linear(
        _ x: UnsafePointer<Float>, rows: Int, inputs: Int, halfWeight: UnsafePointer<UInt16>,
        bias: UnsafePointer<Float>?, outputs: Int, into y: UnsafeMutablePointer<Float>, pool: ComputePool = .shared
    ) {
        precondition(rows <= 8)
        for row in 0..<rows {
            if let bias {
                (y + row * outputs).update(from: bias, count: outputs)
            } else {
                (y + row * outputs).update(repeating: 0, count: outputs)
            }
        }
        let x = UnsafeSendable(x), weight = UnsafeSendable(halfWeight), y = UnsafeSendable(y)
        let chunk = max(32, (outputs + 8 * pool.threadCount - 1) / (8 * pool.threadCount))
        pool.parallelFor(outputs, chunk: chunk) { range in
            lookout_linear_f16_rows(
                x.pointer, Int32(rows), Int32(inputs), weight.pointer, Int32(range.lowerBound), Int32(range.upperBound),
                Int32(outputs), y.pointer)
        }
    }

    /// SiLU in place, `x / (1 + exp(−x))` (vectorised where the CPU allows).
    public static func silu(_ values: UnsafeMutablePointer<Float>, count: Int) {
        lookout_silu(values, count)
    }

    /// The head's box decode (distribution focal loss): for side `s` < 4 and anchor `i` < `count`, the expectation
    /// Σ_b b·softmax_b over rows `s·bins + b` of `box` (rows of `plane` floats, column `first + i`), into
    /// `distances[s·count + i]` (vectorised where the CPU allows, with SiLU's polynomial exp).
    public static func distributionExpectations(
        _ box: UnsafePointer<Float>, plane: Int, first: Int, count: Int, bins: Int,
        into distances: UnsafeMutablePointer<Float>
    ) {
        lookout_dfl(box, Int32(plane), Int32(first), Int32(count), Int32(bins), distances)
    }

    /// IEEE half bit patterns to Float32 (vectorised where the CPU has F16C).
    public static func halfToFloat(_ source: UnsafePointer<UInt16>, _ target: UnsafeMutablePointer<Float>, count: Int) {
        lookout_f16_to_f32(source, target, count)
    }

    /// `y[r, c] += x[r, :]·W[c, :]` for columns `columns` and at most 8 rows: every weight row is read
    /// once and dotted with all rows of `x` (which stay in cache) — for a handful of rows this is bound by
    /// reading the weights, where a packed GEMM would first copy them.
    static func fewRowsLinear(
        _ x: UnsafePointer<Float>, rows: Int, inputs: Int, weight: UnsafePointer<Float>, outputs: Int,
        columns: Range<Int>, into y: UnsafeMutablePointer<Float>
    ) {
        let vectors = inputs / 8
        for column in columns {
            let w = UnsafeRawPointer(weight + column * inputs)
            for row in 0..<rows {
                let input = UnsafeRawPointer(x + row * inputs)
                var sum0 = SIMD8<Float>(), sum1 = SIMD8<Float>()
                var index = 0
                while index + 1 < vectors {
                    sum0 +=
                        w.loadUnaligned(fromByteOffset: index * 32, as: SIMD8<Float>.self)
                        * input.loadUnaligned(fromByteOffset: index * 32, as: SIMD8<Float>.self)
                    sum1 +=
                        w.loadUnaligned(fromByteOffset: (index + 1) * 32, as: SIMD8<Float>.self)
                        * input.loadUnaligned(fromByteOffset: (index + 1) * 32, as: SIMD8<Float>.self)
                    index += 2
                }
                if index < vectors {
                    sum0 +=
                        w.loadUnaligned(fromByteOffset: index * 32, as: SIMD8<Float>.self)
                        * input.loadUnaligned(fromByteOffset: index * 32, as: SIMD8<Float>.self)
                }
                var total = (sum0 + sum1).sum()
                for k in (vectors * 8)..<inputs { total += (x + row * inputs)[k] * (weight + column * inputs)[k] }
                y[row * outputs + column] += total
            }
        }
    }

    /// LayerNorm over the last dimension (PyTorch `layer_norm_kernel.cpp`):
    /// `rstd = 1/sqrt(var + eps)`, `y = (x·rstd + (−rstd·mean))·γ + β`, biased variance.
    public static func layerNorm(
        _ x: UnsafePointer<Float>, rows: Int, width: Int, gamma: UnsafePointer<Float>, beta: UnsafePointer<Float>,
        epsilon: Float, into y: UnsafeMutablePointer<Float>
    ) {
        for row in 0..<rows {
            let input = x + row * width
            let output = y + row * width
            var sum = 0.0
            for index in 0..<width { sum += Double(input[index]) }
            let mean = sum / Double(width)
            var squares = 0.0
            for index in 0..<width {
                let centered = Double(input[index]) - mean
                squares += centered * centered
            }
            let variance = Float(squares / Double(width))
            let rstd = 1 / (variance + epsilon).squareRoot()
            let shift = -rstd * Float(mean)
            for index in 0..<width {
                output[index] = (input[index] * rstd + shift) * gamma[index] + beta[index]
            }
        }
    }

    /// QuickGELU in place: `x · sigmoid(1.702·x)`.
    public static func quickGELU(_ x: UnsafeMutablePointer<Float>, count: Int) {
        lookout_quick_gelu(x, count)
    }

    /// Exact GELU in place: `x · Φ(x)` with the error function (PyTorch's `nn.GELU()` default).
    public static func gelu(_ x: UnsafeMutablePointer<Float>, count: Int) {
        lookout_gelu(x, count)
    }

    /// GELU with the tanh approximation in place (PyTorch's `gelu(x, approximate="tanh")`, SigLIP's
    /// `gelu_pytorch_tanh`): `x/2 · (1 + tanh(√(2/π) · (x + 0.044715·x³)))`, in Float32 as PyTorch computes it.
    public static func geluTanh(_ x: UnsafeMutablePointer<Float>, count: Int) {
        let root: Float = 0.7978845608028654  // √(2/π)
        for index in 0..<count {
            let v = x[index]
            let cube = v * v * v
            let inner = root * (v + 0.044715 * cube)
            x[index] = 0.5 * v * (1 + tanhf(inner))
        }
    }

    /// `x += y` element-wise.
    public static func add(_ y: UnsafePointer<Float>, into x: UnsafeMutablePointer<Float>, count: Int) {
        for index in 0..<count { x[index] += y[index] }
    }

    /// Causal self-attention of one sequence for one head. `qkv` rows hold `[q | k | v]` of `width` each
    /// (row stride `3·width`); the head's slice starts at `head·headSize`. Writes `length` rows of
    /// `headSize` into `output` (row stride `width`). Softmax subtracts the row maximum.
    public static func causalAttentionHead(
        qkv: UnsafePointer<Float>, length: Int, width: Int, head: Int, headSize: Int, scale: Float,
        into output: UnsafeMutablePointer<Float>, scratch: UnsafeMutablePointer<Float>
    ) {
        attentionHead(
            qkv: qkv, length: length, width: width, head: head, headSize: headSize, scale: scale, causal: true,
            into: output, scratch: scratch)
    }

    /// Softmax of each of `count` rows of `length` values, in place: `exp(x − max)`, times the inverse of
    /// their sum.
    public static func softmaxRows(_ rows: UnsafeMutablePointer<Float>, count: Int, length: Int) {
        for i in 0..<count {
            let row = rows + i * length
            var maximum = -Float.infinity
            for j in 0..<length { maximum = max(maximum, row[j]) }
            var total: Float = 0
            for j in 0..<length {
                let e = expf(row[j] - maximum)
                row[j] = e
                total += e
            }
            let inverse = 1 / total
            for j in 0..<length { row[j] *= inverse }
        }
    }

    /// One head of scaled dot-product attention over `length` rows of packed q, k, v (`3 × width` per row):
    /// causal (row i attends to rows 0…i, the text tower) or full (every row, the image tower). `scratch`
    /// holds at least `length` floats when causal, `length²` when full.
    ///
    /// Full attention runs its two products through OpenBLAS (scores `Q·Kᵀ`, then `P·V`) with a row
    /// softmax between; the causal path stays a per-row loop (a handful of tokens per query).
    public static func attentionHead(
        qkv: UnsafePointer<Float>, length: Int, width: Int, head: Int, headSize: Int, scale: Float, causal: Bool,
        into output: UnsafeMutablePointer<Float>, scratch: UnsafeMutablePointer<Float>
    ) {
        let stride = 3 * width
        let q = qkv + head * headSize
        let k = qkv + width + head * headSize
        let v = qkv + 2 * width + head * headSize
        if !causal {
            BLAS.gemm(
                m: length, n: length, k: headSize, a: q, b: k, transposeB: true, c: scratch, lda: stride, ldb: stride,
                ldc: length, alpha: scale)
            softmaxRows(scratch, count: length, length: length)
            BLAS.gemm(
                m: length, n: headSize, k: length, a: scratch, b: v, c: output + head * headSize, lda: length,
                ldb: stride, ldc: width)
            return
        }
        for i in 0..<length {
            let query = q + i * stride
            var maximum = -Float.infinity
            let last = causal ? i : length - 1
            for j in 0...last {
                let key = k + j * stride
                var dot: Float = 0
                for d in 0..<headSize { dot += query[d] * key[d] }
                let score = dot * scale
                scratch[j] = score
                maximum = max(maximum, score)
            }
            var total: Float = 0
            for j in 0...last {
                let e = expf(scratch[j] - maximum)
                scratch[j] = e
                total += e
            }
            let out = output + i * width + head * headSize
            for d in 0..<headSize { out[d] = 0 }
            for j in 0...last {
                let weight = scratch[j] / total
                let value = v + j * stride
                for d in 0..<headSize { out[d] += weight * value[d] }
            }
        }
    }
}

/// A pointer handed to pool workers. The caller guarantees the memory outlives the parallel loop and
/// that workers write disjoint parts.
public struct UnsafeSendable<Pointer>: @unchecked Sendable {
    public let pointer: Pointer
    public init(_ pointer: Pointer) { self.pointer = pointer }
}

/// A Linear layer's weight packed once, at load, for Lookout's own GEMM kernel (`lookout_packed_linear`):
/// panels of 16 output columns, each the inputs × 16 block that a register tile of the output multiplies.
/// OpenBLAS copies the weight matrix into its layout on every call; for the few dozen rows of one photo in
/// the CLIP image tower that copy cost as much as the products. Weights stored as IEEE halves (OpenAI's
/// checkpoints) stay halves, widened exactly as they are read: half the bytes to stream from memory, which
/// bounds a single photo's time on the image tower.
public struct PackedLinear: Sendable {
    public let inputs: Int
    public let outputs: Int
    let floats: [Float]?
    let halves: [UInt16]?
    /// The weight in bf16 pairs (``ConvolutionGEMM/packBF16(_:m:k:matrices:)``, `outputs × inputs`) when the
    /// layer runs in bf16, and its bias unpadded.
    let bf16: [UInt32]?
    let bias: [Float]?
    let plainBias: [Float]?

    /// `weight` is `outputs × inputs` (PyTorch's layout), `bias` has `outputs` values.
    public init(weight: [Float], bias: [Float]?, inputs: Int, outputs: Int) {
        precondition(weight.count == inputs * outputs && (bias?.count ?? outputs) == outputs)
        var packed = [Float](repeating: 0, count: Self.paddedCount(inputs, outputs))
        weight.withUnsafeBufferPointer { w in
            packed.withUnsafeMutableBufferPointer { p in
                lookout_pack_linear(w.baseAddress!, Int32(inputs), Int32(outputs), p.baseAddress!)
            }
        }
        (self.inputs, self.outputs, floats, halves, bf16, plainBias) = (inputs, outputs, packed, nil, nil, nil)
        self.bias = bias.map { Self.padded($0) }
    }

    /// In bf16 (where the CPU has AVX-512 BF16; otherwise as ``init(weight:bias:inputs:outputs:)``): the
    /// weight rounded to bf16 at load, each input rounded as it is read, products summed in fp32
    /// (``ConvolutionGEMM/multiply(bf16:m:k:rows:b:ldb:n:c:ldc:bias:activation:portable:)`` on the transposed
    /// rows).
    public init(bf16Weight weight: [Float], bias: [Float]?, inputs: Int, outputs: Int) {
        guard Precision.bf16.isNative else {
            self = PackedLinear(weight: weight, bias: bias, inputs: inputs, outputs: outputs)
            return
        }
        precondition(weight.count == inputs * outputs && (bias?.count ?? outputs) == outputs)
        let packed = weight.withUnsafeBufferPointer { ConvolutionGEMM.packBF16($0.baseAddress!, m: outputs, k: inputs) }
        self = PackedLinear(inputs: inputs, outputs: outputs, bf16: packed, bias: bias)
    }

    private init(inputs: Int, outputs: Int, bf16: [UInt32], bias: [Float]?) {
        (self.inputs, self.outputs, floats, halves, self.bf16) = (inputs, outputs, nil, nil, bf16)
        (self.bias, plainBias) = (nil, bias)
    }

    /// `halfWeight` holds the IEEE-half bit patterns of an `outputs × inputs` weight.
    public init(halfWeight: [UInt16], bias: [Float]?, inputs: Int, outputs: Int) {
        precondition(halfWeight.count == inputs * outputs && (bias?.count ?? outputs) == outputs)
        var packed = [UInt16](repeating: 0, count: Self.paddedCount(inputs, outputs))
        halfWeight.withUnsafeBufferPointer { w in
            packed.withUnsafeMutableBufferPointer { p in
                lookout_pack_linear_f16(w.baseAddress!, Int32(inputs), Int32(outputs), p.baseAddress!)
            }
        }
        (self.inputs, self.outputs, floats, halves, bf16, plainBias) = (inputs, outputs, nil, packed, nil, nil)
        self.bias = bias.map { Self.padded($0) }
    }

    /// Whether the layer runs in bf16.
    public var isBF16: Bool { bf16 != nil }

    /// The weight, `outputs × inputs`, unpacked from its fp32 or fp16 storage (what a GPU backend computes with);
    /// nil for bf16.
    public var denseWeight: [Float]? {
        var dense = [Float](repeating: 0, count: outputs * inputs)
        if let floats {
            for c in 0..<outputs {
                let panel = (c / 16) * inputs * 16
                for k in 0..<inputs { dense[c * inputs + k] = floats[panel + k * 16 + c % 16] }
            }
        } else if let halves {
            var values = [Float](repeating: 0, count: halves.count)
            halves.withUnsafeBufferPointer { h in
                values.withUnsafeMutableBufferPointer {
                    Kernels.halfToFloat(h.baseAddress!, $0.baseAddress!, count: h.count)
                }
            }
            for c in 0..<outputs {
                let panel = (c / 16) * inputs * 16
                for k in 0..<inputs { dense[c * inputs + k] = values[panel + k * 16 + c % 16] }
            }
        } else {
            return nil
        }
        return dense
    }

    /// The bias, `outputs` values, or nil.
    public var denseBias: [Float]? { (plainBias ?? bias).map { Array($0.prefix(outputs)) } }

    /// The address of the weights' storage, which names them while the layer (holding it) lives: a GPU backend's
    /// cache key (it keeps the layer with what it copied, so the address cannot come back naming others).
    public var storageAddress: UInt {
        if let floats { return floats.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } }
        if let halves { return halves.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } }
        return bf16?.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } ?? 0
    }

    /// The code the kernel runs: 1 portable C, 2 AVX2, 3 AVX-512; 0 (the default) the best this CPU has.
    /// Returns the level in force (a level the CPU lacks gives the best it has). For tests, process-wide.
    @discardableResult
    public static func setLevel(_ level: Int) -> Int { Int(lookout_packed_linear_level(Int32(level))) }

    private static func paddedCount(_ inputs: Int, _ outputs: Int) -> Int { (outputs + 15) / 16 * 16 * inputs }
    private static func padded(_ bias: [Float]) -> [Float] {
        bias + [Float](repeating: 0, count: (bias.count + 15) / 16 * 16 - bias.count)
    }

    /// `y = x · Wᵀ + bias` for `rows` rows of `x` (`rows × inputs` into `rows × outputs`), the output
    /// columns shared among the pool's threads (in pairs of panels, the AVX-512 tile's width).
    public func apply(
        _ x: UnsafePointer<Float>, rows: Int, into y: UnsafeMutablePointer<Float>, pool: ComputePool = .shared
    ) {
        guard rows > 0 else { return }
        if let bf16 {
            applyBF16(bf16, x, rows: rows, into: y, pool: pool)
            return
        }
        let pairs = (outputs + 31) / 32
        let panels = (outputs + 15) / 16
        let x = UnsafeSendable(x), y = UnsafeSendable(y)
        let (inputs, outputs) = (Int32(self.inputs), Int32(self.outputs))
        let run = { (weights: UnsafeRawPointer, half: Int32, bias: UnsafePointer<Float>?) in
            let weights = UnsafeSendable(weights), bias = bias.map(UnsafeSendable.init)
            let chunk = max(1, (pairs + 2 * pool.threadCount - 1) / (2 * pool.threadCount))
            pool.parallelFor(pairs, chunk: chunk) { range in
                lookout_packed_linear(
                    x.pointer, Int32(rows), inputs, weights.pointer, half, bias?.pointer, Int32(2 * range.lowerBound),
                    Int32(min(panels, 2 * range.upperBound)), outputs, y.pointer)
            }
        }
        func withBias(_ body: (UnsafePointer<Float>?) -> Void) {
            if let bias { bias.withUnsafeBufferPointer { body($0.baseAddress!) } } else { body(nil) }
        }
        if let halves {
            halves.withUnsafeBytes { w in withBias { run(w.baseAddress!, 1, $0) } }
        } else {
            floats!.withUnsafeBytes { w in withBias { run(w.baseAddress!, 0, $0) } }
        }
    }

    /// `yᵀ = W · xᵀ` through the bf16 GEMM: the rows transposed in, the outputs' panels shared among the pool's
    /// threads, transposed back.
    private func applyBF16(
        _ packed: [UInt32], _ x: UnsafePointer<Float>, rows: Int, into y: UnsafeMutablePointer<Float>,
        pool: ComputePool
    ) {
        let (inputs, outputs) = (self.inputs, self.outputs)
        let xT = UnsafeMutablePointer<Float>.allocate(capacity: inputs * rows)
        let yT = UnsafeMutablePointer<Float>.allocate(capacity: outputs * rows)
        defer {
            xT.deallocate()
            yT.deallocate()
        }
        for r in 0..<rows {
            for i in 0..<inputs { xT[i * rows + r] = x[r * inputs + i] }
        }
        let panels = (outputs + 7) / 8
        let chunk = max(1, (panels + 2 * pool.threadCount - 1) / (2 * pool.threadCount))
        let (b, c) = (UnsafeSendable(xT), UnsafeSendable(yT))
        packed.withUnsafeBufferPointer { a in
            let a = UnsafeSendable(UnsafeMutablePointer(mutating: a.baseAddress!))
            func run(_ bias: UnsafePointer<Float>?) {
                let bias = bias.map { UnsafeSendable(UnsafeMutablePointer(mutating: $0)) }
                pool.parallelFor(panels, chunk: chunk) { range in
                    ConvolutionGEMM.multiply(
                        bf16: a.pointer, m: outputs, k: inputs,
                        rows: (8 * range.lowerBound)..<min(outputs, 8 * range.upperBound), b: b.pointer, ldb: rows,
                        n: rows, c: c.pointer, ldc: rows, bias: bias.map { UnsafePointer($0.pointer) })
                }
            }
            if let plainBias { plainBias.withUnsafeBufferPointer { run($0.baseAddress!) } } else { run(nil) }
        }
        for r in 0..<rows {
            for o in 0..<outputs { y[r * outputs + o] = yT[o * rows + r] }
        }
    }
}
