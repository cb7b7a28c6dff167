import Foundation

/// A video decoded on a thread of its own, running ahead of its reader by at most `ahead` frames, so that
/// decoding overlaps the network on the other core. Each frame comes with whether `selection` takes it;
/// with `onlySelected`, frames it skips are dropped on the decoding thread (never queued). A camera never
/// waits for its reader: when the reader is behind, the oldest queued frame is dropped, so that what the
/// network sees is at most `ahead` frames old.
public final class VideoReadAhead: @unchecked Sendable {
    public let info: VideoInfo
    public let path: String
    private let condition = NSCondition()
    private var queue: [(frame: VideoFrame, selected: Bool)] = []
    private var ended = false
    private var failure: VideoError?
    private var stopped = false
    private let ahead: Int
    private let live: Bool
    private var droppedCount = 0

    public init(
        _ reader: VideoReader, selection: FrameSelection, onlySelected: Bool, ahead: Int = 4
    ) {
        info = reader.info
        path = reader.path
        self.ahead = max(1, ahead)
        live = reader.info.isLive
        let box = UncheckedReader(reader: reader)
        let thread = Thread { [self] in
            var selection = selection
            decode(box.reader, &selection, onlySelected)
        }
        thread.stackSize = 4 << 20
        thread.start()
    }

    deinit { stop() }

    /// Frames of a live source dropped so far because the reader was behind (never counts a file's frames:
    /// a file waits for its reader).
    public var dropped: Int {
        condition.lock()
        defer { condition.unlock() }
        return droppedCount
    }

    /// Stops decoding (a reader that leaves early).
    public func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }

    /// The next frame, and whether it is selected; nil at the end. Throws the decoding error after the frames
    /// decoded before it.
    public func next() throws(VideoError) -> (frame: VideoFrame, selected: Bool)? {
        condition.lock()
        defer { condition.unlock() }
        while queue.isEmpty && !ended { condition.wait() }
        if !queue.isEmpty {
            let item = queue.removeFirst()
            condition.broadcast()
            return item
        }
        if let failure { throw failure }
        return nil
    }

    private func decode(_ reader: VideoReader, _ selection: inout FrameSelection, _ onlySelected: Bool) {
        do {
            while let frame = try reader.next() {
                let selected = selection.takes(frame.index, time: frame.time)
                if onlySelected && !selected { continue }
                condition.lock()
                if live && queue.count >= ahead {
                    queue.removeFirst()
                    droppedCount += 1
                }
                while queue.count >= ahead && !stopped { condition.wait() }
                if stopped {
                    condition.unlock()
                    return
                }
                queue.append((frame, selected))
                condition.broadcast()
                condition.unlock()
            }
        } catch {
            condition.lock()
            failure = error
            condition.unlock()
        }
        condition.lock()
        ended = true
        condition.broadcast()
        condition.unlock()
    }
}

/// The reader, handed to the one thread that decodes.
private struct UncheckedReader: @unchecked Sendable {
    let reader: VideoReader
}
