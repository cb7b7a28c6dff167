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
    /// The GEMM's A operand packed for ``ConvolutionGEMM`` (the weights as `outputs × inputs·k·k`, or for
    /// Winograd the 36 transformed matrices one after another), or empty: the kernels then use OpenBLAS.
    public var packed: [Float] = []
    /// The same operand in bf16 (``ConvolutionGEMM/packBF16(_:m:k:matrices:)``) when the kernel runs in bf16,
    /// or empty.
    public var packedBF16: [UInt32] = []
    /// The instructions that multiply `packedBF16` (the kernel's, set by its `prepare`).
    public var bf16Path: BF16Path = .best
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
    /// What models use by default: Winograd F(4×4, 3×3) for stride-1 3×3 convolutions where the CPU has
    /// AVX2/FMA, the lowered GEMM for the rest (``KernelSettings/environment``: `LOOKOUT_CONVOLUTION=lowered`
    /// runs every layer lowered, for comparisons).
    public static let `default`: any ConvolutionKernel = kernel(precision: .fp32)

    /// The kernels of a precision (bf16 where the packed GEMM runs, int8 from AVX2 up; fp32 otherwise) under
    /// `settings`; bf16's and int8's measured per layer against fp32's (``TunedConvolution``) unless
    /// ``KernelSettings/measureLayers`` is off. int8: every convolution with a calibrated input range in int8
    /// (``Int8Convolution``), the others in fp32.
    public static func kernel(precision: Precision, settings: KernelSettings = .environment) -> any ConvolutionKernel {
        // int8 has its own kernels down to AVX2; bf16 needs the packed GEMM (AVX-512).
        let precision =
            precision == .int8
            ? (Precision.int8.isNative ? .int8 : .fp32)
            : ConvolutionGEMM.available ? precision : .fp32
        func plain(_ precision: Precision, _ path: BF16Path = .best) -> any ConvolutionKernel {
            settings.convolution == .lowered
                ? LoweredConvolution(precision: precision, bf16Path: path)
                : WinogradConvolution(precision: precision, bf16Path: path)
        }
        if precision == .int8 {
            let int8 = Int8Convolution(fallback: plain(.fp32))
            // int8 against fp32 per layer: on an AMD EPYC with AVX2 only, VPMADDUBSW's int8 beat fp32 on the 1×1
            // and stride-2 layers of s and lost to fp32's Winograd on several stride-1 3×3 ones (BENCHMARKS.md,
            // "int8 on AVX2"). AMX's tiles, like bf16's, against fp32 at a 20 % margin.
            guard settings.measureLayers else { return int8 }
            return TunedConvolution(
                [("int8", int8), ("fp32", plain(.fp32))], switchMargin: Int8Convolution.bestLevel >= 4 ? 0.2 : 0.05)
        }
        // bf16: per layer the faster of bf16 and fp32 on this CPU (a new instance per layer: it holds the layer's
        // prepared weights). With AMX, its tiles against fp32, fp32 taken only where at least 20 % faster: on the
        // Xeon AMX beat AVX-512 BF16 on every layer shape of s and fp32 on all but a few small ones by less than
        // the timing noise of a loaded machine, and choices flipped by that noise mixed fp32 layers into bf16
        // differently from run to run (a borderline object of the example scenes moved by 0.15 in score).
        if precision == .bf16 && settings.measureLayers {
            if BF16Path.tiles.isAvailable {
                return TunedConvolution(
                    [("bf16-amx", plain(.bf16, .tiles)), ("fp32", plain(.fp32))], switchMargin: 0.2)
            }
            return TunedConvolution([("bf16", plain(.bf16, .vector)), ("fp32", plain(.fp32))])
        }
        return plain(precision)
    }
}
