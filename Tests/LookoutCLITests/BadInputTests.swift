import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Every subcommand over a corpus of bad inputs: each run must end by itself within the time bound, with a
/// non-zero status that is not a signal, and a message naming the file.
@Suite struct BadInputTests {
    /// A folder of bad files: (name, what makes it bad).
    static func corpus(in folder: String) throws -> [String] {
        let valid = try Data(contentsOf: URL(fileURLWithPath: CLI.root + "/examples/scenes/scene-0001.jpg"))
        let png = try Data(contentsOf: URL(fileURLWithPath: CLI.root + "/Tests/Fixtures/demo/scene-0007-rgba.png"))
        var hugePNG = Data(png.prefix(33))  // signature and IHDR …
        hugePNG.replaceSubrange(16..<24, with: [0x00, 0x01, 0x86, 0xA0, 0x00, 0x01, 0x86, 0xA0])  // 100000 × 100000
        let files: [(String, Data)] = [
            ("empty.jpg", Data()),
            ("truncated.jpg", valid.prefix(valid.count / 3)),
            ("header-only.jpg", valid.prefix(20)),
            ("text.jpg", Data("this is not a photo\n".utf8)),
            ("random.png", Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) })),
            ("truncated.png", png.prefix(png.count / 2)),
            ("huge-header.png", hugePNG + Data(count: 64)),
            ("weights.pt", Data("PK\u{3}\u{4}not really a zip".utf8)),
            ("weights.safetensors", Data([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F]) + Data("{".utf8)),
            ("vocab.json", Data("{\"encoder\": {\"a\": 1}".utf8)),
            ("index.sqlite", Data("SQLite format 3\u{0}".utf8) + Data(count: 100)),
        ]
        for (name, data) in files { try data.write(to: URL(fileURLWithPath: folder + "/" + name)) }
        try FileManager.default.createDirectory(atPath: folder + "/folder.jpg", withIntermediateDirectories: true)
        #expect(mkfifo(folder + "/pipe.jpg", 0o600) == 0)
        return files.map(\.0) + ["folder.jpg", "pipe.jpg", "missing.jpg"]
    }

    @Test func everySubcommandRefusesBadInputsClearly() throws {
        let folder = try CLI.scratch("bad-inputs")
        defer { CLI.remove(folder) }
        let names = try Self.corpus(in: folder)
        let photos = names.filter { $0.hasSuffix(".jpg") || $0.hasSuffix(".png") }
        var runs: [(arguments: [String], file: String, input: String?)] = []
        for name in photos {
            let path = folder + "/" + name
            runs.append((["detect", path, "-q", "star"], path, nil))
            runs.append((["detect", path, "-q", "star", "--json"], path, nil))
            runs.append((["query", path], path, "star\n"))
            if name != "text.jpg" {  // a line of text is a valid queries file
                runs.append(
                    (["detect", CLI.root + "/examples/scenes/scene-0001.jpg", "--queries-file", path], path, nil))
            }
        }
        for name in [
            "weights.pt", "weights.safetensors", "empty.jpg", "text.jpg", "folder.jpg", "pipe.jpg", "missing.jpg",
        ] {
            let path = folder + "/" + name
            runs.append((["models", "inspect", path], path, nil))
            runs.append((["models", "convert", path, "-o", folder + "/out.safetensors"], path, nil))
            runs.append(
                (
                    [
                        "detect", "--detector", path, "--text-model", path,
                        CLI.root + "/examples/scenes/scene-0001.jpg", "-q", "x",
                    ], path, nil
                ))
            runs.append((["embed", "--text-model", path, "dog"], path, nil))
        }
        for name in ["vocab.json", "empty.jpg", "folder.jpg", "pipe.jpg", "missing.jpg"] {
            let path = folder + "/" + name
            runs.append((["tokenize", "--vocab", path, "--no-cache", "dog"], path, nil))
        }
        for name in ["index.sqlite", "text.jpg", "empty.jpg", "folder.jpg", "missing.jpg"] {
            let path = folder + "/" + name
            runs.append((["search", "star", "--db", path], path, nil))
            runs.append((["index", "--failures", "--db", path], path, nil))
        }
        runs.append(
            (["index", folder + "/missing-folder", "--db", folder + "/new.sqlite"], folder + "/missing-folder", nil))
        runs.append((["index", folder + "/text.jpg", "--db", folder + "/new.sqlite"], folder + "/text.jpg", nil))
        runs.append((["models", "verify", folder], folder + "/lookout-model.json", nil))

        var problems: [String] = []
        let started = Date()
        for run in runs {
            let result = try CLI.run(run.arguments, input: run.input, timeout: 60)
            let command = run.arguments.joined(separator: " ")
            if result.status >= 128 {
                problems.append("\(command): ended by a signal or the time bound (\(result.status))")
            }
            if result.status == 0 { problems.append("\(command): status 0") }
            if !result.stderr.contains(run.file) {
                problems.append("\(command): message does not name the file: \(result.stderr.suffix(300))")
            }
        }
        #expect(
            problems.isEmpty, "\(problems.count) of \(runs.count) runs:\n\(problems.prefix(15).joined(separator: "\n"))"
        )
        print("bad inputs: \(runs.count) runs in \(Int(Date().timeIntervalSince(started))) s")
    }
}
