import Foundation
import LookoutImage
import LookoutSupport
import LookoutTestSupport
import LookoutVideo
import Testing

/// The video reader against ffmpeg's own decoding (lossless FFV1: every pixel equal), rotation, frame
/// selection, the writer read back, and the errors. Videos are made by Debian's `ffmpeg` command.
@Suite(.serialized) struct VideoReaderTests {
    static let root = Repository.root
    static let scene = root + "/examples/scenes/scene-0019.jpg"

    static func scratch() throws -> String {
        let folder = NSTemporaryDirectory() + "lookout-video-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        return folder
    }

    @Test func losslessFramesEqualFFmpegsPixels() throws {
        try #require(TestVideos.haveFFmpeg, "ffmpeg is missing: scripts/test installs it")
        let folder = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let video = folder + "/pan.mkv"
        #expect(TestVideos.pan(scene: Self.scene, to: video, frames: 12) == 0)
        #expect(TestVideos.framesAsPNG(video, prefix: folder + "/f") == 0)
        let reader = try VideoReader(path: video)
        #expect(reader.info.width == 320 && reader.info.height == 256 && reader.info.rotation == 0)
        #expect(reader.info.codec == "ffv1")
        #expect(abs((reader.info.frameRate ?? 0) - 10) < 1e-9)
        var count = 0
        var previous: Image?
        while let frame = try reader.next() {
            let png = try ImageFile.read(folder + String(format: "/f%04d.png", frame.index + 1))
            let same = frame.image == png, moved = frame.image != previous
            #expect(same, "frame \(frame.index)")
            #expect(abs(frame.time - Double(frame.index) / 10) < 1e-6)
            #expect(moved, "the window moves")
            previous = frame.image
            count += 1
        }
        #expect(count == 12)
        #expect(try reader.next() == nil)
    }

    @Test func rotationMetadataTurnsFrames() throws {
        try #require(TestVideos.haveFFmpeg)
        let folder = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let video = folder + "/pan.mkv"
        #expect(TestVideos.pan(scene: Self.scene, to: video, frames: 4) == 0)
        // QuickTime with lossless PNG frames and a display matrix (ffmpeg's `rotate` tag). Which way a tag
        // turns is ffmpeg's business: the frames must be what ffmpeg itself shows (its autorotate).
        #expect(TestVideos.shell("ffmpeg -nostdin -y -i \(video) -c:v png -pix_fmt rgb24 \(folder)/plain.mov") == 0)
        var turns: Set<Int> = []
        for tag in ["90", "180", "270"] {
            let rotated = folder + "/rotated-\(tag).mov"
            // (ffmpeg 5.1 writes the matrix of a `rotate` tag when it copies the stream, not when it encodes.)
            #expect(
                TestVideos.shell(
                    "ffmpeg -nostdin -y -i \(folder)/plain.mov -c copy -metadata:s:v:0 rotate=\(tag) \(rotated)") == 0)
            let reader = try VideoReader(path: rotated)
            turns.insert(reader.info.rotation)
            let quarter = reader.info.rotation != 180
            #expect(reader.info.width == (quarter ? 256 : 320) && reader.info.height == (quarter ? 320 : 256))
            let upright = try VideoReader(path: video)
            #expect(TestVideos.framesAsPNG(rotated, prefix: folder + "/r\(tag)-") == 0)
            while let turned = try reader.next() {
                let plain = try #require(try upright.next())
                let turnedAsItSays = turned.image == plain.image.rotated(clockwise: reader.info.rotation)
                let asFFmpegShowsIt =
                    try ImageFile.read(folder + String(format: "/r\(tag)-%04d.png", turned.index + 1)) == turned.image
                #expect(turnedAsItSays && asFFmpegShowsIt, "rotate=\(tag), frame \(turned.index)")
            }
        }
        #expect(turns == [90, 180, 270])
    }

    /// What phones and cameras write: each decoded as ffmpeg decodes it (every pixel), with the stated codec.
    @Test(arguments: [
        ("mp4", "-c:v libx264 -pix_fmt yuv420p", "h264"), ("mov", "-c:v libx264 -pix_fmt yuv420p", "h264"),
        ("mp4", "-c:v libx265 -pix_fmt yuv420p -tag:v hvc1 -x265-params log-level=error", "hevc"),
        ("webm", "-c:v libvpx-vp9 -pix_fmt yuv420p -deadline realtime", "vp9"),
        ("webm", "-c:v libvpx -pix_fmt yuv420p -deadline realtime", "vp8"),
        ("mkv", "-c:v libx264 -pix_fmt yuv444p", "h264"),
    ])
    func phoneFormatsDecodeAsFFmpegDoes(container: String, codec: String, decoder: String) throws {
        try #require(TestVideos.haveFFmpeg)
        let folder = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let video = folder + "/clip." + container
        #expect(TestVideos.pan(scene: Self.scene, to: video, frames: 8, codec: codec) == 0)
        #expect(TestVideos.framesAsPNG(video, prefix: folder + "/f") == 0)
        let reader = try VideoReader(path: video)
        #expect(reader.info.codec == decoder && reader.info.width == 320 && reader.info.height == 256)
        var count = 0
        while let frame = try reader.next() {
            let same = try ImageFile.read(folder + String(format: "/f%04d.png", frame.index + 1)) == frame.image
            #expect(same, "\(container) \(decoder): frame \(frame.index)")
            count += 1
        }
        #expect(count == 8)
    }

    @Test func rotationTurnsPixelsClockwise() {
        // 2×1: left red, right blue (BGR); a quarter turn clockwise puts left on top.
        let image = Image(width: 2, height: 1, pixels: [0, 0, 255, 255, 0, 0])
        let turned = image.rotated(clockwise: 90)
        #expect(turned.width == 1 && turned.height == 2)
        #expect(turned.pixels == [0, 0, 255, 255, 0, 0])
        let back = image.rotated(clockwise: 270)
        #expect(back.pixels == [255, 0, 0, 0, 0, 255])
        #expect(image.rotated(clockwise: 180).pixels == [255, 0, 0, 0, 0, 255])
        #expect(image.rotated(clockwise: 360) == image)
    }

    @Test func frameSelection() {
        var every = FrameSelection(.every(3))
        #expect((0..<10).filter { every.takes($0, time: Double($0) / 10) } == [0, 3, 6, 9])
        // 4 per second of a 10 fps video: the first frame at or after 0, 0.25, 0.5, 0.75, …
        var perSecond = FrameSelection(.perSecond(4))
        #expect((0..<20).filter { perSecond.takes($0, time: Double($0) / 10) } == [0, 3, 5, 8, 10, 13, 15, 18])
        // More per second than the video has: every frame once.
        var dense = FrameSelection(.perSecond(30))
        #expect((0..<5).filter { dense.takes($0, time: Double($0) / 10) } == [0, 1, 2, 3, 4])
        // A stream starting late: counted from its first frame.
        var late = FrameSelection(.perSecond(1))
        #expect((0..<30).filter { late.takes($0, time: 5.05 + Double($0) / 10) } == [0, 10, 20])
    }

    @Test func containersAreToldFromPhotos() {
        func head(_ text: String, at offset: Int = 0) -> [UInt8] {
            [UInt8](repeating: 0, count: offset) + Array(text.utf8)
        }
        #expect(VideoFile.looksLikeVideo([0, 0, 0, 0x20] + Array("ftypisom\0\0\0\0".utf8)))
        #expect(VideoFile.looksLikeVideo([0, 0, 0, 0x14] + Array("ftypqt  ".utf8)))
        #expect(!VideoFile.looksLikeVideo([0, 0, 0, 0x18] + Array("ftypheic".utf8)))
        #expect(!VideoFile.looksLikeVideo([0, 0, 0, 0x18] + Array("ftypavif".utf8)))
        #expect(VideoFile.looksLikeVideo([0x1A, 0x45, 0xDF, 0xA3, 1, 2]))
        #expect(VideoFile.looksLikeVideo(head("RIFF") + [1, 2, 3, 4] + head("AVI LIST")))
        #expect(!VideoFile.looksLikeVideo(head("RIFF") + [1, 2, 3, 4] + head("WEBPVP8 ")))
        #expect(!VideoFile.looksLikeVideo([0xFF, 0xD8, 0xFF, 0xE0]))
        #expect(!VideoFile.looksLikeVideo([0x89] + head("PNG\r\n")))
        #expect(VideoFile.isCamera("/dev/video0"))
    }

    @Test func writtenVideoReadsBack() throws {
        try #require(TestVideos.haveFFmpeg)
        let folder = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let video = folder + "/pan.mkv"
        #expect(TestVideos.pan(scene: Self.scene, to: video, frames: 10, width: 171, height: 97) == 0)
        let reader = try VideoReader(path: video)
        let output = folder + "/out.mp4"
        let writer = try VideoWriter(path: output, width: 171, height: 97, frameRate: 10)
        var originals: [Image] = []
        while let frame = try reader.next() {
            try writer.add(frame.image, time: frame.time)
            originals.append(frame.image)
        }
        try writer.finish()
        let back = try VideoReader(path: output)
        #expect(back.info.codec == "h264" && back.info.width == 171 + 1 && back.info.height == 97 + 1)
        #expect(back.info.frameCount == 10)
        var index = 0
        while let frame = try back.next(), index < originals.count {
            #expect(abs(frame.time - Double(index) / 10) < 1e-3)
            // H.264 at quality 20 is lossy: the mean error stays small.
            var error = 0
            for y in 0..<97 {
                for x in 0..<171 {
                    for c in 0..<3 {
                        error += abs(
                            Int(frame.image.pixels[(y * 172 + x) * 3 + c])
                                - Int(originals[index].pixels[(y * 171 + x) * 3 + c]))
                    }
                }
            }
            #expect(Double(error) / Double(171 * 97 * 3) < 6, "frame \(index)")
            index += 1
        }
        #expect(index == 10)
    }

    @Test func errorsNameTheFile() throws {
        try #require(TestVideos.haveFFmpeg)
        let folder = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        func failure(_ path: String, _ body: () throws -> Void) -> VideoError? {
            do {
                try body()
                return nil
            } catch let error as VideoError {
                #expect(error.description.hasPrefix(path + ": "))
                return error
            } catch {
                return nil
            }
        }
        func readAll(_ path: String) throws {
            let reader = try VideoReader(path: path)
            while try reader.next() != nil {}
        }
        let video = folder + "/pan.mkv"
        #expect(TestVideos.pan(scene: Self.scene, to: video, frames: 20) == 0)
        let bytes = try FileContents.read(video)
        // Cut short: the frames before the cut are decoded, then the reader says it is truncated.
        let cut = folder + "/cut.mkv"
        try FileContents.writeAtomically(Array(bytes[0..<(bytes.count * 6 / 10)]), to: cut)
        let truncated = failure(cut) { try readAll(cut) }
        #expect(
            truncated?.kind == .damaged && truncated?.problem.contains("truncated") == true,
            "\(String(describing: truncated))")
        // An MP4 cut short.
        let mp4 = folder + "/pan.mp4"
        #expect(TestVideos.shell("ffmpeg -nostdin -y -i \(video) -c:v libx264 -pix_fmt yuv420p \(mp4)") == 0)
        let mp4Bytes = try FileContents.read(mp4)
        let cutMP4 = folder + "/cut.mp4"
        try FileContents.writeAtomically(Array(mp4Bytes[0..<(mp4Bytes.count / 2)]), to: cutMP4)
        #expect(failure(cutMP4) { try readAll(cutMP4) } != nil)
        // Sound only.
        let sound = folder + "/tone.m4a"
        #expect(TestVideos.shell("ffmpeg -nostdin -y -f lavfi -i sine=frequency=440:duration=1 \(sound)") == 0)
        #expect(failure(sound) { try readAll(sound) }?.kind == .noVideoStream)
        // Not a video at all.
        let text = folder + "/notes.mp4"
        try FileContents.writeAtomically(Array(String(repeating: "not a video\n", count: 100).utf8), to: text)
        #expect(failure(text) { try readAll(text) }?.kind == .unreadable)
        #expect(failure(folder + "/missing.mkv") { try readAll(folder + "/missing.mkv") }?.kind == .unreadable)
        // No camera on this machine.
        #expect(failure("/dev/video63") { try readAll("/dev/video63") }?.problem.contains("camera") == true)
    }
}
