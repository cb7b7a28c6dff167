import Foundation
import LookoutJSON
import Testing

/// The demo's multilingual scene tower (`--image-model multilingual`, Models/demo/scene-tower; issue 52): a small
/// SigLIP trained on generated scenes with captions in English, German, French, Spanish and Chinese
/// (scripts/demo/train_siglip.py). It is a trained model, not a port, so there is no reference to match: these
/// tests hold it to what it was trained for, on the example scenes it never saw (examples/scenes, seed 700000,
/// with their truth), in every language.
@Suite struct MultilingualDemoTests {
    static let languages = ["en", "de", "fr", "es", "zh"]
    static let counts = [
        "one shape", "two shapes", "three shapes", "four shapes", "five shapes", "six shapes", "seven shapes",
        "eight shapes",
    ]

    /// The example scenes' files and, for each, the English scene captions true of it (as train_image.py's
    /// true_captions: its count, its background, and each object's colour, shape and pair).
    static func examples() throws -> [(file: String, captions: Set<String>)] {
        let truth = try Self.document(CLI.root + "/examples/scenes/truth.json").root
        let images = try #require(truth["images"])
        return try (0..<images.count).map { i in
            let image = images[i]
            let objects = try #require(image["objects"])
            var captions: Set<String> = [
                counts[min(objects.count, 8) - 1], try #require(image["background"]?.string) + " background",
            ]
            for k in 0..<objects.count {
                let label = try #require(objects[k]["label"]?.string)
                let words = label.split(separator: " ").map(String.init)
                captions.formUnion([words[0] + " shape", words[1], label])
            }
            return (CLI.root + "/examples/scenes/" + (try #require(image["file"]?.string)), captions)
        }
    }

    /// English caption → its five versions, from the training captions' table (multilingual.py's translations).
    static func translations() throws -> [(english: String, versions: [String: String])] {
        let table = try Self.document(CLI.root + "/scripts/demo/multilingual_captions.json").root
        let texts = try #require(table["texts"])
        var out: [(english: String, versions: [String: String])] = []
        texts.forEachMember { name, versions in
            let english = String(decoding: name, as: UTF8.self)
            out.append((english, Dictionary(uniqueKeysWithValues: languages.map { ($0, versions[$0]!.string!) })))
        }
        return out
    }

    static func document(_ path: String) throws -> JSONDocument {
        try JSONDocument(bytes: Array(try #require(FileManager.default.contents(atPath: path))))
    }

    static func embeddings(_ arguments: [String]) throws -> [[Double]] {
        let done = try CLI.run(["embed"] + arguments)
        #expect(done.status == 0, "\(done.stderr)")
        return try done.stdout.split(separator: "\n").map { line in
            let row = try JSONDocument(text: String(line)).root
            return (0..<row.count).map { row[$0].number! }
        }
    }

    /// Captions → scenes in each language: for every caption true of at least one of the 24 example scenes, is one
    /// of them among the 5 most similar? Measured 0.889 to 0.900 in the five languages (recall@1 0.62 to 0.63); a
    /// tower that had not learned would find one by chance in 0.516 of them. A language the tower did not learn
    /// falls to chance.
    @Test func captionsFindTheirScenesInEveryLanguage() throws {
        let scenes = try Self.examples()
        let photos = try Self.embeddings(["--image", "--image-model", "multilingual"] + scenes.map(\.file))
        #expect(photos.count == scenes.count)
        let captions = try Self.translations().filter { caption in
            scenes.contains { $0.captions.contains(caption.english) }
        }
        #expect(captions.count == 90, "captions true of an example scene: \(captions.count)")
        for language in Self.languages {
            let texts = try Self.embeddings(["--text-model", "multilingual"] + captions.map { $0.versions[language]! })
            #expect(texts.count == captions.count)
            var found = 0
            var first = 0
            for (text, caption) in zip(texts, captions) {
                let scores = photos.map { photo in zip(photo, text).reduce(0) { $0 + $1.0 * $1.1 } }
                let order = scores.indices.sorted { scores[$0] > scores[$1] }
                if order.prefix(5).contains(where: { scenes[$0].captions.contains(caption.english) }) { found += 1 }
                if scenes[order[0]].captions.contains(caption.english) { first += 1 }
            }
            let recall5 = Double(found) / Double(captions.count)
            let recall1 = Double(first) / Double(captions.count)
            #expect(recall5 >= 0.8, "\(language): recall@5 \(recall5)")
            #expect(recall1 >= 0.5, "\(language): recall@1 \(recall1)")
        }
    }

    /// Out of the box: `lookout index` with the demo model stores the multilingual tower's embeddings (its manifest's
    /// scene_tower), and `lookout search` with no option finds a scene with a blue circle among its first three for
    /// "blue circle" in each language; with `--scenes`, the score is the model's probability.
    @Test func searchFindsBlueCirclesInEveryLanguage() throws {
        let scenes = try Self.examples()
        let withBlueCircles = Set(scenes.filter { $0.captions.contains("blue circle") }.map(\.file))
        #expect(withBlueCircles.count == 3)
        let folder = try CLI.scratch("multilingual-index")
        defer { CLI.remove(folder) }
        let db = folder + "/index.sqlite"
        let indexed = try CLI.run(["index", CLI.root + "/examples/scenes", "--db", db, "--plain"])
        #expect(indexed.status == 0, "\(indexed.stderr)")
        let blueCircle = try #require(Self.translations().first { $0.english == "blue circle" })
        for language in Self.languages {
            let query = blueCircle.versions[language]!
            for evidence in [[], ["--scenes"]] {
                let done = try CLI.run(["search", query, "--db", db, "--json", "--top", "3"] + evidence)
                #expect(done.status == 0, "\(done.stderr)")
                let found = try done.stdout.split(separator: "\n").map { try JSONDocument(text: String($0)).root }
                #expect(found.count == 3, "\(query) \(evidence): \(done.stdout)")
                let files = found.compactMap { $0["image"]?.string }
                #expect(files.contains { withBlueCircles.contains($0) }, "\(query) \(evidence): \(files)")
                for result in found where evidence == ["--scenes"] {
                    let score = try #require(result["scene_score"]?.number)
                    #expect(score > 0 && score < 1, "\(query): a probability, got \(score)")
                }
            }
        }
        // `models verify` names the demo's scene tower and loads it.
        let verified = try CLI.run(["models", "verify", CLI.root + "/Models/demo"])
        #expect(verified.status == 0, "\(verified.stdout)\(verified.stderr)")
        #expect(
            verified.stdout.contains("scene tower: ")
                && verified.stdout.contains("SigLIP image tower, 256-d embeddings"),
            "\(verified.stdout)")
    }

    /// The demo tower's scene score is the calibration its config.json records (fitted on other held-out scenes:
    /// `σ((cos − centre) · slope)`), not SigLIP's own logit scale and bias: a search's scene score equals it computed
    /// from `lookout embed`'s embeddings (within the stored F16 rounding). Half a calibration is refused by name.
    @Test func sceneScoresAreTheRecordedCalibration() throws {
        let folder = try CLI.scratch("multilingual-calibration")
        defer { CLI.remove(folder) }
        let config = try Self.document(CLI.root + "/Models/demo/scene-tower/config.json").root
        let center = try #require(config["lookout_scene_center"]?.number)
        let slope = try #require(config["lookout_scene_slope"]?.number)
        let photo = CLI.root + "/examples/scenes/scene-0011.jpg"
        try FileManager.default.createDirectory(atPath: folder + "/photos", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: photo, toPath: folder + "/photos/scene-0011.jpg")
        let db = folder + "/index.sqlite"
        let indexed = try CLI.run(["index", folder + "/photos", "--db", db, "--plain"])
        #expect(indexed.status == 0, "\(indexed.stderr)")
        let image = try #require(Self.embeddings(["--image", "--image-model", "multilingual", photo]).first)
        for query in ["blue circle", "blauer Kreis", "red star"] {
            let text = try #require(Self.embeddings(["--text-model", "multilingual", query]).first)
            let cosine = zip(image, text).reduce(0) { $0 + $1.0 * $1.1 }
            let expected = 1 / (1 + exp(-(cosine - center) * slope))
            let done = try CLI.run(["search", query, "--db", db, "--scenes", "--json", "--min-score", "0"])
            #expect(done.status == 0, "\(done.stderr)")
            let line = try #require(done.stdout.split(separator: "\n").first, "\(query): nothing found")
            let score = try #require(try JSONDocument(text: String(line)).root["scene_score"]?.number)
            #expect(abs(score - expected) < 2e-3, "\(query): \(score) against \(expected)")
        }
        // A copy of the folder with the centre but not the slope.
        let copy = folder + "/tower"
        try FileManager.default.copyItem(atPath: CLI.root + "/Models/demo/scene-tower", toPath: copy)
        let text = try String(contentsOfFile: copy + "/config.json", encoding: .utf8)
        try text.replacing(/"lookout_scene_slope": [0-9.]+,?\n/, with: "").write(
            toFile: copy + "/config.json", atomically: true, encoding: .utf8)
        let refused = try CLI.run(["embed", "--image", "--image-model", copy, photo])
        #expect(refused.status != 0 && refused.stderr.contains("go together"), "\(refused.stderr)")
        // The server says the scores are calibrated (not the model's own sigmoid).
        let server = try ServeCommandTests.Server(["--db", db])
        let health = try ServeCommandTests.request("GET", server.url + "api/v1/health")
        let tower = try #require(health.json["image_tower"], "\(String(decoding: health.body, as: UTF8.self))")
        #expect(tower["family"]?.string == "SigLIP" && tower["name"]?.string == "scene-tower")
        #expect(tower["scores"]?.string == "calibrated", "\(String(decoding: health.body, as: UTF8.self))")
        #expect(server.stop().status == 0)
    }

    /// Re-indexing with another whole-photo tower (the detector, classes and settings the same) keeps every photo's
    /// regions and computes only its embedding: the run says so (none computed, 24 re-embedded), object search
    /// answers exactly as before, and scene search answers as an index made with that tower from the start. From
    /// the demo's CLIP tower (`clip`) to its default, the multilingual one.
    @Test func anotherTowerRecomputesOnlyThePhotoEmbeddings() throws {
        let folder = try CLI.scratch("retower")
        defer { CLI.remove(folder) }
        let photos = CLI.root + "/examples/scenes"
        let db = folder + "/index.sqlite"
        let fresh = folder + "/fresh.sqlite"
        let first = try CLI.run(["index", photos, "--db", db, "--image-model", "clip", "--plain"])
        #expect(first.status == 0, "\(first.stderr)")
        func search(_ arguments: [String], _ db: String) throws -> String {
            let done = try CLI.run(["search"] + arguments + ["--db", db, "--json", "--top", "30"])
            #expect(done.status == 0, "\(done.stderr)")
            return done.stdout
        }
        let objects = try search(["red star", "--objects"], db)
        #expect(!objects.isEmpty)
        let again = try CLI.run(["index", photos, "--db", db, "--plain"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(
            (again.stdout + again.stderr).contains(
                "(0 computed, 24 re-embedded with the new image tower (regions kept)"),
            "\(again.stdout)\(again.stderr)")
        #expect(try search(["red star", "--objects"], db) == objects, "the regions changed")
        let made = try CLI.run(["index", photos, "--db", fresh, "--image-model", "multilingual", "--plain"])
        #expect(made.status == 0, "\(made.stderr)")
        // The same embeddings, up to the thread count's summation order and the stored F16 rounding.
        func scenes(_ db: String) throws -> [String: Double] {
            var scores: [String: Double] = [:]
            for line in try search(["blauer Kreis", "--scenes", "--min-score", "0"], db).split(separator: "\n") {
                let row = try JSONDocument(text: String(line)).root
                scores[row["image"]!.string!] = row["scene_score"]!.number!
            }
            return scores
        }
        let reembedded = try scenes(db)
        let expected = try scenes(fresh)
        #expect(reembedded.count == 24 && Set(reembedded.keys) == Set(expected.keys))
        for (image, score) in expected {
            #expect(abs(reembedded[image]! - score) <= 0.01, "\(image): \(reembedded[image]!) against \(score)")
        }
    }
}
