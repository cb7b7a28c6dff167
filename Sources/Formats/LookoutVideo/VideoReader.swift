import CLookoutVideo
import LookoutImage
import LookoutSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A video that cannot be read or written, with the file, the reason in a sentence, and its ``kind``.
public struct VideoError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Sendable, Equatable {
        /// The file cannot be opened, or holds no container FFmpeg knows.
        case unreadable
        /// A container without a video stream (audio only, for example).
        case noVideoStream
        /// A video stream whose codec this machine's FFmpeg cannot decode.
        case unsupportedCodec
        /// It ends before the frames or the duration its container states, or a frame cannot be decoded.
        case damaged
        /// Frames over the pixel limit.
        case tooLarge
        /// The annotated video could not be written.
        case notWritten
    }

    public let path: String
    public let kind: Kind
    public let problem: String
    public var description: String { "\(path): \(problem)" }

    /// A URL's password is never kept (nor printed).
    public init(path: String, kind: Kind, problem: String) {
        self.path = URLText.redacted(path)
        self.kind = kind
        self.problem = problem
    }
}

/// What a video's container states.
public struct VideoInfo: Sendable, Equatable {
    /// The upright frame size (rotation applied).
    public let width: Int
    public let height: Int
    /// Clockwise degrees applied to every frame to make it upright (the stream's display matrix).
    public let rotation: Int
    /// Seconds; nil when the container does not say (cameras).
    public let duration: Double?
    public let frameRate: Double?
    /// Frames the container states; nil when it does not say (Matroska, for one).
    public let frameCount: Int?
    public let isLive: Bool
    public let codec: String
    public let container: String

    /// The frames a video holds, as far as its container lets one estimate them.
    public var estimatedFrames: Int? {
        if let frameCount { return frameCount }
        if let duration, let frameRate { return Int((duration * frameRate).rounded()) }
        return nil
    }
}

/// One decoded frame: its number among the decoded frames (from 0), its presentation time in seconds from
/// the stream's start, and the upright picture in Lookout's BGR layout.
public struct VideoFrame: Sendable {
    public let index: Int
    public let time: Double
    public let image: Image

    public init(index: Int, time: Double, image: Image) {
        self.index = index
        self.time = time
        self.image = image
    }
}

/// Frames of a video file (or a V4L2 camera), decoded in order by FFmpeg. Not for several threads at once.
public final class VideoReader {
    public let path: String
    public let info: VideoInfo
    private let handle: OpaquePointer
    private let codedWidth: Int, codedHeight: Int
    private var decoded = 0

    /// Frames larger than this many pixels are refused, as photos are.
    public static let defaultPixelLimit = ImageFile.defaultPixelLimit

    /// Opens `path` with a decoder of `threads` threads (0: FFmpeg's choice, 1 leaves the other cores to the
    /// network). The open and each read give up after `timeout` seconds: a URL's without an answer, a file's
    /// still busy. A file is read by the demuxers of ordinary containers through the file protocol alone (no
    /// manifest, playlist or concatenation naming other sources); a URL only by the schemes of
    /// ``VideoFile/streamSchemes``. Frames over `pixelLimit` pixels are refused, at the open and for every
    /// frame before it is decoded.
    public init(
        path: String, threads: Int = 1, pixelLimit: Int = defaultPixelLimit, timeout: Double = 10
    )
        throws(VideoError)
    {
        self.path = path
        var raw = lookout_video_info()
        var message = [CChar](repeating: 0, count: 512)
        guard
            let handle = lookout_video_open(
                path, Int32(threads), timeout, Int64(pixelLimit), &raw, &message, message.count)
        else {
            let problem = message.text
            let kind: VideoError.Kind =
                problem.hasPrefix("no video stream")
                ? .noVideoStream
                : problem.hasPrefix("its video codec")
                    ? .unsupportedCodec : problem.hasPrefix("frames of") ? .tooLarge : .unreadable
            throw VideoError(path: path, kind: kind, problem: problem)
        }
        self.handle = handle
        codedWidth = Int(raw.width)
        codedHeight = Int(raw.height)
        let quarter = Int(raw.rotation) % 180 == 90
        info = VideoInfo(
            width: quarter ? codedHeight : codedWidth, height: quarter ? codedWidth : codedHeight,
            rotation: Int(raw.rotation), duration: raw.duration > 0 ? raw.duration : nil,
            frameRate: raw.frame_rate > 0 ? raw.frame_rate : nil,
            frameCount: raw.frame_count > 0 ? Int(raw.frame_count) : nil, isLive: raw.is_live != 0,
            codec: Self.text(raw.codec), container: Self.text(raw.container))
    }

    deinit { lookout_video_close(handle) }

    /// The next frame, or nil at the end of the video.
    public func next() throws(VideoError) -> VideoFrame? {
        var pixels = [UInt8](repeating: 0, count: codedWidth * codedHeight * 3)
        var time = 0.0
        var message = [CChar](repeating: 0, count: 512)
        let status = pixels.withUnsafeMutableBufferPointer {
            lookout_video_next(handle, $0.baseAddress, &time, &message, message.count)
        }
        if status == 0 { return nil }
        guard status > 0 else {
            let problem = message.text
            throw VideoError(
                path: path, kind: problem.contains("-pixel limit") ? .tooLarge : .damaged, problem: problem)
        }
        var image = Image(width: codedWidth, height: codedHeight, pixels: pixels)
        if info.rotation != 0 { image = image.rotated(clockwise: info.rotation) }
        defer { decoded += 1 }
        return VideoFrame(index: decoded, time: time, image: image)
    }

    /// The first frame shown at or after `seconds` (within half a frame), or the last one before the end.
    /// Its ``VideoFrame/index`` counts from the key frame the seek landed on, not from the video's start.
    public func frame(at seconds: Double) throws(VideoError) -> VideoFrame? {
        var message = [CChar](repeating: 0, count: 512)
        if lookout_video_seek(handle, max(0, seconds), &message, message.count) != 0 {
            throw VideoError(path: path, kind: .damaged, problem: message.text)
        }
        decoded = 0
        let slack = 0.5 / (info.frameRate ?? 25)
        var last: VideoFrame?
        while let frame = try next() {
            if frame.time + slack >= seconds { return frame }
            last = frame
        }
        return last
    }

    private static func text<T>(_ tuple: T) -> String {
        withUnsafeBytes(of: tuple) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
    }
}

/// Which decoded frames are processed: every Nth (from the first), or F per second of video time.
public struct FrameSelection: Sendable, Equatable {
    public enum Rule: Sendable, Equatable {
        case every(Int)
        case perSecond(Double)
    }

    public let rule: Rule
    private var nextTime: Double?

    public init(_ rule: Rule) { self.rule = rule }

    /// Every frame.
    public static let all = FrameSelection(.every(1))

    /// Whether the frame is processed. Frames must be offered in order. With F per second the first frame
    /// is taken, then the first frame at or after each following multiple of 1/F seconds (a frame that
    /// covers several such times is taken once).
    public mutating func takes(_ index: Int, time: Double) -> Bool {
        switch rule {
        case .every(let n): return index % max(1, n) == 0
        case .perSecond(let rate):
            let interval = 1 / rate
            guard let due = nextTime else {
                nextTime = (time / interval).rounded(.down) * interval + interval
                return true
            }
            // A microsecond of slack: 30 fps timestamps are rounded to the container's time base.
            guard time + 1e-6 >= due else { return false }
            nextTime = ((time + 1e-6) / interval).rounded(.down) * interval + interval
            return true
        }
    }
}

/// Telling photos from videos by a file's first bytes (photos are JPEG and PNG; the containers below are
/// what phones and cameras write) or by the name of a V4L2 camera.
public enum VideoFile {
    /// Names ffmpeg, phones and cameras give videos. `lookout detect` sends such a file to the video reader
    /// even when its first bytes are not a container recognised here, so that the error comes from FFmpeg.
    public static let extensions: Set<String> = [
        "mp4", "m4v", "mov", "qt", "mkv", "webm", "avi", "3gp", "mts", "m2ts", "ts", "mpg", "mpeg", "flv", "ogv", "wmv",
    ]

    /// Whether the file name of `path` ends in one of `extensions` (any case).
    public static func hasExtension(_ path: String, in extensions: Set<String> = extensions) -> Bool {
        guard let dot = path.lastIndex(of: "."), !path[dot...].contains("/") else { return false }
        return extensions.contains(path[path.index(after: dot)...].lowercased())
    }

    /// Names of the form /dev/videoN are cameras.
    public static func isCamera(_ path: String) -> Bool { path.hasPrefix("/dev/video") }

    /// Network sources FFmpeg reads here: RTSP (rtsps too), HTTP(S) for HLS playlists and progressive MP4,
    /// UDP (MPEG-TS), RTMP, SRT.
    public static let streamSchemes: Set<String> = ["rtsp", "rtsps", "http", "https", "udp", "rtp", "rtmp", "srt"]

    /// Whether `path` is a URL of a network stream.
    public static func isStream(_ path: String) -> Bool {
        URLText.scheme(path).map(streamSchemes.contains) ?? false
    }

    /// Whether `path` is a camera, a network stream, or starts like a video container: ISO media (MP4, MOV,
    /// 3GP; not HEIC or AVIF images), Matroska and WebM, AVI, MPEG transport and program streams, FLV, Ogg.
    public static func isVideo(_ path: String) -> Bool {
        if isCamera(path) || isStream(path) { return true }
        guard let head = try? FileContents.readPrefix(path, count: 16) else { return false }
        return looksLikeVideo(head)
    }

    public static func looksLikeVideo(_ head: [UInt8]) -> Bool {
        func starts(_ prefix: [UInt8], at offset: Int = 0) -> Bool {
            head.count >= offset + prefix.count && Array(head[offset..<(offset + prefix.count)]) == prefix
        }
        if starts(Array("ftyp".utf8), at: 4) {
            let brand = head.count >= 12 ? String(decoding: head[8..<12], as: UTF8.self) : ""
            let images = ["heic", "heix", "hevc", "heim", "heis", "mif1", "msf1", "avif", "avis"]
            return !images.contains(brand)
        }
        // QuickTime files that start with another atom.
        for atom in ["moov", "mdat", "wide", "free", "skip"] where starts(Array(atom.utf8), at: 4) { return true }
        if starts([0x1A, 0x45, 0xDF, 0xA3]) { return true }  // EBML: Matroska, WebM
        if starts(Array("RIFF".utf8)) && starts(Array("AVI ".utf8), at: 8) { return true }
        if starts([0x00, 0x00, 0x01, 0xBA]) || starts([0x00, 0x00, 0x01, 0xB3]) { return true }  // MPEG-PS
        if starts(Array("FLV".utf8)) || starts(Array("OggS".utf8)) { return true }
        return false
    }
}

extension [CChar] {
    /// The C string in the buffer, up to its first NUL.
    var text: String { String(decoding: prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self) }
}
