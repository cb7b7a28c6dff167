import ArgumentParser
import LookoutDetector
import LookoutEngine
import LookoutFrames
import LookoutImage
import LookoutJSON
import LookoutSupport
import LookoutTracking
import LookoutVideo

#if canImport(Glibc)
    import Glibc
#endif

struct TrackCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "track",
        abstract: "Follow what you describe through a video or a camera: an id per object, lines and zones counted.",
        discussion: """
            Detects on each processed frame, then follows the boxes with ByteTrack exactly as ultralytics' \
            model.track() does (bytetrack.yaml): the same detections give the same ids. --tracker botsort is \
            ultralytics' BoT-SORT without re-identification (botsort.yaml): a Kalman filter over width and \
            height, and the camera's own motion (pans, turns, zoom) estimated from each frame by sparse \
            optical flow as ultralytics' GMC does, so boxes stay on their objects when the camera moves; it \
            costs a few milliseconds a frame more. As there, the \
            detection threshold defaults to 0.1 (ByteTrack's second association uses the doubtful boxes), and \
            a frame shows its tracks only, with the tracker's (Kalman) box and the score and class of the \
            detection it matched; a frame without a confirmed track shows nothing while a new track waits, \
            and otherwise its detections without ids (as ultralytics reports it).

            --line x1,y1,x2,y2 counts tracks crossing the segment, per query and direction (as \
            supervision's LineZone: all four corners of a box must have passed to its other side; "in" is \
            from the right of start→end to its left). --zone x1,y1,x2,y2,x3,y3,… counts the tracks whose \
            box's bottom centre stands in the polygon in each frame (supervision's PolygonZone). Both \
            repeat; coordinates are the video's pixels.

            Output: a table per frame, or with --json one line per processed frame — \
            {"video","frame","time","width","height","detections":[{…,"track_id"}],"lines":[…],"zones":[…]} \
            — and a last line {"video","summary":{…}}. --save writes the video with ids, trails, lines \
            and zones drawn.

            Examples:
              lookout track examples/tracking/shapes.mp4 -q "red circle, blue square, green star"
              lookout track examples/tracking/camera.mp4 -q "red circle, green star" --tracker botsort
              lookout track traffic.mp4 --model yolov8s-worldv2 -q "car, truck" --line 0,400,1280,400 --json
              lookout track /dev/video0 -q person --zone 100,100,500,100,500,400,100,400
              lookout track clip.mp4 -q dog --every 2 --save out.mp4
            """
    )

    @Argument(
        help: ArgumentHelp("A video file (MP4, MOV, MKV, WebM, AVI) or a camera (/dev/video0).", valueName: "video"))
    var source: String

    @Option(
        name: [.customShort("q"), .customLong("queries")],
        help: "Comma-separated queries in Lookout's syntax (sofa|couch, dog@0.4, -person).")
    var queries: String

    @Option(
        help: ArgumentHelp(
            "The tracker: bytetrack (ultralytics' bytetrack.yaml) or botsort (botsort.yaml, camera motion "
                + "compensated, no re-identification).", valueName: "name"),
        completion: .list(["bytetrack", "botsort"]))
    var tracker = "bytetrack"

    @Option(
        help: ArgumentHelp("Frames a lost track is kept for before its id is retired (track_buffer).", valueName: "n"))
    var trackBuffer = 30

    @OptionGroup var frameOptions: FrameOptions

    @Option(
        parsing: .unconditionalSingleValue,
        help: ArgumentHelp("A counting line x1,y1,x2,y2 in the video's pixels (repeatable).", valueName: "x1,y1,x2,y2"))
    var line: [String] = []

    @Option(
        parsing: .unconditionalSingleValue,
        help: ArgumentHelp(
            "A counting zone, a polygon x1,y1,x2,y2,x3,y3,… of at least 3 whole-pixel corners (repeatable).",
            valueName: "x1,y1,…"))
    var zone: [String] = []

    @Flag(
        help: ArgumentHelp(
            "Keep a track's side of each --line for as long as the tracker keeps the track, so that a crossing made "
                + "while the object is hidden counts when it shows again. By default the count is supervision's "
                + "LineZone's, which forgets a track's side after 2 frames without it."))
    var countHidden = false

    @Flag(help: "One JSON object per processed frame per line, then a summary line.")
    var json = false

    @Option(
        help: ArgumentHelp(
            "Write the annotated video: a file (.mp4, .mkv, .mov) or a folder (FOLDER/NAME.mp4).", valueName: "out"))
    var save: String?

    @Option(parsing: .unconditional, help: "Confidence threshold for the detector (ultralytics' track() uses 0.1).")
    var conf: Float = 0.1

    @Option(parsing: .unconditional, help: "IoU above which a lower-scoring box of the same query is suppressed.")
    var iou: Double = 0.7

    @Option(parsing: .unconditional, help: "Network input size (multiple of 32).")
    var imgsz = 640

    @OptionGroup var streamOptions: StreamOptions
    @OptionGroup var modelOptions: ModelOptions
    @OptionGroup var slicingOptions: SlicingOptions

    func validate() throws {
        try ThresholdOptions.check(conf: conf, iou: iou, maxDet: 300, imgsz: imgsz)
        _ = try slicingOptions.options()
        guard ByteTracker.Method(rawValue: tracker) != nil else {
            throw ValidationError("--tracker \(tracker): choose bytetrack or botsort.")
        }
        guard (1...10_000).contains(trackBuffer) else { throw ValidationError("--track-buffer must be 1 to 10000.") }
        _ = try lines()
        _ = try zones()
    }

    func lines() throws -> [LineCounter] {
        try line.map { text in
            let values = text.split(separator: ",", omittingEmptySubsequences: false).map {
                Double($0.trimmingCharacters(in: " "))
            }
            guard values.count == 4, values.allSatisfy({ $0?.isFinite == true }) else {
                throw ValidationError("--line \(text): give four numbers x1,y1,x2,y2 (the segment's ends in pixels).")
            }
            guard var counter = LineCounter(from: (values[0]!, values[1]!), to: (values[2]!, values[3]!)) else {
                throw ValidationError("--line \(text): the two ends are the same point.")
            }
            counter.keepsSides = countHidden
            return counter
        }
    }

    func zones() throws -> [ZoneCounter] {
        try zone.map { text in
            let values = text.split(separator: ",", omittingEmptySubsequences: false).map {
                Int($0.trimmingCharacters(in: " "))
            }
            guard values.count >= 6, values.count % 2 == 0, values.allSatisfy({ $0 != nil && abs($0!) <= 1_000_000 })
            else {
                throw ValidationError(
                    "--zone \(text): give at least three corners as whole pixels, x1,y1,x2,y2,x3,y3,…")
            }
            let points = stride(from: 0, to: values.count, by: 2).map { (values[$0]!, values[$0 + 1]!) }
            return ZoneCounter(polygon: points)!
        }
    }

    func run() throws {
        let list: [Query]
        do throws(QuerySyntaxError) {
            list = try QuerySyntax.parseLine(queries).0
        } catch {
            throw ValidationError(error.message)
        }
        guard list.contains(where: { !$0.negative }) else {
            throw ValidationError("-q needs at least one query naming something to follow.")
        }
        guard VideoDetection.isVideo(source) else {
            throw LookoutError(
                "\(Report.visible(shown)): not a video (lookout track reads MP4, MOV, MKV, WebM, AVI, /dev/videoN, or rtsp://, http(s)://, udp:// streams)"
            )
        }
        let engine = try modelOptions.engine()
        let plan = QueryPlan(list)
        warnAboutLongQueries(plan.texts, engine: engine)
        var options = SuppressionOptions()
        options.confidence = conf
        options.iou = iou
        let slicing = try slicingOptions.options()
        slicingOptions.explain(slicing, confidence: conf)
        let query = engine.prepare(plan, options: options)

        var settings = ByteTracker.Settings()
        settings.method = ByteTracker.Method(rawValue: tracker) ?? .byteTrack
        settings.buffer = trackBuffer
        let session = TrackingSession(settings: settings, lines: try lines(), zones: try zones())

        let frames = try VideoSource(
            path: source, selection: frameOptions.selection,
            onlySelected: save == nil, timeout: streamOptions.timeout, reconnects: streamOptions.reconnect,
            notice: { printError("lookout: \($0)") })
        defer { frames.stop() }
        let info = frames.info
        var writer: VideoWriter?
        if let output = try savePath() {
            writer = try VideoWriter(
                path: output, width: info.width, height: info.height, frameRate: info.frameRate ?? 30)
            if !json { print("saving \(Report.visible(output))") }
        }
        let labels = plan.labels
        var processed = 0
        var latest: TrackingSession.Frame?
        var masks: [BinaryMask?] = []
        var interrupted: VideoError?
        var pipeline = FramePipeline(engine: engine, query: query, imageSize: imgsz, tracking: session, name: shown)
        pipeline.slicing = slicing
        do {
            try pipeline.run(frames) { item throws(VideoError) in
                let frame = item.frame
                if let result = item.detections, let tracked = item.tracks {
                    // A segmentation model's masks follow their detections into the tracks (as ultralytics' track).
                    masks = tracked.shown.map { result.detections[$0.detection].mask }
                    latest = tracked
                    processed += 1
                    print(
                        json
                            ? jsonLine(
                                tracked, masks: masks, frame: frame, width: result.width, height: result.height,
                                labels: labels)
                            : table(tracked, frame: frame, width: result.width, height: result.height, labels: labels),
                        terminator: "")
                }
                if let writer {
                    try writer.add(
                        annotate(frame.image, latest, masks: masks, session: session, labels: labels), time: frame.time)
                }
            }
            try writer?.finish()
        } catch {
            // The source's and the writer's are the only errors here.
            let error = error as? VideoError ?? VideoError(path: shown, kind: .damaged, problem: "\(error)")
            if error.kind != .notWritten { try? writer?.finish() }
            interrupted = error
        }
        if let note = frames.droppedNote { printError("lookout: \(note)") }
        print(
            json
                ? summaryJSON(session, frames: processed, labels: labels)
                : summaryTable(session, frames: processed, labels: labels), terminator: "")
        if let interrupted { throw interrupted }
    }

    /// The source for messages and output (a URL's password hidden).
    var shown: String { URLText.redacted(source) }

    /// --save: a video file as named, or FOLDER/NAME.mp4.
    func savePath() throws -> String? {
        guard let save else { return nil }
        let lower = save.lowercased()
        if [".mp4", ".mkv", ".mov"].contains(where: { lower.hasSuffix($0) }) { return save }
        try FileContents.makeDirectories(save)
        let name = VideoFile.isStream(source) ? "stream" : String(source.split(separator: "/").last ?? "video")
        let stem = name.contains(".") ? String(name[..<name.lastIndex(of: ".")!]) : name
        return save + "/" + stem + ".mp4"
    }

    private func table(
        _ tracked: TrackingSession.Frame, frame: VideoFrame, width: Int, height: Int, labels: [String]
    ) -> String {
        var out =
            "\(Report.visible(shown)) frame \(frame.index) at \(VideoDetection.seconds(frame.time)) s (\(width)×\(height)): \(tracked.shown.count) tracked\n"
        let names = tracked.shown.map { Report.visible(labels[$0.label]) }
        let nameWidth = max(5, names.map(Report.displayWidth).max() ?? 0)
        for (item, name) in zip(tracked.shown, names) {
            let id = item.id.map { "#\($0)" } ?? "-"
            let box = item.box.map { Report.format1($0) }.joined(separator: " ")
            out +=
                "  \(id.padding(toLength: 5, withPad: " ", startingAt: 0)) \(name)\(String(repeating: " ", count: nameWidth - Report.displayWidth(name)))  \(Report.format3(item.score))  [\(box)]\n"
        }
        for (l, counts) in tracked.lines.enumerated() {
            out += "  line \(l + 1): in \(total(counts.into)), out \(total(counts.outOf))\n"
        }
        for (z, count) in tracked.zones.enumerated() { out += "  zone \(z + 1): \(count.total)\n" }
        return out
    }

    private func total(_ counts: [Int: Int]) -> Int { counts.values.reduce(0, +) }

    private func perLabel(_ counts: [Int: Int], _ labels: [String]) -> JSONValue {
        .object(counts.keys.sorted().map { (labels[$0], .int(Int64(counts[$0]!))) })
    }

    private func jsonLine(
        _ tracked: TrackingSession.Frame, masks: [BinaryMask?], frame: VideoFrame, width: Int, height: Int,
        labels: [String]
    ) -> String {
        let detections = JSONValue.array(
            zip(tracked.shown, masks).map { item, mask in
                DetectionJSON.object(
                    label: labels[item.label], queryIndex: item.label, score: item.score, box: item.box,
                    trackID: item.id, mask: mask)
            })
        var fields: [(String, JSONValue)] = [
            ("video", .string(shown)), ("frame", .int(Int64(frame.index))),
            ("time", .double((frame.time * 1_000_000).rounded() / 1_000_000)),
            ("width", .int(Int64(width))), ("height", .int(Int64(height))), ("detections", detections),
        ]
        if !line.isEmpty {
            fields.append(
                (
                    "lines",
                    .array(
                        tracked.lines.map {
                            .object([("in", perLabel($0.into, labels)), ("out", perLabel($0.outOf, labels))])
                        })
                ))
        }
        if !zone.isEmpty {
            fields.append(
                (
                    "zones",
                    .array(
                        tracked.zones.map {
                            .object([("count", .int(Int64($0.total))), ("labels", perLabel($0.perLabel, labels))])
                        })
                ))
        }
        return JSONValue.object(fields).serialized + "\n"
    }

    private func summaryJSON(_ session: TrackingSession, frames: Int, labels: [String]) -> String {
        var summary: [(String, JSONValue)] = [
            ("frames", .int(Int64(frames))), ("tracks", .int(Int64(session.ids.count))),
        ]
        if !line.isEmpty {
            summary.append(
                (
                    "lines",
                    .array(
                        zip(line, session.lines).map { text, counter in
                            .object([
                                ("line", .string(text)), ("in", perLabel(counter.into, labels)),
                                ("out", perLabel(counter.outOf, labels)),
                            ])
                        })
                ))
        }
        if !zone.isEmpty {
            summary.append(
                (
                    "zones",
                    .array(
                        zip(zone, session.zonePeaks).map { text, peak in
                            .object([("zone", .string(text)), ("most_at_once", .int(Int64(peak)))])
                        })
                ))
        }
        return JSONValue.object([("video", .string(shown)), ("summary", .object(summary))]).serialized + "\n"
    }

    private func summaryTable(_ session: TrackingSession, frames: Int, labels: [String]) -> String {
        let tracks = session.ids.count
        var out =
            "\(Report.visible(shown)): \(frames) frame\(frames == 1 ? "" : "s") processed, \(tracks) track\(tracks == 1 ? "" : "s")\n"
        for (text, counter) in zip(line, session.lines) {
            let described = { (counts: [Int: Int]) in
                counts.keys.sorted().map { "\(counts[$0]!) \(Report.visible(labels[$0]))" }.joined(separator: ", ")
            }
            out += "  line \(text): in \(counter.totalIn)"
            if counter.totalIn > 0 { out += " (\(described(counter.into)))" }
            out += ", out \(counter.totalOut)"
            if counter.totalOut > 0 { out += " (\(described(counter.outOf)))" }
            out += "\n"
        }
        for (text, peak) in zip(zone, session.zonePeaks) { out += "  zone \(text): at most \(peak) at once\n" }
        return out
    }

    /// The frame with the counting lines and zones, each shown track's trail, and its box labelled with its id,
    /// coloured by id.
    private func annotate(
        _ image: Image, _ tracked: TrackingSession.Frame?, masks: [BinaryMask?], session: TrackingSession,
        labels: [String]
    ) -> Image {
        var paths: [PathAnnotation] = []
        for counter in session.lines {
            paths.append(
                PathAnnotation(
                    points: [
                        (Float(counter.start.x), Float(counter.start.y)), (Float(counter.end.x), Float(counter.end.y)),
                    ],
                    colorIndex: 11))
        }
        for zone in session.zones {
            paths.append(
                PathAnnotation(points: zone.polygon.map { (Float($0.x), Float($0.y)) }, colorIndex: 5, closed: true))
        }
        // Each line's counts so far, written at its start.
        let counts = session.lines.map { counter in
            BoxAnnotation(
                box: [
                    Float(counter.start.x), Float(counter.start.y), Float(counter.start.x) + 1,
                    Float(counter.start.y) + 1,
                ], label: "in \(counter.totalIn) out \(counter.totalOut)", colorIndex: 11)
        }
        guard let tracked else { return image.drawing(paths).annotated(with: counts) }
        for item in tracked.shown {
            if let id = item.id, let trail = session.trails[id] {
                paths.append(PathAnnotation(points: trail, colorIndex: id))
            }
        }
        let boxes = tracked.shown.map { item in
            BoxAnnotation(
                box: item.box,
                label: (item.id.map { "#\($0) " } ?? "") + "\(labels[item.label]) \(Report.format2(item.score))",
                colorIndex: item.id ?? item.label)
        }
        let tints = zip(tracked.shown, masks).compactMap { item, mask in
            mask.map { Report.tint($0, colorIndex: item.id ?? item.label) }
        }
        return (tints.isEmpty ? image : image.tinted(with: tints)).drawing(paths).annotated(with: boxes + counts)
    }
}
