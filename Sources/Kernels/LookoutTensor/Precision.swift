import CLookoutKernels

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The arithmetic convolutions run in. fp32: exact to the reference. bf16: weights and activations rounded to
/// bfloat16, products summed in fp32 (AVX-512 BF16's VDPBF16PS), about twice the multiply rate. int8: weights
/// quantised per output channel, each convolution's input per map with the range calibration recorded
/// (``ActivationRanges``), exact integer sums (AMX, AVX-512 VNNI's VPDPBUSD, or VPMADDUBSW of AVX-512BW or AVX2).
public enum Precision: String, Sendable, CaseIterable {
    case fp32
    case bf16
    case int8

    /// Whether this CPU runs `self` natively (bf16: AVX512_BF16, and not turned off by LOOKOUT_NO_BF16; int8:
    /// AVX-512 VNNI with 8-bit weights, or AVX-512BW or AVX2 with 7-bit ones, ``Int8Convolution/bestLevel``).
    public var isNative: Bool {
        switch self {
        case .fp32: return true
        case .bf16: return lookout_gemm_bf16_available() != 0 && ConvolutionGEMM.available
        case .int8: return lookout_int8_level() >= 1
        }
    }
}

extension Precision {
    /// Whether this CPU has AMX (tile products in bf16 and int8) and the kernel supports its tile state.
    /// bf16's products use it (``BF16Path/tiles``) unless `LOOKOUT_NO_AMX` is set.
    public static var amxUsable: Bool { lookout_amx_usable() != 0 }
}
