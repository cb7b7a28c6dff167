import LookoutImage
import LookoutSupport
import LookoutVideo

#if canImport(Glibc)
    import Glibc
#endif

/// Videos in the index. A video's frames, taken every ``PhotoIndex/videoEvery`` seconds of video time, are
/// entries of their own named by the W3C media-fragment form `VIDEO#t=SECONDS` (three decimals); each has its
/// regions and whole-frame embedding as a photo does. The video's own file row is written last, when every
/// frame is recorded: a video without it (an update interrupted in the middle) is indexed again, its old
/// frames removed first. Searches report the video once, at the time of its best frame.
public enum VideoFrames {
    /// What separates a video's path from the time of one of its frames.
    public static let separator = "#t="

    /// File names the index reads as videos (by extension, as photos are found by theirs): what phones and
    /// cameras write. Fewer than ``VideoFile/extensions``: a folder walk must not take `.ts` sources and the like.
    public static let extensions: Set<String> = ["mp4", "m4v", "mov", "mkv", "webm", "avi", "3gp", "mts", "m2ts"]

    public static func isVideo(_ path: String) -> Bool { VideoFile.hasExtension(path, in: extensions) }

    /// The entry of the frame at `time` seconds of `video`.
    public static func entry(video: String, time: Double) -> String { video + separator + seconds(time) }

    /// `time` in seconds with three decimals, as entries name it ("12.000").
    public static func seconds(_ time: Double) -> String {
        let thousandths = Int64((time * 1000).rounded())
        let fraction = String(thousandths % 1000)
        return "\(thousandths / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    /// The video and the time of a frame entry; nil for a photo's path.
    public static func split(_ path: String) -> (video: String, time: Double)? {
        guard let range = path.range(of: separator, options: .backwards) else { return nil }
        let video = String(path[..<range.lowerBound])
        guard isVideo(video), let time = Double(path[range.upperBound...]), time >= 0 else { return nil }
        return (video, time)
    }

    /// The file that holds `path`: the video of a frame entry, else `path` itself.
    public static func file(of path: String) -> String { split(path)?.video ?? path }

    /// The picture of an indexed entry: the photo, or the frame of the video shown at its time.
    public static func image(at path: String, pixelLimit: Int = ImageFile.defaultPixelLimit) throws -> Image {
        guard let (video, time) = split(path) else { return try ImageFile.read(path, pixelLimit: pixelLimit) }
        let reader = try VideoReader(path: video, threads: 0, pixelLimit: pixelLimit)
        guard let frame = try reader.frame(at: time) else {
            throw VideoError(path: video, kind: .damaged, problem: "no frame at \(time) s")
        }
        return frame.image
    }

    /// The SHA-256 of a file, read in pieces (videos may be larger than memory).
    static func contentHash(_ path: String) throws(FileContents.FileError) -> String {
        let descriptor = FileSystem.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else {
            throw FileContents.FileError(path: path, reason: String(cString: strerror(errno)))
        }
        defer { close(descriptor) }
        var hash = SHA256()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else {
                throw FileContents.FileError(path: path, reason: String(cString: strerror(errno)))
            }
            if count == 0 { break }
            buffer.withUnsafeBytes { hash.update(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
        }
        return hash.finalize()
    }
}
