import Foundation
import LookoutJSON
import Testing

/// `lookout detect` run as a process with the random-weight fixtures (n detector, tiny CLIP).
@Suite struct DetectCommandTests {
    static let root = TokenizeCommandTests.repositoryRoot
    static let model = [
        "--detector", root + "/Tests/Fixtures/weights/yolov8n-worldv2-random.pt",
        "--text-model", root + "/Tests/Fixtures/weights/clip-tiny-openai.pt", "--no-cache",
    ]

    @Test func jsonLinesPerImage() throws {
        let result = try TokenizeCommandTests.run(
            ["detect"] + Self.model + [
                Self.root + "/examples/photos/rocket.jpg", Self.root + "/examples/photos/chelsea.jpg", "-q",
                "rocket, cat,, sky",
                "--conf", "0.05", "--json",
            ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("ignoring 1 empty query"))
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.count == 2)
        for line in lines {
            let object = try JSONDocument(text: String(line)).root
            #expect(object["image"]?.string?.hasSuffix(".jpg") == true)
            #expect(object["width"]?.int != nil && object["timings"]?["total_ms"]?.number != nil)
            let detections = object["detections"]!
            for index in 0..<detections.count {
                let detection = detections[index]
                #expect(["rocket", "cat", "sky"].contains(detection["label"]!.string!))
                #expect(detection["score"]!.number! > 0.05)
                #expect(detection["box"]!.count == 4)
            }
        }
    }

    @Test func paddingQueryChangesScoresButIsNotShown() throws {
        let arguments =
            ["detect"] + Self.model + [
                Self.root + "/examples/photos/rocket.jpg", "-q", "rocket, sky", "--conf", "0.01", "--json",
            ]
        let plain = try TokenizeCommandTests.run(arguments)
        let padded = try TokenizeCommandTests.run(arguments + ["--pad"])
        #expect(plain.status == 0 && padded.status == 0, "\(padded.stderr)")
        let a = try JSONDocument(text: plain.stdout.trimmingCharacters(in: .newlines)).root["detections"]!
        let b = try JSONDocument(text: padded.stdout.trimmingCharacters(in: .newlines)).root["detections"]!
        for index in 0..<b.count { #expect(b[index]["label"]!.string! != " ") }
        #expect(a.count > 0 && b.count > 0)
        #expect(a[0]["score"]!.number! != b[0]["score"]!.number!)
    }

    @Test func unreadableImagesAreReportedAndTheOthersStillRun() throws {
        let result = try TokenizeCommandTests.run(
            ["detect"] + Self.model + [
                Self.root + "/Tests/Fixtures/image/files/truncated.jpg", Self.root + "/examples/photos/rocket.jpg",
                "-q", "rocket",
            ])
        #expect(result.status != 0)
        #expect(result.stderr.contains("truncated.jpg"))
        #expect(result.stdout.contains("rocket.jpg (640×427)"))
    }

    @Test func modelErrors() throws {
        let none = try TokenizeCommandTests.run(
            ["detect", Self.root + "/examples/photos/rocket.jpg", "-q", "rocket"],
            environment: ["LOOKOUT_DEFAULT_MODEL": "/nonexistent/lookout-model.json"])
        #expect(none.status != 0 && none.stderr.contains("The demo model not found"))
        #expect(none.stderr.contains("--model DIR"))
        let mismatch = try TokenizeCommandTests.run(
            [
                "detect", "--detector", Self.root + "/Tests/Fixtures/weights/clip-tiny-openai.pt", "--text-model",
                Self.root + "/Tests/Fixtures/weights/clip-tiny-openai.pt", Self.root + "/examples/photos/rocket.jpg",
                "-q", "x",
            ])
        #expect(mismatch.status != 0 && mismatch.stderr.contains("not a YOLO-World v2 detector"))
        let empty = try TokenizeCommandTests.run(
            ["detect"] + Self.model + [Self.root + "/examples/photos/rocket.jpg", "-q", " , "])
        #expect(empty.status != 0 && empty.stderr.contains("no queries"))
        let badConf = try TokenizeCommandTests.run(
            ["detect"] + Self.model + [Self.root + "/examples/photos/rocket.jpg", "-q", "x", "--conf", "2"])
        #expect(badConf.status != 0)
    }

    /// With no model named, the demo model answers, and says so once on stderr.
    @Test func theDemoModelIsTheDefault() throws {
        let result = try TokenizeCommandTests.run(
            ["detect", Self.root + "/examples/scenes/scene-0002.jpg", "-q", "pink square, brown ring", "--no-cache"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.components(separatedBy: "using the demo model").count == 2)
        #expect(result.stdout.contains("pink square") && result.stdout.contains("brown ring"))
    }

    @Test func saveWritesAnnotatedImages() throws {
        let directory = NSTemporaryDirectory() + "lookout-save-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let png = Self.root + "/Tests/Fixtures/demo/scene-0007-rgba.png"
        let jpeg = Self.root + "/examples/scenes/scene-0002.jpg"
        let result = try TokenizeCommandTests.run(
            ["detect", jpeg, png, jpeg, "-q", "square, ring", "--save", directory + "/out", "--no-cache"])
        #expect(result.status == 0, "\(result.stderr)")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory + "/out").sorted()
        #expect(names == ["scene-0002-2.jpg", "scene-0002.jpg", "scene-0007-rgba.png"])
        let jpegBytes = try Data(contentsOf: URL(fileURLWithPath: directory + "/out/scene-0002.jpg"))
        #expect(jpegBytes.prefix(3) == Data([0xFF, 0xD8, 0xFF]))
        let pngBytes = try Data(contentsOf: URL(fileURLWithPath: directory + "/out/scene-0007-rgba.png"))
        #expect(pngBytes.prefix(4) == Data([0x89, 0x50, 0x4E, 0x47]))
        #expect(result.stdout.contains("saved \(directory)/out/scene-0002.jpg"))

        let blocked = try TokenizeCommandTests.run(
            ["detect", jpeg, "-q", "square", "--save", "/proc/lookout-cannot-write-here", "--no-cache"])
        #expect(blocked.status != 0 && blocked.stderr.contains("/proc/lookout-cannot-write-here"))
    }
}
