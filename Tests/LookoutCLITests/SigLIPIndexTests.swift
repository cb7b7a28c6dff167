import Foundation
import LookoutJSON
import LookoutSupport
import LookoutWeights
import Testing

/// An index made with a SigLIP model's image tower (issue 52): the photos embedded with its own image processor,
/// scenes scored by SigLIP's own probability `σ(exp(logit_scale)·cos + logit_bias)` against the query embedded by its
/// own tokenizer and text tower — by `lookout search` and by the server's search — and `lookout similar` with its
/// tower. Expected values from transformers (`Tests/Fixtures/siglip/bicubic-96`): the model's `logits_per_text`,
/// read back from the scene score's logit, within the stored F16 embeddings' rounding of the cosine (2e-3) times
/// `exp(logit_scale)` (10 in the fixture).
@Suite struct SigLIPIndexTests {
    static let tower = CLI.root + "/Tests/Fixtures/siglip/bicubic-96"
    static let names = ["wide.jpg", "gray.jpg", "rgba.png", "tall.jpg"]

    static func list(_ file: WeightFile, _ key: String) throws -> [String] {
        let node = try JSONDocument(text: try #require(file.metadata[key])).root
        return (0..<node.count).map { node[$0].string ?? "" }
    }

    @Test func indexSearchAndSimilarWithSigmoidScores() throws {
        let expected = try WeightFile.open(Self.tower + "/expected.safetensors")
        let photos = try Self.list(expected, "photos")
        let texts = try Self.list(expected, "texts")
        let logits = try expected.view("logits_per_text").floats()
        let folder = try CLI.scratch("siglip-index")
        defer { CLI.remove(folder) }
        try FileManager.default.createDirectory(atPath: folder + "/photos", withIntermediateDirectories: true)
        for name in Self.names {
            try FileManager.default.copyItem(
                atPath: CLI.root + "/Tests/Fixtures/clip-image/" + name, toPath: folder + "/photos/" + name)
        }
        let db = folder + "/index.sqlite"
        let indexed = try CLI.run(["index", folder + "/photos", "--db", db, "--image-model", Self.tower, "--plain"])
        #expect(indexed.status == 0, "\(indexed.stderr)")
        let query = "blauer Kreis"
        let t = try #require(texts.firstIndex(of: query))
        func reference(_ name: String) throws -> Double {
            let i = try #require(photos.firstIndex(of: "Tests/Fixtures/clip-image/" + name))
            return Double(logits[t * photos.count + i])
        }
        let bound = 10 * 2e-3
        let found = try CLI.run(
            ["search", query, "--db", db, "--scenes", "--json", "--min-score", "0.0000001", "--top", "10"])
        #expect(found.status == 0, "\(found.stderr)")
        let lines = found.stdout.split(separator: "\n").map { try! JSONDocument(text: String($0)).root }
        #expect(lines.count == Self.names.count, "\(found.stdout)")
        var sceneScores: [String: Double] = [:]
        for line in lines {
            let name = String(line["image"]!.string!.split(separator: "/").last!)
            let score = try #require(line["scene_score"]?.number, "\(name) has no scene score")
            sceneScores[name] = score
            let logit = log(score / (1 - score))
            let expected = try reference(name)
            #expect(abs(logit - expected) <= bound, "\(name): logit \(logit) against \(expected)")
        }
        // The server's search: the same scene scores.
        let server = try ServeCommandTests.Server(["--db", db])
        let reply = try ServeCommandTests.request(
            "GET", server.url + "api/v1/search?q=blauer%20Kreis&conf=0.0000001&top=10")
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
        // The health names the tower; its scores are SigLIP's own probabilities (the folder records no calibration).
        let health = try ServeCommandTests.request("GET", server.url + "api/v1/health")
        let tower = try #require(health.json["image_tower"], "\(String(decoding: health.body, as: UTF8.self))")
        #expect(tower["family"]?.string == "SigLIP" && tower["name"]?.string == "bicubic-96")
        #expect(tower["scores"]?.string == "sigmoid", "\(String(decoding: health.body, as: UTF8.self))")
        #expect(server.stop().status == 0)
        // lookout similar: each photo by the tower's cosine.
        let similar = try CLI.run(["similar", folder + "/photos/wide.jpg", "--db", db, "--json"])
        #expect(similar.status == 0, "\(similar.stderr)")
        let wide = try expected.view("image:Tests/Fixtures/clip-image/wide.jpg").floats()
        for line in similar.stdout.split(separator: "\n") {
            let object = try JSONDocument(text: String(line)).root
            let name = String(object["image"]!.string!.split(separator: "/").last!)
            let other = try expected.view("image:Tests/Fixtures/clip-image/" + name).floats()
            let cosine = OpenCLIPIndexTests.cosine(wide, other)
            #expect(
                abs(object["cosine"]!.number! - cosine) <= 2e-3,
                "\(name): \(object["cosine"]!.number!) against \(cosine)")
        }
        // The tower's text tower embeds queries: `lookout embed --text-model FOLDER` gives the model's text embedding.
        let embedded = try CLI.run(["embed", query, "--text-model", Self.tower])
        #expect(embedded.status == 0, "\(embedded.stderr)")
        let values = try JSONDocument(text: embedded.stdout.trimmingCharacters(in: .whitespacesAndNewlines)).root
        let text = try expected.view("text:\(t)").floats()
        #expect(values.count == text.count)
        for d in 0..<min(values.count, text.count) {
            #expect(abs(values[d].number! - Double(text[d])) <= 1e-5, "value \(d)")
        }
    }
}
