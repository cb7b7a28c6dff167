import CLookoutKernels

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Convolutions in int8: the input map quantised to u8 once (``ActivationQuantization``, from the range
/// calibration recorded), lowered in bytes (1×1 stride-1: the map itself), multiplied by the weights quantised
/// per output channel (``ConvolutionGEMM/packInt8(_:m:k:input:limit:)``) with exact integer sums, dequantised
/// with bias and SiLU in the GEMM's epilogue. Convolutions without a recorded range or with fewer than 16
/// inputs (the stem's first), and — unless `winograd` is false — stride-1 3×3 ones with at least twice as many
/// inputs as outputs (the head's first convolutions: there Winograd in bf16 measured faster than int8 lowered,
/// BENCHMARKS.md "int8"), go to `fallback`.
public struct Int8Convolution: ConvolutionKernel {
    let fallback: any ConvolutionKernel
    let winograd: Bool

    public init(fallback: any ConvolutionKernel, winograd: Bool) {
        self.fallback = fallback
        self.winograd = winograd
    }

    func applies(_ w: ConvolutionWeights) -> Bool {
        w.inputRange != nil && w.inputs >= 16
            && !(winograd && w.kernel == 3 && w.stride == 1 && w.inputs >= 2 * w.outputs
                && WinogradConvolution.available)
    }

    public func prepare(_ weights: ConvolutionWeights) -> ConvolutionWeights {
        guard applies(weights), let range = weights.inputRange else { return fallback.prepare(weights) }
        var prepared = weights
        let depth = weights.inputs * weights.kernel * weights.kernel
        prepared.int8 = weights.weight.withUnsafeBufferPointer {
            ConvolutionGEMM.packInt8(
                $0.baseAddress!, m: weights.outputs, k: depth, input: ActivationQuantization(range: range))
        }
        prepared.weight = []  // one copy: the quantised one (``ConvolutionWeights/denseWeight`` reads it back)
        return prepared
    }

    public func convolve(_ x: FeatureMap, _ w: ConvolutionWeights, pool: ComputePool) -> FeatureMap {
        guard let int8 = w.int8 else { return fallback.convolve(x, w, pool: pool) }
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
        x.data.withUnsafeBufferPointer { source in
            let source = UnsafeSendable(UnsafeMutablePointer(mutating: source.baseAddress!))
            let chunk = max(1, inputs / (4 * pool.threadCount))
            pool.parallelFor(inputs, chunk: chunk) { range in
                int8.input.quantize(
                    source.pointer + range.lowerBound * pixels, count: range.count * pixels,
                    into: quantized.pointer + range.lowerBound * pixels)
            }
        }
        let pointwise = kernel == 1 && stride == 1
        let wanted = 4 * pool.threadCount
        var tile = pointwise ? 384 : LoweredConvolution.tileColumns
        let balanced = ((columns + wanted - 1) / wanted + 47) / 48 * 48
        tile = max(48, min(tile, balanced))
        let tiles = (columns + tile - 1) / tile
        let panels = (outputs + 7) / 8
        let groups = pointwise ? max(1, min(panels, wanted / tiles)) : 1
        let panelsPerGroup = (panels + groups - 1) / groups
        let zero = UInt8(int8.input.zero)
        w.bias.withUnsafeBufferPointer { bias in
            out.data.withUnsafeMutableBufferPointer { c in
                let bias = UnsafeSendable(UnsafeMutablePointer(mutating: bias.baseAddress!))
                let c = UnsafeSendable(c.baseAddress!)
                pool.parallelFor(tiles * groups, chunk: 1) { range in
                    let buffer = pointwise ? nil : UnsafeMutablePointer<UInt8>.allocate(capacity: depth * tile)
                    defer { buffer?.deallocate() }
                    for task in range {
                        let (t, group) = (task / groups, task % groups)
                        let p0 = t * tile
                        let n = min(tile, columns - p0)
                        let rows =
                            min(outputs, group * panelsPerGroup * 8)..<min(outputs, (group + 1) * panelsPerGroup * 8)
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
                            ldc: columns, bias: bias.pointer, activation: w.activation)
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
