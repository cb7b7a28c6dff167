import Foundation
import Testing

/// `lookout models …` run as a process.
@Suite struct ModelsCommandTests {
    static let weights = CLI.root + "/Tests/Fixtures/weights"

    @Test func inspectSaysWhatEachFileIs() throws {
        let detector = try CLI.run(["models", "inspect", Self.weights + "/yolov8n-worldv2-random.pt"])
        #expect(detector.status == 0, "\(detector.stderr)")
        #expect(detector.stdout.contains("YOLO-World v2 detector, scale n, text embedding 512, 80 built-in classes"))
        #expect(detector.stdout.contains("tensors: 412 (F16 ×348, I64 ×64)"))
        let clip = try CLI.run(["models", "inspect", Self.weights + "/clip-tiny-openai.pt"])
        #expect(clip.stdout.contains("CLIP text encoder (openai names): width 64, 2 layers"))
        let evil = try CLI.run(["models", "inspect", Self.weights + "/evil-reduce.pt"])
        #expect(evil.status != 0)
        #expect(evil.stderr.contains("evil-reduce.pt"))
    }

    @Test func convertThenInspect() throws {
        let output = NSTemporaryDirectory() + "lookout-convert-\(UUID().uuidString).safetensors"
        defer { try? FileManager.default.removeItem(atPath: output) }
        let convert = try CLI.run(
            ["models", "convert", Self.weights + "/yolov8n-worldv2-random.pt", "-o", output])
        #expect(convert.status == 0, "\(convert.stderr)")
        let inspect = try CLI.run(["models", "inspect", output])
        #expect(inspect.stdout.contains("file format: safetensors"))
        #expect(inspect.stdout.contains("scale n"))
        #expect(inspect.stdout.contains("F32 ×"))
    }

    @Test func verifyChecksDigests() throws {
        let directory = NSTemporaryDirectory() + "lookout-model-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func manifest(_ sha: String) throws {
            let text = """
                {"name": "tiny", "detector": {"file": "\(Self.weights)/yolov8n-worldv2-random.pt", "sha256": "\(sha)"},
                 "text_encoder": {"file": "\(Self.weights)/clip-tiny-openai.pt"}}
                """
            try text.write(toFile: directory + "/lookout-model.json", atomically: true, encoding: .utf8)
        }
        try manifest(String(repeating: "0", count: 64))
        let wrong = try CLI.run(["models", "verify", directory])
        #expect(wrong.status != 0)
        #expect(wrong.stdout.contains("DOES NOT MATCH"))
        // The digest Lookout computed, checked against the system's sha256sum.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
        process.arguments = [Self.weights + "/yolov8n-worldv2-random.pt"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        process.waitUntilExit()
        let sha = String(String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).prefix(64))
        try manifest(sha)
        let right = try CLI.run(["models", "verify", directory])
        #expect(right.status == 0, "\(right.stdout) \(right.stderr)")
        #expect(right.stdout.contains("matches the manifest"))
        let missing = try CLI.run(["models", "verify", directory + "/nowhere"])
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("lookout-model.json"))
    }
}
