import Foundation
import LookoutImage
import LookoutJSON
import LookoutSupport
import LookoutTestSupport
import LookoutVideo
import Testing

/// `lookout detect VIDEO`: every processed frame's detections equal `lookout detect` on that frame saved
/// losslessly as a PNG by ffmpeg itself (FFV1 exactly; H.264 with rotation too), frame selection by count and
/// by time, the annotated H.264 video, and the errors. Videos are made from a demo scene by Debian's ffmpeg.
@Suite(.serialized) struct VideoCommandTests {
    static let scene = CLI.root + "/examples/scenes/scene-0019.jpg"
    static let queries = ["-q", "star, circle, shape, ring, square, blue shape"]

    /// Detection lines of `lookout detect ARGS --json`.
    static func lines(_ arguments: [String]) throws -> (status: Int32, lines: [JSONNode], stderr: String) {
        let result = try CLI.run(["detect"] + arguments + queries + ["--json"])
        return (result.status, try Reference.lines(result.stdout), result.stderr)
    }

    /// The detections of a JSON line, serialised (labels, query indices, scores and boxes exactly).
    static func detections(_ line: JSONNode) -> String { line["detections"]!.value.serialized }

    static func items(_ node: JSONNode) -> [JSONNode] { (0..<node.count).map { node[$0] } }

    /// Checks each frame line against `lookout detect` on ffmpeg's PNG of that frame.
    static func expectFramesEqualPhotos(
        _ frames: [JSONNode], pngPrefix: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let pngs = frames.map { pngPrefix + String(format: "%04d.png", Int($0["frame"]!.int!) + 1) }
        let photos = try lines(pngs + ["--lanes", "1"])
        #expect(photos.status == 0, "\(photos.stderr)", sourceLocation: sourceLocation)
        #expect(photos.lines.count == frames.count, sourceLocation: sourceLocation)
        for (frame, photo) in zip(frames, photos.lines) {
            #expect(frame["width"]!.int! == photo["width"]!.int!, sourceLocation: sourceLocation)
            #expect(frame["height"]!.int! == photo["height"]!.int!, sourceLocation: sourceLocation)
            #expect(
                detections(frame) == detections(photo), "frame \(frame["frame"]!.int!)",
                sourceLocation: sourceLocation)
        }
        // Something is found, and not the same thing everywhere: the comparison can fail.
        let found = frames.map { $0["detections"]!.count }
        #expect(found.reduce(0, +) >= frames.count, "\(found)", sourceLocation: sourceLocation)
        #expect(Set(frames.map(detections)).count == frames.count, sourceLocation: sourceLocation)
    }

    @Test func losslessFramesEqualTheirPhotos() throws {
        try #require(TestVideos.haveFFmpeg, "ffmpeg is missing: scripts/test installs it")
        let folder = try CLI.scratch("video")
        defer { CLI.remove(folder) }
        let video = folder + "/pan.mkv"
        #expect(TestVideos.pan(scene: Self.scene, to: video) == 0)
        #expect(TestVideos.framesAsPNG(video, prefix: folder + "/frame-") == 0)
        let result = try Self.lines([video, "--every", "3"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.lines.map { $0["frame"]!.int! } == [0, 3, 6, 9, 12, 15, 18])
        for line in result.lines {
            #expect(line["video"]!.string! == video)
            #expect(abs(line["time"]!.number! - Double(line["frame"]!.int!) / 10) < 1e-6)
            #expect(line["width"]!.int! == 320 && line["height"]!.int! == 256)
        }
        try Self.expectFramesEqualPhotos(result.lines, pngPrefix: folder + "/frame-")
    }

    @Test func framesPerSecondOfVideoTime() throws {
        try #require(TestVideos.haveFFmpeg)
        let folder = try CLI.scratch("video")
        defer { CLI.remove(folder) }
        let video = folder + "/pan.mkv"
        #expect(TestVideos.pan(scene: Self.scene, to: video, frames: 20) == 0)
        // 10 fps video, 4 frames a second: the first frame at or after 0, 0.25, 0.5, 0.75, 1, … s.
        let result = try Self.lines([video, "--fps", "4"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.lines.map { $0["frame"]!.int! } == [0, 3, 5, 8, 10, 13, 15, 18])
        let table = try CLI.run(["detect", video, "--every", "10"] + Self.queries)
        #expect(table.status == 0)
        #expect(table.stdout.contains("pan.mkv frame 10 at 1.0 s (320×256): "), "\(table.stdout)")
    }

    @Test func rotatedH264EqualsFFmpegsFrames() throws {
        try #require(TestVideos.haveFFmpeg)
        let folder = try CLI.scratch("video")
        defer { CLI.remove(folder) }
        let lossless = folder + "/pan.mkv"
        #expect(TestVideos.pan(scene: Self.scene, to: lossless, frames: 15) == 0)
        // A phone's kind of file: H.264 in MP4, held sideways (a display matrix; ffmpeg writes it on a copy).
        let plain = folder + "/plain.mp4", video = folder + "/phone.mp4"
        #expect(TestVideos.shell("ffmpeg -nostdin -y -i \(lossless) -c:v libx264 -pix_fmt yuv420p \(plain)") == 0)
        #expect(TestVideos.shell("ffmpeg -nostdin -y -i \(plain) -c copy -metadata:s:v:0 rotate=90 \(video)") == 0)
        #expect(TestVideos.framesAsPNG(video, prefix: folder + "/frame-") == 0)
        let result = try Self.lines([video, "--every", "4"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.lines.map { $0["frame"]!.int! } == [0, 4, 8, 12])
        #expect(result.lines.allSatisfy { $0["width"]!.int! == 256 && $0["height"]!.int! == 320 })
        try Self.expectFramesEqualPhotos(result.lines, pngPrefix: folder + "/frame-")
    }

    @Test func savedVideoIsH264WithTheBoxesDrawn() throws {
        try #require(TestVideos.haveFFmpeg)
        let folder = try CLI.scratch("video")
        defer { CLI.remove(folder) }
        let video = folder + "/pan.mkv"
        #expect(TestVideos.pan(scene: Self.scene, to: video, frames: 12) == 0)
        let result = try CLI.run(["detect", video, "--every", "4", "--save", folder + "/out", "--json"] + Self.queries)
        #expect(result.status == 0, "\(result.stderr)")
        let lines = try Reference.lines(result.stdout)
        #expect(lines.count == 3)
        let saved = try VideoReader(path: folder + "/out/pan.mp4")
        #expect(saved.info.codec == "h264" && saved.info.width == 320 && saved.info.height == 256)
        #expect(saved.info.frameCount == 12, "every frame is written, with the boxes of the last processed one")
        let original = try VideoReader(path: video)
        var index = 0
        while let frame = try saved.next() {
            let source = try #require(try original.next())
            let boxes = Self.items(lines[index / 4]["detections"]!).map {
                Self.items($0["box"]!).map { Int($0.number!) }
            }
            // Along each box's top edge the picture changed (the outline); far from every box, only x264's loss.
            var edge = 0, edgeCount = 0, far = 0, farCount = 0
            for y in 0..<256 {
                for x in 0..<320 {
                    let i = (y * 320 + x) * 3
                    let difference = (0..<3).map {
                        abs(Int(frame.image.pixels[i + $0]) - Int(source.image.pixels[i + $0]))
                    }
                    .reduce(0, +)
                    if boxes.contains(where: { y == max($0[1], 0) && x > $0[0] + 2 && x < $0[2] - 2 }) {
                        edge += difference
                        edgeCount += 1
                    } else if boxes.allSatisfy({ x < $0[0] - 40 || x > $0[2] + 40 || y < $0[1] - 40 || y > $0[3] + 40 })
                    {
                        far += difference
                        farCount += 1
                    }
                }
            }
            if edgeCount > 0 { #expect(Double(edge) / Double(edgeCount) > 60, "frame \(index)") }
            if farCount > 0 { #expect(Double(far) / Double(farCount) < 15, "frame \(index)") }
            index += 1
        }
        #expect(index == 12)
    }

    @Test func badVideosGetErrorsNamingThem() throws {
        try #require(TestVideos.haveFFmpeg)
        let folder = try CLI.scratch("video")
        defer { CLI.remove(folder) }
        let video = folder + "/pan.mkv"
        #expect(TestVideos.pan(scene: Self.scene, to: video, frames: 20) == 0)
        let bytes = try FileContents.read(video)
        let cut = folder + "/cut.mkv"
        try FileContents.writeAtomically(Array(bytes[0..<(bytes.count / 2)]), to: cut)
        // The frames before the cut are printed, then the error (a JSON line and a sentence), exit status 1.
        let truncated = try Self.lines([cut])
        #expect(truncated.status == 1)
        #expect(truncated.stderr.contains("\(cut): truncated"), "\(truncated.stderr)")
        #expect(truncated.lines.count >= 2 && truncated.lines.count < 20)
        #expect(truncated.lines.last?["error"]?.string?.contains("truncated") == true)
        #expect(truncated.lines.dropLast().allSatisfy { $0["frame"] != nil })
        // With --save, the annotated video keeps the frames before the cut and is a complete MP4.
        let saved = try CLI.run(["detect", cut, "--save", folder + "/out"] + Self.queries)
        #expect(saved.status == 1)
        let partial = try VideoReader(path: folder + "/out/cut.mp4")
        var frames = 0
        while try partial.next() != nil { frames += 1 }
        #expect(frames >= truncated.lines.count - 1 && frames < 20, "\(frames) frames")

        let sound = folder + "/tone.m4a"
        #expect(TestVideos.shell("ffmpeg -nostdin -y -f lavfi -i sine=duration=1 \(sound)") == 0)
        let notes = folder + "/notes.mp4"
        try FileContents.writeAtomically(Array(String(repeating: "no video here\n", count: 50).utf8), to: notes)
        for (path, words) in [
            (sound, "no video stream"), (notes, "not a video"), ("/dev/video63", "no such camera"),
            (folder + "/missing.mkv", "No such file"),
        ] {
            let result = try Self.lines([path])
            #expect(result.status == 1, "\(path)")
            #expect(result.stderr.contains("\(path): ") && result.stderr.contains(words), "\(result.stderr)")
        }
        // A photo and a broken video: the photo's line, the video's error, exit status 2 (partly done).
        let mixed = try Self.lines([CLI.root + "/examples/scenes/scene-0001.jpg", sound])
        #expect(mixed.status == 2 && mixed.lines.count == 2 && mixed.lines[0]["image"] != nil)

        for (arguments, words) in [
            (["--every", "0"], "--every"), (["--every", "2", "--fps", "3"], "not both"), (["--fps", "0"], "--fps"),
            (["--format", "csv"], "Video frames print as"),
        ] {
            let result = try CLI.run(["detect", video] + arguments + Self.queries)
            #expect(result.status != 0 && result.stderr.contains(words), "\(arguments): \(result.stderr)")
        }
    }
}
