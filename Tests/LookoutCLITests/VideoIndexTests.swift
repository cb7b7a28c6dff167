import Foundation
import LookoutIndex
import LookoutJSON
import LookoutSupport
import LookoutTestSupport
import Testing

/// Videos in the index: a video's frames every `--video-every` seconds are entries that score exactly as the
/// same frames saved by ffmpeg as PNG photos and indexed as photos; search reports the video once, at the
/// time of its best frame, and `--html` shows that frame; updates are incremental, and an update interrupted
/// inside a video (its own row never written) indexes the video again.
@Suite(.serialized) struct VideoIndexTests {
    static let scenes = ["scene-0002.jpg", "scene-0004.jpg", "scene-0007.jpg"]

    /// Three scenes, 2 s each at 5 fps, 480×360, lossless: yellow stars only in the last one (from 4 s).
    static func makeVideo(_ path: String) -> Int32 {
        let inputs = scenes.map { "-loop 1 -framerate 5 -t 2 -i \(CLI.root)/examples/scenes/\($0)" }.joined(
            separator: " ")
        let fit = "scale=480:360:force_original_aspect_ratio=decrease,pad=480:360:(ow-iw)/2:(oh-ih)/2,setsar=1"
        let filter = "[0]\(fit)[a];[1]\(fit)[b];[2]\(fit)[c];[a][b][c]concat=n=3:v=1[v]"
        return TestVideos.shell(
            "ffmpeg -nostdin -y \(inputs) -filter_complex '\(filter)' -map '[v]' -c:v ffv1 -pix_fmt bgr0 \(path)")
    }

    static func search(_ query: String, db: String, _ extra: [String] = []) throws -> [JSONNode] {
        let result = try CLI.run(["search", query, "--db", db, "--json", "--top", "20"] + extra)
        #expect(result.status == 0, "\(result.stderr)")
        return try Reference.lines(result.stdout)
    }

    @Test func videoFramesAreIndexedAndFound() throws {
        try #require(TestVideos.haveFFmpeg, "ffmpeg is missing: scripts/test installs it")
        let folder = try CLI.scratch("video-index")
        defer { CLI.remove(folder) }
        let photos = folder + "/photos", frames = folder + "/frames"
        try FileManager.default.createDirectory(atPath: photos, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: frames, withIntermediateDirectories: true)
        for scene in ["scene-0001.jpg", "scene-0003.jpg"] {
            try FileManager.default.copyItem(
                atPath: CLI.root + "/examples/scenes/" + scene, toPath: photos + "/" + scene)
        }
        let video = photos + "/clip.mkv"
        #expect(Self.makeVideo(video) == 0)
        // The reference: frames 0, 10 and 20 (0, 2 and 4 s) as ffmpeg decodes them, indexed as photos.
        #expect(
            TestVideos.shell(
                "ffmpeg -nostdin -y -i \(video) -vf \"select='not(mod(n\\,10))'\" -fps_mode passthrough -pix_fmt rgb24 \(frames)/t%d.png"
            ) == 0)
        let db = folder + "/index.sqlite", reference = folder + "/reference.sqlite"
        let indexed = try CLI.run(["index", photos, "--db", db, "--plain", "--video-every", "2"])
        #expect(indexed.status == 0, "\(indexed.stderr)")
        #expect(indexed.stderr.contains("3 video frames indexed (one every 2.0 s of video)"), "\(indexed.stderr)")
        #expect(indexed.stderr.contains("2 photos and 1 video (3 frames) indexed (3 computed"), "\(indexed.stderr)")
        let photoIndexed = try CLI.run(["index", frames, "--db", reference, "--plain"])
        #expect(photoIndexed.status == 0, "\(photoIndexed.stderr)")

        // Each query's video hit equals the reference photo of the same frame: score, boxes, evidence.
        let pngOfTime = [0.0: "t1.png", 2.0: "t2.png", 4.0: "t3.png"]
        var times: Set<Double> = []
        for query in ["yellow star", "orange circle", "pink square", "ring", "star"] {
            let hits = try Self.search(query, db: db)
            let videoHits = hits.filter { $0["image"]!.string! == video }
            #expect(videoHits.count <= 1, "a video is listed once: \(query)")
            guard let hit = videoHits.first else { continue }
            let time = try #require(hit["time"]?.number)
            times.insert(time)
            let expected = try Self.search(query, db: reference).first {
                $0["image"]!.string!.hasSuffix("/" + (pngOfTime[time] ?? "?"))
            }
            let photo = try #require(expected, "\(query): the frame at \(time) s is found as a photo too")
            // The best frame is the reference's best photo among the three frames.
            let best = try Self.search(query, db: reference).first!
            #expect(best["image"]!.string!.hasSuffix("/" + pngOfTime[time]!), "\(query)")
            for field in ["score", "detections", "evidence", "object_score", "scene_score"] {
                #expect(hit[field]!.value == photo[field]!.value, "\(query): \(field)")
            }
        }
        let star = try #require(try Self.search("yellow star", db: db).first { $0["image"]!.string! == video })
        #expect(star["time"]!.number! == 4.0, "yellow stars appear at 4 s")
        #expect(times.count >= 2, "different queries find different moments: \(times)")

        // --html shows the frame (a thumbnail) with the time; the table says where.
        let html = folder + "/stars.html"
        let page = try CLI.run(["search", "yellow star", "--db", db, "--html", html])
        #expect(page.status == 0 && page.stdout.contains("clip.mkv at 4.0 s"), "\(page.stdout)")
        let text = String(decoding: try FileContents.read(html), as: UTF8.self)
        #expect(text.contains("clip.mkv at 4.000 s") && !text.contains("not readable"))

        // Incremental: nothing to do; a touched video is indexed again (its frames replaced, not doubled).
        let again = try CLI.run(["index", photos, "--db", db, "--plain"])
        #expect(again.stderr.contains("0 computed") && again.stderr.contains("3 unchanged"), "\(again.stderr)")
        var times2 = timespec(tv_sec: 1_700_000_000, tv_nsec: 0)
        _ = withUnsafePointer(to: &times2) { pointer in
            var both = [pointer.pointee, pointer.pointee]
            return utimensat(AT_FDCWD, video, &both, 0)
        }
        let touched = try CLI.run(["index", photos, "--db", db, "--plain", "--video-every", "2"])
        #expect(touched.stderr.contains("1 computed") && touched.stderr.contains("3 video frames"), "\(touched.stderr)")
        let store = try SQLiteIndexStore(path: db, readOnly: true)
        let entries = try store.files(withPrefix: video).keys.sorted()
        #expect(entries == [video, video + "#t=0.000", video + "#t=2.000", video + "#t=4.000"], "\(entries)")

        // Interrupted inside the video: its own row and one frame missing. The next update indexes it again.
        let writable = try SQLiteIndexStore(path: db)
        let model = try #require(try writable.storedModel())
        try writable.remove(paths: [video, video + "#t=4.000"], keepingModel: model.key)
        #expect(try Self.search("yellow star", db: db).allSatisfy { $0["image"]!.string! != video })
        let resumed = try CLI.run(["index", photos, "--db", db, "--plain", "--video-every", "2"])
        #expect(resumed.stderr.contains("1 computed") && resumed.stderr.contains("3 video frames"), "\(resumed.stderr)")
        #expect(try Self.search("yellow star", db: db).first { $0["image"]!.string! == video }?["time"]?.number == 4.0)

        // A deleted video leaves the index with its frames.
        try FileManager.default.removeItem(atPath: video)
        let pruned = try CLI.run(["index", photos, "--db", db, "--plain"])
        #expect(pruned.stderr.contains("1 removed"), "\(pruned.stderr)")
        #expect(try SQLiteIndexStore(path: db, readOnly: true).files(withPrefix: video).isEmpty)
    }

    @Test func brokenVideosAreRecordedAsFailures() throws {
        try #require(TestVideos.haveFFmpeg)
        let folder = try CLI.scratch("video-index")
        defer { CLI.remove(folder) }
        let photos = folder + "/photos"
        try FileManager.default.createDirectory(atPath: photos, withIntermediateDirectories: true)
        #expect(Self.makeVideo(folder + "/whole.mkv") == 0)
        let bytes = try FileContents.read(folder + "/whole.mkv")
        try FileContents.writeAtomically(Array(bytes[0..<(bytes.count * 8 / 10)]), to: photos + "/cut.mkv")
        try FileContents.writeAtomically(Array("not a video".utf8), to: photos + "/notes.mp4")
        let db = folder + "/index.sqlite"
        let indexed = try CLI.run(["index", photos, "--db", db, "--plain"])
        #expect(indexed.status != 0 && indexed.stderr.contains("2 files could not be indexed"), "\(indexed.stderr)")
        let failures = try CLI.run(["index", "--failures", "--db", db])
        #expect(failures.stdout.contains("cut.mkv: truncated"), "\(failures.stdout)")
        #expect(failures.stdout.contains("notes.mp4: not a video"), "\(failures.stdout)")
        // The frames before the cut stay searchable.
        let kept = try SQLiteIndexStore(path: db, readOnly: true).files(withPrefix: photos + "/cut.mkv#t=")
        #expect(kept.count >= 2, "\(kept.keys.sorted())")
    }

    /// The same on PostgreSQL (a real server, scripts/pg-test-server): the shared job takes the video like a
    /// photo, and the searches equal the SQLite index's.
    @Test func videosOnPostgreSQLEqualSQLite() throws {
        try #require(TestVideos.haveFFmpeg)
        let folder = try CLI.scratch("video-index")
        defer { CLI.remove(folder) }
        let photos = folder + "/photos"
        try FileManager.default.createDirectory(atPath: photos, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: CLI.root + "/examples/scenes/scene-0001.jpg", toPath: photos + "/scene-0001.jpg")
        let video = photos + "/clip.mkv"
        #expect(Self.makeVideo(video) == 0)
        let options = ["--imgsz", "320", "--plain"]
        let sqlite = folder + "/index.sqlite"
        let reference = try CLI.run(["index", photos, "--db", sqlite] + options)
        #expect(reference.status == 0, "\(reference.stderr)")
        let server = try TestPostgres()
        let shared = try CLI.run(["index", photos, "--db", server.url] + options)
        #expect(shared.status == 0 && shared.stderr.contains("3 video frames"), "\(shared.stderr)")
        #expect(try server.count("SELECT count(*) FROM lookout.files") == 5, "a photo, the video and 3 frames")
        #expect(try server.count("SELECT count(*) FROM lookout.work") == 0)
        for query in ["yellow star", "orange circle", "ring", "shape"] {
            let a = try CLI.run(["search", query, "--db", sqlite, "--json"])
            let b = try CLI.run(["search", query, "--db", server.url, "--json"])
            #expect(a.stdout == b.stdout && a.stdout.contains("\"time\""), "\(query): \(b.stdout) \(b.stderr)")
        }
        let again = try CLI.run(["index", photos, "--db", server.url] + options)
        #expect(again.stderr.contains("(0 computed, 0 reused, 2 unchanged, 0 removed)"), "\(again.stderr)")
    }
}
