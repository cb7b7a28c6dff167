import Foundation
import LookoutJSON
import LookoutSupport
import LookoutTestSupport
import Testing

/// Several examples per label across reference photos (`--prompt-image A --prompt-box … --prompt-image B
/// --prompt-box …`), as processes: YOLOE's prompts and YOLO-World's CLIP crops, detect and eval. The averaging and
/// the combinations with text are proven in ExamplesTests.
@Suite struct ExamplesCommandTests {
    static let scenes = CLI.root + "/examples/scenes/"
    static let starA = ["--prompt-image", scenes + "scene-0000.jpg", "--prompt-box", "124,62,209,108:star"]
    static let starB = ["--prompt-image", scenes + "scene-0001.jpg", "--prompt-box", "20,108,132,237:star"]

    static func detections(_ arguments: [String]) throws -> String {
        let run = try CLI.run(["detect", scenes + "scene-0003.jpg", "--json"] + arguments)
        #expect(run.status == 0, "\(run.stderr)")
        return try Reference.lines(run.stdout).first.map { $0["detections"]!.value.serialized } ?? ""
    }

    /// The order of the reference photos changes nothing; two photos differ from one; each model finds the star.
    @Test(arguments: [["--model", "demo-yoloe"], []])
    func referencePhotosInAnyOrderMakeOneQuery(model: [String]) throws {
        let forward = try Self.detections(model + Self.starA + Self.starB)
        let backward = try Self.detections(model + Self.starB + Self.starA)
        #expect(forward == backward)
        #expect(forward.contains("\"label\":\"star\""))
        #expect(try Self.detections(model + Self.starA) != forward)
    }

    /// A label typed and given by examples is one query (best: the examples an alternative of the text).
    @Test func textAndExamplesOfOneLabelAreOneQuery() throws {
        let run = try CLI.run(
            ["detect", Self.scenes + "scene-0003.jpg", "--model", "demo-yoloe", "-q", "star, hexagon", "--json"]
                + Self.starA + Self.starB)
        #expect(run.status == 0, "\(run.stderr)")
        let found = try Reference.lines(run.stdout)[0]["detections"]!
        let labels = Set((0..<found.count).map { found[$0]["label"]!.string! })
        #expect(labels == ["star", "hexagon"])
        let indices = Set((0..<found.count).map { found[$0]["query_index"]!.int! })
        #expect(indices.isSubset(of: [0, 1]))
    }

    @Test func evalTakesExamplesPerCategory() throws {
        let truth = Self.scenes + "instances.json"
        let run = try CLI.run(
            [
                "eval", truth, "--images", CLI.root + "/examples/scenes", "--model", "demo-yoloe", "--json", "--plain",
                "--examples-only",
            ] + Self.starA + Self.starB)
        #expect(run.status == 0, "\(run.stderr)")
        let summary = try JSONDocument(text: run.stdout).root
        #expect(summary["AP"]?.number != nil)
        let unknown = try CLI.run(
            [
                "eval", truth, "--images", CLI.root + "/examples/scenes", "--model", "demo-yoloe", "--prompt-image",
                Self.scenes + "scene-0000.jpg", "--prompt-box", "124,62,209,108:spaceship",
            ])
        #expect(unknown.status != 0 && unknown.stderr.contains("no category"), "\(unknown.stderr)")
    }

    @Test func misplacedExamplesAreRefusedClearly() throws {
        let photo = Self.scenes + "scene-0003.jpg"
        let cases: [([String], String)] = [
            (["--prompt-image", Self.scenes + "scene-0000.jpg"], "give the boxes too"),
            (
                Self.starA + ["--prompt-image", Self.scenes + "scene-0001.jpg"],
                "has no --prompt-box after it"
            ),
            (Self.starA + ["--combine-examples", "sum"], "best or mean"),
        ]
        for (arguments, message) in cases {
            let run = try CLI.run(["detect", photo, "--model", "demo-yoloe"] + arguments)
            #expect(run.status != 0 && run.stderr.contains(message), "\(arguments): \(run.stderr)")
        }
    }

    /// `search` by examples on several reference photos (YOLOE): the order of the photos changes nothing, two photos
    /// differ from one, and joined to the words with `--combine-examples best` each photo scores the better of the
    /// words' and the examples' searches (each region takes the better of the two).
    @Test func searchTakesExamplesOnSeveralPhotos() throws {
        let folder = try IndexCommandTests.scratch(
            [
                "scene-0000.jpg", "scene-0001.jpg", "scene-0002.jpg", "scene-0003.jpg", "scene-0004.jpg",
                "scene-0005.jpg",
            ])
        defer { CLI.remove(folder) }
        let db = folder + "/index.sqlite"
        let model = ["--model", "demo-yoloe"]
        let classes = folder + "/classes.txt"
        try FileContents.writeAtomically(
            Array("circle\nsquare\ntriangle\nstar\nhexagon\nheart\ncross\nring\n".utf8), to: classes)
        let indexed = try CLI.run(
            ["index", folder + "/photos", "--db", db, "--plain", "--imgsz", "320", "--classes", classes] + model)
        try #require(indexed.status == 0, "\(indexed.stderr)")
        func search(_ arguments: [String]) throws -> [String: Double] {
            let run = try CLI.run(
                ["search", "star", "--db", db, "--json", "--conf", "0.001", "--top", "100"] + model + arguments)
            try #require(run.status == 0, "\(run.stderr)")
            var scores: [String: Double] = [:]
            for hit in try Reference.lines(run.stdout) { scores[hit["image"]!.string!] = hit["score"]!.number! }
            return scores
        }
        let unlabelled = [
            "--prompt-box", "124,62,209,108", "--prompt-image", Self.scenes + "scene-0001.jpg", "--prompt-box",
            "20,108,132,237",
        ]
        let forward = try search(["--prompt-image", Self.scenes + "scene-0000.jpg"] + unlabelled)
        let backward = try search(Self.starB + Self.starA)
        #expect(!forward.isEmpty && forward == backward)
        #expect(try search(Self.starA) != forward)
        let words = try search(["--objects"])
        let best = try search(Self.starA + Self.starB + ["--combine-examples", "best"])
        for (photo, score) in best {
            #expect(score == max(words[photo] ?? 0, forward[photo] ?? 0), "\(photo)")
        }
        #expect(best.count >= max(words.count, forward.count))
        let mean = try search(Self.starA + Self.starB + ["--combine-examples", "mean"])
        #expect(mean != best && !mean.isEmpty)
        let other = try CLI.run(
            ["search", "star", "--db", db] + model + Self.starA + ["--prompt-box", "1,1,9,9:hexagon"])
        #expect(other.status != 0 && other.stderr.contains("leave the boxes' labels out"), "\(other.stderr)")
        let nowhere = try CLI.run(["search", "star", "--db", db, "--prompt-box", "1,1,9,9"] + model)
        #expect(nowhere.status != 0 && nowhere.stderr.contains("--prompt-image REF.jpg"), "\(nowhere.stderr)")
    }
}
