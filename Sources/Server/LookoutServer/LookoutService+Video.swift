import Foundation
import LookoutEngine
import LookoutFrames
import LookoutJSON
import LookoutSupport
import LookoutTracking
import LookoutVideo

extension LookoutService {
    /// How a video upload is read: every Nth frame, optionally followed by ByteTrack or BoT-SORT; at most
    /// `maximumSeconds` of video and `maximumFrames` decoded frames (processed or not).
    public struct VideoRequest: Sendable {
        public var every = 1
        public var track = false
        public var tracker = ByteTracker.Method.byteTrack
        public var maximumSeconds = 120.0
        public var maximumFrames = 3600

        public init() {}
    }

    /// `POST /api/v1/videos/detect`: the uploaded video's processed frames with their detections (and track
    /// ids when tracking), then what was found when — one JSON document:
    /// `{"width","height","frames":[{"frame","time","detections"}],"found":{label:{"first","last","frames"}},
    /// "tracks"}`. The bytes go to FFmpeg as an ``UnlinkedFile`` (nothing is left behind whatever ends the
    /// request or the server). The
    /// work stops at the next frame once `cancellation` says so (503).
    public func detectVideo(
        bytes: [UInt8], queries: [Query], thresholds: Thresholds, request: VideoRequest,
        cancellation: Cancellation = Cancellation()
    ) throws(ServiceError) -> [UInt8] {
        let queries = try Self.checked(queries)
        guard !bytes.isEmpty else { throw ServiceError(400, "the request body is empty: send the video's bytes") }
        guard VideoFile.looksLikeVideo(Array(bytes.prefix(16))) else {
            throw ServiceError(415, "not a video Lookout reads (MP4, MOV, MKV, WebM, AVI, MPEG, FLV, Ogg)")
        }
        let file: UnlinkedFile
        do {
            file = try UnlinkedFile(bytes: bytes, directory: NSTemporaryDirectory())
        } catch .cannotCreate {
            throw ServiceError(500, "cannot make a temporary file for the video")
        } catch {
            throw ServiceError(507, "cannot store the video to read it")
        }
        let path = file.path

        let reader: VideoReader
        do {
            reader = try VideoReader(path: path, threads: 1, pixelLimit: pixelLimit)
        } catch {
            throw Self.serviceError(error)
        }
        if let duration = reader.info.duration, duration > request.maximumSeconds + 0.5 {
            throw ServiceError(
                422, "the video lasts \(Int(duration.rounded())) s: at most \(Int(request.maximumSeconds)) s")
        }
        // The queries embedded once for every frame.
        let query = engine.prepare(QueryPlan(queries), options: thresholds.options(for: engine))
        var settings = ByteTracker.Settings()
        settings.method = request.tracker
        let session = request.track ? TrackingSession(settings: settings) : nil
        var pipeline = FramePipeline(
            engine: engine, query: query, imageSize: imageSize, tracking: session, name: "upload")
        pipeline.limits = FrameLimits(
            frames: request.maximumFrames, seconds: request.maximumSeconds,
            framesSetting: "the server's --max-video-frames", source: "upload")
        pipeline.isCancelled = { cancellation.isCancelled }
        var frames: [JSONValue] = []
        var found: [String: (first: Double, last: Double, frames: Int)] = [:]
        var width = reader.info.width, height = reader.info.height
        // Every decoded frame passes the limits, taken or not (as decoding costs whether or not it is detected).
        let source = VideoReadAhead(reader, selection: FrameSelection(.every(request.every)), onlySelected: false)
        let givenUp: Bool
        do {
            givenUp =
                try pipeline.run(source) { item in
                    guard let result = item.detections else { return }
                    width = result.width
                    height = result.height
                    let items = Self.shown(result.detections, tracked: item.tracks)
                    for label in Set(items.map(\.label)) {
                        let seen = found[label]
                        found[label] = (seen?.first ?? item.frame.time, item.frame.time, (seen?.frames ?? 0) + 1)
                    }
                    frames.append(
                        .object([
                            ("frame", .int(Int64(item.frame.index))),
                            ("time", .double((item.frame.time * 1000).rounded() / 1000)),
                            ("detections", .array(items.map(\.json))),
                        ]))
                } == .cancelled
        } catch let error as VideoError {
            throw Self.serviceError(error)
        } catch {
            throw ServiceError(500, "\(error)")
        }
        if givenUp {
            throw ServiceError(
                503,
                "the request was given up (its time limit, the client gone or the server stopping); its work stopped")
        }
        guard !frames.isEmpty else { throw ServiceError(400, "no frame could be decoded") }
        var document: [(String, JSONValue)] = [
            ("width", .int(Int64(width))), ("height", .int(Int64(height))), ("frames", .array(frames)),
            (
                "found",
                .object(
                    found.keys.sorted().map { label in
                        let entry = found[label]!
                        return (
                            label,
                            .object([
                                ("first", .double((entry.first * 1000).rounded() / 1000)),
                                ("last", .double((entry.last * 1000).rounded() / 1000)),
                                ("frames", .int(Int64(entry.frames))),
                            ])
                        )
                    })
            ),
        ]
        if let session { document.append(("tracks", .int(Int64(session.ids.count)))) }
        return Array(JSONValue.object(document).serialized.utf8)
    }

    static func serviceError(_ error: VideoError) -> ServiceError {
        switch error.kind {
        case .unreadable, .noVideoStream, .unsupportedCodec:
            ServiceError(415, "not a video Lookout reads: \(error.problem)")
        case .tooLarge: ServiceError(422, error.problem)
        case .damaged, .notWritten: ServiceError(400, "the video is damaged: \(error.problem)")
        }
    }
}
