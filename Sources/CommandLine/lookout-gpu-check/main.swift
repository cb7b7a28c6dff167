import LookoutCUDA
import LookoutEngine
import LookoutTensor

#if canImport(Glibc)
    import Glibc
#endif

// `lookout-gpu-check [--ops] [--detect] [ARCH]`, `lookout-gpu-check --bench DETECTOR [PHOTO [ARITHMETIC]]`,
// `lookout-gpu-check --accuracy DIR...`, `lookout-gpu-check --tower FILE [BATCH]`, `lookout-gpu-check --cpu-int8` (every int8 path of the machine's CPU against
// the portable C), `lookout-gpu-check --make-photos DIR COUNT [WIDTH HEIGHT]` (large JPEGs to index): what
// scripts/device/gpu-check and scripts/bench/gpu.py run on the GPU machine.
// - The NVIDIA driver, its GPUs and NVRTC as Lookout finds them, and the check kernel (SiLU) compiled by NVRTC and
//   run on each GPU against the CPU.
// - The op-by-op suite (OperationChecks): every ComputeBackend operation on the CUDA backend, with cuBLAS and with
//   Lookout's own GEMM kernel, against the CPU backend.
// - Detection parity (DetectionChecks): the demo models on the example scenes, GPU against CPU, with timings.
// With ARCH (compute_90, sm_90) it only compiles the check kernel and the backend's kernels with NVRTC (no GPU
// needed: what CI runs). Exit status 1 when a check fails or none can run. Run from the repository's root.

/// A line on standard error.
func printError(_ message: String) {
    let line = Array("lookout-gpu-check: \(message)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

func fail(_ message: String) -> Never {
    printError(message)
    exit(1)
}

var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "--bench" {
    guard arguments.count >= 2 else { fail("--bench DETECTOR [PHOTO [fp32|fp16|bf16]]") }
    let photo = arguments.count > 2 ? arguments[2] : "examples/photos/astronaut.jpg"
    var benchmark = Benchmark(detector: arguments[1], photo: photo)
    if arguments.count > 3 {
        guard let arithmetic = GPUArithmetic(rawValue: arguments[3]) else {
            fail("\(arguments[3]): fp32, fp16 or bf16")
        }
        benchmark.arithmetic = arithmetic
    }
    exit(benchmark.run() ? 0 : 1)
}
if arguments.first == "--tower" {
    // `--tower FILE [BATCH]`: a CLIP image tower on the GPU against the CPU in fp32, fp16 and bf16, and BATCH
    // photos in one call timed in each (scripts/bench/gpu_towers.py).
    guard arguments.count >= 2 else { fail("--tower FILE [BATCH]") }
    let scenes = (0..<10).map { "examples/scenes/scene-000\($0).jpg" }
    let (lines, passed) = TowerChecks(
        tower: arguments[1], photos: scenes, arithmetics: [.fp32, .fp16, .bf16],
        batch: arguments.count > 2 ? Int(arguments[2]) ?? 0 : 0
    ).run()
    for line in lines { print(line) }
    exit(passed ? 0 : 1)
}
if arguments.first == "--make-photos" {
    // `--make-photos DIR COUNT [WIDTH HEIGHT]`: COUNT distinct JPEG photos (quality 92, default 4000×3000: 12
    // megapixels) for scripts/bench/gpu_index.py, on every core.
    guard arguments.count >= 3, let count = Int(arguments[2]), count > 0 else {
        fail("--make-photos DIR COUNT [WIDTH HEIGHT]")
    }
    let width = arguments.count > 4 ? Int(arguments[3]) ?? 4000 : 4000
    let height = arguments.count > 4 ? Int(arguments[4]) ?? 3000 : 3000
    do {
        print(try SyntheticPhotos(folder: arguments[1], width: width, height: height).write(count))
    } catch { fail("\(error)") }
    exit(0)
}
if arguments.first == "--cpu-int8" {
    // `--cpu-int8`: every int8 path of this CPU against the portable C (no GPU needed).
    let (lines, passed) = CPUInt8Checks().run()
    for line in lines { print(line) }
    exit(passed ? 0 : 1)
}
if arguments.first == "--accuracy" {
    // `--accuracy DIR...`: the demo model's mAP on each folder of COCO-labelled scenes, CPU fp32 and GPU fp32,
    // fp16 and bf16.
    var passed = true
    for folder in arguments.dropFirst() {
        let (lines, ok) = AccuracyChecks(model: "Models/demo", folder: folder).run()
        for line in lines { print(line) }
        passed = passed && ok
    }
    exit(passed ? 0 : 1)
}
if let architecture = arguments.first(where: { !$0.hasPrefix("--") }) {
    do {
        let nvrtc = try CUDA.nvrtc()
        let image = try CUDA.compile(CUDA.checkSource, name: "lookout_check.cu", architecture: architecture)
        print(
            "NVRTC \(nvrtc.version) (\(nvrtc.path)) compiled the check kernel for \(architecture): \(image.count) bytes"
        )
        let kernels = try CUDA.compile(CUDAKernels.source, name: "lookout_kernels.cu", architecture: architecture)
        print(
            "NVRTC compiled the backend's \(CUDAKernels.names.count) kernels for \(architecture): \(kernels.count) bytes"
        )
        exit(0)
    } catch {
        fail(error.description)
    }
}
let all = arguments.isEmpty
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
if all || arguments.contains("--ops") {
    for useCUBLAS in [true, false] {
        do {
            let backend = try CUDABackend(gpu: 0, cacheDirectory: nil, useCUBLAS: useCUBLAS)
            print(
                "op-by-op suite on \(backend.name), GEMMs through \(backend.cublasPath.map { "cuBLAS (\($0))" } ?? "Lookout's kernel"):"
            )
            var results = OperationChecks(gpu: backend, cpu: CPUBackend.shared).run()
            // 16-bit convolutions every way: lowered into memory first, and lowered as they are multiplied
            // (`lk_conv_16` and `lk_conv_16_wide`, where the GPU has them).
            for arithmetic in [GPUArithmetic.fp16, .bf16] {
                for lowering in [CUDABackend.Lowering.inMemory, .asMultiplied(wide: false), .asMultiplied(wide: true)] {
                    let sixteen = try CUDABackend(
                        gpu: 0, cacheDirectory: nil, useCUBLAS: useCUBLAS, arithmetic: arithmetic, lowering: lowering)
                    results += OperationChecks.sixteenBit(sixteen)
                    // The fused sublayers do not lower convolutions: once per arithmetic.
                    if lowering == .inMemory { results += OperationChecks.sublayers(sixteen) }
                    do { try sixteen.checkFailure() } catch {
                        print("  FAILED: the GPU reported \(error) in \(arithmetic.rawValue)")
                        failed = true
                    }
                }
            }
            for result in results { print(result.line) }
            let passed = results.filter(\.passed).count
            print("  \(passed) of \(results.count) passed")
            do { try backend.checkFailure() } catch {
                print("  FAILED: the GPU reported \(error)")
                failed = true
            }
            failed = failed || passed != results.count
        } catch {
            printError("the CUDA backend: \(error.description)")
            failed = true
        }
    }
}
if all || arguments.contains("--detect") {
    let scenes = (0..<10).map { "examples/scenes/scene-000\($0).jpg" }
    let checks = [
        DetectionChecks(
            model: "Models/demo",
            queries: ["circle", "square", "triangle", "star", "hexagon", "heart", "cross", "ring", "red star"],
            photos: scenes, device: .cuda(0)),
        DetectionChecks(
            model: "Models/demo-yoloe",
            queries: ["circle", "square", "triangle", "star", "hexagon", "heart", "cross", "ring", "red star"],
            photos: scenes, device: .cuda(0)),
    ]
    // A model left out of what travelled to the GPU machine (its 64 MiB) is skipped, and said.
    for check in checks {
        guard access(check.model + "/detector.safetensors", R_OK) == 0 else {
            print("\(check.model): not here, skipped")
            continue
        }
        let outcome = check.run()
        for line in outcome.lines { print(line) }
        failed = failed || !outcome.passed
    }
    if access("Models/demo/image-encoder.safetensors", R_OK) != 0 {
        print("Models/demo/image-encoder.safetensors: not here, skipped")
    } else {
        let tower = TowerChecks(
            tower: "Models/demo/image-encoder.safetensors", photos: scenes, arithmetics: [.fp32, .fp16, .bf16]
        ).run()
        for line in tower.lines { print(line) }
        failed = failed || !tower.passed
    }
}
exit(failed ? 1 : 0)
