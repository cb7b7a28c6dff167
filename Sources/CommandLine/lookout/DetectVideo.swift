import ArgumentParser
import LookoutDetector
import LookoutEngine
import LookoutFrames
import LookoutImage
import LookoutJSON
import LookoutSupport
import LookoutVideo

#if canImport(Glibc)
    import Glibc
#endif

/// `lookout detect VIDEO`: the frames a ``FrameSelection`` takes, decoded on a thread of their own while the
/// network runs on the current one, each detected as a photo is.
struct VideoDetection {
    let path: String
    let engine: Engine
    /// The queries, embedded once for every frame.
    let query: PreparedQuery
    let imgsz: Int
    /// Frames cut into tiles (`--slice`), or whole.
    let slicing: SliceOptions?
    let selection: FrameSelection
    let format: DetectCommand.OutputFormat
    let pad: Bool
    /// Where `--save` writes the annotated video.
    let saveTo: String?
    let progress: Bool
    /// A network stream's time limit for an answer, and how often a live one that stops is opened again.
    var timeout = 10.0
    var reconnects = 5

    /// A video by its first bytes, or by its name (the error then comes from FFmpeg).
    static func isVideo(_ path: String) -> Bool { VideoFile.isVideo(path) || VideoFile.hasExtension(path) }

    /// Detects on the selected frames, printing as it goes. Returns normally when the video was read to its end;
    /// throws the error that stopped it (after printing the frames before it).
    func run() throws(VideoError) {
        let frames = try VideoSource(
            path: path, selection: selection, onlySelected: saveTo == nil, timeout: timeout, reconnects: reconnects,
            notice: { printError("lookout: \($0)") })
        defer { frames.stop() }
        let info = frames.info
        var writer: VideoWriter?
        if let output = saveTo {
            writer = try VideoWriter(
                path: output, width: info.width, height: info.height, frameRate: info.frameRate ?? 30)
            if format == .table { print("  saving \(Report.visible(output))") }
        }
        let expected = expectedFrames(info)
        let reporter = progress && expected != nil ? ProgressReporter(terminal: true, unit: "frames") : nil
        var processed = 0
        var latest: ImageDetections?
        // However the stream ends, a person learns how much of it went undetected.
        defer { if let note = frames.droppedNote { printError("lookout: \(note)") } }
        var pipeline = FramePipeline(engine: engine, query: query, imageSize: imgsz, name: frames.shown)
        pipeline.slicing = slicing
        do {
            try pipeline.run(frames) { item throws(VideoError) in
                if let result = item.detections {
                    let shown = pad ? result.droppingPadding() : result
                    latest = shown
                    processed += 1
                    // The bar shares the screen with the lines only when both go to the terminal.
                    if let reporter, isatty(1) == 1 { reporter.clearLine() }
                    print(render(shown, frame: item.frame), terminator: "")
                    if let reporter, let expected { reporter.report(done: min(processed, expected), total: expected) }
                }
                if let writer {
                    let boxes = latest.map(Report.annotations) ?? []
                    let image = item.frame.image
                    try writer.add(boxes.isEmpty ? image : image.annotated(with: boxes), time: item.frame.time)
                }
            }
            reporter?.finish()
            try writer?.finish()
        } catch {
            reporter?.finish()
            // The source's and the writer's are the only errors here.
            let error = error as? VideoError ?? VideoError(path: path, kind: .damaged, problem: "\(error)")
            // The annotated video keeps the frames before a decoding error (a playable file, not a torn one).
            if error.kind != .notWritten { try? writer?.finish() }
            throw error
        }
    }

    /// The frames the selection will take, as far as the container lets one know.
    private func expectedFrames(_ info: VideoInfo) -> Int? {
        switch selection.rule {
        case .every(let n): return info.estimatedFrames.map { ($0 + n - 1) / n }
        case .perSecond(let rate): return info.duration.map { max(1, Int(($0 * rate).rounded(.up))) }
        }
    }

    private func render(_ result: ImageDetections, frame: VideoFrame) -> String {
        switch format {
        case .json: return Self.json(result, video: URLText.redacted(path), frame: frame)
        default:
            return Report.table(
                result,
                title:
                    "\(Report.visible(URLText.redacted(path))) frame \(frame.index) at \(Self.seconds(frame.time)) s (\(result.width)×\(result.height))"
            )
        }
    }

    /// `{"video", "frame", "time", "width", "height", "detections"}` for one processed frame.
    static func json(_ result: ImageDetections, video: String, frame: VideoFrame) -> String {
        let value = JSONValue.object([
            ("video", .string(video)), ("frame", .int(Int64(frame.index))),
            ("time", .double((frame.time * 1_000_000).rounded() / 1_000_000)),
            ("width", .int(Int64(result.width))), ("height", .int(Int64(result.height))),
            ("detections", DetectionJSON.array(result.detections)),
        ])
        return value.serialized + "\n"
    }

    static func seconds(_ time: Double) -> String { "\((time * 1000).rounded() / 1000)" }
}

/// `--every` and `--fps`: which frames of a video `detect` and `track` process.
struct FrameOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "In a video, detect on every Nth decoded frame (the first, then every Nth after it; default 1).",
            valueName: "n"))
    var every: Int?

    @Option(
        help: ArgumentHelp(
            "In a video, detect on F frames per second of video time (the first frame at or after each 1/F seconds), instead of --every.",
            valueName: "F"))
    var fps: Double?

    func validate() throws {
        if every != nil && fps != nil { throw ValidationError("Give --every N or --fps F, not both.") }
        if let every, every < 1 { throw ValidationError("--every must be 1 or more.") }
        if let fps, !(fps > 0 && fps <= 1000) { throw ValidationError("--fps must be above 0 and at most 1000.") }
    }

    var selection: FrameSelection { FrameSelection(fps.map { .perSecond($0) } ?? .every(every ?? 1)) }
}

/// `--timeout` and `--reconnect`: how `detect` and `track` treat a network stream.
struct StreamOptions: ParsableArguments {
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Seconds a network stream (rtsp://, http(s):// HLS or MP4, udp://) may take to answer, at the start and for each read.",
            valueName: "s"))
    var timeout: Double = 10

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Times a live stream that stops is opened again (waiting 1, 2, 4… s between tries); 0: end at the first stop.",
            valueName: "n"))
    var reconnect = 5

    func validate() throws {
        guard timeout.isFinite && timeout > 0 && timeout <= 3600 else {
            throw ValidationError("--timeout must be above 0 and at most 3600 seconds.")
        }
        guard (0...100).contains(reconnect) else { throw ValidationError("--reconnect must be 0 to 100.") }
    }
}
