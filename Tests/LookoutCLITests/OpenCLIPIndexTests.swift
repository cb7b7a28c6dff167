import Foundation
import LookoutJSON
import LookoutSupport
import LookoutWeights
import Testing

/// An index made with an open_clip model's image tower (issue 52): the photos embedded with its own preprocessing,
/// scenes scored against the query embedded by its own text tower — by `lookout search` and by the server's search —
/// and `lookout similar` with its tower. Expected values from open_clip (`Tests/Fixtures/open-clip`): the cosine of a
/// photo's and a text's embeddings, read back from the scene score (``SceneScore/standard``: 1/(1 + e^−40(c − 0.25))),
/// within the stored F16 embedding's rounding. The demo detector's text encoder embeds in 512 dimensions and the tower
/// in 32: a scene score at all shows the tower's own text was used.
@Suite struct OpenCLIPIndexTests {
    static let tower = CLI.root + "/Tests/Fixtures/open-clip/gelu-224"
    static let names = ["wide.jpg", "gray.jpg", "rgba.png", "tall.jpg"]

    static func cosine(_ a: [Float], _ b: [Float]) -> Double {
        zip(a, b).reduce(0.0) { $0 + Double($1.0) * Double($1.1) }
    }

    /// The cosine a scene score was mapped from.
    static func cosine(score: Double) -> Double { 0.25 + log(score / (1 - score)) / 40 }

    @Test func indexSearchAndSimilarWithTheTowersOwnText() throws {
        let expected = try WeightFile.open(Self.tower + "/expected.safetensors")
        let folder = try CLI.scratch("open-clip-index")
        defer { CLI.remove(folder) }
        try FileManager.default.createDirectory(atPath: folder + "/photos", withIntermediateDirectories: true)
        for name in Self.names {
            try FileManager.default.copyItem(
                atPath: CLI.root + "/Tests/Fixtures/clip-image/" + name, toPath: folder + "/photos/" + name)
        }
        let db = folder + "/index.sqlite"
        let indexed = try CLI.run(["index", folder + "/photos", "--db", db, "--image-model", Self.tower, "--plain"])
        #expect(indexed.status == 0, "\(indexed.stderr)")
        let text = try expected.view("text:1").floats()  // "red car"
        var images: [String: [Float]] = [:]
        for name in Self.names {
            images[name] = try expected.view("image:Tests/Fixtures/clip-image/" + name).floats()
        }
        // lookout search --scenes: every photo, its score from the cosine with the tower's text embedding.
        let found = try CLI.run(
            ["search", "red car", "--db", db, "--scenes", "--json", "--min-score", "0.0000001", "--top", "10"])
        #expect(found.status == 0, "\(found.stderr)")
        let lines = found.stdout.split(separator: "\n").map { try! JSONDocument(text: String($0)).root }
        #expect(lines.count == Self.names.count, "\(found.stdout)")
        var sceneScores: [String: Double] = [:]
        for line in lines {
            let name = String(line["image"]!.string!.split(separator: "/").last!)
            let score = try #require(line["scene_score"]?.number, "\(name) has no scene score")
            sceneScores[name] = score
            let reference = Self.cosine(images[name]!, text)
            #expect(abs(Self.cosine(score: score) - reference) <= 2e-3, "\(name): \(score) against cosine \(reference)")
        }
        // The server's search: the same scene scores.
        let server = try ServeCommandTests.Server(["--db", db])
        let reply = try ServeCommandTests.request(
            "GET", server.url + "api/v1/search?q=red%20car&conf=0.0000001&top=10")
        #expect(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
        let results = try #require(reply.json["results"])
        var scenes = 0
        for k in 0..<results.count where results[k]["evidence"]?.string == "scenes" {
            let name = results[k]["name"]!.string!
            let score = results[k]["score"]!.number!
            #expect(
                abs(score - sceneScores[name]!) <= 1e-6 * max(1, score),
                "\(name): API \(score), CLI \(sceneScores[name]!)")
            scenes += 1
        }
        #expect(scenes > 0, "the server found no scene evidence")
        #expect(server.stop().status == 0)
        // lookout similar: the photo itself first, at cosine 1, and each other by the towers' cosine.
        let similar = try CLI.run(["similar", folder + "/photos/wide.jpg", "--db", db, "--json"])
        #expect(similar.status == 0, "\(similar.stderr)")
        for line in similar.stdout.split(separator: "\n") {
            let object = try JSONDocument(text: String(line)).root
            let name = String(object["image"]!.string!.split(separator: "/").last!)
            let reference = Self.cosine(images["wide.jpg"]!, images[name]!)
            #expect(
                abs(object["cosine"]!.number! - reference) <= 2e-3,
                "\(name): \(object["cosine"]!.number!) against \(reference)")
        }
    }
}
