import CLookoutKernels

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

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

    /// `count` values of `x` → bytes, through the int8 path `level` (``Int8Convolution/bestLevel``'s numbers; nil
    /// the best this CPU has): the same bytes on each.
    public func quantize(
        _ x: UnsafePointer<Float>, count: Int, into out: UnsafeMutablePointer<UInt8>, level: Int? = nil
    ) {
        lookout_quantize_u8_at(Int32(level ?? Int(lookout_int8_level())), x, count, 1 / scale, zero, out)
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
    /// The same weights in AMX's tile layout (``ConvolutionGEMM/packInt8(_:m:k:input:limit:segments:)`` makes them
    /// where the CPU has AMX), or empty.
    public var tiles: [UInt32] = []

    /// The quantised weights as floats, `m × k`.
    public func dequantised(m: Int, k: Int) -> [Float] {
        [Float](unsafeUninitializedCapacity: m * k) { buffer, count in
            lookout_gemm_int8_unpack(packed, weightScales, Int32(m), Int32(k), buffer.baseAddress!)
            count = m * k
        }
    }
}
