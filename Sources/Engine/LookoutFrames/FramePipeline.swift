import LookoutEngine
import LookoutImage
import LookoutTracking
import LookoutVideo

/// Where a ``FramePipeline``'s frames come from, in order, each with whether the frame selection takes it:
/// a file, camera or network stream (``VideoSource``, which reconnects), or a video decoded ahead on a thread
/// of its own (``VideoReadAhead``: an index's videos, an uploaded video).
public protocol FrameSource: AnyObject {
    var info: VideoInfo { get }
    /// The next frame and whether it is selected; nil at the end. Throws the decoding error that stopped the
    /// source, after the frames before it.
    func next() throws(VideoError) -> (frame: VideoFrame, selected: Bool)?
    /// Stops decoding (a consumer that leaves early).
    func stop()
}

extension VideoSource: FrameSource {}
extension VideoReadAhead: FrameSource {}

/// One frame through the pipeline: the frame, whether the selection took it, and for a taken frame its
/// detections (as the engine gives them: letterbox padding kept, each with its query's label) and, when
/// tracking, what the tracker shows.
public struct PipelineFrame {
    public let frame: VideoFrame
    public let selected: Bool
    public let detections: ImageDetections?
    public let tracks: TrackingSession.Frame?
}

/// How much of a video a pipeline reads at most (an uploaded video's limits): frames decoded, processed or
/// not, and seconds of video time. Going past either is an error of kind `.tooLarge` naming the limit.
public struct FrameLimits: Sendable {
    public var frames: Int
    public var seconds: Double
    /// Words naming where each limit is set, for the error (`"the server's --max-video-frames"`).
    public var framesSetting: String
    public var source: String

    public init(frames: Int, seconds: Double, framesSetting: String, source: String) {
        self.frames = frames
        self.seconds = seconds
        self.framesSetting = framesSetting
        self.source = source
    }
}

/// The one loop over a video's frames that `lookout detect VIDEO`, `lookout track`, an index's videos and the
/// server's video uploads share: frames from a ``FrameSource``; for each selected frame, when a query is
/// given, the letterboxed frame detected with the prepared query (embedded once for every frame) and, with a
/// ``TrackingSession``, tracked; then every frame handed to the consumer in order. The consumer prints,
/// saves, records or collects. The loop stops early when `isCancelled` says so (checked before each frame),
/// and always stops its source.
public struct FramePipeline {
    public let engine: Engine?
    public let query: PreparedQuery?
    public let imageSize: Int
    public let tracking: TrackingSession?
    /// The name the frames' detections carry (the video's path, or "upload").
    public let name: String
    public var limits: FrameLimits?
    /// Each selected frame cut into tiles and merged (sliced inference, ``SliceOptions``); nil: whole frames.
    public var slicing: SliceOptions?
    public var isCancelled: () -> Bool = { false }

    /// Frames detected with `query` (and tracked with `tracking`).
    public init(engine: Engine, query: PreparedQuery, imageSize: Int, tracking: TrackingSession? = nil, name: String) {
        self.engine = engine
        self.query = query
        self.imageSize = imageSize
        self.tracking = tracking
        self.name = name
    }

    /// Frames handed over as decoded, for a consumer that computes on them itself (an index's regions).
    public init(name: String) {
        engine = nil
        query = nil
        imageSize = 0
        tracking = nil
        self.name = name
    }

    /// How a run ended.
    public enum Ending: Sendable, Equatable {
        /// The source ended.
        case ended
        /// `isCancelled` said so before a frame.
        case cancelled
    }

    /// Runs the source to its end (or until cancelled), handing each frame to `consume`. Throws the source's
    /// error (a ``VideoError``), after the frames before it, or the consumer's.
    @discardableResult
    public func run(_ source: FrameSource, _ consume: (PipelineFrame) throws -> Void) throws -> Ending {
        defer { source.stop() }
        while true {
            if isCancelled() { return .cancelled }
            guard let (frame, selected) = try source.next() else { return .ended }
            if let limits { try Self.check(frame, limits) }
            var detections: ImageDetections?
            var tracks: TrackingSession.Frame?
            if selected, let engine, let query {
                let result: ImageDetections
                do {
                    result = try engine.detect(
                        image: frame.image, name: name, size: imageSize, slicing: slicing, query)
                } catch {
                    // Only slicing fails here: a frame too large for its tiles.
                    throw VideoError(path: name, kind: .tooLarge, problem: error.problem)
                }
                detections = result
                if let tracking { tracks = Self.track(result.detections, frame: frame.image, in: tracking) }
            }
            try consume(PipelineFrame(frame: frame, selected: selected, detections: detections, tracks: tracks))
        }
    }

    /// The tracker's update with a frame's detections (with the frame's pixels for camera-motion compensation
    /// where the session has it and the frame is in colour), labels being the query indices.
    public static func track(
        _ detections: [ImageDetections.Item], frame: Image?, in session: TrackingSession
    ) -> TrackingSession.Frame {
        let boxes = detections.map { ByteTracker.Detection(box: $0.box, score: $0.score, label: $0.queryIndex) }
        guard let frame, frame.channels == 3 else { return session.update(boxes) }
        return session.update(boxes, bgr: frame.pixels, width: frame.width, height: frame.height)
    }

    static func check(_ frame: VideoFrame, _ limits: FrameLimits) throws(VideoError) {
        guard frame.index < limits.frames else {
            throw VideoError(
                path: limits.source, kind: .tooLarge,
                problem: "the video holds more than \(limits.frames) frames (\(limits.framesSetting))")
        }
        guard frame.time <= limits.seconds else {
            throw VideoError(
                path: limits.source, kind: .tooLarge, problem: "the video goes on past \(Int(limits.seconds)) s")
        }
    }
}
