import ArgumentParser
import Foundation
import LookoutCUDA
import LookoutEngine
import LookoutSupport
import LookoutTensor

/// `lookout devices`: what Lookout can compute on here — the CPU and its fast paths, and NVIDIA GPUs through the
/// driver and NVRTC opened at run time.
struct DevicesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "Show the CPU and the NVIDIA GPUs Lookout can use, and check a GPU.",
        discussion: """
            The CPU: its model, the threads Lookout computes on, and whether it runs bf16 (AVX-512 BF16) and int8 \
            (AMX, AVX-512 VNNI, or AVX-512BW or AVX2 with 7-bit weights) natively. NVIDIA GPUs: Lookout opens the \
            driver (libcuda.so.1) and NVRTC (which compiles \
            its GPU kernels) at run time, from where the system's loader looks, the CUDA toolkit's folders, pip's \
            nvidia-* packages or the folder in LOOKOUT_CUDA_PATH; nothing of CUDA is needed to build or run it \
            on the CPU. Without a GPU this says what is missing and how to get it.

            --check compiles a kernel with NVRTC, runs it on each GPU and compares it with the CPU, then opens \
            the backend the detectors run on with --device cuda (its kernels, compiled once per GPU architecture \
            and kept in the cache, and cuBLAS for the products). --compile ARCH only compiles the check kernel \
            and the backend's kernels (no GPU needed), for an architecture such as compute_90.
            """)

    @Flag(
        help:
            "Run a kernel on each GPU and compare it with the CPU, and open the backend --device cuda uses (exit status 1 when a check fails)."
    )
    var check = false

    @Option(
        help: ArgumentHelp(
            "Compile the check kernel and the backend's kernels with NVRTC for this architecture (compute_90: PTX; sm_90: a cubin) and say their sizes; no GPU needed.",
            valueName: "arch"))
    var compile: String?

    func validate() throws {
        if let compile, compile.range(of: "^(compute|sm)_[0-9]{2,3}[af]?$", options: .regularExpression) == nil {
            throw ValidationError("--compile \(compile): an architecture such as compute_90 or sm_90.")
        }
    }

    func run() throws {
        let bf16 = Precision.bf16.isNative ? "yes (AVX-512 BF16)" : "no"
        let int8 =
            Precision.int8.isNative
            ? "yes (\(Int8Convolution.pathName(Int8Convolution.bestLevel)), \(Int8Convolution.weightBits)-bit weights)"
            : "no"
        print(
            "CPU: \(AutomaticPrecision.cpuModel()), \(ComputePool.shared.threadCount) threads; bf16 \(bf16), int8 \(int8)"
                + (BF16Path.tiles.isAvailable ? "; AMX tiles for bf16" : Precision.amxUsable ? "; AMX turned off" : "")
        )
        var gpus: [GPU] = []
        do {
            let driver = try CUDA.driver()
            print(
                "NVIDIA driver \(driver.version) (\(driver.path)): \(driver.gpus.count) GPU\(driver.gpus.count == 1 ? "" : "s")"
            )
            for gpu in driver.gpus { print("  \(gpu.summary)") }
            gpus = driver.gpus
        } catch {
            print("GPU: \(error.description)")
        }
        var compiler: String?
        do {
            let nvrtc = try CUDA.nvrtc()
            compiler = nvrtc.version
            print("NVRTC \(nvrtc.version) (\(nvrtc.path))")
        } catch {
            print("NVRTC: \(error.description)")
        }
        var failed = false
        if let compile {
            do {
                let image = try CUDA.compile(CUDA.checkSource, name: "lookout_check.cu", architecture: compile)
                print("compiled the check kernel for \(compile) with NVRTC \(compiler ?? ""): \(image.count) bytes")
                let kernels = try CUDA.compile(CUDAKernels.source, name: "lookout_kernels.cu", architecture: compile)
                print(
                    "compiled the backend's \(CUDAKernels.names.count) kernels for \(compile) with NVRTC \(compiler ?? ""): \(kernels.count) bytes"
                )
            } catch {
                printError("lookout: \(error.description)")
                failed = true
            }
        }
        if check {
            if gpus.isEmpty {
                printError("lookout: --check: no GPU to check")
                failed = true
            }
            for gpu in gpus {
                do {
                    let result = try CUDA.check(gpu)
                    print(result.summary)
                    failed = failed || !result.passed
                    let backend = try CUDABackend(gpu: gpu.index, cacheDirectory: ResourceLocator.cacheDirectory())
                    print(
                        "backend \(backend.name): kernels \(backend.kernelsFromCache ? "from the cache" : "compiled by NVRTC"), products through \(backend.cublasPath.map { "cuBLAS (\($0))" } ?? "Lookout's own kernel (no cuBLAS found)")"
                    )
                } catch {
                    printError("lookout: GPU \(gpu.index): \(error.description)")
                    failed = true
                }
            }
        }
        if failed { throw ExitCode(1) }
    }
}
