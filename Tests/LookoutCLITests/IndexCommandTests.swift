import Foundation
import LookoutJSON
import Testing

/// `lookout index` and `lookout search` as processes, with the demo model on the example scenes.
@Suite struct IndexCommandTests {
    static let root = CLI.root

    static func scratch() throws -> String {
        let folder = NSTemporaryDirectory() + "lookout-index-cli-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: folder + "/photos", withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: root + "/examples/scenes") where name.hasSuffix(".jpg") {
            try FileManager.default.copyItem(atPath: root + "/examples/scenes/" + name, toPath: folder + "/photos/" + name)
        }
        return folder
    }

    @Test func killedMidwayThenResumedGivesACompleteIndex() throws {
        let folder = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let db = folder + "/index.sqlite"
        let process = Process()
        process.executableURL = CLI.executable
        process.arguments = ["index", folder + "/photos", "--db", db, "--plain", "--no-cache"]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        let log = Log()
        errors.fileHandleForReading.readabilityHandler = { handle in log.append(handle.availableData) }
        try process.run()
        // Wait for the first progress line ("indexed k/24", every 5 s), then kill -9 in the middle of the run.
        var waited = 0.0
        while waited < 120 && !log.text.contains("indexed ") {
            Thread.sleep(forTimeInterval: 0.2)
            waited += 0.2
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        errors.fileHandleForReading.readabilityHandler = nil
        #expect(process.terminationReason == .uncaughtSignal, "\(log.text)")

        let resumed = try CLI.run(["index", folder + "/photos", "--db", db, "--plain", "--no-cache"])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stderr.contains("24 photos indexed"), "\(resumed.stderr)")
        let computed = resumed.stderr.components(separatedBy: "photos indexed (").dropFirst().first
            .flatMap { Int($0.split(separator: " ")[0]) }
        #expect(computed != nil && computed! < 24, "the resumed run redid everything: \(resumed.stderr)")

        let search = try CLI.run(
            ["search", "red square", "--db", db, "--json", "--top", "3", "--no-cache", "--html", folder + "/sheet.html"])
        #expect(search.status == 0, "\(search.stderr)")
        let lines = search.stdout.split(separator: "\n")
        #expect(!lines.isEmpty && lines.count <= 3)
        var previous = Double.infinity
        for line in lines {
            let object = try JSONDocument(text: String(line)).root
            let score = object["score"]!.number!
            #expect(score <= previous)
            previous = score
            #expect(object["image"]!.string!.hasPrefix("/"))
            #expect(object["detections"]![0]["label"]!.string! == "red square")
        }
        let first = try JSONDocument(text: String(lines[0])).root["image"]!.string!
        #expect(first.hasSuffix("scene-0003.jpg") || first.hasSuffix("scene-0018.jpg"), "\(first)")
        let html = try String(contentsOfFile: folder + "/sheet.html", encoding: .utf8)
        #expect(html.contains("data:image/jpeg;base64,") && html.contains("red square"))
    }

    final class Log: @unchecked Sendable {
        private let lock = NSLock()
        private var data = Data()
        func append(_ chunk: Data) { lock.withLock { data.append(chunk) } }
        var text: String { lock.withLock { String(decoding: data, as: UTF8.self) } }
    }

    @Test func clearErrors() throws {
        let missing = try CLI.run(["search", "red star", "--db", "/nonexistent/index.sqlite"])
        #expect(missing.status != 0 && missing.stderr.contains("no index here"))
        let empty = try CLI.run(["search", "  ", "--db", "/tmp/x.sqlite"])
        #expect(empty.status != 0 && empty.stderr.contains("empty"))
        let folder = try CLI.run(["index", "/nonexistent-folder", "--db", NSTemporaryDirectory() + "lookout-never-\(getpid()).sqlite"])
        #expect(folder.status != 0 && folder.stderr.contains("/nonexistent-folder"))
    }
}
