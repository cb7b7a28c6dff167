import LookoutCUDA
import LookoutImage
import LookoutSupport
import LookoutTensor
import LookoutTextEncoder
import LookoutWeights

/// A CLIP image tower on the GPU against the CPU: the example scenes in one batch, each embedding within 1e-5 of
/// the CPU's in fp32 (largest difference of a coordinate; the embeddings are unit vectors). In fp16 and bf16 (the
/// products on the tensor cores) the smallest cosine with the CPU's fp32 embedding is reported and must be at least
/// 0.99 (a sanity bound: their accuracy is what it is, and is measured here). With `batch`, the time of
/// `batch` photos in one call in each arithmetic (the photos' preprocessed values copied over included), the
/// photos being the scenes again and again: `--tower FILE [BATCH]`, which scripts/bench/gpu_towers.py reads.
struct TowerChecks {
    let tower: String
    let photos: [String]
    var arithmetics: [GPUArithmetic] = [.fp32]
    var batch = 0

    func run() -> (lines: [String], passed: Bool) {
        let encoder: CLIPImageEncoder
        var inputs: [[Float]] = [], pixels: [[UInt8]] = []
        do {
            encoder = try CLIPImageEncoder(weights: WeightFile.open(tower))
            for photo in photos {
                let rgb = CLIPPreprocessing.resizedAndCropped(
                    try CLIPPreprocessing.decode(FileContents.read(photo), name: photo),
                    size: encoder.configuration.inputResolution)
                pixels.append(rgb.pixels)
                inputs.append(CLIPPreprocessing.tensor(rgb))
            }
        } catch {
            return (["  FAILED loading \(tower): \(error)"], false)
        }
        let c = encoder.configuration
        var lines = [
            "tower \(tower): width \(c.width), \(c.layers) layers, \(c.heads) heads, patches of \(c.patchSize), \(c.tokens) tokens, input \(c.inputResolution)"
        ]
        var want: [[Float]] = []
        let cpuTime = DetectionChecks.milliseconds { want = encoder.encode(inputs, backend: CPUBackend.shared) }
        var passed = true
        func format(_ value: Double) -> String { String((value * 100).rounded() / 100) }
        for arithmetic in arithmetics {
            let gpu: CUDABackend
            do {
                gpu = try CUDABackend(gpu: 0, cacheDirectory: "/tmp/lookout-gpu-check-cache", arithmetic: arithmetic)
            } catch {
                lines.append("  FAILED opening the CUDA backend: \(error)")
                return (lines, false)
            }
            var got: [[Float]] = []
            _ = encoder.encode(inputs, backend: gpu)
            let gpuTime = DetectionChecks.milliseconds { got = encoder.encode(inputs, backend: gpu) }
            var (largest, cosine): (Float, Float) = (0, 1)
            for (a, b) in zip(want, got) {
                for (x, y) in zip(a, b) where !(abs(x - y) <= largest) {
                    largest = abs(x - y).isNaN ? .infinity : abs(x - y)
                }
                let dot = zip(a, b).reduce(Float(0)) { $0 + $1.0 * $1.1 }
                cosine = dot.isNaN ? -1 : min(cosine, dot)
            }
            let ok =
                want.count == got.count
                && (arithmetic == .fp32 ? largest <= 1e-5 : cosine >= 0.99)
            passed = passed && ok
            do { try gpu.checkFailure() } catch {
                lines.append("  FAILED: the GPU reported \(error)")
                passed = false
            }
            let bound = arithmetic == .fp32 ? "largest difference bound 1e-5" : "smallest cosine bound 0.99"
            lines.append(
                "  \(ok ? "passed" : "FAILED") \(arithmetic.rawValue): \(photos.count) photos in one batch on \(gpu.name) against \(CPUBackend.shared.name) fp32: largest difference of a coordinate \(largest), smallest cosine \(cosine) (\(bound)); CPU \(format(cpuTime)) ms, GPU \(format(gpuTime)) ms"
            )
            guard batch > 0 else { continue }
            // From the photos' 8-bit pixels (what the index hands over), and from their floats.
            let many = (0..<batch).map { pixels[$0 % pixels.count] }
            let manyFloats = (0..<batch).map { inputs[$0 % inputs.count] }
            let (mean, std) = (CLIPPreprocessing.mean, CLIPPreprocessing.std)
            let fromPixels = encoder.encode(pixels: many, mean: mean, std: std, backend: gpu)
            let fromFloats = encoder.encode(manyFloats, backend: gpu)
            let same = fromPixels == fromFloats
            passed = passed && same
            lines.append(
                "  \(same ? "passed" : "FAILED") \(arithmetic.rawValue) batch \(batch) from 8-bit pixels equal to the batch from floats, bit for bit"
            )
            var times: [Double] = [], floatTimes: [Double] = []
            for _ in 0..<5 {
                times.append(
                    DetectionChecks.milliseconds {
                        _ = encoder.encode(pixels: many, mean: mean, std: std, backend: gpu)
                    })
                floatTimes.append(DetectionChecks.milliseconds { _ = encoder.encode(manyFloats, backend: gpu) })
            }
            let median = DetectionChecks.median(times)
            lines.append(
                "tower \(arithmetic.rawValue) batch \(batch): \(format(median)) ms a batch from 8-bit pixels (median of 5), \(Int((Double(batch) / median * 1000).rounded())) images/s; from floats \(format(DetectionChecks.median(floatTimes))) ms"
            )
            if gpu.profiling {
                _ = gpu.profile()
                _ = encoder.encode(pixels: many, mean: mean, std: std, backend: gpu)
                for line in gpu.profile().prefix(14) { lines.append("    " + line) }
            }
        }
        return (lines, passed)
    }
}
