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
        let kernels = try #require(
            result.stdout.split(separator: "\n").first { $0.hasPrefix("compiled the backend's") })
        let size = Int(kernels.split(separator: " ").dropLast().last ?? "") ?? 0
        #expect(kernels.contains("for \(architecture) with NVRTC 12.") && size > 50_000, "\(kind): \(kernels)")
    }
}

/// `--device` where there is no GPU: `cuda` fails with one line naming what is missing, `auto` says so and
/// detects on the CPU (the same output as without the option), other words and GPU-less precisions are refused.
@Suite struct DeviceOptionTests {
    @Test func withoutAGPU() throws {
        try #require(
            !DevicesCommandTests.hasDriver, "this machine has an NVIDIA driver: the no-GPU messages cannot be seen here"
        )
        let empty = try CLI.scratch("no-cuda-detect")
        defer { CLI.remove(empty) }
        let photo = Repository.root + "/examples/scenes/scene-0001.jpg"
        let environment = ["LOOKOUT_CUDA_PATH": empty]
        let query = ["detect", photo, "-q", "red star, blue circle"]
        let cuda = try CLI.run(query + ["--device", "cuda"], environment: environment)
        #expect(cuda.status == 1, "\(cuda.stderr)")
        #expect(
            cuda.stderr.contains("--device cuda:0: no NVIDIA driver: libcuda.so.1 is not on this machine")
                && cuda.stdout.isEmpty, "\(cuda.stderr)")
        let cpu = try CLI.run(query, environment: environment)
        let auto = try CLI.run(query + ["--device", "auto"], environment: environment)
        #expect(cpu.status == 0 && auto.status == 0, "\(auto.stderr)")
        #expect(auto.stderr.contains("--device auto: no GPU to compute on (no NVIDIA driver"), "\(auto.stderr)")
        #expect(auto.stdout == cpu.stdout && cpu.stdout.contains("blue circle"), "\(auto.stdout)")
        let named = try CLI.run(query + ["--device", "cpu"], environment: environment)
        #expect(named.stdout == cpu.stdout)
        let bad = try CLI.run(query + ["--device", "gpu"], environment: environment)
        #expect(bad.status == 64 && bad.stderr.contains("choose cpu, cuda, cuda:N"), "\(bad.stderr)")
        // fp16 and bf16 on a GPU are its tensor cores' (the network stays fp32): they reach the driver; int8 has
        // no GPU form; fp16 is the GPU's alone.
        for precision in ["bf16", "fp16"] {
            let half = try CLI.run(query + ["--device", "cuda:1", "--precision", precision], environment: environment)
            #expect(half.status == 1 && half.stderr.contains("--device cuda:1: no NVIDIA driver"), "\(half.stderr)")
        }
        let int8 = try CLI.run(query + ["--device", "cuda", "--precision", "int8"], environment: environment)
        #expect(
            int8.status == 1 && int8.stderr.contains("--device cuda:0: --precision int8 does not run on the GPU"),
            "\(int8.stderr)")
        let fp16 = try CLI.run(query + ["--precision", "fp16"], environment: environment)
        #expect(
            fp16.status == 64 && fp16.stderr.contains("--precision fp16 runs on an NVIDIA GPU's tensor cores"),
            "\(fp16.stderr)")
        let autoFP16 = try CLI.run(query + ["--device", "auto", "--precision", "fp16"], environment: environment)
        #expect(
            autoFP16.status == 0 && autoFP16.stderr.contains("computing on the CPU, in fp32 (fp16 runs on a GPU only)")
                && autoFP16.stdout == cpu.stdout, "\(autoFP16.stderr)")
    }

    /// `embed --image --device`: the image tower's device, refused as detection's is, and the CPU's embeddings
    /// where `auto` finds no GPU.
    @Test func embeddingPhotosWithoutAGPU() throws {
        try #require(
            !DevicesCommandTests.hasDriver, "this machine has an NVIDIA driver: the no-GPU messages cannot be seen here"
        )
        let empty = try CLI.scratch("no-cuda-embed")
        defer { CLI.remove(empty) }
        let environment = ["LOOKOUT_CUDA_PATH": empty]
        let embed = ["embed", "--image", Repository.root + "/examples/scenes/scene-0001.jpg"]
        let cuda = try CLI.run(embed + ["--device", "cuda"], environment: environment)
        #expect(
            cuda.status == 1 && cuda.stdout.isEmpty
                && cuda.stderr.contains("--device cuda:0: no NVIDIA driver: libcuda.so.1 is not on this machine"),
            "\(cuda.stderr)")
        let cpu = try CLI.run(embed, environment: environment)
        let auto = try CLI.run(embed + ["--device", "auto"], environment: environment)
        #expect(cpu.status == 0 && auto.status == 0 && cpu.stdout.hasPrefix("["), "\(auto.stderr)")
        #expect(auto.stderr.contains("--device auto: no GPU to compute on") && auto.stdout == cpu.stdout)
        let bad = try CLI.run(embed + ["--device", "gpu"], environment: environment)
        #expect(bad.status == 64 && bad.stderr.contains("choose cpu, cuda, cuda:N"), "\(bad.stderr)")
        let texts = try CLI.run(["embed", "red car", "--device", "cuda"], environment: environment)
        #expect(texts.status == 64 && texts.stderr.contains("add --image"), "\(texts.stderr)")
    }
}
