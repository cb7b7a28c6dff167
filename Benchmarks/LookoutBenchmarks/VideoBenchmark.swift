import ArgumentParser
import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutTensor
import LookoutVideo
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

/// Frames per second of the stages of `lookout detect VIDEO`: decoding alone, the network alone (frames in
/// memory), H.264 encoding alone, and the whole pipeline as `detect` runs it (decoding on its own thread ahead
/// of the network), without and with the annotated video written.
struct Video: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Video: decode, network, encode and the pipeline, in fps.")
    @Option(help: "Detector weights (.pt or safetensors); without it, the demo model.") var detector: String?
    @Option(help: "A video file.") var video: String
    @Option(help: "Network input size.") var imgsz = 640
    @Option(help: "How many random unit queries.") var queries = 3
    @Option(help: "Frames for the network-alone and encode-alone stages (kept in memory).") var frames = 30

    func run() throws {
        let engine: Engine
        if let detector {
            engine = try Engine(network: try YOLOWorldNetwork(weights: WeightFile.open(detector)), embedder: nil)
        } else {
            engine = try Engine.load(EngineConfiguration(model: .demo, caches: false)).engine
        }
        let text = randomUnitQueries(queries)
        let labels = (0..<queries).map { "q\($0)" }
        let size = imgsz

        // Decoding alone, every frame: one decoder thread (as `detect` runs it), then FFmpeg's choice.
        for threads in [1, 0] {
            let reader = try VideoReader(path: video, threads: threads)
            let start = now()
            var count = 0
            while try reader.next() != nil { count += 1 }
            let seconds = now() - start
            print(
                "decode alone (\(threads == 0 ? "FFmpeg's threads" : "1 thread"), to BGR): \(count) frames of \(reader.info.width)x\(reader.info.height) \(reader.info.codec), \(format3(Double(count) / seconds)) fps"
            )
        }
        // The network alone on frames in memory.
        let reader = try VideoReader(path: video)
        var kept: [VideoFrame] = []
        while kept.count < frames, let frame = try reader.next() { kept.append(frame) }
        _ = engine.detect(engine.prepare(image: kept[0].image, name: "warm-up", size: size), labels: labels, text: text)
        var start = now()
        for frame in kept {
            _ = engine.detect(engine.prepare(image: frame.image, name: "frame", size: size), labels: labels, text: text)
        }
        print(
            "network alone (letterbox → NMS, \(queries) queries, \(size)): \(format3(Double(kept.count) / (now() - start))) fps"
        )
        // Encoding alone.
        let output = "/tmp/lookout-video-benchmark-\(getpid()).mp4"
        defer { unlink(output) }
        let writer = try VideoWriter(
            path: output, width: reader.info.width, height: reader.info.height, frameRate: reader.info.frameRate ?? 30)
        start = now()
        for frame in kept { try writer.add(frame.image, time: frame.time) }
        try writer.finish()
        print("encode alone (H.264, libx264 veryfast, 1 thread): \(format3(Double(kept.count) / (now() - start))) fps")
        kept = []
        // The pipeline, as `lookout detect VIDEO` runs it.
        for save in [false, true] {
            let frames = VideoReadAhead(try VideoReader(path: video, threads: 1), selection: .all, onlySelected: true)
            let writer =
                save
                ? try VideoWriter(
                    path: output, width: frames.info.width, height: frames.info.height,
                    frameRate: frames.info.frameRate ?? 30) : nil
            start = now()
            var count = 0
            while let (frame, _) = try frames.next() {
                let result = engine.detect(
                    engine.prepare(image: frame.image, name: "frame", size: size), labels: labels, text: text)
                if let writer {
                    let boxes = result.detections.map {
                        BoxAnnotation(box: $0.box, label: "\($0.label) \($0.score)", colorIndex: $0.queryIndex)
                    }
                    try writer.add(frame.image.annotated(with: boxes), time: frame.time)
                }
                count += 1
            }
            try writer?.finish()
            print(
                "pipeline (decode ahead on its own thread + network\(save ? " + annotate + encode" : "")): \(count) frames, \(format3(Double(count) / (now() - start))) fps"
            )
        }
        print("peak resident memory: \(peakMegabytes()) MB")
    }
}
