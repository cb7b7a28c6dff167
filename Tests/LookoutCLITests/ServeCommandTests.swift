import Foundation
import LookoutEngine
import LookoutJSON
import LookoutServer
import LookoutSupport
import LookoutTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// `lookout serve` as a process on a loopback port, spoken to over real HTTP: the API's answers against
/// `lookout detect` for the same photo and queries, re-query without the backbone, search and photos by id
/// only, the errors (400, 401, 404, 413, 415, 422, 503), the OpenAPI document against the routes, and a
/// clean exit on SIGTERM with a request in flight. (The page in a browser: scripts/check-web-page.)
@Suite(.serialized) struct ServeCommandTests {
    /// A running `lookout serve --port 0 …`.
    final class Server {
        let process = Process()
        let url: String
        private let home: String
        private let output = Pipe()
        let errors = Pipe()

        /// `environment`: variables beside HOME (a fresh folder, removed with the server) and PATH.
        init(_ arguments: [String] = [], environment: [String: String] = [:]) throws {
            process.executableURL = CLI.executable
            process.arguments = ["serve", "--port", "0"] + arguments
            home = try CLI.scratch("serve-home")
            process.environment = CLI.environment(home: home, environment)
            process.standardOutput = output
            process.standardError = errors
            try process.run()
            var line: [UInt8] = []
            var byte: UInt8 = 0
            while read(output.fileHandleForReading.fileDescriptor, &byte, 1) == 1 && byte != 10 { line.append(byte) }
            let text = String(decoding: line, as: UTF8.self)
            guard let range = text.range(of: "listening on ") else {
                process.terminate()
                throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "no URL: \(text)"])
            }
            url = String(text[range.upperBound...])
        }

        /// SIGTERM, then the exit status and the seconds it took.
        func stop() -> (status: Int32, seconds: Double) {
            let start = Date()
            kill(process.processIdentifier, SIGTERM)
            let deadline = Date().addingTimeInterval(20)
            while process.isRunning && Date() < deadline { usleep(20_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            return (process.terminationStatus, Date().timeIntervalSince(start))
        }

        deinit {
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
            CLI.remove(home)
        }
    }

    struct Reply {
        var status: Int
        var body: [UInt8]
        var headers: [String: String]
        var json: JSONNode { try! JSONDocument(bytes: body).root }
    }

    static func request(
        _ method: String, _ url: String, body: [UInt8]? = nil, headers: [String: String] = [:]
    ) throws -> Reply {
        var request = URLRequest(url: URL(string: url)!, timeoutInterval: 120)
        request.httpMethod = method
        if let body { request.httpBody = Data(body) }
        // The type the API documents for the endpoint, unless the test gives one (a POST of another type is 415).
        if method == "POST" && !headers.keys.contains(where: { $0.lowercased() == "content-type" }) {
            request.setValue(
                url.contains("/api/v1/images/") ? "application/json" : "application/octet-stream",
                forHTTPHeaderField: "Content-Type")
        }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var reply: Reply?
        nonisolated(unsafe) var failure: Error?
        URLSession.shared.dataTask(with: request) { data, response, error in
            if let response = response as? HTTPURLResponse {
                var fields: [String: String] = [:]
                for (key, value) in response.allHeaderFields {
                    fields[String(describing: key).lowercased()] = String(describing: value)
                }
                reply = Reply(status: response.statusCode, body: Array(data ?? Data()), headers: fields)
            } else {
                failure = error
            }
            done.signal()
        }.resume()
        done.wait()
        if let failure { throw failure }
        return reply!
    }

    static let scene = CLI.root + "/examples/scenes/scene-0003.jpg"

    /// `lookout detect --json` for the same photo and queries.
    static func detected(_ queries: String, conf: String = "0.25") throws -> JSONNode {
        let result = try CLI.run(["detect", scene, "-q", queries, "--conf", conf, "--json"])
        return try Reference.lines(result.stdout)[0]["detections"]!
    }

    static func expectSame(_ served: JSONNode, _ reference: JSONNode, _ label: String) {
        #expect(served.count == reference.count, "\(label): \(served.count) vs \(reference.count)")
        for k in 0..<min(served.count, reference.count) {
            let a = served[k], b = reference[k]
            #expect(
                a["label"]!.string == b["label"]!.string && a["query_index"]!.int == b["query_index"]!.int,
                "\(label) #\(k)")
            #expect(abs(a["score"]!.number! - b["score"]!.number!) <= 1e-6, "\(label) #\(k)")
            let x = Reference.numbers(a["box"]!), y = Reference.numbers(b["box"]!)
            #expect(zip(x, y).allSatisfy { abs($0 - $1) <= 1e-3 }, "\(label) #\(k): \(x) vs \(y)")
        }
    }

    /// `detect?slice=400`: the API's sliced detection equals `lookout detect --slice 400` on the same photo; a
    /// re-query with the same slice settings is answered from the kept tiles and equals the command line's answer
    /// for the new queries; other settings find no tiles (404); bad values are 400, too many tiles 422.
    @Test func slicedDetectionEqualsTheCommandLine() throws {
        let server = try Server()
        let path = CLI.root + "/Tests/Fixtures/slicing/small/scene-0000.jpg"
        let photo = try FileContents.read(path)
        func cli(_ queries: String) throws -> JSONNode {
            let run = try CLI.run(["detect", path, "-q", queries, "--slice", "400", "--overlap", "0.25", "--json"])
            return try Reference.lines(run.stdout)[0]["detections"]!
        }
        let reply = try Self.request(
            "POST", server.url + "api/v1/detect?q=star,ring,heart&slice=400&overlap=0.25", body: photo)
        #expect(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
        let served = reply.json["detections"]!
        #expect(served.count > 2)
        Self.expectSame(served, try cli("star, ring, heart"), "sliced")
        let id = reply.json["image_id"]!.string!
        let again = try Self.request(
            "POST", server.url + "api/v1/images/\(id)/detect",
            body: Array(#"{"q": "square, hexagon", "slice": "400", "overlap": 0.25}"#.utf8))
        #expect(again.status == 200, "\(String(decoding: again.body, as: UTF8.self))")
        #expect(again.json["timings"]!["backbone_ms"]!.number! == 0)
        Self.expectSame(again.json["detections"]!, try cli("square, hexagon"), "sliced re-query")
        let other = try Self.request(
            "POST", server.url + "api/v1/images/\(id)/detect", body: Array(#"{"q": "star", "slice": "640"}"#.utf8))
        #expect(other.status == 404)
        for bad in ["slice=8", "slice=640x", "slice=640&overlap=1", "overlap=0.2", "slice=auto&overlap=0.2"] {
            let refused = try Self.request("POST", server.url + "api/v1/detect?q=star&" + bad, body: photo)
            #expect(refused.status == 400, "\(bad): \(refused.status)")
        }
        let many = try Self.request("POST", server.url + "api/v1/detect?q=star&slice=64&overlap=0.5", body: photo)
        #expect(many.status == 422 && many.json["error"]!.string!.contains("at most 256"))
        #expect(server.stop().status == 0)
    }

    /// Examples on several photos sent before (`prompt_boxes` with `image_id`): the answer equals the library's
    /// examples averaged over those photos' kept features (letterboxed as for detection), in either order.
    @Test func examplesOnSeveralPhotosEqualTheLibrary() throws {
        let server = try Server(["--model", "demo-yoloe"])
        let scenes = CLI.root + "/examples/scenes/"
        var ids: [String] = []
        for name in ["scene-0000.jpg", "scene-0001.jpg", "scene-0003.jpg"] {
            let reply = try Self.request(
                "POST", server.url + "api/v1/detect?q=hexagon", body: try FileContents.read(scenes + name))
            #expect(reply.status == 200)
            ids.append(reply.json["image_id"]!.string!)
        }
        let a = #"{"box": [124, 62, 209, 108], "label": "star", "image_id": "\#(ids[0])"}"#
        let b = #"{"box": [20, 108, 132, 237], "label": "star", "image_id": "\#(ids[1])"}"#
        func ask(_ boxes: String) throws -> Reply {
            try Self.request(
                "POST", server.url + "api/v1/images/\(ids[2])/detect",
                body: Array(#"{"q": "hexagon", "prompt_boxes": [\#(boxes)]}"#.utf8))
        }
        let forward = try ask(a + ", " + b)
        #expect(forward.status == 200, "\(String(decoding: forward.body, as: UTF8.self))")
        let backward = try ask(b + ", " + a)
        #expect(forward.json["detections"]!.value.serialized == backward.json["detections"]!.value.serialized)
        // The library, on the same kept features.
        let engine = try Engine.load(
            EngineConfiguration(model: .directory(CLI.root + "/Models/demo-yoloe"), caches: false)
        ).engine
        let photos = try [("scene-0000.jpg", [124, 62, 209, 108]), ("scene-0001.jpg", [20, 108, 132, 237])].map {
            ExamplePhoto(
                photo: try engine.prepare(path: scenes + $0.0, size: 640),
                prompts: [VisualPrompt(box: $0.1.map(Float.init), label: "star")])
        }
        var plan = QueryPlan([Query("hexagon")])
        engine.add(try engine.exampleQueries(photos), to: &plan, combination: .best)
        let expected = engine.detect(
            try engine.prepare(path: scenes + "scene-0003.jpg", size: 640), engine.prepare(plan))
        let served = forward.json["detections"]!
        #expect(served.count == expected.detections.count && served.count > 1)
        for (k, item) in expected.detections.enumerated() where k < served.count {
            #expect(
                served[k]["label"]!.string == item.label && abs(served[k]["score"]!.number! - Double(item.score)) < 1e-6
            )
        }
        let gone = try ask(#"{"box": [1, 1, 20, 20], "label": "star", "image_id": "nope"}"#)
        #expect(gone.status == 404)
        #expect(server.stop().status == 0)
    }

    /// Search by examples on several photos sent before (`prompt_box=x1,y1,x2,y2@ID`): either order gives the
    /// same answer, two photos differ from one, and `combine_examples=best` scores each photo with the better of
    /// the words' and the examples' searches; a box on no photo, or an unknown combination, is a 400.
    @Test func searchByExamplesOnSeveralPhotos() throws {
        let folder = try IndexCommandTests.scratch([
            "scene-0000.jpg", "scene-0001.jpg", "scene-0003.jpg", "scene-0005.jpg",
        ])
        defer { CLI.remove(folder) }
        let db = folder + "/index.sqlite"
        let classes = folder + "/classes.txt"
        try FileContents.writeAtomically(Array("star\nhexagon\nsquare\ncircle\n".utf8), to: classes)
        let indexed = try CLI.run([
            "index", folder + "/photos", "--db", db, "--plain", "--imgsz", "320", "--classes", classes,
            "--no-image-model", "--model", "demo-yoloe",
        ])
        try #require(indexed.status == 0, "\(indexed.stderr)")
        let server = try Server(["--model", "demo-yoloe", "--db", db, "--imgsz", "320"])
        let scenes = CLI.root + "/examples/scenes/"
        var ids: [String] = []
        for name in ["scene-0000.jpg", "scene-0001.jpg"] {
            let reply = try Self.request(
                "POST", server.url + "api/v1/detect?q=star", body: try FileContents.read(scenes + name))
            #expect(reply.status == 200)
            ids.append(reply.json["image_id"]!.string!)
        }
        func search(_ parameters: String) throws -> [String: Double] {
            let reply = try Self.request("GET", server.url + "api/v1/search?q=star&conf=0.001&top=100&" + parameters)
            try #require(reply.status == 200, "\(parameters): \(String(decoding: reply.body, as: UTF8.self))")
            var scores: [String: Double] = [:]
            let results = reply.json["results"]!
            for k in 0..<results.count { scores[results[k]["image"]!.string!] = results[k]["score"]!.number! }
            return scores
        }
        let a = "prompt_box=124,62,209,108@\(ids[0])", b = "prompt_box=20,108,132,237@\(ids[1])"
        let forward = try search(a + "&" + b)
        #expect(!forward.isEmpty)
        #expect(try search(b + "&" + a) == forward)
        #expect(try search("image_id=\(ids[0])&prompt_box=124,62,209,108&" + b) == forward)
        #expect(try search(a) != forward)
        let words = try search("")
        let best = try search(a + "&" + b + "&combine_examples=best")
        for (photo, score) in best { #expect(score == max(words[photo] ?? 0, forward[photo] ?? 0), "\(photo)") }
        #expect(best.count >= max(words.count, forward.count))
        for bad in ["prompt_box=1,1,9,9", a + "&combine_examples=sum", "combine_examples=best", "prompt_box=1,1,9@x"] {
            let reply = try Self.request("GET", server.url + "api/v1/search?q=star&" + bad)
            #expect(reply.status == 400, "\(bad): \(reply.status)")
        }
        #expect(try Self.request("GET", server.url + "api/v1/search?q=star&prompt_box=1,1,9,9@nope").status == 404)
        #expect(server.stop().status == 0)
    }

    /// `detect?track=NAME`: frames sent under one name are followed (ids kept from frame to frame, the first
    /// frame's tracks confirmed at once, as ByteTrack does), another name starts its own ids, new queries start
    /// again, and a bad name is refused.
    @Test func framesSentUnderANameAreTracked() throws {
        let server = try Server()
        let photo = try FileContents.read(Self.scene)
        func ids(_ reply: Reply) -> [Int64] {
            let detections = reply.json["detections"]!
            return (0..<detections.count).compactMap { detections[$0]["track_id"]?.int }
        }
        var seen: [[Int64]] = []
        for _ in 0..<3 {
            let reply = try Self.request(
                "POST", server.url + "api/v1/detect?q=star,circle,shape&keep=false&track=cam-1", body: photo)
            #expect(reply.status == 200)
            seen.append(ids(reply))
        }
        #expect(!seen[0].isEmpty && seen.allSatisfy { $0 == seen[0] }, "\(seen)")
        #expect(seen[0] == Array(1...Int64(seen[0].count)), "ids from 1: \(seen[0])")
        let other = try Self.request(
            "POST", server.url + "api/v1/detect?q=star,circle,shape&keep=false&track=cam-2", body: photo)
        #expect(ids(other) == seen[0], "another name, its own ids from 1")
        let plain = try Self.request("POST", server.url + "api/v1/detect?q=star,circle,shape&keep=false", body: photo)
        #expect(ids(plain).isEmpty, "no track: no ids")
        let bad = try Self.request("POST", server.url + "api/v1/detect?q=star&track=bad%20name", body: photo)
        #expect(bad.status == 400 && bad.json["error"]!.string!.contains("track must be"))
        #expect(server.stop().status == 0)
    }

    /// `POST /api/v1/videos/detect?track=true`: every frame's detections and track ids equal `lookout track` on
    /// the same file, with ByteTrack and (on the moving camera's video) BoT-SORT; what was found when; an
    /// unknown tracker (400), not a video (415) and too long a video (422) refused.
    @Test func aVideoUploadEqualsLookoutTrack() throws {
        let server = try Server(["--max-video-seconds", "10"])
        let video = try FileContents.read(TrackCommandTests.video)
        let queries = "red%20circle,blue%20square,yellow%20triangle,green%20star,purple%20heart"
        let reply = try Self.request(
            "POST", server.url + "api/v1/videos/detect?q=\(queries)&track=true", body: video,
            headers: ["Content-Type": "video/mp4"])
        try #require(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
        let frames = reply.json["frames"]!
        let cli = try Reference.lines(
            try CLI.run(["track", TrackCommandTests.video] + TrackCommandTests.queries + ["--json"]).stdout
        ).filter { $0["frame"] != nil }
        #expect(frames.count == 72 && cli.count == 72)
        var ids = Set<Int64>()
        for f in 0..<min(frames.count, cli.count) {
            #expect(
                frames[f]["detections"]!.value.serialized == cli[f]["detections"]!.value.serialized, "frame \(f)")
            let detections = frames[f]["detections"]!
            for d in 0..<detections.count { ids.insert(detections[d]["track_id"]!.int!) }
        }
        #expect(ids.count == 7 && reply.json["tracks"]!.int! == 7)
        let heart = reply.json["found"]!["purple heart"]!
        #expect(heart["first"]!.number! == 0 && heart["frames"]!.int! == 72)
        // BoT-SORT on the video seen by a moving camera: the same as `lookout track --tracker botsort`.
        let camera = CLI.root + "/examples/tracking/camera.mp4"
        let moving = try Self.request(
            "POST", server.url + "api/v1/videos/detect?q=\(queries)&track=true&tracker=botsort",
            body: try FileContents.read(camera), headers: ["Content-Type": "video/mp4"])
        try #require(moving.status == 200, "\(String(decoding: moving.body, as: UTF8.self))")
        let botsort = try Reference.lines(
            try CLI.run(["track", camera] + TrackCommandTests.queries + ["--tracker", "botsort", "--json"]).stdout
        ).filter { $0["frame"] != nil }
        let movingFrames = moving.json["frames"]!
        #expect(movingFrames.count == 60 && botsort.count == 60)
        for f in 0..<min(movingFrames.count, botsort.count) {
            #expect(
                movingFrames[f]["detections"]!.value.serialized == botsort[f]["detections"]!.value.serialized,
                "botsort frame \(f)")
        }
        let unknown = try Self.request(
            "POST", server.url + "api/v1/videos/detect?q=star&track=true&tracker=sort", body: video)
        #expect(unknown.status == 400 && unknown.json["error"]!.string!.contains("bytetrack or botsort"))
        let photo = try FileContents.read(Self.scene)
        let notVideo = try Self.request("POST", server.url + "api/v1/videos/detect?q=star", body: photo)
        #expect(notVideo.status == 415, "\(notVideo.status)")
        #expect(server.stop().status == 0)
        let short = try Server(["--max-video-seconds", "2"])
        let long = try Self.request("POST", short.url + "api/v1/videos/detect?q=star", body: video)
        #expect(long.status == 422 && long.json["error"]!.string!.contains("at most 2 s"), "\(long.status)")
        #expect(short.stop().status == 0)
    }

    @Test func detectAndRequeryMatchTheCommandLine() throws {
        let server = try Server()
        let photo = try FileContents.read(Self.scene)
        let first = try Self.request("POST", server.url + "api/v1/detect?q=star,circle", body: photo)
        #expect(first.status == 200, "\(String(decoding: first.body, as: UTF8.self))")
        let reference = try Self.detected("star, circle")
        #expect(reference.count > 0)
        Self.expectSame(first.json["detections"]!, reference, "detect")
        let id = first.json["image_id"]!.string!
        #expect(first.json["width"]!.int == 554 && first.json["height"]!.int == 391)

        let body = Array(#"{"queries": ["red shape", "ring", "square"], "conf": 0.1}"#.utf8)
        let again = try Self.request("POST", server.url + "api/v1/images/\(id)/detect", body: body)
        #expect(again.status == 200)
        Self.expectSame(
            again.json["detections"]!, try Self.detected("red shape, ring, square", conf: "0.1"), "re-query")
        #expect(again.json["timings"]!["backbone_ms"]!.number == 0)

        // Errors, each with a JSON sentence.
        let cases: [(String, String, [UInt8]?, Int)] = [
            ("POST", "api/v1/images/0123456789abcdef/detect", body, 404),
            ("POST", "api/v1/images/\(id)/detect", Array("{not json".utf8), 400),
            ("POST", "api/v1/images/\(id)/detect", Array(#"{"queries": []}"#.utf8), 400),
            // Visual prompts: malformed, and on a model without a visual prompt encoder (the demo's YOLO-World).
            ("POST", "api/v1/images/\(id)/detect", Array(#"{"prompt_boxes": 5}"#.utf8), 400),
            ("POST", "api/v1/images/\(id)/detect", Array(#"{"prompt_boxes": [{"box": [10, 10, 90, 90]}]}"#.utf8), 400),
            ("POST", "api/v1/images/\(id)/detect", Array(#"{"queries": ["x"], "conf": 2}"#.utf8), 400),
            ("POST", "api/v1/images/\(id)/detect", Array(#"{"queries": ["x"], "iou": "high"}"#.utf8), 400),
            ("POST", "api/v1/detect?q=star", Array("not a photo at all".utf8), 415),
            ("POST", "api/v1/detect?q=star", Array(photo.prefix(3000)), 400),
            ("POST", "api/v1/detect?q=star", Self.hugePNG(), 422),
            ("POST", "api/v1/detect?q=star", [], 400),
            ("POST", "api/v1/detect", photo, 400),
            ("POST", "api/v1/detect?q=star&max_det=0", photo, 400),
            ("GET", "api/v1/search?q=star", nil, 404),
        ]
        for (method, path, payload, status) in cases {
            let reply = try Self.request(method, server.url + path, body: payload)
            #expect(
                reply.status == status,
                "\(method) \(path): \(reply.status) \(String(decoding: reply.body, as: UTF8.self))")
            #expect(reply.json["error"]?.string?.isEmpty == false, "\(path)")
        }
        let big = try Self.request(
            "POST", server.url + "api/v1/detect?q=star", body: [UInt8](repeating: 0, count: 33 << 20))
        #expect(big.status == 413)

        let metrics = String(decoding: try Self.request("GET", server.url + "metrics").body, as: UTF8.self)
        #expect(
            metrics.contains("lookout_feature_store_bytes") && metrics.contains("hb_requests{"),
            "\(metrics.prefix(400))")
        let page = try Self.request("GET", server.url)
        #expect(page.status == 200 && String(decoding: page.body, as: UTF8.self).contains("<title>Lookout</title>"))
        #expect(server.stop().status == 0)
    }

    /// A PNG whose header says 20,000 × 20,000 (over the pixel limit), with one small IDAT (a stored
    /// deflate block of 1,000 zero bytes) and IEND: well-formed up to what it claims.
    static func hugePNG() -> [UInt8] {
        func be(_ v: UInt32) -> [UInt8] {
            [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
        }
        func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
            let body = Array(type.utf8) + data
            var crc: UInt32 = 0xFFFF_FFFF
            for byte in body {
                crc ^= UInt32(byte)
                for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
            }
            return be(UInt32(data.count)) + body + be(~crc)
        }
        let zeros = [UInt8](repeating: 0, count: 1000)
        let deflate: [UInt8] = [0x78, 0x01, 0x01, 0xE8, 0x03, 0x17, 0xFC] + zeros + be((1000 << 16) | 1)
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
            + chunk("IHDR", be(20000) + be(20000) + [8, 2, 0, 0, 0])
            + chunk("IDAT", deflate) + chunk("IEND", [])
    }

    @Test func searchAndPhotosByIdOnly() throws {
        let folder = try IndexCommandTests.scratch(["scene-0001.jpg", "scene-0003.jpg", "scene-0007.jpg"])
        defer { CLI.remove(folder) }
        let db = folder + "/index.sqlite"
        #expect(try CLI.run(["index", folder + "/photos", "--db", db, "--plain"]).status == 0)
        let server = try Server(["--db", db])
        let found = try Self.request("GET", server.url + "api/v1/search?q=star&top=5")
        #expect(found.status == 200)
        let text = String(decoding: found.body, as: UTF8.self)
        #expect(!text.contains(folder), "a path leaked: \(text)")
        let results = found.json["results"]!
        #expect(results.count > 0)
        let id = results[0]["image"]!.string!
        let name = results[0]["name"]!.string!
        let photo = try Self.request("GET", server.url + "api/v1/photos/\(id)")
        let original = try FileContents.read(folder + "/photos/" + name)
        #expect(photo.status == 200 && photo.body == original)
        let thumbnail = try Self.request("GET", server.url + "api/v1/photos/\(id)/thumbnail")
        #expect(thumbnail.status == 200 && thumbnail.body.starts(with: [0xFF, 0xD8]))
        for bad in ["0123456789abcdef01234567", "..%2F..%2F..%2Fetc%2Fpasswd", "%2Fetc%2Fpasswd", id + "0"] {
            let reply = try Self.request("GET", server.url + "api/v1/photos/\(bad)")
            #expect(reply.status == 404, "\(bad): \(reply.status)")
        }
        #expect(try Self.request("GET", server.url + "api/v1/search?q=star&top=0").status == 400)
        #expect(server.stop().status == 0)
    }

    /// `GET /api/v1/search/dataset`: the search's photos with boxes as a training set in a ZIP archive (unpacked by
    /// Python's zipfile, every CRC checked): YOLO's label lines are the search's boxes, normalised; COCO's
    /// annotations are the boxes in pixels; the photos are the indexed files, byte for byte.
    @Test func searchResultsExportAsADataset() throws {
        let folder = try IndexCommandTests.scratch(["scene-0001.jpg", "scene-0003.jpg", "scene-0007.jpg"])
        defer { CLI.remove(folder) }
        let db = folder + "/index.sqlite"
        #expect(try CLI.run(["index", folder + "/photos", "--db", db, "--plain"]).status == 0)
        let server = try Server(["--db", db])
        let found = try Self.request("GET", server.url + "api/v1/search?q=star&conf=0.3")
        let results = found.json["results"]!
        var expected: [String: (width: Double, height: Double, boxes: [[Double]])] = [:]
        for k in 0..<results.count where results[k]["detections"]!.count > 0 {
            let boxes = results[k]["detections"]!
            expected[results[k]["name"]!.string!] = (
                results[k]["width"]!.number!, results[k]["height"]!.number!,
                (0..<boxes.count).map { i in (0..<4).map { boxes[i]["box"]![$0].number! } }
            )
        }
        try #require(!expected.isEmpty)
        func unpacked(_ format: String) throws -> String {
            let reply = try Self.request(
                "GET", server.url + "api/v1/search/dataset?q=star&conf=0.3&val=0&format=" + format)
            try #require(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
            let archive = folder + "/\(format).zip", out = folder + "/" + format
            try FileContents.writeAtomically(reply.body, to: archive)
            let script =
                "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); assert z.testzip() is None; z.extractall(sys.argv[2])"
            let status = TestVideos.shell(
                "python3 -c \(TestVideos.quoted(script)) \(TestVideos.quoted(archive)) \(TestVideos.quoted(out))")
            try #require(status == 0, "Python's zipfile refused the archive")
            return out
        }
        let yolo = try unpacked("yolo")
        let yaml = String(decoding: try FileContents.read(yolo + "/data.yaml"), as: UTF8.self)
        #expect(yaml.contains("train: images/train") && yaml.contains("names:\n  0: \"star\""), "\(yaml)")
        for (name, photo) in expected {
            #expect(
                try FileContents.read(yolo + "/images/train/" + name) == FileContents.read(folder + "/photos/" + name))
            let stem = String(name.dropLast(4))
            let lines = String(decoding: try FileContents.read(yolo + "/labels/train/\(stem).txt"), as: UTF8.self)
                .split(separator: "\n").map { $0.split(separator: " ").map { Double($0)! } }
            #expect(lines.count == photo.boxes.count)
            for (line, b) in zip(lines, photo.boxes) {
                let want = [
                    0, (b[0] + b[2]) / 2 / photo.width, (b[1] + b[3]) / 2 / photo.height, (b[2] - b[0]) / photo.width,
                    (b[3] - b[1]) / photo.height,
                ]
                #expect(zip(line, want).allSatisfy { abs($0 - $1) <= 1e-6 }, "\(name): \(line) vs \(want)")
            }
        }
        let coco = try unpacked("coco")
        let instances = try JSONDocument(bytes: try FileContents.read(coco + "/annotations/instances_train.json")).root
        #expect(instances["images"]!.count == expected.count)
        #expect(instances["annotations"]!.count == expected.values.reduce(0) { $0 + $1.boxes.count })
        #expect(instances["categories"]![0]["name"]!.string == "star")
        for bad in ["format=voc", "val=2"] {
            #expect(try Self.request("GET", server.url + "api/v1/search/dataset?q=star&" + bad).status == 400, "\(bad)")
        }
        #expect(server.stop().status == 0)
    }

    /// `label=` on the search API keeps the photos where the index's prompt-free detector named that, as
    /// `lookout search --label` does; an index without labels, or an empty label, is a 400.
    @Test func searchFiltersByPromptFreeLabels() throws {
        let folder = try IndexCommandTests.scratch(IndexCommandTests.photos)
        defer { CLI.remove(folder) }
        let db = folder + "/labels.sqlite"
        let indexed = try CLI.run([
            "index", folder + "/photos", "--db", db, "--plain", "--imgsz", "320", "--prompt-free",
            CLI.root + "/Tests/Fixtures/yoloe/yoloe-11n-seg-pf-random.pt",
        ])
        try #require(indexed.status == 0, "\(indexed.stderr)")
        let cli = try CLI.run(["search", "star", "--db", db, "--json", "--top", "100"])
        let hits = try Reference.lines(cli.stdout)
        var counts: [String: Int] = [:]
        for hit in hits {
            let labels = hit["labels"]!
            for name in Set((0..<labels.count).map { labels[$0]["label"]!.string! }) { counts[name, default: 0] += 1 }
        }
        let name = try #require(counts.filter { $0.value < hits.count }.keys.sorted().first)
        let server = try Server(["--db", db])
        let found = try Self.request("GET", server.url + "api/v1/search?q=star&top=100&label=\(name)")
        #expect(found.status == 200)
        let results = found.json["results"]!
        let expected = try CLI.run(["search", "star", "--db", db, "--json", "--top", "100", "--label", name])
        let byCLI = try Reference.lines(expected.stdout).count
        #expect(results.count == counts[name] && results.count == byCLI, "\(results.count), \(byCLI)")
        for k in 0..<results.count {
            let labels = results[k]["labels"]!
            #expect((0..<labels.count).contains { labels[$0].string == name }, "result \(k) is labelled \(name)")
        }
        #expect(try Self.request("GET", server.url + "api/v1/search?q=star&label=").status == 400)
        #expect(server.stop().status == 0)
        let plainDB = folder + "/plain.sqlite"
        #expect(try CLI.run(["index", folder + "/photos", "--db", plainDB, "--plain", "--imgsz", "320"]).status == 0)
        let plain = try Server(["--db", plainDB])
        #expect(try Self.request("GET", plain.url + "api/v1/search?q=star&label=\(name)").status == 400)
        #expect(plain.stop().status == 0)
    }

    /// Without --db, `serve` searches the index `lookout index` made by default (as `search` does) and says
    /// so; without one it says how to make one, and search answers 404.
    @Test func theDefaultIndexIsServed() throws {
        let folder = try IndexCommandTests.scratch(["scene-0001.jpg", "scene-0003.jpg"])
        defer { CLI.remove(folder) }
        let data = ["XDG_DATA_HOME": folder + "/data"]
        #expect(try CLI.run(["index", folder + "/photos", "--plain"], environment: data).status == 0)
        let server = try Server([], environment: data)
        let found = try Self.request("GET", server.url + "api/v1/search?q=star&top=5")
        #expect(found.status == 200 && found.json["results"]!.count > 0)
        #expect(server.stop().status == 0)
        let said = String(decoding: server.errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(said.contains("searching \(folder)/data/lookout/index.sqlite (the default index"), "\(said)")
        #expect(!said.contains("was indexed"), "an index that fits the model is served without a note: \(said)")
        // An index made in another arithmetic is served with a note saying so, as `search` says it.
        let bf16 = folder + "/bf16.sqlite"
        let made = try CLI.run(["index", folder + "/photos", "--plain", "--db", bf16, "--precision", "bf16"])
        #expect(made.status == 0, "\(made.stderr)")
        if !made.stderr.contains("this CPU has no") {  // a CPU without AVX-512 BF16 indexes in fp32
            let noted = try Server(["--db", bf16])
            #expect(noted.stop().status == 0)
            let note = String(decoding: noted.errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(note.contains("bf16.sqlite was indexed in bf16, and this server computes in"), "\(note)")
        }

        let bare = try Server([], environment: ["XDG_DATA_HOME": folder + "/nothing"])
        #expect(try Self.request("GET", bare.url + "api/v1/search?q=star").status == 404)
        #expect(bare.stop().status == 0)
        let told = String(decoding: bare.errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(told.contains("no index to search (none at \(folder)/nothing/lookout/index.sqlite)"), "\(told)")
    }

    @Test func tokenRequiredOffLoopback() throws {
        let open = try CLI.run(["serve", "--host", "0.0.0.0", "--port", "0"])
        #expect(open.status == 64 && open.stderr.contains("--token"), "\(open.stderr)")
        let server = try Server(["--token", "s3cret"])
        let photo = try FileContents.read(Self.scene)
        let refused = try Self.request("POST", server.url + "api/v1/detect?q=star", body: photo)
        #expect(refused.status == 401 && refused.headers["www-authenticate"] == "Bearer")
        let wrong = try Self.request(
            "POST", server.url + "api/v1/detect?q=star", body: photo, headers: ["Authorization": "Bearer s3cre"])
        #expect(wrong.status == 401)
        let allowed = try Self.request(
            "POST", server.url + "api/v1/detect?q=star", body: photo, headers: ["Authorization": "Bearer s3cret"])
        #expect(allowed.status == 200)
        #expect(try Self.request("GET", server.url + "api/v1/health").status == 200)
        #expect(server.stop().status == 0)
    }

    /// Every operation of the served OpenAPI document is routed (its answer is one the document lists, with
    /// a JSON error where it is not 200) and every route is documented.
    @Test func openAPIDocumentMatchesTheRoutes() throws {
        let server = try Server()
        let reply = try Self.request("GET", server.url + "api/v1/openapi.json")
        #expect(reply.status == 200)
        let paths = reply.json["paths"]!
        var documented: Set<String> = []
        for path in paths.value.objectKeys {
            for method in paths[path]!.value.objectKeys { documented.insert(method.uppercased() + " " + path) }
        }
        #expect(documented == Set(OpenAPIDocument.operations.map { $0.method + " " + $0.path }))
        let photo = try FileContents.read(Self.scene)
        for (method, path) in OpenAPIDocument.operations {
            let concrete = path.replacingOccurrences(of: "{image_id}", with: "00").replacingOccurrences(
                of: "{photo_id}", with: "00")
            let answer = try Self.request(
                method, server.url + String(concrete.dropFirst()) + (path.hasSuffix("detect") ? "?q=star" : ""),
                body: method == "POST" ? (path.contains("images") ? Array(#"{"queries":["star"]}"#.utf8) : photo) : nil)
            let listed = paths[path]![method.lowercased()]!["responses"]!.value.objectKeys
            #expect(listed.contains(String(answer.status)), "\(method) \(path): \(answer.status) not documented")
            if answer.status != 200 { #expect(answer.json["error"]?.string != nil, "\(method) \(path)") }
        }
        // A documented path with another method: 405 and the methods it takes; an unknown path: 404. JSON both.
        let wrong = try Self.request("DELETE", server.url + "api/v1/images/ab12/detect")
        #expect(wrong.status == 405 && wrong.headers["allow"] == "POST" && wrong.json["error"]?.string != nil)
        let unknown = try Self.request("GET", server.url + "api/v1/nothing")
        #expect(unknown.status == 404 && unknown.json["error"]?.string != nil)
        #expect(server.stop().status == 0)
    }

    /// SIGTERM while a detection runs: that request is answered, and the server exits 0 within 5 s.
    @Test func sigtermLetsTheRequestInFlightFinish() throws {
        let server = try Server()
        let photo = try FileContents.read(CLI.root + "/examples/photos/astronaut.jpg")
        nonisolated(unsafe) var status = 0
        let done = DispatchSemaphore(value: 0)
        let url = server.url
        Thread.detachNewThread {
            status = (try? Self.request("POST", url + "api/v1/detect?q=person,rocket", body: photo).status) ?? -1
            done.signal()
        }
        usleep(300_000)
        let (exit, seconds) = server.stop()
        done.wait()
        #expect(status == 200 && exit == 0 && seconds < 5, "status \(status), exit \(exit) after \(seconds) s")
    }

    /// A request still running at its time limit is answered 503 with Retry-After then, not when it ends;
    /// the server goes on answering.
    @Test func requestTimeLimit() throws {
        let server = try Server(["--imgsz", "1280", "--timeout", "0.1"])
        let photo = try FileContents.read(CLI.root + "/examples/photos/astronaut.jpg")
        let reply = try Self.request("POST", server.url + "api/v1/detect?q=person", body: photo)
        #expect(reply.status == 503 && reply.headers["retry-after"] == "1", "\(reply.status)")
        #expect(String(decoding: reply.body, as: UTF8.self).contains("longer than its limit"))
        #expect(try Self.request("GET", server.url + "api/v1/health").status == 200)
        #expect(server.stop().status == 0)
    }

    /// SIGTERM with several detections queued: the one running finishes, the waiting ones get 503 at once,
    /// and the server exits 0 within 5 s.
    @Test func sigtermWithAQueueStopsWithinFiveSeconds() throws {
        // At 1280 a detection takes about four times as long as at 640, so that six of them cannot all be
        // done within the half second before SIGTERM, however fast the machine or the kernels become.
        let server = try Server(["--imgsz", "1280"])
        let photo = try FileContents.read(CLI.root + "/examples/photos/astronaut.jpg")
        let lock = NSLock()
        nonisolated(unsafe) var statuses: [Int] = []
        let group = DispatchGroup()
        let url = server.url
        for n in 0..<6 {
            group.enter()
            Thread.detachNewThread {
                // Other bytes each time (after the JPEG's end): every request runs the backbone.
                let status =
                    (try? Self.request("POST", url + "api/v1/detect?q=person", body: photo + [UInt8(n)]).status) ?? -1
                lock.withLock { statuses.append(status) }
                group.leave()
            }
        }
        usleep(500_000)
        let (exit, seconds) = server.stop()
        group.wait()
        #expect(exit == 0 && seconds < 5, "exit \(exit) after \(seconds) s")
        #expect(statuses.allSatisfy { $0 == 200 || $0 == 503 } && statuses.contains(503), "\(statuses)")
    }

    /// Query parameters as forms write them: "+" is a space ("red+shape" is the query "red shape").
    @Test func formEncodedQueries() throws {
        let server = try Server()
        let photo = try FileContents.read(Self.scene)
        let reply = try Self.request("POST", server.url + "api/v1/detect?q=red+shape,star", body: photo)
        #expect(reply.status == 200)
        let labels = Set((0..<reply.json["detections"]!.count).map { reply.json["detections"]![$0]["label"]!.string! })
        #expect(labels.contains("red shape") && !labels.contains { $0.contains("+") }, "\(labels)")
        #expect(server.stop().status == 0)
    }

    /// With one request allowed to wait, a burst gets 503 with Retry-After for some, 200 for the others.
    @Test func busyServerSays503() throws {
        let server = try Server(["--queue", "1"])
        let photos = try (1...6).map {
            try FileContents.read(CLI.root + String(format: "/examples/scenes/scene-%04d.jpg", $0))
        }
        let statuses = NSLock()
        nonisolated(unsafe) var seen: [(Int, String?)] = []
        let group = DispatchGroup()
        let url = server.url
        for photo in photos {
            group.enter()
            Thread.detachNewThread {
                let reply = try? Self.request("POST", url + "api/v1/detect?q=star", body: photo)
                statuses.withLock { seen.append((reply?.status ?? -1, reply?.headers["retry-after"])) }
                group.leave()
            }
        }
        group.wait()
        #expect(seen.contains { $0.0 == 200 } && seen.contains { $0.0 == 503 && $0.1 == "1" }, "\(seen)")
        #expect(seen.allSatisfy { $0.0 == 200 || $0.0 == 503 }, "\(seen)")
        #expect(server.stop().status == 0)
    }
}

extension JSONValue {
    /// The keys of an object value, in order (empty for other values).
    fileprivate var objectKeys: [String] {
        if case .object(let members) = self { return members.map(\.0) }
        return []
    }
}
