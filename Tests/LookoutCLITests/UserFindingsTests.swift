import Foundation
import LookoutJSON
import LookoutSupport
import LookoutTensor
import Testing

/// What a new user found wrong (issue 49), each as that user met it: search read several comma-separated
/// queries as one text, the API did the same and had no scan to compare with, `serve` answered searches of an
/// index made by another model, `models verify` passed a changed image encoder, a plain `index` recomputed an
/// index in fp32, and `--queries-file` took comments as queries.
@Suite(.serialized) struct UserFindingsTests {
    static let scenes = CLI.root + "/examples/scenes"

    /// A folder of the first `count` example scenes and its index (demo model).
    static func library(_ name: String, count: Int = 4, options: [String] = []) throws -> (folder: String, db: String) {
        let folder = try CLI.scratch(name)
        try FileManager.default.createDirectory(atPath: folder + "/photos", withIntermediateDirectories: true)
        for n in 1...count {
            let file = String(format: "scene-%04d.jpg", n)
            try FileManager.default.copyItem(atPath: scenes + "/" + file, toPath: folder + "/photos/" + file)
        }
        let db = folder + "/index.sqlite"
        let index = try CLI.run(["index", folder + "/photos", "--db", db, "--plain"] + options)
        try #require(index.status == 0, "\(index.stderr)")
        return (folder, db)
    }

    @Test func searchRefusesSeveralQueriesAndTheAPIReadsTheSyntax() throws {
        let (folder, db) = try Self.library("findings-search")
        defer { CLI.remove(folder) }
        let several = try CLI.run(["search", "ring, star", "--db", db])
        #expect(several.status == 64 && several.stderr.contains("ring|star"), "\(several.stderr)")

        let server = try ServeCommandTests.Server(["--db", db])
        func search(_ q: String, _ extra: String = "") throws -> (status: Int, scores: [String: Double], body: JSONNode)
        {
            let encoded = q.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let reply = try ServeCommandTests.request(
                "GET", server.url + "api/v1/search?q=" + encoded + "&conf=0.05" + extra)
            var scores: [String: Double] = [:]
            for item in reply.json["results"]?.elements ?? [] { scores[item["name"]!.string!] = item["score"]!.number! }
            return (reply.status, scores, reply.json)
        }
        let comma = try search("ring, star")
        #expect(comma.status == 400 && (comma.body["error"]?.string ?? "").contains("ring|star"))
        #expect(try search("-star").status == 400)
        // Alternatives: each photo the better of each alternative's own search, as on the command line.
        let star = try search("star"), circle = try search("circle"), either = try search("star|circle")
        #expect(!either.scores.isEmpty)
        for (name, score) in either.scores {
            #expect(score == max(star.scores[name] ?? 0, circle.scores[name] ?? 0), "\(name)")
        }
        // A threshold in the query replaces conf.
        let strict = try search("star@0.9")
        #expect(
            strict.status == 200 && strict.scores.values.allSatisfy { $0 > 0.9 }
                && strict.scores.count <= star.scores.count)
        // The exact scan answers the same as the index's lists or scan here.
        let scanned = try search("star", "&scan=true")
        #expect(scanned.status == 200 && scanned.scores == star.scores)
        #expect(try search("star", "&scan=maybe").status == 400)
        #expect(server.stop().status == 0)

        // The same index served with another model: refused, as `lookout search` refuses it.
        let other = try ServeCommandTests.Server(["--db", db, "--model", "demo-yoloe"])
        let refused = try ServeCommandTests.request("GET", other.url + "api/v1/search?q=star")
        #expect(refused.status == 409, "\(refused.status)")
        #expect((refused.json["error"]?.string ?? "").contains("another model"))
        #expect(other.stop().status == 0)
    }

    @Test func verifyChecksTheImageEncoder() throws {
        let folder = try CLI.scratch("findings-verify")
        defer { CLI.remove(folder) }
        for name in [
            "lookout-model.json", "detector.safetensors", "text-encoder.safetensors", "image-encoder.safetensors",
            "scene-tower",
        ] {
            try FileManager.default.copyItem(atPath: CLI.root + "/Models/demo/" + name, toPath: folder + "/" + name)
        }
        let good = try CLI.run(["models", "verify", folder])
        #expect(good.status == 0 && good.stdout.contains("image encoder:"), "\(good.stdout)")
        #expect(!good.stdout.contains("Optional("), "\(good.stdout)")
        var bytes = try FileContents.read(folder + "/image-encoder.safetensors")
        bytes[bytes.count - 5] ^= 0x01
        try FileContents.writeAtomically(bytes, to: folder + "/image-encoder.safetensors")
        let changed = try CLI.run(["models", "verify", folder])
        #expect(changed.status != 0 && changed.stdout.contains("DOES NOT MATCH"), "\(changed.stdout)")
    }

    @Test(.enabled(if: Precision.bf16.isNative, "this CPU has no AVX-512 BF16: --precision bf16 computes fp32 here"))
    func aPlainIndexKeepsTheIndexsPrecision() throws {
        let (folder, db) = try Self.library("findings-precision", count: 2, options: ["--precision", "bf16"])
        defer { CLI.remove(folder) }
        let again = try CLI.run(["index", folder + "/photos", "--db", db, "--plain"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stderr.contains("indexing in bf16 again"), "\(again.stderr)")
        #expect(again.stderr.contains("0 computed") && again.stderr.contains("2 unchanged"), "\(again.stderr)")
    }

    @Test func commentsInAQueriesFileAreSkipped() throws {
        let folder = try CLI.scratch("findings-queries")
        defer { CLI.remove(folder) }
        let file = folder + "/queries.txt"
        try FileContents.writeAtomically(Array("# shapes to find\nstar\n  # circle\nring\n".utf8), to: file)
        let photo = Self.scenes + "/scene-0003.jpg"
        let fromFile = try CLI.run(["detect", photo, "--queries-file", file, "--json"])
        let inline = try CLI.run(["detect", photo, "-q", "star, ring", "--json"])
        #expect(fromFile.status == 0, "\(fromFile.stderr)")
        #expect(
            try Reference.lines(fromFile.stdout)[0]["detections"]!.value
                == Reference.lines(inline.stdout)[0]["detections"]!.value)
    }

    /// `embed --model` takes a model's name as every other command does, and a name Lookout does not know is
    /// not sent to `models fetch` as if it could be downloaded.
    @Test func embedTakesAModelsNameAndUnknownNamesAreNotFetchable() throws {
        let byName = try CLI.run(["embed", "--model", "demo-yoloe", "red ring"])
        #expect(byName.status == 0, "\(byName.stderr)")
        let vector = try JSONDocument(bytes: Array(byName.stdout.utf8)).root
        #expect(vector.count == 512, "a MobileCLIP embedding: \(vector.count)")
        let byFolder = try CLI.run(["embed", "--model", CLI.root + "/Models/demo-yoloe", "red ring"])
        #expect(byFolder.stdout == byName.stdout)
        let unknown = try CLI.run(["embed", "--model", "no-such-model", "red ring"])
        #expect(unknown.status != 0)
        #expect(!unknown.stderr.contains("models fetch no-such-model"), "\(unknown.stderr)")
        #expect(unknown.stderr.contains("models fetch --list"), "\(unknown.stderr)")
    }

    /// An index made without whole-photo embeddings says how to get them for the demo model (not a download);
    /// a YOLOE index searched without --model names the model to give; the summary's database size is the file's.
    @Test func indexMessagesNameWhatToDo() throws {
        let (folder, db) = try Self.library("findings-messages", count: 2, options: ["--no-image-model"])
        defer { CLI.remove(folder) }
        let scenes = try CLI.run(["search", "plain background", "--db", db, "--scenes"])
        #expect(scenes.status != 0 && scenes.stderr.contains("without --no-image-model"), "\(scenes.stderr)")

        let classes = folder + "/classes.txt"
        try FileContents.writeAtomically(Array("red ring\ngreen star\n".utf8), to: classes)
        let yoloe = folder + "/yoloe.sqlite"
        let index = try CLI.run([
            "index", folder + "/photos", "--db", yoloe, "--plain", "--model", "demo-yoloe", "--classes", classes,
        ])
        try #require(index.status == 0, "\(index.stderr)")
        let mismatch = try CLI.run(["search", "red ring", "--db", yoloe])
        #expect(mismatch.status != 0 && mismatch.stderr.contains("`--model demo-yoloe`"), "\(mismatch.stderr)")
        #expect(try CLI.run(["search", "red ring", "--db", yoloe, "--model", "demo-yoloe"]).status == 0)

        // "database N KiB": the file as it stays (the write-ahead log folded in), not file plus log.
        let line = index.stderr.split(separator: "\n").first { $0.contains("database ") }
        let reported = line.flatMap { Int($0.components(separatedBy: "database ").last!.split(separator: " ")[0]) }
        let size = try FileManager.default.attributesOfItem(atPath: yoloe)[.size] as! Int
        #expect(reported == size / 1024, "reported \(String(describing: line)), file \(size) bytes")
    }

    /// A usage mistake found only while running (no query to follow) points to the command's own help, not to
    /// the root's `Usage: lookout <subcommand>`; other runtime errors print their message alone.
    @Test func runtimeErrorsDoNotPrintTheRootUsage() throws {
        let track = try CLI.run(["track", CLI.root + "/examples/tracking/shapes.mp4", "-q", ""])
        #expect(track.status == 64, "\(track.stderr)")
        #expect(track.stderr.contains("See 'lookout track --help'."), "\(track.stderr)")
        #expect(!track.stderr.contains("Usage: lookout <subcommand>"), "\(track.stderr)")
        let search = try CLI.run(["search", "dog", "--db", "/nonexistent/index.sqlite"])
        #expect(search.status == 1 && !search.stderr.contains("Usage:"), "\(search.stderr)")
        let eval = try CLI.run(["eval", "--help"])
        #expect(eval.stdout.contains("5e-15") && !eval.stdout.contains("1e-4"), "eval --help states the measured error")
    }
}
