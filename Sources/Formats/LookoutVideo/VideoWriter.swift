import CLookoutVideo
import Foundation
import LookoutImage

/// An H.264 video in an MP4 file (libx264, yuv420p, BT.601), made frame by frame from BGR images of one size.
public final class VideoWriter {
    public let path: String
    public let width: Int, height: Int
    private var handle: OpaquePointer?

    /// `quality` is x264's constant rate factor (lower is better; 23 is its default).
    public init(path: String, width: Int, height: Int, frameRate: Double, quality: Int = 20) throws(VideoError) {
        self.path = path
        self.width = width
        self.height = height
        var message = [CChar](repeating: 0, count: 512)
        guard
            let handle = lookout_video_writer_open(
                path, Int32(width), Int32(height), frameRate, Int32(quality), &message, message.count)
        else {
            throw VideoError(path: path, kind: .notWritten, problem: message.text)
        }
        self.handle = handle
    }

    deinit { if let handle { lookout_video_writer_abandon(handle) } }

    /// Adds a frame shown at `time` seconds. Frames of another size are refused.
    public func add(_ image: Image, time: Double) throws(VideoError) {
        guard let handle else { throw VideoError(path: path, kind: .notWritten, problem: "the video is finished") }
        guard image.width == width, image.height == height, image.channels == 3 else {
            throw VideoError(
                path: path, kind: .notWritten,
                problem: "a frame of \(image.width)×\(image.height) in a video of \(width)×\(height)")
        }
        var message = [CChar](repeating: 0, count: 512)
        let status = image.pixels.withUnsafeBufferPointer {
            lookout_video_writer_add(handle, $0.baseAddress, time, &message, message.count)
        }
        if status != 0 { throw VideoError(path: path, kind: .notWritten, problem: message.text) }
    }

    /// Writes the rest of the file. The writer takes no frames afterwards.
    public func finish() throws(VideoError) {
        guard let handle else { return }
        self.handle = nil
        var message = [CChar](repeating: 0, count: 512)
        if lookout_video_writer_finish(handle, &message, message.count) != 0 {
            throw VideoError(path: path, kind: .notWritten, problem: message.text)
        }
    }
}
