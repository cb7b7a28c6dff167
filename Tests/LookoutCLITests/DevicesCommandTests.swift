import Foundation
import LookoutTestSupport
import Testing

/// `lookout devices` and `lookout-gpu-check` where there is no GPU (CI's machines): the CPU named, the missing
/// driver and NVRTC named with how to get them, `--check` an error; with NVRTC from PyPI's wheel (fetched by
/// scripts/test into `$LOOKOUT_TEST_NVRTC`), the check kernel compiled for Hopper as PTX and as a cubin, no GPU
/// needed. On the GPU machine the check runs the kernel (scripts/device/gpu-check; BENCHMARKS.md has its output).
@Suite struct DevicesCommandTests {
    static var hasDriver: Bool {
        ["/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1"].contains {
            FileManager.default.fileExists(atPath: $0)
        }
    }

    static var gpuCheck: URL { CLI.executable.deletingLastPathComponent().appendingPathComponent("lookout-gpu-check") }

    @Test func withoutAGPUItSaysWhatIsMissing() throws {
        try #require(!Self.hasDriver, "this machine has an NVIDIA driver: the no-GPU messages cannot be seen here")
        let empty = try CLI.scratch("no-cuda")
        defer { CLI.remove(empty) }
        let result = try CLI.run(["devices"], environment: ["LOOKOUT_CUDA_PATH": empty])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("CPU: ") && result.stdout.contains(" threads; bf16 "), "\(result.stdout)")
        #expect(
            result.stdout.contains("GPU: no NVIDIA driver: libcuda.so.1 is not on this machine"), "\(result.stdout)")
        #expect(result.stdout.contains("pip install nvidia-cuda-nvrtc-cu12"), "\(result.stdout)")
        let check = try CLI.run(["devices", "--check"], environment: ["LOOKOUT_CUDA_PATH": empty])
        #expect(check.status == 1 && check.stderr.contains("--check: no GPU to check"), "\(check.stderr)")
        let bad = try CLI.run(["devices", "--compile", "hopper"])
        #expect(bad.status == 64 && bad.stderr.contains("an architecture such as compute_90"), "\(bad.stderr)")

        let standalone = Process()
        standalone.executableURL = Self.gpuCheck
        standalone.environment = ["PATH": "/usr/bin:/bin", "LOOKOUT_CUDA_PATH": empty]
        let errors = Pipe()
        standalone.standardError = errors
        standalone.standardOutput = Pipe()
        try standalone.run()
        let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        standalone.waitUntilExit()
        #expect(standalone.terminationStatus == 1 && said.contains("no NVIDIA driver"), "\(said)")
    }

    @Test(arguments: [("compute_90", "PTX"), ("sm_90", "cubin")])
    func nvrtcCompilesTheKernelsWithoutAGPU(architecture: String, kind: String) throws {
        let nvrtc = try #require(
            ProcessInfo.processInfo.environment["LOOKOUT_TEST_NVRTC"],
            "LOOKOUT_TEST_NVRTC names PyPI's NVRTC: scripts/test fetches it (scripts/device/nvrtc)")
        let result = try CLI.run(["devices", "--compile", architecture], environment: ["LOOKOUT_CUDA_PATH": nvrtc])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("NVRTC 12."), "\(result.stdout)")
        let line = try #require(
            result.stdout.split(separator: "\n").first { $0.hasPrefix("compiled the check kernel") })
        let bytes = Int(line.split(separator: " ").dropLast().last ?? "") ?? 0
        #expect(line.contains("for \(architecture) with NVRTC 12.") && bytes > 500, "\(kind): \(line)")
    }
}
