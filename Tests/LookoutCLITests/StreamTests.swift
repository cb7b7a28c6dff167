import Foundation
import LookoutJSON
import LookoutSupport
import LookoutTestSupport
import Testing

/// Network streams in `lookout detect` and `lookout track`: an HLS playlist served over HTTP from segments
/// ffmpeg cut from the tracking video, and an RTSP stream of the same file from Debian's GStreamer RTSP server
/// (scripts/test-rtsp-server.py), each giving the file's lines (the RTSP stream, live, those of the frames it
/// did not drop); the server killed mid-stream (reconnect
/// attempts, then a clean end); a server that never answers (the time limit); a password in the URL (never
/// shown).
@Suite(.serialized) struct StreamTests {
    static let video = CLI.root + "/examples/tracking/shapes.mp4"
    static let queries = ["-q", "red circle, blue square, yellow triangle, green star, purple heart"]

    /// Lines of `lookout track SOURCE --json` without the "video" field (the summary line dropped).
    static func frames(_ result: CLI.Result) throws -> [String] {
        try Reference.lines(result.stdout).filter { $0["frame"] != nil }.map { line in
            JSONValue.object([
                ("frame", line["frame"]!.value), ("detections", line["detections"]!.value),
            ]).serialized
        }
    }

    /// The count in "N frames dropped because detection was slower than the stream", 0 when no such line.
    static func droppedCount(_ stderr: String) -> Int {
        for line in stderr.split(separator: "\n") where line.contains("dropped because detection was slower") {
            let words = line.split(separator: " ")
            if let at = words.firstIndex(where: { $0.hasPrefix("frame") }), at > 0, let count = Int(words[at - 1]) {
                return count
            }
        }
        return 0
    }

    static var haveRTSPServer: Bool {
        FileManager.default.fileExists(atPath: "/usr/lib/x86_64-linux-gnu/girepository-1.0/GstRtspServer-1.0.typelib")
    }

    @Test func hlsOverHTTPGivesTheFilesLines() throws {
        try #require(TestVideos.haveFFmpeg, "ffmpeg is missing: scripts/test installs it")
        let folder = try CLI.scratch("hls")
        defer { CLI.remove(folder) }
        let status = TestVideos.shell(
            "ffmpeg -v error -i \(TestVideos.quoted(Self.video)) -c copy -f hls -hls_time 2 -hls_playlist_type vod "
                + "-hls_segment_filename \(TestVideos.quoted(folder + "/part%03d.ts")) \(TestVideos.quoted(folder + "/shapes.m3u8"))"
        )
        try #require(status == 0)
        let server = try ModelsFetchTests.ScriptServer([folder], script: "test-file-server.py", scheme: "http://")
        let file = try CLI.run(["track", Self.video] + Self.queries + ["--json"])
        let stream = try CLI.run(["track", server.url + "shapes.m3u8"] + Self.queries + ["--json"])
        #expect(stream.status == 0, "\(stream.stderr)")
        let expected = try Self.frames(file)
        #expect(expected.count == 72)
        #expect(try Self.frames(stream) == expected)
    }

    @Test func rtspGivesTheFilesLines() throws {
        try #require(Self.haveRTSPServer, "GStreamer's RTSP server is missing: scripts/test installs it")
        let server = try ModelsFetchTests.ScriptServer(
            [Self.video], script: "test-rtsp-server.py", scheme: "rtsp://", python: "/usr/bin/python3")
        let file = try CLI.run(["detect", Self.video] + Self.queries + ["--json"])
        let stream = try CLI.run(["detect", server.url] + Self.queries + ["--json", "--reconnect", "0"])
        #expect(stream.status == 0, "\(stream.stderr)")
        var fileFrames: [Int64: String] = [:]
        for line in try Reference.lines(file.stdout) {
            fileFrames[line["frame"]!.int!] = line["detections"]!.value.serialized
        }
        // A live stream drops the frames the detector has no time for (the oldest first), so frames are
        // matched by their number: every frame that came through equals the file's frame of that number.
        // How many the detector keeps up with depends on the machine's load; what must hold on any machine is
        // that every frame of the file is either detected or counted as dropped, and that a person is told.
        let streamFrames = try Reference.lines(stream.stdout)
        let equal = streamFrames.filter { fileFrames[$0["frame"]!.int!] == $0["detections"]!.value.serialized }
        let dropped = Self.droppedCount(stream.stderr)
        print(
            "RTSP: \(streamFrames.count) frames of the file's \(fileFrames.count) came through, \(equal.count) equal, \(dropped) dropped"
        )
        #expect(fileFrames.count == 72)
        #expect(!streamFrames.isEmpty)
        #expect(streamFrames.count + dropped == fileFrames.count, "every frame detected or counted: \(stream.stderr)")
        #expect(Set(streamFrames.map { $0["frame"]!.int! }).count == streamFrames.count, "no frame twice")
        #expect(equal.count == streamFrames.count)
    }

    @Test func aServerKilledMidStreamIsRetriedThenEndsCleanly() throws {
        try #require(Self.haveRTSPServer, "GStreamer's RTSP server is missing: scripts/test installs it")
        // The server kills itself 2.5 s after lookout connects (after its model is loaded, however long that
        // takes on a busy machine), so that some frames come before the loss.
        let server = try ModelsFetchTests.ScriptServer(
            [Self.video, "--die-after", "2.5"], script: "test-rtsp-server.py", scheme: "rtsp://",
            python: "/usr/bin/python3")
        let started = Date()
        let result = try CLI.run(
            ["track", server.url] + Self.queries + ["--json", "--reconnect", "2", "--timeout", "3"], timeout: 120)
        let seconds = Date().timeIntervalSince(started)
        #expect(result.status == 0, "a stream that ends is a clean end: \(result.stderr)")
        #expect(result.stderr.contains("reconnecting in 1 s (attempt 1 of 2)"), "\(result.stderr)")
        #expect(result.stderr.contains("gave up after 2 attempts"), "\(result.stderr)")
        let lines = try Reference.lines(result.stdout)
        #expect(lines.count > 2 && lines.count < 72, "some frames before the kill, then the summary")
        #expect(lines.last!["summary"] != nil)
        #expect(seconds < 60)
    }

    @Test(arguments: ["rtsp", "http"])
    func aServerThatNeverAnswersEndsWithinTheLimit(scheme: String) throws {
        // A listener that accepts connections and never says a word.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                try #require(bind(listener, raw, length) == 0 && listen(listener, 8) == 0)
                try #require(getsockname(listener, raw, &length) == 0)
            }
        }
        let port = UInt16(bigEndian: address.sin_port)
        let started = Date()
        let result = try CLI.run(
            ["detect", "\(scheme)://127.0.0.1:\(port)/live"] + Self.queries + ["--timeout", "2", "--json"], timeout: 60)
        let seconds = Date().timeIntervalSince(started)
        #expect(result.status != 0 && result.status < 128, "\(result.stderr)")
        #expect(
            result.stderr.contains("no answer within 2 s") || result.stderr.contains("no video within 2 s"),
            "\(result.stderr)")
        #expect(seconds < 15, "it took \(seconds) s")
    }

    @Test func aPasswordInTheURLIsNeverShown() throws {
        try #require(Self.haveRTSPServer, "GStreamer's RTSP server is missing: scripts/test installs it")
        let server = try ModelsFetchTests.ScriptServer(
            [Self.video, "--user", "watcher", "--password", "hunter2"], script: "test-rtsp-server.py",
            scheme: "rtsp://", python: "/usr/bin/python3")
        let withPassword = server.url.replacingOccurrences(of: "rtsp://", with: "rtsp://watcher:hunter2@")
        let result = try CLI.run(["track", withPassword] + Self.queries + ["--json", "--reconnect", "0"])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = try Reference.lines(result.stdout)
        #expect(lines.count > 10)
        #expect(lines[0]["video"]!.string!.hasPrefix("rtsp://watcher:***@"))
        #expect(!(result.stdout + result.stderr).contains("hunter2"))
        let wrong = server.url.replacingOccurrences(of: "rtsp://", with: "rtsp://watcher:swordfish@")
        let refused = try CLI.run(["track", wrong] + Self.queries + ["--reconnect", "0", "--timeout", "5"])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("rtsp://watcher:***@"), "\(refused.stderr)")
        #expect(!(refused.stdout + refused.stderr).contains("swordfish"))
    }
}
