import Foundation
import LookoutJSON
import LookoutSupport
import LookoutVideo
import Testing

/// `lookout track` end to end on the generated tracking video (examples/tracking/shapes.mp4): every frame's ids,
/// boxes, line crossings and zone counts equal the reference's (ultralytics' BYTETracker and supervision, run
/// on the detections Lookout recorded from this video: Tests/Fixtures/tracking), the annotated video, and the
/// errors.
@Suite struct TrackCommandTests {
    static let video = CLI.root + "/examples/tracking/shapes.mp4"
    static let queries = ["-q", "red circle, blue square, yellow triangle, green star, purple heart"]
    static let reference = try! JSONDocument(
        bytes: FileContents.read(CLI.root + "/Tests/Fixtures/tracking/bytetrack.json")
    ).root

    static func numbers(_ node: JSONNode) -> [Double] { (0..<node.count).map { node[$0].number! } }

    @Test func idsBoxesAndCountsEqualTheReference() throws {
        let lineArguments = (0..<Self.reference["lines"]!.count).flatMap { i in
            ["--line", Self.numbers(Self.reference["lines"]![i]).map { String(Int($0)) }.joined(separator: ",")]
        }
        let zone = Self.reference["zone"]!
        let zoneArgument = (0..<zone.count).flatMap { Self.numbers(zone[$0]).map { String(Int($0)) } }
            .joined(separator: ",")
        let result = try CLI.run(
            ["track", Self.video] + Self.queries + lineArguments + ["--zone", zoneArgument, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = try Reference.lines(result.stdout)
        let expected = Self.reference["recorded"]!
        let counts = Self.reference["counts"]!
        try #require(lines.count == expected.count + 1, "one line per frame, then the summary")
        let labels = ["red circle", "blue square", "yellow triangle", "green star", "purple heart"]
        var worst = 0.0
        for f in 0..<expected.count {
            let line = lines[f]
            #expect(line["frame"]!.int! == Int64(f))
            let shown = line["detections"]!
            let want = expected[f]["tracks"]!
            try #require(shown.count == want.count, "frame \(f)")
            for i in 0..<shown.count {
                let row = Self.numbers(want[i])
                #expect(shown[i]["track_id"]!.int! == Int64(row[4]), "frame \(f) track \(i)")
                #expect(shown[i]["label"]!.string! == labels[Int(row[6])])
                let box = Self.numbers(shown[i]["box"]!)
                for k in 0..<4 { worst = max(worst, abs(box[k] - row[k])) }
            }
            // Counts so far, per line and direction, by label; the zone's count in this frame.
            for l in 0..<line["lines"]!.count {
                for direction in ["in", "out"] {
                    var got: [String: Int64] = [:]
                    line["lines"]![l][direction]!.forEachMember { key, value in
                        got[String(decoding: key, as: UTF8.self)] = value.int!
                    }
                    var wanted: [String: Int64] = [:]
                    counts[f]["lines"]![l][direction]!.forEachMember { key, value in
                        wanted[labels[Int(String(decoding: key, as: UTF8.self))!]] = value.int!
                    }
                    #expect(got == wanted, "frame \(f) line \(l) \(direction)")
                }
            }
            #expect(line["zones"]![0]["count"]!.int! == counts[f]["zone"]!.int!, "frame \(f) zone")
        }
        print("lookout track: \(expected.count) frames, largest box difference from the reference \(worst) px")
        #expect(worst < 0.01)
        let summary = lines.last!["summary"]!
        #expect(summary["frames"]!.int! == Int64(expected.count))
        #expect(summary["tracks"]!.int! == 7)
    }

    @Test func savesTheAnnotatedVideoAndPrintsATable() throws {
        let folder = try CLI.scratch("track")
        defer { CLI.remove(folder) }
        let result = try CLI.run(
            ["track", Self.video] + Self.queries + [
                "--every", "2", "--save", folder + "/tracked.mp4", "--line", "208,0,208,320",
            ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("frame 70 at "))
        #expect(result.stdout.contains("  #1 "))
        #expect(result.stdout.contains("line 208,0,208,320: in "))
        let reader = try VideoReader(path: folder + "/tracked.mp4", threads: 1)
        var frames = 0
        var changed = false
        let original = try VideoReader(path: Self.video, threads: 1)
        while let frame = try reader.next(), let source = try original.next() {
            frames += 1
            if frame.image.pixels != source.image.pixels { changed = true }
        }
        #expect(frames == 72, "every frame is written, processed or not")
        #expect(changed, "boxes are drawn")
    }

    /// The example of docs/video-and-tracking.md: the blue square crosses the line while it is hidden (frames 34–39) and keeps its id.
    /// supervision's count (the default) forgets its side and counts one crossing out; `--count-hidden` keeps the
    /// side while the tracker keeps the track, and counts the two a person sees.
    @Test func aCrossingMadeWhileHiddenCountsWithCountHidden() throws {
        let arguments =
            ["track", Self.video, "-q", "red circle, blue square, yellow triangle, green star, purple heart"]
            + ["--line", "208,0,208,320"]
        let supervision = try CLI.run(arguments)
        #expect(supervision.status == 0, "\(supervision.stderr)")
        #expect(supervision.stdout.contains("out 1 ("), "\(supervision.stdout)")
        let hidden = try CLI.run(arguments + ["--count-hidden"])
        #expect(hidden.status == 0, "\(hidden.stderr)")
        #expect(hidden.stdout.contains("out 2 ("), "\(hidden.stdout)")
    }

    /// `--tracker botsort` on the video seen by a moving camera: the ids and boxes of ultralytics' BOTSORT
    /// (its own GMC on OpenCV's decoding of the frames) on the same detections.
    @Test func botSortIdsEqualTheReference() throws {
        let reference = try JSONDocument(
            bytes: FileContents.read(CLI.root + "/Tests/Fixtures/tracking/botsort.json")
        ).root
        let video = CLI.root + "/" + reference["video"]!.string!
        let result = try CLI.run(["track", video] + Self.queries + ["--tracker", "botsort", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = try Reference.lines(result.stdout)
        let expected = reference["recorded"]!
        try #require(lines.count == expected.count + 1, "one line per frame, then the summary")
        var worst = 0.0
        for f in 0..<expected.count {
            let shown = lines[f]["detections"]!
            let want = expected[f]["tracks"]!
            try #require(shown.count == want.count, "frame \(f)")
            for i in 0..<shown.count {
                let row = Self.numbers(want[i])
                #expect(shown[i]["track_id"]!.int! == Int64(row[4]), "frame \(f) track \(i)")
                let box = Self.numbers(shown[i]["box"]!)
                for k in 0..<4 { worst = max(worst, abs(box[k] - row[k])) }
            }
        }
        print("track --tracker botsort: boxes within \(worst) px of ultralytics' BOTSORT")
        #expect(worst <= 1e-3)
    }

    @Test(arguments: [
        (["--tracker", "deepsort"], "choose bytetrack or botsort"),
        (["--line", "1,2,3"], "four numbers"),
        (["--line", "5,5,5,5"], "the same point"),
        (["--zone", "1,2,3,4"], "at least three corners"),
        (["--zone", "1,2,3,4,5,6.5"], "whole pixels"),
        (["--conf", "1.5"], "--conf must be"),
    ])
    func refusesBadOptions(arguments: [String], message: String) throws {
        let result = try CLI.run(["track", Self.video] + Self.queries + arguments)
        #expect(result.status != 0)
        #expect(result.stderr.contains(message), "\(result.stderr)")
    }

    @Test func refusesWhatIsNotAVideo() throws {
        let photo = try CLI.run(["track", CLI.root + "/examples/scenes/scene-0001.jpg"] + Self.queries)
        #expect(photo.status == 1)
        #expect(photo.stderr.contains("not a video"), "\(photo.stderr)")
        let folder = try CLI.scratch("track-bad")
        defer { CLI.remove(folder) }
        let truncated = folder + "/cut.mp4"
        let bytes = try FileContents.read(Self.video)
        try FileContents.writeAtomically(Array(bytes.prefix(bytes.count / 3)), to: truncated)
        let cut = try CLI.run(["track", truncated] + Self.queries + ["--json"])
        #expect(cut.status != 0 && cut.status < 128, "a clear error, not a crash: \(cut.stderr)")
    }
}
