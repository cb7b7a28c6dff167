import Foundation
import LookoutJSON
import LookoutSupport
import LookoutTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What a careful attacker tried on `lookout serve` and the video path (issue 48), each case made here from
/// generated files (ffmpeg and small writers, no binary blobs): an upload that crashed the server (frames of
/// 10240×10240, over the pixel limit), manifests that hung it or read the server's own files (DASH behind a
/// container's first bytes), more frames than an upload may hold, bodies that trickle in, clients that leave,
/// the browser's ways in (simple cross-origin types, another Host), links out of the library. Each must end in
/// a clear error within a bounded time, with the server still answering others, a clean stop on SIGTERM,
/// and no upload left in its temporary folder.
@Suite(.serialized) struct HostileInputTests {
    typealias Server = ServeCommandTests.Server

    /// The generated hostile files, made once.
    static let files: [String: String] = {
        let folder = (try? CLI.scratch("hostile-files")) ?? NSTemporaryDirectory()
        var made: [String: String] = [:]
        // One H.264 frame of 10240×10240 (105 megapixels: over the server's 50-megapixel limit and the command line's 100), a few kB.
        let huge = folder + "/huge.mp4"
        TestVideos.shell(
            "ffmpeg -nostdin -y -f lavfi -i color=c=gray:s=10240x10240:d=0.04 -frames:v 1 -c:v libx264 -preset ultrafast -pix_fmt yuv420p \(TestVideos.quoted(huge))"
        )
        made["huge"] = huge
        // A live DASH manifest naming missing file: segments, behind a comment holding `ftypjp2` (so its first
        // 16 bytes look like an ISO media file): FFmpeg's DASH demuxer looped on it for ever.
        let dash = folder + "/holiday.mp4"
        try? FileContents.writeAtomically(
            Array(
                """
                <!--ftypjp2  -->
                <?xml version="1.0"?>
                <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="dynamic" minimumUpdatePeriod="PT1S" availabilityStartTime="1970-01-01T00:00:00Z" profiles="urn:mpeg:dash:profile:isoff-live:2011">
                <Period start="PT0S"><AdaptationSet mimeType="video/mp4"><Representation id="v" bandwidth="1000" width="64" height="64" codecs="avc1.42c00a">
                <SegmentTemplate timescale="1" duration="1" initialization="file:/nonexistent/init.mp4" media="file:/nonexistent/$Number$.m4s" startNumber="1"/>
                </Representation></AdaptationSet></Period></MPD>

                """.utf8), to: dash)
        made["dash"] = dash
        // A static manifest naming a video on the server's own disk.
        let local = CLI.root + "/examples/tracking/shapes.mp4"
        let manifest = folder + "/manifest.mp4"
        try? FileContents.writeAtomically(
            Array(
                """
                <!--ftypjp2  -->
                <?xml version="1.0"?>
                <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT5S" profiles="urn:mpeg:dash:profile:isoff-on-demand:2011">
                <Period><AdaptationSet mimeType="video/mp4"><Representation id="v" bandwidth="1000"><BaseURL>file:\(local)</BaseURL></Representation></AdaptationSet></Period></MPD>

                """.utf8), to: manifest)
        made["manifest"] = manifest
        // 600 frames of 16×16 (a fraction of a second each of inference, but many): over a cap of 100.
        let many = folder + "/many.mp4"
        TestVideos.shell(
            "ffmpeg -nostdin -y -f lavfi -i testsrc=s=16x16:r=600 -t 1 -c:v libx264 -preset ultrafast -pix_fmt yuv420p \(TestVideos.quoted(many))"
        )
        made["many"] = many
        // A long ordinary video: 400 frames of a panning scene (seconds of work for the demo model).
        let long = folder + "/long.mp4"
        TestVideos.pan(
            scene: CLI.root + "/examples/scenes/scene-0003.jpg", to: long, frames: 400, width: 320, height: 256,
            speed: 1, codec: "-c:v libx264 -preset ultrafast -pix_fmt yuv420p")
        made["long"] = long
        return made
    }()

    static func bytes(_ name: String) throws -> [UInt8] { try FileContents.read(try #require(files[name])) }

    /// The seconds `work` took, and its result.
    static func timed<T>(_ work: () throws -> T) rethrows -> (T, Double) {
        let start = Date()
        let result = try work()
        return (result, Date().timeIntervalSince(start))
    }

    /// A server that answers a normal detection.
    static func answersNormally(_ server: Server, _ label: String) throws {
        let photo = try FileContents.read(ServeCommandTests.scene)
        let reply = try ServeCommandTests.request("POST", server.url + "api/v1/detect?q=star&keep=false", body: photo)
        #expect(reply.status == 200, "\(label): the server no longer answers a photo (\(reply.status))")
    }

    /// Each upload that crashed or hung the server, or read its files, gets a clear error in seconds, and the
    /// server answers a photo after each; a SIGTERM then ends it, and its temporary folder holds nothing.
    @Test func hostileUploadsEndInAClearError() throws {
        try #require(TestVideos.haveFFmpeg, "ffmpeg is missing: scripts/test installs it")
        let temporary = try CLI.scratch("hostile-tmp")
        defer { CLI.remove(temporary) }
        let server = try Server(["--max-video-frames", "100"], environment: ["TMPDIR": temporary])
        let video = ["Content-Type": "video/mp4"]
        for (name, status, says) in [
            ("huge", 422, "pixel limit"), ("dash", 415, "not a video"), ("manifest", 415, "not a video container"),
            ("many", 422, "more than 100 frames"),
        ] {
            let (reply, seconds) = try Self.timed {
                try ServeCommandTests.request(
                    "POST", server.url + "api/v1/videos/detect?q=star", body: try Self.bytes(name), headers: video)
            }
            let message = reply.json["error"]?.string ?? ""
            print("hostile upload \(name): \(reply.status) in \(seconds) s: \(message)")
            #expect(reply.status == status && message.contains(says), "\(name): \(reply.status) \(message)")
            #expect(seconds < 20, "\(name) took \(seconds) s")
            #expect(!message.contains(CLI.root) && !message.contains(temporary), "\(name) names a path: \(message)")
            try Self.answersNormally(server, name)
        }
        // The same bytes as a photo: refused as what they are, not decoded.
        let asPhoto = try ServeCommandTests.request(
            "POST", server.url + "api/v1/detect?q=star", body: try Self.bytes("huge"),
            headers: ["Content-Type": "image/jpeg"])
        #expect(asPhoto.status == 415 || asPhoto.status == 422, "\(asPhoto.status)")
        let stop = server.stop()
        #expect(stop.status == 0 && stop.seconds < 12, "SIGTERM: \(stop)")
        let left = (try? FileManager.default.contentsOfDirectory(atPath: temporary)) ?? []
        #expect(left.isEmpty, "uploads left behind: \(left)")
    }

    /// The browser kept out: the types a page may post across origins without asking (text, forms, none) get 415,
    /// a Host header naming another server 421, and every answer carries the strict headers.
    @Test func theBrowserIsKeptOut() throws {
        let server = try Server()
        let photo = try FileContents.read(ServeCommandTests.scene)
        for type in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""] {
            for path in ["api/v1/detect?q=star", "api/v1/videos/detect?q=star"] {
                let reply = try ServeCommandTests.request(
                    "POST", server.url + path, body: photo, headers: ["Content-Type": type])
                #expect(reply.status == 415, "\(path) as \(type.isEmpty ? "no type" : type): \(reply.status)")
            }
            let requery = try ServeCommandTests.request(
                "POST", server.url + "api/v1/images/0123456789abcdef0123/detect",
                body: Array(#"{"queries":["x"]}"#.utf8),
                headers: ["Content-Type": type])
            #expect(requery.status == 415, "re-query as \(type): \(requery.status)")
        }
        let port = server.url.split(separator: ":").last!.filter(\.isNumber)
        for (host, status) in [
            ("attacker.example", 421), ("attacker.example:\(port)", 421), ("127.0.0.1.nip.io:\(port)", 421),
            ("localhost:\(port)", 200), ("127.0.0.1:\(port)", 200), ("[::1]:\(port)", 200),
        ] {
            let reply = try Self.raw(
                server, "GET /api/v1/health HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
            #expect(reply.hasPrefix("HTTP/1.1 \(status)"), "Host \(host): \(reply.prefix(40))")
        }
        let page = try ServeCommandTests.request("GET", server.url)
        let policy = page.headers["content-security-policy"] ?? ""
        #expect(
            policy.contains("default-src 'none'") && policy.contains("frame-ancestors 'none'")
                && policy.contains("script-src 'sha256-"), "\(policy)")
        #expect(page.headers["x-content-type-options"] == "nosniff" && page.headers["x-frame-options"] == "DENY")
        let error = try ServeCommandTests.request("GET", server.url + "api/v1/nothing")
        #expect(error.headers["x-content-type-options"] == "nosniff", "an error answer carries the headers too")
        #expect(server.stop().status == 0)
    }

    /// A body that trickles in holds no place in the queue and gets 408 after --body-timeout; a client that
    /// leaves with its video half done gives its place back and its work stops, so that the next photo is
    /// answered in seconds (one place in the queue: a request that kept it would make the next one wait).
    @Test func slowBodiesAndLeavingClientsHoldNoPlace() throws {
        try #require(TestVideos.haveFFmpeg, "ffmpeg is missing: scripts/test installs it")
        let server = try Server(["--queue", "1", "--body-timeout", "3", "--timeout", "60"])
        // Two slow bodies, then a photo: answered at once.
        let slow = try (0..<2).map { _ in
            try Self.connect(
                server,
                sending:
                    "POST /api/v1/detect?q=star HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: image/jpeg\r\nContent-Length: 100000\r\n\r\nxx"
            )
        }
        let (_, quick) = try Self.timed { try Self.answersNormally(server, "beside slow bodies") }
        #expect(quick < 10, "a photo beside two slow bodies took \(quick) s")
        for socket in slow {
            let answer = Self.readAll(socket, seconds: 10)
            #expect(answer.hasPrefix("HTTP/1.1 408"), "a trickling body: \(answer.prefix(60))")
            close(socket)
        }
        // A long video, and the client gone after a second.
        let video = try Self.bytes("long")
        let leaving = try Self.connect(
            server,
            sending:
                "POST /api/v1/videos/detect?q=star HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: video/mp4\r\nContent-Length: \(video.count)\r\n\r\n",
            body: video)
        usleep(1_500_000)
        close(leaving)
        // The one place is the video's until its leaving is seen (within a second): photos get 503 until then.
        let photo = try FileContents.read(ServeCommandTests.scene)
        let (status, after) = try Self.timed { () throws -> Int in
            var status = 0
            let deadline = Date().addingTimeInterval(20)
            while status != 200 && Date() < deadline {
                status = try ServeCommandTests.request(
                    "POST", server.url + "api/v1/detect?q=star&keep=false", body: photo
                ).status
                if status != 200 { usleep(200_000) }
            }
            return status
        }
        print("a photo answered \(after) s after a client left mid-video")
        #expect(status == 200 && after < 5, "the video the client left held the queue for \(after) s")
        let stop = server.stop()
        #expect(stop.status == 0 && stop.seconds < 12, "SIGTERM: \(stop)")
    }

    /// On the command line: the same files end in a clear error within seconds (`detect`, `track`, and `index`
    /// of a folder holding one), and names that FFmpeg would take as other protocols are files, or refused.
    @Test func theCommandLineRefusesTheSameFiles() throws {
        try #require(TestVideos.haveFFmpeg, "ffmpeg is missing: scripts/test installs it")
        for (name, says) in [
            ("huge", "pixel limit"), ("dash", "not a video container"), ("manifest", "not a video container"),
        ] {
            let file = try #require(Self.files[name])
            for command in ["detect", "track"] {
                let (result, seconds) = try Self.timed { try CLI.run([command, file, "-q", "star"], timeout: 60) }
                #expect(result.status != 0 && result.status < 128, "\(command) \(name): \(result.status)")
                #expect(result.stderr.contains(says), "\(command) \(name): \(result.stderr)")
                #expect(seconds < 30, "\(command) \(name) took \(seconds) s")
            }
        }
        let folder = try CLI.scratch("hostile-index")
        defer { CLI.remove(folder) }
        try FileManager.default.copyItem(atPath: try #require(Self.files["dash"]), toPath: folder + "/holiday.mp4")
        try FileManager.default.copyItem(atPath: ServeCommandTests.scene, toPath: folder + "/scene.jpg")
        let (index, seconds) = try Self.timed {
            try CLI.run(["index", folder, "--db", folder + "/index.db", "--plain"], timeout: 120)
        }
        // Exit 2: done, with a file that could not be indexed.
        #expect(index.status == 2 && seconds < 60, "index: \(index.status) in \(seconds) s: \(index.stderr)")
        #expect(index.stderr.contains("1 file could not be indexed"), "\(index.stderr)")
        let failures = try CLI.run(["index", folder, "--db", folder + "/index.db", "--failures"])
        #expect(
            failures.stdout.contains("holiday.mp4") && failures.stdout.contains("not a video container"),
            "\(failures.stdout)")
        for source in [
            "concat:\(CLI.root)/examples/tracking/shapes.mp4|\(CLI.root)/examples/tracking/shapes.mp4",
            "subfile,,start,0,end,0,,:\(CLI.root)/examples/tracking/shapes.mp4", "ftp://127.0.0.1:9/x.mp4",
            "gopher://127.0.0.1:9/x.mp4", "file://\(CLI.root)/examples/tracking/shapes.mp4",
        ] {
            let (result, took) = try Self.timed { try CLI.run(["detect", source, "-q", "star"], timeout: 60) }
            #expect(result.status != 0 && took < 30, "\(source): \(result.status) \(result.stdout.prefix(100))")
        }
    }

    /// Only the library's files: `index` follows no link out of the folder unless asked, and a photo replaced
    /// by a link (to a file outside) is no longer served.
    @Test func onlyTheLibrarysFilesAreServed() throws {
        let folder = try CLI.scratch("hostile-links")
        defer { CLI.remove(folder) }
        let photos = folder + "/photos", outside = folder + "/outside"
        try FileManager.default.createDirectory(atPath: photos, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        for n in 1...2 {
            let name = String(format: "scene-%04d.jpg", n)
            try FileManager.default.copyItem(atPath: CLI.root + "/examples/scenes/" + name, toPath: photos + "/" + name)
        }
        try FileManager.default.copyItem(
            atPath: CLI.root + "/examples/scenes/scene-0003.jpg", toPath: outside + "/secret.jpg")
        symlink(outside + "/secret.jpg", photos + "/link-out.jpg")
        symlink(outside, photos + "/folder-out")
        symlink(photos + "/scene-0001.jpg", photos + "/link-in.jpg")
        let db = folder + "/index.db"
        let index = try CLI.run(["index", photos, "--db", db, "--plain"])
        #expect(index.status == 0, "\(index.stderr)")
        #expect(index.stderr.contains("2 symbolic links out of the folder skipped"), "\(index.stderr)")
        let listed = try CLI.run(["search", "shape", "--db", db, "--json", "--conf", "0.0001", "--top", "50"])
        let paths = try Reference.lines(listed.stdout).compactMap { $0["image"]?.string }
        #expect(!paths.isEmpty && paths.allSatisfy { !$0.contains("secret") && !$0.contains("folder-out") }, "\(paths)")
        let followed = try CLI.run(["index", photos, "--db", folder + "/all.db", "--plain", "--follow-links"])
        #expect(followed.status == 0 && !followed.stderr.contains("out of the folder"), "\(followed.stderr)")
        let all = try CLI.run([
            "search", "shape", "--db", folder + "/all.db", "--json", "--conf", "0.0001", "--top", "50",
        ])
        #expect(all.stdout.contains("secret.jpg"), "--follow-links indexes the linked photo")

        let server = try Server(["--db", db])
        let search = try ServeCommandTests.request("GET", server.url + "api/v1/search?q=shape&conf=0.0001&top=50")
        let results = try #require(search.json["results"]?.elements)
        let id = try #require(results.first { $0["name"]?.string == "scene-0002.jpg" }?["image"]?.string)
        #expect(try ServeCommandTests.request("GET", server.url + "api/v1/photos/\(id)").status == 200)
        unlink(photos + "/scene-0002.jpg")
        symlink("/etc/passwd", photos + "/scene-0002.jpg")
        for path in ["api/v1/photos/\(id)", "api/v1/photos/\(id)/thumbnail"] {
            let reply = try ServeCommandTests.request("GET", server.url + path)
            #expect(reply.status == 410, "\(path) after the photo became a link: \(reply.status)")
            #expect(!String(decoding: reply.body, as: UTF8.self).contains("root:"), "\(path) served /etc/passwd")
        }
        // An index that cannot be opened: 503 naming no path.
        unlink(db)
        let gone = try ServeCommandTests.request("GET", server.url + "api/v1/search?q=shape")
        let text = String(decoding: gone.body, as: UTF8.self)
        #expect(gone.status == 503 && !text.contains(folder), "\(gone.status): \(text)")
        #expect(server.stop().status == 0)
    }

    /// HTTPS with --tls-cert and --tls-key (a certificate made here by openssl): curl trusting that certificate
    /// gets the health answer over TLS, plain HTTP to the port gets none; half a TLS configuration, or a key that
    /// is not one, refuses to start with a sentence.
    @Test func tlsServesHTTPS() throws {
        let folder = try CLI.scratch("tls")
        defer { CLI.remove(folder) }
        let certificate = folder + "/server.crt", key = folder + "/server.key"
        try #require(
            TestVideos.shell(
                "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 -addext 'subjectAltName = IP:127.0.0.1' -keyout \(key) -out \(certificate)"
            ) == 0, "openssl")
        let server = try Server(["--tls-cert", certificate, "--tls-key", key])
        #expect(server.url.hasPrefix("https://"), "\(server.url)")
        let answer = folder + "/health.json"
        #expect(
            TestVideos.shell(
                "curl -sS --fail --max-time 20 --cacert \(certificate) -o \(answer) \(server.url)api/v1/health") == 0)
        #expect(((try? String(contentsOfFile: answer, encoding: .utf8)) ?? "").contains("\"status\":\"ok\""))
        let plain = server.url.replacingOccurrences(of: "https://", with: "http://")
        #expect(TestVideos.shell("curl -sS --fail --max-time 5 \(plain)api/v1/health") != 0, "plain HTTP answered")
        #expect(server.stop().status == 0)
        let half = try CLI.run(["serve", "--port", "0", "--tls-cert", certificate], timeout: 60)
        #expect(half.status != 0 && half.stderr.contains("go together"), "\(half.stderr)")
        let wrong = try CLI.run(["serve", "--port", "0", "--tls-cert", certificate, "--tls-key", answer], timeout: 60)
        #expect(wrong.status != 0 && wrong.stderr.contains("--tls-key"), "\(wrong.stderr)")
    }

    /// Secrets in URLs are masked wherever one is printed: a URL's password and the values of secret query
    /// parameters; the rest unchanged.
    @Test func secretsInURLsAreMasked() {
        let cases = [
            (
                "postgresql://lookout:hunter2@db.example/photos?sslmode=require&password=x1",
                "postgresql://lookout:***@db.example/photos?sslmode=require&password=***"
            ),
            ("rtsp://cam.local/live?token=abc123&channel=2", "rtsp://cam.local/live?token=***&channel=2"),
            (
                "https://bucket.example/v.mp4?X-Amz-Signature=ff00&sig=1&Key=k",
                "https://bucket.example/v.mp4?X-Amz-Signature=***&sig=***&Key=***"
            ),
            ("cannot open rtsp://u:p@h/s?apikey=z (refused)", "cannot open rtsp://u:***@h/s?apikey=*** (refused)"),
            ("/home/me/photos/keyring.jpg", "/home/me/photos/keyring.jpg"),
            ("http://example.com/?monkey=1&keys=2", "http://example.com/?monkey=1&keys=2"),
        ]
        for (given, expected) in cases { #expect(URLText.redacted(given) == expected, "\(given)") }
    }

    // MARK: - Raw connections

    static func port(_ server: Server) -> UInt16 {
        UInt16(server.url.split(separator: ":").last!.filter(\.isNumber))!
    }

    /// A connection to the server with `text` (and `body`) sent; the socket, still open.
    static func connect(_ server: Server, sending text: String, body: [UInt8] = []) throws -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port(server).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(connected == 0, "cannot connect to \(server.url)")
        let bytes = Array(text.utf8) + body
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes {
                send(socket, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL))
            }
            guard count > 0 else { break }
            sent += count
        }
        return socket
    }

    /// What the server sends on `socket` until it closes it or `seconds` pass.
    static func readAll(_ socket: Int32, seconds: Double) -> String {
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var received: [UInt8] = []
        let deadline = Date().addingTimeInterval(seconds)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date() < deadline {
            let count = recv(socket, &buffer, buffer.count, 0)
            if count == 0 { break }
            if count > 0 {
                received += buffer[0..<count]
                if String(decoding: received, as: UTF8.self).contains("\r\n\r\n") && received.count > 12 {
                    // Enough to read the status line; the body may follow.
                    usleep(100_000)
                }
            }
            if count < 0 && !received.isEmpty { break }
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// One request on a fresh connection, the server's whole answer.
    static func raw(_ server: Server, _ text: String) throws -> String {
        let socket = try connect(server, sending: text)
        defer { close(socket) }
        return readAll(socket, seconds: 10)
    }
}
