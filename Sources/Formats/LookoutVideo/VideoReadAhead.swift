import Foundation
import LookoutSupport

/// A video decoded on a thread of its own, running ahead of its reader by at most `ahead` frames, so that
/// decoding overlaps the network on the other core. Each frame comes with whether `selection` takes it;
/// with `onlySelected`, frames it skips are dropped on the decoding thread (never queued). A camera never
/// waits for its reader: when the reader is behind, the oldest queued frame is dropped (and counted), so that
/// what the network sees is at most `ahead` frames old. The frames travel through a ``BoundedQueue``.
public final class VideoReadAhead: @unchecked Sendable {
    public let info: VideoInfo
    public let path: String
    private let queue: BoundedQueue<(frame: VideoFrame, selected: Bool)>
    private let lock = NSLock()
    private var failure: VideoError?

    public init(
        _ reader: VideoReader, selection: FrameSelection, onlySelected: Bool, ahead: Int = 4
    ) {
        info = reader.info
        path = reader.path
        queue = BoundedQueue(capacity: ahead, whenFull: reader.info.isLive ? .dropOldest : .wait)
        let box = UncheckedReader(reader: reader)
        let thread = Thread { [self] in
            var selection = selection
            decode(box.reader, &selection, onlySelected)
        }
        thread.stackSize = 4 << 20
        thread.start()
    }

    deinit { stop() }

    /// Frames of a live source dropped so far because the reader was behind (never a file's frames: a file
    /// waits for its reader).
    public var dropped: Int { queue.dropped }

    /// Stops decoding (a reader that leaves early).
    public func stop() { queue.stop() }

    /// The next frame, and whether it is selected; nil at the end. Throws the decoding error after the frames
    /// decoded before it.
    public func next() throws(VideoError) -> (frame: VideoFrame, selected: Bool)? {
        if let item = queue.pop() { return item }
        lock.lock()
        defer { lock.unlock() }
        if let failure { throw failure }
        return nil
    }

    private func decode(_ reader: VideoReader, _ selection: inout FrameSelection, _ onlySelected: Bool) {
        do {
            while let frame = try reader.next() {
                let selected = selection.takes(frame.index, time: frame.time)
                if onlySelected && !selected { continue }
                guard queue.push((frame, selected)) else { return }  // the reader left
            }
        } catch {
            lock.lock()
            failure = error
            lock.unlock()
        }
        queue.close()
    }
}

/// The reader, handed to the one thread that decodes.
private struct UncheckedReader: @unchecked Sendable {
    let reader: VideoReader
}
