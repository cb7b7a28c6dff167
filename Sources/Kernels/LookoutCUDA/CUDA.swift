import CLookoutCUDA
import LookoutTensor

#if canImport(Glibc)
    import Glibc
#endif

/// What went wrong opening or using CUDA, in one sentence naming what is missing and how to get it.
public struct CUDAError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The operands of the convolutions' products on the GPU: fp32 (no TF32: equal to the CPU within the summation
/// order), or fp16 or bf16 on the tensor cores, each product exact and the sums in fp32 (`--precision fp16|bf16`
/// with `--device cuda`). Everything else (the head's logits, attention, the towers) stays fp32.
public enum GPUArithmetic: String, Sendable, CaseIterable {
    case fp32
    case fp16
    case bf16

    /// The shim's code for a 16-bit type (``lookout_cublas_gemm_16``, the kernels' `type`).
    var code: Int32 {
        switch self {
        case .fp32: 0
        case .fp16: Int32(LOOKOUT_CUDA_FP16)
        case .bf16: Int32(LOOKOUT_CUDA_BF16)
        }
    }

    /// `value` rounded as the GPU rounds it to this type (to nearest, ties to even), back in fp32: what the
    /// op-by-op suite computes its references from.
    public func rounded(_ value: Float) -> Float {
        switch self {
        case .fp32: return value
        case .fp16: return Float(Float16(value))
        case .bf16:
            var bits = value.bitPattern
            if value.isNaN { return value }
            bits = bits &+ 0x7fff &+ ((bits >> 16) & 1)
            return Float(bitPattern: bits & 0xffff_0000)
        }
    }
}

/// A GPU the NVIDIA driver reports.
public struct GPU: Sendable, Equatable {
    public let index: Int
    public let name: String
    public let memoryBytes: Int
    /// Compute capability, `major.minor` (9.0 for Hopper: H100, H200).
    public let major: Int
    public let minor: Int
    public let multiprocessors: Int

    /// NVRTC's architecture names for this GPU: `compute_90` (PTX, any later GPU) and `sm_90` (a cubin).
    /// The most dynamic shared memory a block may be given (bytes), by compute capability, as NVIDIA's CUDA
    /// programming guide tabulates it: 227 KB on 9.0, 163 KB on 8.0 and 8.7, 99 KB on 8.6 and 8.9, 96 KB on 7.0
    /// and 7.2, 64 KB on 7.5; 48 KB before 7.0 (no opt-in).
    public var sharedMemoryPerBlock: Int {
        switch (major, minor) {
        case (9..., _): 227 * 1024
        case (8, 0), (8, 7): 163 * 1024
        case (8, _): 99 * 1024
        case (7, 5): 64 * 1024
        case (7, _): 96 * 1024
        default: 48 * 1024
        }
    }

    public var virtualArchitecture: String { "compute_\(major)\(minor)" }
    public var realArchitecture: String { "sm_\(major)\(minor)" }

    public var summary: String {
        "GPU \(index): \(name), \(memoryBytes >> 30) GiB, compute capability \(major).\(minor), \(multiprocessors) multiprocessors"
    }
}

/// The NVIDIA driver and NVRTC, opened at run time (`dlopen`): Lookout builds and runs without CUDA, and a
/// machine with a GPU needs only the driver and NVRTC (the CUDA toolkit's, or pip's `nvidia-cuda-nvrtc`), found
/// where the loader looks, in the toolkit's folders, in pip's `nvidia/*/lib` folders or in `LOOKOUT_CUDA_PATH`.
/// The first part of issue 51: finding, naming and checking the GPU; the backend's kernels come next.
public enum CUDA {
    /// The driver's library, its version (`13.0`) and its GPUs; an error naming what is missing otherwise.
    public static func driver() throws(CUDAError) -> (path: String, version: String, gpus: [GPU]) {
        var message = [CChar](repeating: 0, count: 1024)
        var path = [CChar](repeating: 0, count: 4096)
        guard lookout_cuda_open(&path, path.count, &message, message.count) == 0 else {
            throw CUDAError(string(message))
        }
        var version: Int32 = 0
        _ = lookout_cuda_driver_version(&version)
        var count: Int32 = 0
        guard lookout_cuda_device_count(&count, &message, message.count) == 0 else { throw CUDAError(string(message)) }
        var gpus: [GPU] = []
        for index in 0..<Int(count) {
            var gpu = lookout_gpu()
            guard lookout_cuda_device(Int32(index), &gpu, &message, message.count) == 0 else {
                throw CUDAError(string(message))
            }
            let name = withUnsafeBytes(of: gpu.name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            gpus.append(
                GPU(
                    index: index, name: name, memoryBytes: Int(gpu.memory), major: Int(gpu.major),
                    minor: Int(gpu.minor), multiprocessors: Int(gpu.multiprocessors)))
        }
        return (string(path), "\(version / 1000).\(version % 1000 / 10)", gpus)
    }

    /// NVRTC's library and version; an error naming what is missing otherwise.
    public static func nvrtc() throws(CUDAError) -> (path: String, version: String) {
        var message = [CChar](repeating: 0, count: 1024)
        var path = [CChar](repeating: 0, count: 4096)
        guard lookout_nvrtc_open(&path, path.count, &message, message.count) == 0 else {
            throw CUDAError(string(message))
        }
        var (major, minor): (Int32, Int32) = (0, 0)
        _ = lookout_nvrtc_version(&major, &minor)
        return (string(path), "\(major).\(minor)")
    }

    /// CUDA C++ compiled by NVRTC for `architecture` (`compute_90`: PTX text; `sm_90`: a cubin). No GPU is needed.
    public static func compile(_ source: String, name: String, architecture: String) throws(CUDAError) -> [UInt8] {
        var message = [CChar](repeating: 0, count: 8192)
        var output: UnsafeMutablePointer<CChar>?
        var size = 0
        guard lookout_nvrtc_compile(source, name, architecture, &output, &size, &message, message.count) == 0,
            let output
        else { throw CUDAError(string(message)) }
        defer { free(output) }
        return Array(UnsafeRawBufferPointer(start: output, count: size))
    }

    /// The kernels of the GPU check: SiLU as PyTorch computes it, `x / (1 + exp(−x))`, one thread per value.
    public static let checkSource = """
        extern "C" __global__ void lookout_silu(const float *in, float *out, int count) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < count) out[i] = in[i] / (1.0f + expf(-in[i]));
        }
        """

    /// What the GPU check found: the largest difference from the CPU's SiLU (``Kernels/silu(_:count:)``),
    /// relative to the value, over `count` values, and the milliseconds from the copy in to the copy back.
    public struct Check: Sendable {
        public let gpu: GPU
        public let count: Int
        public let largestRelativeDifference: Float
        public let milliseconds: Double

        /// The largest relative difference a GPU may show: CUDA's `expf` and the CPU's vector exp each within a
        /// few ulps.
        public static let bound: Float = 1e-6

        public var passed: Bool { largestRelativeDifference <= Self.bound }

        /// One line for a person: the kernel, the difference against the bound, the time.
        public var summary: String {
            "check GPU \(gpu.index): SiLU on \(count) values compiled for \(gpu.virtualArchitecture), largest relative difference from the CPU \(largestRelativeDifference) (\(passed ? "passed" : "FAILED: above \(Self.bound)")), \((milliseconds * 100).rounded() / 100) ms with the copies"
        }
    }

    /// Compiles ``checkSource`` with NVRTC for `gpu`, runs it on 2^20 values from −20 to 20, and compares with
    /// the CPU's kernel.
    public static func check(_ gpu: GPU) throws(CUDAError) -> Check {
        let count = 1 << 20
        let input = (0..<count).map { Float($0) / Float(count) * 40 - 20 }
        var image = try compile(checkSource, name: "lookout_check.cu", architecture: gpu.virtualArchitecture)
        image.append(0)  // PTX is text: the driver reads it to its end
        var output = [Float](repeating: .nan, count: count)
        var message = [CChar](repeating: 0, count: 1024)
        var milliseconds = 0.0
        let status = image.withUnsafeBytes { image in
            lookout_cuda_map_floats(
                Int32(gpu.index), image.baseAddress, "lookout_silu", input, &output, Int32(count), &milliseconds,
                &message, message.count)
        }
        guard status == 0 else { throw CUDAError(string(message)) }
        var expected = input
        expected.withUnsafeMutableBufferPointer { Kernels.silu($0.baseAddress!, count: count) }
        var largest: Float = 0
        for (got, want) in zip(output, expected) {
            let difference = abs(got - want) / max(abs(want), 1e-30)
            if !(difference <= largest) { largest = difference.isNaN ? .infinity : difference }
        }
        return Check(gpu: gpu, count: count, largestRelativeDifference: largest, milliseconds: milliseconds)
    }

    private static func string(_ characters: [CChar]) -> String {
        characters.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}
