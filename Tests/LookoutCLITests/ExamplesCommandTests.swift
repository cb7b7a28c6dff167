import Foundation
import LookoutJSON
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
}
