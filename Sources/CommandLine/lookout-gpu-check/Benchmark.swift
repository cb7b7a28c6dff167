import Dispatch
import LookoutCUDA
import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutTensor
import LookoutWeights
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `lookout-gpu-check --bench DETECTOR [PHOTO [fp32|fp16|bf16]]`: a detector (YOLO-World v2 s from scripts/bench/gpu.py, random
/// weights) on the GPU and on the CPU with three random L2-normalised queries: the full detection from decoded
/// pixels (letterbox, network, NMS, boxes in the photo's pixels), a re-query of kept features, and as
/// throughputs photos one after another, on threads side by side and in batches (each photo's raw output against
/// the one made alone); the GPU's detections against the CPU's. One line per figure,
/// read by scripts/bench/gpu.py. In fp16 or bf16 (the GPU's products on its tensor cores) the differences from
/// the CPU's fp32 are reported, not bounded: their accuracy is measured by `--accuracy`.
struct Benchmark {
    let detector: String
    let photo: String
    var arithmetic = GPUArithmetic.fp32

    func run() -> Bool {
        let image: Image
        let network: any DetectorNetwork
        let cpu: Engine, gpu: Engine
        do {
            image = try ImageFile.read(photo)
            network = try openDetector(WeightFile.open(detector))
            cpu = try Engine(network: network, embedder: nil)
            gpu = try Engine(
                network: network, embedder: nil,
                backend: CUDABackend(gpu: 0, cacheDirectory: "/tmp/lookout-gpu-check-cache", arithmetic: arithmetic))
        } catch {
            print("bench FAILED: \(error)")
            return false
        }
        let labels = ["a", "b", "c"]
        let size = network.embeddingSize
        var text = OperationChecks.random(labels.count * size, seed: 77)
        for row in 0..<labels.count {
            let slice = text[(row * size)..<((row + 1) * size)]
            let norm = slice.reduce(0) { $0 + $1 * $1 }.squareRoot()
            for index in (row * size)..<((row + 1) * size) { text[index] /= norm }
        }
        let options = SuppressionOptions()
        func detect(_ engine: Engine) -> ImageDetections {
            engine.detect(engine.prepare(image: image, name: photo), labels: labels, text: text, options: options)
        }
        print("bench \(detector) (\(network.familyName)) on \(photo) (\(image.width)×\(image.height)), 3 queries")
        var want: ImageDetections!, got: ImageDetections!
        want = detect(cpu)
        var cpuTimes: [Double] = []
        for _ in 0..<5 { cpuTimes.append(DetectionChecks.milliseconds { want = detect(cpu) }) }
        got = detect(gpu)
        var gpuTimes: [Double] = []
        var stages: [String: [Double]] = [:]
        for _ in 0..<50 {
            gpuTimes.append(DetectionChecks.milliseconds { got = detect(gpu) })
            for (stage, value) in got.timings.milliseconds { stages[stage, default: []].append(value) }
        }
        let prepared = gpu.prepare(image: image, name: photo)
        var requery: [Double] = []
        for _ in 0..<50 {
            requery.append(
                DetectionChecks.milliseconds { _ = gpu.detect(prepared, labels: labels, text: text, options: options) })
        }
        let stream = DetectionChecks.milliseconds { for _ in 0..<32 { _ = detect(gpu) } }
        // Threads sharing the GPU, each on its own stream (each photo's host work beside another's GPU work).
        let (name, sharedText) = (photo, text)
        var sideBySide: [Int: Double] = [:]
        // Every detection made side by side must be the one made alone (each thread's work on its own stream).
        let alone = got.detections
        let differing = Mutex(0)
        for threads in [4, 8] {
            let lanes = (0..<threads).map { _ in gpu.sharingWeights(pool: ComputePool(threads: 1)) }
            sideBySide[threads] = DetectionChecks.milliseconds {
                DispatchQueue.concurrentPerform(iterations: threads) { lane in
                    let engine = lanes[lane]
                    for _ in 0..<(64 / threads) {
                        let result = engine.detect(
                            engine.prepare(image: image, name: name), labels: labels, text: sharedText,
                            options: options)
                        if result.detections != alone { differing.withLock { $0 += 1 } }
                    }
                }
            }
        }
        // Batches: photos of one size through each layer together (Engine.detect(images:)), whole detections
        // (letterbox to boxes, NMS on threads of their own); each photo's raw output against the one made alone.
        var batches:
            [(size: Int, milliseconds: Double, network: Double, prepare: Double, difference: Float, differing: Int)] =
                []
        let single = gpu.score(gpu.prepare(image: image, name: photo), labels: labels, text: text).output
        for size in [8, 32, 64] where gpu.batchLimit >= size {
            let photos = [(image: Image, name: String)](repeating: (image, photo), count: size)
            var results: [ImageDetections] = []
            for _ in 0..<2 { results = gpu.detect(images: photos, labels: labels, text: text, options: options) }
            var times: [Double] = []
            var networkTimes: [Double] = [], prepareTimes: [Double] = []
            for _ in 0..<5 {
                times.append(
                    DetectionChecks.milliseconds {
                        results = gpu.detect(images: photos, labels: labels, text: text, options: options, batch: size)
                    })
                var prepared: [PreparedImage] = []
                let preparing = DetectionChecks.milliseconds { prepared = gpu.prepare(images: photos, batch: size) }
                let scoring = DetectionChecks.milliseconds {
                    _ = gpu.score(prepared, labels: labels, text: text, batch: size)
                }
                networkTimes.append(preparing + scoring)
                prepareTimes.append(preparing)
            }
            let scored = gpu.score(gpu.prepare(images: photos, batch: size), labels: labels, text: text, batch: size)
            let difference = scored.map { zip($0.output, single).map { abs($0 - $1) }.max() ?? .infinity }.max() ?? 0
            batches.append(
                (
                    size, DetectionChecks.median(times), DetectionChecks.median(networkTimes),
                    DetectionChecks.median(prepareTimes), difference,
                    results.filter { $0.detections != alone }.count
                ))
        }
        if let backend = gpu.backend as? CUDABackend, backend.profiling {
            _ = backend.profile()
            _ = detect(gpu)
            print("bench profile of one detection (each kernel waited for):")
            for line in backend.profile() { print("bench   \(line)") }
            let photos = [(image: Image, name: String)](repeating: (image, photo), count: 32)
            _ = gpu.detect(images: photos, labels: labels, text: text, options: options)
            print("bench profile of one batch of 32 (each kernel waited for):")
            for line in backend.profile() { print("bench   \(line)") }
        }
        func format(_ value: Double) -> String { String((value * 1000).rounded() / 1000) }
        if let backend = gpu.backend as? CUDABackend, backend.profilingHost {
            // Where the host spends its time: in the calls to the GPU (nothing waited for but where results come
            // back), against the whole.
            func hostTime(of work: String, _ body: () -> Void) {
                _ = backend.profile()
                let whole = DetectionChecks.milliseconds(body)
                print("bench host's time in \(work): \(format(whole)) ms in all; in the calls:")
                for line in backend.profile().prefix(24) { print("bench   \(line)") }
            }
            hostTime(of: "one detection") { _ = detect(gpu) }
            hostTime(of: "one re-query") { _ = gpu.detect(prepared, labels: labels, text: text, options: options) }
            for size in [1, 8, 32] where gpu.batchLimit >= size {
                let photos = [(image: Image, name: String)](repeating: (image, photo), count: size)
                _ = gpu.detect(images: photos, labels: labels, text: text, options: options, batch: size)
                hostTime(of: "one batch of \(size)") {
                    _ = gpu.detect(images: photos, labels: labels, text: text, options: options, batch: size)
                }
            }
        }
        print("bench cpu_ms \(format(DetectionChecks.median(cpuTimes))) (\(cpu.backend.name), median of 5)")
        print("bench gpu_ms \(format(DetectionChecks.median(gpuTimes))) (\(gpu.backend.name), median of 50)")
        print(
            "bench stages on the GPU (medians; the GPU's work is waited for where results come back, in the neck and head): "
                + got.timings.milliseconds.map { "\($0.0) \(format(DetectionChecks.median(stages[$0.0] ?? [])))" }
                .joined(separator: ", "))
        if let backend = gpu.backend as? CUDABackend { print("bench " + DetectionChecks.graphs(backend)) }
        print("bench requery_ms \(format(DetectionChecks.median(requery))) (median of 50)")
        print("bench gpu_32_photos_per_s \(format(32_000 / stream)) (32 photos one after another)")
        print(
            "bench side by side \(differing.withLock { $0 } == 0 ? "identical" : "DIFFERING"): \(differing.withLock { $0 }) of 128 detections made on 4 and 8 threads differ from the one made alone"
        )
        for (threads, milliseconds) in sideBySide.sorted(by: { $0.key < $1.key }) {
            print(
                "bench gpu_64_photos_\(threads)_threads_per_s \(format(64_000 / milliseconds)) (64 photos, \(threads) threads sharing the GPU)"
            )
        }
        for batch in batches {
            print(
                "bench gpu_batch_\(batch.size)_photos_per_s \(format(Double(batch.size) * 1000 / batch.milliseconds)) (batches of \(batch.size), whole detections: \(format(batch.milliseconds)) ms a batch; letterbox to scores alone \(format(Double(batch.size) * 1000 / batch.network)) photos/s, of which the image features \(format(batch.prepare)) ms a batch)"
            )
            print(
                "bench batch of \(batch.size) against one photo alone: raw output within \(batch.difference), \(batch.differing) of \(batch.size) photos' detections differ"
            )
        }
        // The network's raw output (boxes and scores of every anchor), GPU against CPU, relative to its range.
        let raw = (
            cpu.score(cpu.prepare(image: image, name: photo), labels: labels, text: text).output,
            gpu.score(gpu.prepare(image: image, name: photo), labels: labels, text: text).output
        )
        let range = raw.0.map { abs($0) }.max() ?? 1
        let rawDifference = zip(raw.0, raw.1).map { abs($0 - $1) }.max() ?? .infinity
        let boxes = 4 * (raw.0.count / (4 + labels.count))
        let scoreDifference = zip(raw.0[boxes...], raw.1[boxes...]).map { abs($0 - $1) }.max() ?? .infinity
        print(
            "bench raw output: \(raw.0.count) values (boxes in input pixels up to \(range)), largest difference \(rawDifference) (\(rawDifference / range) of the range), of the scores \(scoreDifference)"
        )
        var (largestScore, largestBox, matched) = (Float(0), Float(0), 0)
        for a in want.detections {
            let candidates = got.detections.filter { $0.queryIndex == a.queryIndex }
            let distances = candidates.map { b in zip(a.box, b.box).map { abs($0 - $1) }.max() ?? .infinity }
            guard let best = distances.indices.min(by: { distances[$0] < distances[$1] }) else { continue }
            matched += 1
            largestScore = max(largestScore, abs(a.score - candidates[best].score))
            largestBox = max(largestBox, distances[best])
        }
        // Random weights score many anchors nearly alike, so NMS may keep another of two near-equal boxes: the
        // network's raw output is what must agree; the detections are reported beside it.
        guard arithmetic == .fp32 else {
            print(
                "bench \(arithmetic.rawValue) against the CPU's fp32 (reported, not bounded): detections: CPU \(want.detections.count), GPU \(got.detections.count), matched by query and nearest box \(matched), largest score difference \(largestScore), largest box difference \(largestBox) px"
            )
            return differing.withLock { $0 } == 0
        }
        let passed =
            rawDifference <= 1e-5 * range && scoreDifference <= DetectionChecks.scoreBound
            && differing.withLock { $0 } == 0
        print(
            "bench parity \(passed ? "passed" : "FAILED") (raw output within 1e-5 of its range, scores within \(DetectionChecks.scoreBound)); detections: CPU \(want.detections.count), GPU \(got.detections.count), matched by query and nearest box \(matched), largest score difference \(largestScore), largest box difference \(largestBox) px"
        )
        return passed
    }
}
