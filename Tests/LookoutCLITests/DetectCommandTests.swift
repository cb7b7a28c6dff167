import Foundation
import LookoutJSON
import LookoutSupport
import Testing

/// `lookout detect` run as a process: the demo model's detections against ultralytics predict on the same
/// files (Tests/Fixtures/demo/expected.json), every option that changes them, and the errors.
@Suite struct DetectCommandTests {
    static let root = CLI.root
    static let model = [
        "--detector", root + "/Tests/Fixtures/weights/yolov8n-worldv2-random.pt",
        "--text-model", root + "/Tests/Fixtures/weights/clip-tiny-openai.pt", "--no-cache",
    ]
    static let fine = Reference.demoQueries("fine")
    static let case0 = Reference.demo["cases"]![0]  // scene-0001.jpg, the 80 fine captions, 640

    /// Runs detect on one photo with `--json` and compares its one answer with `expected`.
    static func expectDetect(
        _ arguments: [String], photo: String, case item: JSONNode, expected: [Reference.Detection], _ name: String,
        environment: [String: String] = [:], sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let result = try CLI.run(["detect", photo, "--json"] + arguments, environment: environment)
        #expect(result.status == 0, "\(name): \(result.stderr)", sourceLocation: sourceLocation)
        let answers = try Reference.lines(result.stdout)
        #expect(answers.count == 1, "\(name)", sourceLocation: sourceLocation)
        guard let answer = answers.first else { return }
        #expect(answer["image"]!.string! == photo, sourceLocation: sourceLocation)
        let width = Int(answer["width"]!.int!), height = Int(answer["height"]!.int!)
        let (score, box) = Reference.tolerances(case: item, width: width, height: height)
        Reference.expectSame(
            Reference.detections(of: answer), expected, score: score, box: box, name, sourceLocation: sourceLocation)
    }

    @Test func theDemoModelMatchesUltralyticsPredict() throws {
        let photo = Self.root + "/" + Self.case0["image"]!.string!
        let expected = Reference.demoDetections(Self.case0["detections"]!["0.25"]!, queries: Self.fine)
        // The default model, then the same model named by --model, and by $LOOKOUT_DEFAULT_MODEL.
        try Self.expectDetect(
            ["-q", Self.fine.joined(separator: ", ")], photo: photo, case: Self.case0, expected: expected, "default")
        try Self.expectDetect(
            ["-q", Self.fine.joined(separator: ","), "--model", Self.root + "/Models/demo"], photo: photo,
            case: Self.case0,
            expected: expected, "--model")
        try Self.expectDetect(
            ["-q", Self.fine.joined(separator: ",")], photo: photo, case: Self.case0, expected: expected,
            "$LOOKOUT_DEFAULT_MODEL",
            environment: ["LOOKOUT_DEFAULT_MODEL": Self.root + "/Models/demo/lookout-model.json"])
        // --detector and --text-model naming the demo's two files.
        try Self.expectDetect(
            [
                "-q", Self.fine.joined(separator: ","), "--detector", Self.root + "/Models/demo/detector.safetensors",
                "--text-model", Self.root + "/Models/demo/text-encoder.safetensors",
            ], photo: photo, case: Self.case0, expected: expected, "--detector/--text-model")
    }

    @Test func queriesFileAndConfidence() throws {
        let folder = try CLI.scratch("queries-file")
        defer { CLI.remove(folder) }
        try (Self.fine.joined(separator: "\n") + "\n").write(
            toFile: folder + "/queries.txt", atomically: true, encoding: .utf8)
        let photo = Self.root + "/" + Self.case0["image"]!.string!
        try Self.expectDetect(
            ["--queries-file", folder + "/queries.txt", "--conf", "0.05"], photo: photo, case: Self.case0,
            expected: Reference.demoDetections(Self.case0["detections"]!["0.05"]!, queries: Self.fine),
            "--queries-file --conf 0.05")
    }

    @Test(arguments: [
        ("conf 0.01", ["--conf", "0.01"]), ("agnostic", ["--conf", "0.01", "--agnostic"]),
        ("iou 0.1", ["--conf", "0.01", "--iou", "0.1"]), ("max-det 3", ["--conf", "0.01", "--max-det", "3"]),
    ])
    func suppressionOptionsMatchUltralytics(name: String, options: [String]) throws {
        let photo = Self.root + "/" + Self.case0["image"]!.string!
        try Self.expectDetect(
            ["-q", Self.fine.joined(separator: ",")] + options, photo: photo, case: Self.case0,
            expected: Reference.demoDetections(Self.case0["options"]![name]!, queries: Self.fine), name)
    }

    /// --imgsz on the RGBA PNG case (512), and the grayscale JPEG case with its own query set.
    @Test func otherInputSizesAndKinds() throws {
        for index in [3, 4] {
            let item = Reference.demo["cases"]![index]
            let queries = Reference.demoQueries(item["queries"]!.string!)
            let size = String(item["imgsz"]!.int!)
            for confidence in ["0.25", "0.05"] {
                try Self.expectDetect(
                    ["-q", queries.joined(separator: ","), "--imgsz", size, "--conf", confidence],
                    photo: Self.root + "/" + item["image"]!.string!, case: item,
                    expected: Reference.demoDetections(item["detections"]![confidence]!, queries: queries),
                    "\(item["image"]!.string!) --imgsz \(size) --conf \(confidence)")
            }
        }
    }

    /// --query-conf: each query's detections are those of a plain run at its own threshold (class-aware NMS
    /// keeps a box only against higher-scoring boxes of its own query, so they are the reference's at a lower
    /// threshold, cut at the query's own).
    @Test func perQueryThresholds() throws {
        let at005 = Reference.demoDetections(Self.case0["detections"]!["0.05"]!, queries: Self.fine)
        let at001 = Reference.demoDetections(Self.case0["options"]!["conf 0.01"]!, queries: Self.fine)
        let raised = at005[0]
        let raisedTo = min(0.999, raised.score + 0.001)
        // A query that gains detections between 0.01 and 0.05.
        let lowered = try #require(
            Self.fine.first { q in at001.filter { $0.label == q }.count > at005.filter { $0.label == q }.count })
        var expected = at005.filter { $0.label != lowered && ($0.label != raised.label || $0.score > raisedTo) }
        expected += at001.filter { $0.label == lowered }
        expected.sort { $0.score > $1.score }
        #expect(expected.map(\.score) != at005.map(\.score), "the thresholds change the result")
        try Self.expectDetect(
            [
                "-q", Self.fine.joined(separator: ","), "--conf", "0.05", "--query-conf", "\(raised.label)=\(raisedTo)",
                "--query-conf", "\(lowered)=0.01",
            ], photo: Self.root + "/" + Self.case0["image"]!.string!, case: Self.case0, expected: expected,
            "--query-conf")
    }

    @Test func jsonLinesPerImageInOrder() throws {
        let photos = [Self.root + "/examples/photos/rocket.jpg", Self.root + "/examples/photos/chelsea.jpg"]
        let result = try CLI.run(
            ["detect"] + Self.model + photos + ["-q", "rocket, cat,, sky", "--conf", "0.05", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("ignoring 1 empty query"))
        let answers = try Reference.lines(result.stdout)
        #expect(answers.map { $0["image"]!.string! } == photos)
        #expect(answers.map { $0["width"]!.int! } == [640, 451] && answers.map { $0["height"]!.int! } == [427, 300])
        var total = 0
        for answer in answers {
            #expect(answer["timings"]?["total_ms"]?.number != nil)
            for detection in Reference.detections(of: answer) {
                #expect(["rocket", "cat", "sky"][detection.query] == detection.label)
                #expect(detection.score > 0.05 && detection.box.count == 4)
                total += 1
            }
        }
        #expect(total > 0)
    }

    @Test func tableOutput() throws {
        let photo = Self.root + "/" + Self.case0["image"]!.string!
        let result = try CLI.run(["detect", photo, "-q", Self.fine.joined(separator: ",")])
        #expect(result.status == 0, "\(result.stderr)")
        let expected = Reference.demoDetections(Self.case0["detections"]!["0.25"]!, queries: Self.fine)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        let truth = try JSONDocument(bytes: FileContents.read(Self.root + "/examples/scenes/truth.json")).root[
            "images"]!
        let scene = try #require((0..<truth.count).map { truth[$0] }.first { $0["file"]!.string! == "scene-0001.jpg" })
        #expect(
            lines.first == "\(photo) (\(scene["width"]!.int!)×\(scene["height"]!.int!)): \(expected.count) detections")
        #expect(lines.count == expected.count + 1)
        for (line, e) in zip(lines.dropFirst(), expected) {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            let label = e.label.split(separator: " ").map(String.init)
            #expect(Array(fields.prefix(label.count)) == label, "\(line)")
            #expect(abs(Double(fields[label.count])! - e.score) <= 0.0005 + 1e-4, "\(line)")
        }
    }

    @Test func paddingQueryChangesScoresButIsNotShown() throws {
        let arguments =
            ["detect"] + Self.model + [
                Self.root + "/examples/photos/rocket.jpg", "-q", "rocket, sky", "--conf", "0.01", "--json",
            ]
        let plain = try CLI.run(arguments)
        let padded = try CLI.run(arguments + ["--pad"])
        #expect(plain.status == 0 && padded.status == 0, "\(padded.stderr)")
        let a = Reference.detections(of: try Reference.lines(plain.stdout)[0])
        let b = Reference.detections(of: try Reference.lines(padded.stdout)[0])
        #expect(a.count > 0 && b.count > 0)
        #expect(b.allSatisfy { ["rocket", "sky"].contains($0.label) })
        #expect(a[0].score != b[0].score)
    }

    /// Several images computed side by side (three lanes) print what one at a time prints, in the order
    /// given, a broken image among them included; only the timings differ.
    @Test func sideBySideEqualsOneAtATime() throws {
        // scene-0007 (438×652) makes a 14×20 map, where a pool-dependent tiling once changed the rounding.
        let scenes = ["scene-0000.jpg", "scene-0001.jpg", "scene-0007.jpg", "scene-0003.jpg", "scene-0004.jpg"]
        var photos = scenes.map { Self.root + "/examples/scenes/" + $0 }
        photos.insert(Self.root + "/Tests/Fixtures/image/files/truncated.jpg", at: 2)
        func run(_ lanes: String) throws -> [String] {
            let result = try CLI.run(
                ["detect"] + photos + [
                    "-q", "red star, blue ring, green square", "--conf", "0.05", "--json", "--lanes", lanes,
                ])
            #expect(result.status != 0 && result.stderr.contains("truncated.jpg"), "\(result.stderr)")
            return result.stdout.split(separator: "\n").map {
                $0.replacingOccurrences(of: #","timings":\{[^}]*\}"#, with: "", options: .regularExpression)
            }
        }
        let one = try run("1"), three = try run("3")
        #expect(one.count == photos.count && one.contains { $0.contains("\"label\"") })
        #expect(three == one)
    }

    @Test func unreadableImagesAreReportedAndTheOthersStillRun() throws {
        let result = try CLI.run(
            ["detect"] + Self.model + [
                Self.root + "/Tests/Fixtures/image/files/truncated.jpg", Self.root + "/examples/photos/rocket.jpg",
                "-q", "rocket",
            ])
        #expect(result.status != 0)
        #expect(result.stderr.contains("truncated.jpg"))
        #expect(result.stdout.hasPrefix(Self.root + "/examples/photos/rocket.jpg (640×427): "))
    }

    @Test func modelErrors() throws {
        let none = try CLI.run(
            ["detect", Self.root + "/examples/photos/rocket.jpg", "-q", "rocket"],
            environment: ["LOOKOUT_DEFAULT_MODEL": "/nonexistent/lookout-model.json"])
        #expect(none.status != 0 && none.stderr.contains("The demo model not found"))
        #expect(none.stderr.contains("/nonexistent/lookout-model.json") && none.stderr.contains("--model DIR"))
        let mismatch = try CLI.run(
            [
                "detect", "--detector", Self.root + "/Tests/Fixtures/weights/clip-tiny-openai.pt", "--text-model",
                Self.root + "/Tests/Fixtures/weights/clip-tiny-openai.pt", Self.root + "/examples/photos/rocket.jpg",
                "-q", "x",
            ])
        #expect(mismatch.status != 0 && mismatch.stderr.contains("not a detector Lookout runs"))
        #expect(mismatch.stderr.contains("clip-tiny-openai.pt"))
        let empty = try CLI.run(["detect"] + Self.model + [Self.root + "/examples/photos/rocket.jpg", "-q", " , "])
        #expect(empty.status != 0 && empty.stderr.contains("no queries"))
        for (option, value, message) in [
            ("--conf", "2", "--conf must be in [0, 1)"), ("--iou", "0", "--iou must be in (0, 1]"),
            ("--max-det", "0", "--max-det must be positive"), ("--imgsz", "100", "--imgsz must be a multiple of 32"),
            ("--query-conf", "dog", "--query-conf takes QUERY=VALUE"),
        ] {
            let bad = try CLI.run(
                ["detect"] + Self.model + [Self.root + "/examples/photos/rocket.jpg", "-q", "x", option, value])
            #expect(bad.status != 0 && bad.stderr.contains(message), "\(option) \(value): \(bad.stderr)")
            #expect(bad.stdout.isEmpty)
        }
    }

    /// With no model named, the demo model answers, and says so once on stderr.
    @Test func theDemoModelIsTheDefaultAndSaysSo() throws {
        let result = try CLI.run([
            "detect", Self.root + "/examples/scenes/scene-0002.jpg", "-q", "pink square, brown ring",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.components(separatedBy: "using the demo model").count == 2)
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.count == 3 && lines[0].hasSuffix("2 detections"))
        #expect(lines.dropFirst().filter { $0.contains("pink square") }.count == 1)
        #expect(lines.dropFirst().filter { $0.contains("brown ring") }.count == 1)
    }

    @Test func saveWritesAnnotatedImages() throws {
        let directory = try CLI.scratch("save")
        defer { CLI.remove(directory) }
        let png = Self.root + "/Tests/Fixtures/demo/scene-0007-rgba.png"
        let jpeg = Self.root + "/examples/scenes/scene-0002.jpg"
        let result = try CLI.run(["detect", jpeg, png, jpeg, "-q", "square, ring", "--save", directory + "/out"])
        #expect(result.status == 0, "\(result.stderr)")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory + "/out").sorted()
        #expect(names == ["scene-0002-2.jpg", "scene-0002.jpg", "scene-0007-rgba.png"])
        let jpegBytes = try Data(contentsOf: URL(fileURLWithPath: directory + "/out/scene-0002.jpg"))
        #expect(jpegBytes.prefix(3) == Data([0xFF, 0xD8, 0xFF]))
        let pngBytes = try Data(contentsOf: URL(fileURLWithPath: directory + "/out/scene-0007-rgba.png"))
        #expect(pngBytes.prefix(4) == Data([0x89, 0x50, 0x4E, 0x47]))
        #expect(result.stdout.contains("saved \(directory)/out/scene-0002.jpg"))
        #expect(result.stdout.contains("saved \(directory)/out/scene-0002-2.jpg"))

        let blocked = try CLI.run(["detect", jpeg, "-q", "square", "--save", "/proc/lookout-cannot-write-here"])
        #expect(blocked.status != 0 && blocked.stderr.contains("/proc/lookout-cannot-write-here"))
    }

    /// $LOOKOUT_PROFILE prints each convolution's time on standard error, and changes nothing else.
    @Test func profileEnvironmentVariable() throws {
        let arguments =
            ["detect"] + Self.model + [Self.root + "/examples/photos/rocket.jpg", "-q", "rocket", "--conf", "0.05"]
        let plain = try CLI.run(arguments)
        let profiled = try CLI.run(arguments, environment: ["LOOKOUT_PROFILE": "1"])
        #expect(plain.status == 0 && profiled.status == 0)
        #expect(profiled.stdout == plain.stdout)
        #expect(profiled.stderr.contains("GFLOP/s") && !plain.stderr.contains("GFLOP/s"), "\(profiled.stderr)")
    }
}
