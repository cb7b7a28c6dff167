import LookoutCUDA
import LookoutEngine
import LookoutImage
import LookoutSupport
import LookoutTensor

#if canImport(Glibc)
    import Glibc
#endif

/// The whole detection on the GPU against the CPU: a model of the repository (`Models/demo`, `Models/demo-yoloe`)
/// on the example scenes, the same queries, fp32 on both. Every detection must be found on both with the same
/// query, its score within `scoreBound` and its box within `boxBound` pixels; masks must agree but for a few
/// pixels on their edges (a score on the 0.5 threshold may round either way).
struct DetectionChecks {
    let model: String
    let queries: [String]
    let photos: [String]
    let device: ComputeDevice

    static let scoreBound: Float = 1e-4
    static let boxBound: Float = 0.01

    struct Outcome {
        var lines: [String] = []
        var passed = true
    }

    static func milliseconds(_ body: () -> Void) -> Double {
        var clock = Stopwatch()
        body()
        return clock.lap() * 1e3
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? .nan : sorted[sorted.count / 2]
    }

    func run() -> Outcome {
        var outcome = Outcome()
        func configuration(_ device: ComputeDevice) -> EngineConfiguration {
            // Caches in a folder of its own: the text embeddings computed once, the GPU's kernels compiled once.
            var configuration = EngineConfiguration(
                model: .directory(model), vocabulary: "Vocab/clip_vocab.json", caches: true,
                cacheDirectory: "/tmp/lookout-gpu-check-cache")
            configuration.device = device
            return configuration
        }
        let cpu: Engine, gpu: Engine
        do {
            cpu = try Engine.load(configuration(.cpu)).engine
            gpu = try Engine.load(configuration(device)).engine
        } catch {
            outcome.lines.append("  FAILED loading \(model): \(error)")
            outcome.passed = false
            return outcome
        }
        outcome.lines.append("\(model) on \(gpu.backend.name) against \(cpu.backend.name), queries \(queries):")
        var (largestScore, largestBox, compared, maskPixels, maskDiffering): (Float, Float, Int, Int, Int) = (
            0, 0, 0, 0, 0
        )
        var (cpuTimes, gpuTimes, requeryTimes): ([Double], [Double], [Double]) = ([], [], [])
        for photo in photos {
            let image: Image
            do { image = try ImageFile.read(photo) } catch {
                outcome.lines.append("  FAILED reading \(photo): \(error)")
                outcome.passed = false
                continue
            }
            var want: ImageDetections!, got: ImageDetections!
            cpuTimes.append(
                Self.milliseconds {
                    want = cpu.detect(cpu.prepare(image: image, name: photo), queries: queries)
                })
            // The first GPU run of a size loads and warms; the next ones are timed.
            got = gpu.detect(gpu.prepare(image: image, name: photo), queries: queries)
            for _ in 0..<3 {
                gpuTimes.append(
                    Self.milliseconds {
                        got = gpu.detect(gpu.prepare(image: image, name: photo), queries: queries)
                    })
            }
            let prepared = gpu.prepare(image: image, name: photo)
            _ = gpu.detect(prepared, queries: queries)
            requeryTimes.append(Self.milliseconds { _ = gpu.detect(prepared, queries: queries) })
            var unmatched = got.detections
            for expected in want.detections {
                let index = unmatched.indices.min { first, second in
                    distance(unmatched[first], expected) < distance(unmatched[second], expected)
                }
                guard let index, unmatched[index].queryIndex == expected.queryIndex else {
                    outcome.lines.append(
                        "  FAILED \(photo): the CPU's \(expected.label) \(expected.score) \(expected.box) has no match on the GPU"
                    )
                    outcome.passed = false
                    continue
                }
                let found = unmatched.remove(at: index)
                compared += 1
                largestScore = max(largestScore, abs(found.score - expected.score))
                largestBox = max(largestBox, distance(found, expected))
                if let wanted = expected.mask, let mask = found.mask {
                    let (a, b) = (wanted.wholePixels, mask.wholePixels)
                    maskPixels += a.count
                    maskDiffering += zip(a, b).filter { $0 != $1 }.count + abs(a.count - b.count)
                }
            }
            for extra in unmatched {
                outcome.lines.append(
                    "  FAILED \(photo): the GPU's \(extra.label) \(extra.score) \(extra.box) is not among the CPU's")
                outcome.passed = false
            }
        }
        let withinBounds = largestScore <= Self.scoreBound && largestBox <= Self.boxBound
        let masksAgree = maskPixels == 0 || Double(maskDiffering) <= 1e-3 * Double(maskPixels)
        outcome.passed = outcome.passed && withinBounds && masksAgree
        outcome.lines.append(
            "  \(withinBounds ? "passed" : "FAILED") \(compared) detections on \(photos.count) photos: largest score difference \(largestScore) (bound \(Self.scoreBound)), largest box difference \(largestBox) px (bound \(Self.boxBound))"
        )
        if maskPixels > 0 {
            outcome.lines.append(
                "  \(masksAgree ? "passed" : "FAILED") masks: \(maskDiffering) of \(maskPixels) pixels differ (bound 0.1%)"
            )
        }
        func format(_ value: Double) -> String { String((value * 100).rounded() / 100) }
        if let backend = gpu.backend as? CUDABackend { outcome.lines.append("  " + Self.graphs(backend)) }
        outcome.lines.append(
            "  median detection from decoded pixels, 640: CPU \(format(Self.median(cpuTimes))) ms, GPU \(format(Self.median(gpuTimes))) ms; re-query on the GPU \(format(Self.median(requeryTimes))) ms"
        )
        return outcome
    }

    /// What the backend recorded and replayed as CUDA graphs (the detections compared came from replays).
    static func graphs(_ backend: CUDABackend) -> String {
        let (recorded, replayed, refused) = backend.replays()
        let refusals = Set(refused).sorted()
        return "CUDA graphs: \(recorded) recorded, \(replayed) replays"
            + (refusals.isEmpty ? "" : "; not recorded: " + refusals.joined(separator: "; "))
            + (CUDABackend.graphsWanted ? "" : " (LOOKOUT_CUDA_GRAPHS=0)")
    }

    /// The largest difference of the two boxes' coordinates, in pixels.
    func distance(_ a: ImageDetections.Item, _ b: ImageDetections.Item) -> Float {
        zip(a.box, b.box).map { abs($0 - $1) }.max() ?? .infinity
    }
}
