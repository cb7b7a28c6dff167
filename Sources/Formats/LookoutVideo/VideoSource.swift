import Foundation
import LookoutSupport

/// The frames `lookout detect` and `lookout track` take from a video file, a camera or a network stream,
/// decoded ahead on a thread of their own. A live network stream (RTSP, UDP, a live HLS playlist) that stops —
/// the server gone, the network down, no data within the time limit — is opened again up to `reconnects` times,
/// waiting 1, 2, 4… seconds (at most 30) between tries and saying so through `notice`; its frames are numbered
/// on across the gap. When every try fails the stream ends there, as a file ends. A live source drops its
/// oldest frames rather than queue them when the detector falls behind.
public final class VideoSource {
    /// The source as given, and as messages show it (a URL's password hidden).
    public let path: String
    public let shown: String
    public private(set) var info: VideoInfo
    /// Times the stream was opened again.
    public private(set) var reconnected = 0

    private var selection: FrameSelection
    private let onlySelected: Bool
    private let timeout: Double
    private let reconnects: Int
    private let notice: (String) -> Void
    private var frames: VideoReadAhead
    private var indexOffset = 0
    private var timeOffset = 0.0
    private var last: (index: Int, time: Double)?
    private var gaveUp = false
    private var droppedBefore = 0

    public init(
        path: String, selection: FrameSelection, onlySelected: Bool, timeout: Double = 10, reconnects: Int = 5,
        notice: @escaping (String) -> Void = { _ in }
    ) throws(VideoError) {
        self.path = path
        shown = URLText.redacted(path)
        self.selection = selection
        self.onlySelected = onlySelected
        self.timeout = timeout
        self.reconnects = reconnects
        self.notice = notice
        let reader = try VideoReader(path: path, threads: 1, timeout: timeout)
        info = reader.info
        frames = VideoReadAhead(reader, selection: .all, onlySelected: false)
    }

    deinit { frames.stop() }

    public func stop() { frames.stop() }

    /// Frames of a live source dropped because the detector was behind, over every connection so far.
    public var dropped: Int { droppedBefore + frames.dropped }

    /// The line that tells a person how many frames of a live source went undetected, or nil when none did.
    public var droppedNote: String? {
        let count = dropped
        guard count > 0 else { return nil }
        return
            "\(shown): \(count) frame\(count == 1 ? "" : "s") dropped because detection was slower than the stream (the newest frames are kept)"
    }

    /// Whether a stop is answered by opening the source again.
    public var canReconnect: Bool { VideoFile.isStream(path) && info.isLive && reconnects > 0 }

    /// The next frame (numbered from the first frame of the first connection) and whether the selection takes
    /// it; nil at the end. Throws a file's decoding error after the frames before it.
    public func next() throws(VideoError) -> (frame: VideoFrame, selected: Bool)? {
        while !gaveUp {
            var reason = "the stream ended"
            do throws(VideoError) {
                if let (frame, _) = try frames.next() {
                    let numbered = VideoFrame(
                        index: frame.index + indexOffset, time: frame.time + timeOffset, image: frame.image)
                    last = (numbered.index, numbered.time)
                    let selected = selection.takes(numbered.index, time: numbered.time)
                    if onlySelected && !selected { continue }
                    return (numbered, selected)
                }
                guard canReconnect else { return nil }
            } catch {
                guard canReconnect else { throw error }
                reason = error.problem
            }
            try reconnect(after: reason)
        }
        return nil
    }

    private func reconnect(after reason: String) throws(VideoError) {
        frames.stop()
        droppedBefore += frames.dropped
        var reason = reason
        for attempt in 1...reconnects {
            let wait = min(30, 1 << (attempt - 1))
            notice("\(shown): \(reason); reconnecting in \(wait) s (attempt \(attempt) of \(reconnects))")
            Thread.sleep(forTimeInterval: Double(wait))
            do throws(VideoError) {
                let reader = try VideoReader(path: path, threads: 1, timeout: timeout)
                let interval = 1 / (info.frameRate ?? reader.info.frameRate ?? 30)
                indexOffset = (last?.index ?? -1) + 1
                timeOffset = (last?.time ?? -interval) + interval
                frames = VideoReadAhead(reader, selection: .all, onlySelected: false)
                reconnected += 1
                notice("\(shown): reconnected")
                return
            } catch {
                reason = error.problem
            }
        }
        notice("\(shown): gave up after \(reconnects) attempts (\(reason)); the stream ends here")
        gaveUp = true
    }
}
