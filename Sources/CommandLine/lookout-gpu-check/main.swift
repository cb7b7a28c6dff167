import LookoutCUDA

#if canImport(Glibc)
    import Glibc
#endif

// `lookout-gpu-check [ARCH]`: the NVIDIA driver, its GPUs and NVRTC as Lookout finds them, then the check kernel
// compiled by NVRTC and run on each GPU against the CPU's SiLU (`lookout devices --check` without the rest of
// Lookout). With ARCH (compute_90, sm_90), only compiles. Exit status 1 when a GPU check fails or none can run.

/// A line on standard error.
func printError(_ message: String) {
    let line = Array("lookout-gpu-check: \(message)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

func fail(_ message: String) -> Never {
    printError(message)
    exit(1)
}

let arguments = CommandLine.arguments.dropFirst()
if let architecture = arguments.first {
    do {
        let nvrtc = try CUDA.nvrtc()
        let image = try CUDA.compile(CUDA.checkSource, name: "lookout_check.cu", architecture: architecture)
        print(
            "NVRTC \(nvrtc.version) (\(nvrtc.path)) compiled the check kernel for \(architecture): \(image.count) bytes"
        )
        exit(0)
    } catch {
        fail(error.description)
    }
}
let gpus: [GPU]
do {
    let driver = try CUDA.driver()
    print("NVIDIA driver \(driver.version) (\(driver.path)): \(driver.gpus.count) GPUs")
    for gpu in driver.gpus { print("  \(gpu.summary)") }
    gpus = driver.gpus
    let nvrtc = try CUDA.nvrtc()
    print("NVRTC \(nvrtc.version) (\(nvrtc.path))")
} catch {
    fail(error.description)
}
if gpus.isEmpty { fail("the driver reports no GPU") }
var failed = false
for gpu in gpus {
    do {
        let result = try CUDA.check(gpu)
        print(result.summary)
        failed = failed || !result.passed
    } catch {
        printError("GPU \(gpu.index): \(error.description)")
        failed = true
    }
}
exit(failed ? 1 : 0)
