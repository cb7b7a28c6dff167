import ArgumentParser
import LookoutDetector
import LookoutEngine
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
    let plan: QueryPlan
    let textFeatures: [Float]
    let options: SuppressionOptions
    let imgsz: Int
    let selection: FrameSelection
    let format: DetectCommand.OutputFormat
    let pad: Bool
    /// The folder of `--save`: the annotated video goes there as NAME.mp4.
    let saveFolder: String?
    let progress: Bool

    /// Names that ffmpeg and phones give videos; such a file goes to the video reader even when its first
    /// bytes are not a container Lookout recognises, so that the error comes from FFmpeg.
    static let extensions: Set<String> = [
        "mp4", "m4v", "mov", "qt", "mkv", "webm", "avi", "3gp", "mts", "m2ts", "ts", "mpg", "mpeg", "flv", "ogv", "wmv",
    ]

    static func isVideo(_ path: String) -> Bool {
        if VideoFile.isVideo(path) { return true }
        guard let dot = path.lastIndex(of: "."), !path[dot...].contains("/") else { return false }
        return extensions.contains(path[path.index(after: dot)...].lowercased())
    }

    /// Detects on the selected frames, printing as it goes. Returns normally when the video was read to its end;
    /// throws the error that stopped it (after printing the frames before it).
    func run() throws(VideoError) {
        let reader = try VideoReader(path: path, threads: 1)
        let info = reader.info
        var writer: VideoWriter?
        if let saveFolder {
            let output = Self.outputName(for: path, in: saveFolder)
            writer = try VideoWriter(
                path: output, width: info.width, height: info.height, frameRate: info.frameRate ?? 30)
            if format == .table { print("  saving \(Report.visible(output))") }
        }
        let frames = VideoReadAhead(reader, selection: selection, onlySelected: writer == nil)
        defer { frames.stop() }
        let expected = expectedFrames(info)
        let reporter = progress && expected != nil ? ProgressReporter(terminal: true, unit: "frames") : nil
        var processed = 0
        var latest: ImageDetections?
        do throws(VideoError) {
            while let (frame, selected) = try frames.next() {
                if selected {
                    let prepared = engine.prepare(image: frame.image, name: path, size: imgsz)
                    let result = engine.detections(
                        engine.score(prepared, plan: plan, text: textFeatures), options: options)
                    let shown = pad ? result.droppingPadding() : result
                    latest = shown
                    processed += 1
                    // The bar shares the screen with the lines only when both go to the terminal.
                    if let reporter, isatty(1) == 1 { reporter.clearLine() }
                    print(render(shown, frame: frame), terminator: "")
                    if let reporter, let expected { reporter.report(done: min(processed, expected), total: expected) }
                }
                if let writer {
                    let boxes = (latest?.detections ?? []).map {
                        BoxAnnotation(
                            box: $0.box, label: "\($0.label) \(Report.format2($0.score))", colorIndex: $0.queryIndex)
                    }
                    try writer.add(boxes.isEmpty ? frame.image : frame.image.annotated(with: boxes), time: frame.time)
                }
            }
            reporter?.finish()
            try writer?.finish()
        } catch {
            reporter?.finish()
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
        case .json: return Self.json(result, video: path, frame: frame)
        default:
            var table = Report.table(result)
            let header =
                "\(Report.visible(path)) frame \(frame.index) at \(Self.seconds(frame.time)) s (\(result.width)×\(result.height))"
            if let colon = table.firstIndex(of: "\n") {
                let firstLine = table[..<colon]
                let count = firstLine.split(separator: ":").last.map(String.init) ?? ""
                table = header + ":" + count + table[colon...]
            }
            return table
        }
    }

    /// `{"video", "frame", "time", "width", "height", "detections"}` for one processed frame.
    static func json(_ result: ImageDetections, video: String, frame: VideoFrame) -> String {
        let detections = result.detections.map { item -> JSONValue in
            .object([
                ("label", .string(item.label)), ("query_index", .int(Int64(item.queryIndex))),
                ("score", Report.shortest(item.score)),
                ("box", .array(item.box.map(Report.shortest))),
            ])
        }
        let value = JSONValue.object([
            ("video", .string(video)), ("frame", .int(Int64(frame.index))),
            ("time", .double((frame.time * 1_000_000).rounded() / 1_000_000)),
            ("width", .int(Int64(result.width))), ("height", .int(Int64(result.height))),
            ("detections", .array(detections)),
        ])
        return value.serialized + "\n"
    }

    static func seconds(_ time: Double) -> String { "\((time * 1000).rounded() / 1000)" }

    /// DIR/<name of the video>.mp4, numbered (-2, -3, …) where that name is taken.
    static func outputName(for source: String, in folder: String) -> String {
        let base = String(source.split(separator: "/").last ?? "video")
        var stem = base
        if let dot = base.lastIndex(of: "."), dot != base.startIndex { stem = String(base[..<dot]) }
        let directory = folder.hasSuffix("/") ? folder : folder + "/"
        var name = directory + stem + ".mp4"
        var counter = 2
        while DetectCommand.exists(name) {
            name = directory + "\(stem)-\(counter).mp4"
            counter += 1
        }
        return name
    }
}
