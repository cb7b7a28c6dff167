import CLookoutKernels

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Convolutions in int8: each input map quantised to u8 once (``ActivationQuantization``, from the range
/// calibration recorded), multiplied by the weights quantised per output channel
/// (``ConvolutionGEMM/packInt8(_:m:k:input:limit:)``) with exact integer sums, dequantised with bias and SiLU in
/// the epilogue. 3×3 convolutions of stride 1 and 2 read a blocked, padded copy of the map directly (no im2col;
/// measured faster than Winograd in bf16 on every stride-1 layer of s, and than lowering on the stride-2 ones,
/// BENCHMARKS.md "int8"); 1×1 stride-1 ones multiply the map itself; others are lowered in bytes. Convolutions
/// without a recorded range, or with fewer than 16 inputs,
/// go to `fallback`.
public struct Int8Convolution: ConvolutionKernel {
    let fallback: any ConvolutionKernel
    let weightLimit: Int

    /// `weightLimit`: the weights' range, ±127 where the CPU has VNNI, ±63 where VPMADDUBSW (AVX-512BW or AVX2)
    /// must not saturate (tests give 63 to run every path on the same weights).
    public init(fallback: any ConvolutionKernel, weightLimit: Int = Int(lookout_gemm_int8_limit())) {
        self.fallback = fallback
        self.weightLimit = weightLimit
    }

    /// The name of int8 path `level` (``bestLevel``'s numbers), as `lookout devices` and the CPU report print it.
    public static func pathName(_ level: Int) -> String {
        switch level {
        case 4...: return "AMX"
        case 3: return "AVX-512 VNNI"
        case 2: return "AVX-512BW VPMADDUBSW"
        case 1: return "AVX2 VPMADDUBSW"
        default: return "portable C"
        }
    }

    /// The weights' width this CPU's int8 path uses: 8 bits with VNNI, 7 without.
    public static var weightBits: Int { lookout_gemm_int8_limit() == 127 ? 8 : 7 }

    /// The fastest int8 path this CPU has: 4 AMX tiles, 3 AVX-512 VNNI, 2 AVX-512BW, 1 AVX2, 0 portable C (the
    /// same integers on each; `LOOKOUT_NO_AMX`, `LOOKOUT_NO_VNNI`, `LOOKOUT_NO_AVX512` and `LOOKOUT_NO_AVX2` take
    /// one away).
    public static var bestLevel: Int { Int(lookout_int8_level()) }

    /// The stem's first convolution (3 inputs: 27 products per output) stays fp32: with VPMADDUBSW's 7-bit weights
    /// it moved boxes by more than the 0.9 IoU allowed (0.893), and it is 1% of the time.
    func applies(_ w: ConvolutionWeights) -> Bool { w.inputRange != nil && w.inputs >= 16 }

    public func prepare(_ weights: ConvolutionWeights) -> ConvolutionWeights {
        guard applies(weights), let range = weights.inputRange else { return fallback.prepare(weights) }
        var prepared = weights
        let depth = weights.inputs * weights.kernel * weights.kernel
        let input = ActivationQuantization(range: range)
        if weights.kernel == 3 && weights.stride <= 2 {
            let ordered = Self.directOrder(weights.weight, inputs: weights.inputs, outputs: weights.outputs)
            prepared.int8 = ordered.withUnsafeBufferPointer {
                ConvolutionGEMM.packInt8(
                    $0.baseAddress!, m: weights.outputs, k: 36 * ((weights.inputs + 3) / 4), input: input,
                    limit: weightLimit, segments: 9)
            }
            prepared.int8?.direct = true
        } else {
            prepared.int8 = weights.weight.withUnsafeBufferPointer {
                ConvolutionGEMM.packInt8(
                    $0.baseAddress!, m: weights.outputs, k: depth, input: input, limit: weightLimit)
            }
        }
        prepared.weight = []  // one copy: the quantised one (``ConvolutionWeights/denseWeight`` reads it back)
        return prepared
    }

    /// 3×3 weights `outputs × inputs × 3 × 3` → `outputs × 36·ceil(inputs/4)`, column `(t·Q + q)·4 + j` holding
    /// input `4q + j` at tap `t` (0 beyond the inputs): the direct kernel's order.
    public static func directOrder(_ weight: [Float], inputs: Int, outputs: Int) -> [Float] {
        let quads = (inputs + 3) / 4
        var ordered = [Float](repeating: 0, count: outputs * 36 * quads)
        for o in 0..<outputs {
            for c in 0..<inputs {
                for t in 0..<9 {
                    ordered[o * 36 * quads + (t * quads + c / 4) * 4 + c % 4] = weight[(o * inputs + c) * 9 + t]
                }
            }
        }
        return ordered
    }

    /// The inverse of ``directOrder(_:inputs:outputs:)``.
    public static func standardOrder(_ ordered: [Float], inputs: Int, outputs: Int) -> [Float] {
        let quads = (inputs + 3) / 4
        var weight = [Float](repeating: 0, count: outputs * inputs * 9)
        for o in 0..<outputs {
            for c in 0..<inputs {
                for t in 0..<9 {
                    weight[(o * inputs + c) * 9 + t] = ordered[o * 36 * quads + (t * quads + c / 4) * 4 + c % 4]
                }
            }
        }
        return weight
    }

    /// `level`: the int8 path (4 AMX, 3 VNNI, 2 AVX-512BW, 1 AVX2, 0 portable; nil the best this CPU has), for
    /// tests.
    public func convolve(_ x: FeatureMap, _ w: ConvolutionWeights, pool: ComputePool) -> FeatureMap {
        convolve(StackedMaps(x), w, pool: pool, level: nil)
    }

    /// The parts are quantised where they lie (the direct 3×3 kernel reads one part so; more are joined first).
    public func convolve(_ x: StackedMaps, _ w: ConvolutionWeights, pool: ComputePool) -> FeatureMap {
        convolve(x, w, pool: pool, level: nil)
    }

    public func convolve(_ x: FeatureMap, _ w: ConvolutionWeights, pool: ComputePool, level: Int?) -> FeatureMap {
        convolve(StackedMaps(x), w, pool: pool, level: level)
    }

    public func convolve(_ x: StackedMaps, _ w: ConvolutionWeights, pool: ComputePool, level: Int?) -> FeatureMap {
        guard let int8 = w.int8 else { return fallback.convolve(x, w, pool: pool) }
        if int8.direct {
            let single = x.parts.count == 1 ? x : StackedMaps(x.joined())
            return convolveDirect(single, w, int8, pool: pool, level: level)
        }
        precondition(x.channels == w.inputs, "convolution expects \(w.inputs) channels, got \(x.channels)")
        let (inputs, outputs, kernel, stride) = (w.inputs, w.outputs, w.kernel, w.stride)
        let (outHeight, outWidth) = w.outputSize(height: x.height, width: x.width)
        let columns = outHeight * outWidth
        let depth = inputs * kernel * kernel
        let pixels = x.height * x.width
        var out = FeatureMap(unfilledChannels: outputs, height: outHeight, width: outWidth)
        let profileStart = LoweredConvolution.profiling ? LoweredConvolution.clock() : 0
        defer {
            if LoweredConvolution.profiling {
                LoweredConvolution.report(w, height: outHeight, width: outWidth, since: profileStart, note: " (int8)")
            }
        }
        let bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: inputs * pixels)
        defer { bytes.deallocate() }
        let quantized = UnsafeSendable(bytes)
        // Each part's channels quantised into their place in the stack: the input's rows.
        x.withParts { bases in
            let bases = bases.map { UnsafeSendable(UnsafeMutablePointer(mutating: $0)) }
            let chunk = max(1, inputs / (4 * pool.threadCount))
            pool.parallelFor(inputs, chunk: chunk) { range in
                x.forEachRun(in: range) { part, local, channel, count in
                    int8.input.quantize(
                        bases[part].pointer + local * pixels, count: count * pixels,
                        into: quantized.pointer + channel * pixels, level: level)
                }
            }
        }
        let pointwise = kernel == 1 && stride == 1
        let split = PackedSplit(columns: columns, outputs: outputs, pointwise: pointwise, pool: pool)
        let tile = split.tile
        let zero = UInt8(int8.input.zero)
        w.bias.withUnsafeBufferPointer { bias in
            out.data.withUnsafeMutableBufferPointer { c in
                let bias = UnsafeSendable(UnsafeMutablePointer(mutating: bias.baseAddress!))
                let c = UnsafeSendable(c.baseAddress!)
                pool.parallelFor(split.count, chunk: 1) { range in
                    let buffer = pointwise ? nil : UnsafeMutablePointer<UInt8>.allocate(capacity: depth * tile)
                    defer { buffer?.deallocate() }
                    for task in range {
                        let (p0, n, rows) = split.task(task)
                        let b: UnsafePointer<UInt8>, ldb: Int
                        if let buffer {
                            LoweredConvolution.lower(
                                UnsafePointer(quantized.pointer), channels: inputs, height: x.height, width: x.width,
                                kernel: kernel, stride: stride, padding: kernel / 2, outWidth: outWidth, first: p0,
                                count: n, zero: zero, into: buffer)
                            (b, ldb) = (UnsafePointer(buffer), n)
                        } else {
                            (b, ldb) = (UnsafePointer(quantized.pointer + p0), pixels)
                        }
                        ConvolutionGEMM.multiply(
                            int8: int8, m: outputs, k: depth, rows: rows, b: b, ldb: ldb, n: n, c: c.pointer + p0,
                            ldc: columns, bias: bias.pointer, activation: w.activation, level: level)
                    }
                }
            }
        }
        return out
    }
}

extension Int8Convolution {
    /// 3×3 of stride 1 or 2 (`x` one part): the input quantised once into the blocked, padded map (for stride 2 in
    /// four phase planes), then output rows × panels of eight outputs straight from it (`lookout_conv3x3_int8`).
    func convolveDirect(
        _ x: StackedMaps, _ w: ConvolutionWeights, _ int8: Int8Weights, pool: ComputePool, level: Int?
    )
        -> FeatureMap
    {
        precondition(x.channels == w.inputs, "convolution expects \(w.inputs) channels, got \(x.channels)")
        let (height, width, inputs, outputs, stride) = (x.height, x.width, w.inputs, w.outputs, w.stride)
        let (outHeight, outWidth) = w.outputSize(height: height, width: width)
        var out = FeatureMap(unfilledChannels: outputs, height: outHeight, width: outWidth)
        let profileStart = LoweredConvolution.profiling ? LoweredConvolution.clock() : 0
        defer {
            if LoweredConvolution.profiling {
                LoweredConvolution.report(
                    w, height: outHeight, width: outWidth, since: profileStart, note: " (int8 direct)")
            }
        }
        let quads = (inputs + 3) / 4
        let blocked = UnsafeMutablePointer<UInt8>.allocate(
            capacity: lookout_int8_blocked_count(Int32(inputs), Int32(height), Int32(width)))
        defer { blocked.deallocate() }
        let map = UnsafeSendable(blocked)
        let chosen = Int32(level ?? Int(lookout_int8_level()))
        x.withParts { bases in
            let source = UnsafeSendable(UnsafeMutablePointer(mutating: bases[0]))
            pool.parallelFor(quads, chunk: max(1, quads / (4 * pool.threadCount))) { range in
                lookout_quantize_u8_blocked_at(
                    chosen, source.pointer, Int32(inputs), Int32(height), Int32(width), Int32(stride),
                    1 / int8.input.scale,
                    int8.input.zero,
                    Int32(range.lowerBound), Int32(range.upperBound), map.pointer)
            }
        }
        // Tasks: bands of output rows × groups of panels, about four per thread.
        let panels = (outputs + 7) / 8
        let wanted = 4 * pool.threadCount
        let bands = min(outHeight, wanted)
        let groups = max(1, min(panels, (wanted + bands - 1) / bands))
        // AMX computes rows in groups of 16: groups of whole pairs of panels, so that none is computed twice.
        let perGroup = (panels + groups - 1) / groups
        let panelsPerGroup = lookout_int8_level() >= 4 && !int8.tiles.isEmpty ? (perGroup + 1) / 2 * 2 : perGroup
        int8.packed.withUnsafeBufferPointer { packed in
            int8.tiles.withUnsafeBufferPointer { tiles in
                int8.scales.withUnsafeBufferPointer { scales in
                    int8.corrections.withUnsafeBufferPointer { corrections in
                        w.bias.withUnsafeBufferPointer { bias in
                            out.data.withUnsafeMutableBufferPointer { y in
                                let packed = UnsafeSendable(UnsafeMutablePointer(mutating: packed.baseAddress!))
                                let tiles = UnsafeSendable(
                                    tiles.isEmpty ? nil : UnsafeMutablePointer(mutating: tiles.baseAddress!))
                                let scales = UnsafeSendable(UnsafeMutablePointer(mutating: scales.baseAddress!))
                                let corrections = UnsafeSendable(
                                    UnsafeMutablePointer(mutating: corrections.baseAddress!))
                                let bias = UnsafeSendable(UnsafeMutablePointer(mutating: bias.baseAddress!))
                                let y = UnsafeSendable(y.baseAddress!)
                                pool.parallelFor(bands * groups, chunk: 1) { range in
                                    for task in range {
                                        let (band, group) = (task / groups, task % groups)
                                        let rows = (band * outHeight / bands)..<((band + 1) * outHeight / bands)
                                        let first = group * panelsPerGroup, last = min(panels, first + panelsPerGroup)
                                        guard !rows.isEmpty && first < last else { continue }
                                        lookout_conv3x3_int8(
                                            chosen, packed.pointer, tiles.pointer, scales.pointer, corrections.pointer,
                                            Int32(outputs),
                                            Int32(inputs), map.pointer, Int32(height), Int32(width), Int32(stride),
                                            Int32(rows.lowerBound), Int32(rows.upperBound), Int32(first), Int32(last),
                                            y.pointer, bias.pointer, w.activation ? 1 : 0)
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
}

/// Records the range of every convolution's input while a model runs (`lookout models calibrate`); safe to
/// share between threads.
public final class ActivationRecorder: @unchecked Sendable, Equatable {
    private var lock = pthread_mutex_t()
    private var seen: [String: ClosedRange<Float>] = [:]
    private var count = 0

    public init() { pthread_mutex_init(&lock, nil) }
    deinit { pthread_mutex_destroy(&lock) }

    public static func == (a: ActivationRecorder, b: ActivationRecorder) -> Bool { a === b }

    /// Widens `name`'s range to hold `values` (non-finite values ignored).
    public func record(_ name: String, _ values: UnsafeBufferPointer<Float>) {
        var low = Float.infinity, high = -Float.infinity
        for value in values where value.isFinite {
            low = min(low, value)
            high = max(high, value)
        }
        guard low <= high else { return }
        pthread_mutex_lock(&lock)
        defer { pthread_mutex_unlock(&lock) }
        if let old = seen[name] {
            seen[name] = min(old.lowerBound, low)...max(old.upperBound, high)
        } else {
            seen[name] = low...high
        }
    }

    /// Counts one image run.
    public func finishedImage() {
        pthread_mutex_lock(&lock)
        count += 1
        pthread_mutex_unlock(&lock)
    }

    /// Each name's range so far, and how many images were run.
    public var recorded: (ranges: [String: ClosedRange<Float>], images: Int) {
        pthread_mutex_lock(&lock)
        defer { pthread_mutex_unlock(&lock) }
        return (seen, count)
    }
}

/// A kernel that records its input's range under `name` before running `inner`.
public struct ObservedConvolution: ConvolutionKernel {
    let inner: any ConvolutionKernel
    let name: String
    let recorder: ActivationRecorder

    public init(_ inner: any ConvolutionKernel, name: String, recorder: ActivationRecorder) {
        self.inner = inner
        self.name = name
        self.recorder = recorder
    }

    public func prepare(_ weights: ConvolutionWeights) -> ConvolutionWeights { inner.prepare(weights) }

    public func convolve(_ x: FeatureMap, _ w: ConvolutionWeights, pool: ComputePool) -> FeatureMap {
        x.data.withUnsafeBufferPointer { recorder.record(name, $0) }
        return inner.convolve(x, w, pool: pool)
    }
}
