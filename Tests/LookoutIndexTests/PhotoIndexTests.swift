import Foundation
import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutIndex
import LookoutJSON
import LookoutSupport
import LookoutTensor
import LookoutTestSupport
import LookoutTextEncoder
import LookoutTokenizer
import LookoutWeights
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The photo index with the demo model on generated scenes whose truth is known.
@Suite(.serialized) struct PhotoIndexTests {
    static let root = Repository.root

    struct Loaded: @unchecked Sendable {
        let engine: Engine
        let model: IndexModel
        let extractor: RegionExtractor
    }

    static let loaded: Loaded = {
        let manifest = try! ModelManifest(directory: root + "/Models/demo")
        let weights = try! WeightFile.open(manifest.detector.path)
        let network = try! YOLOWorldNetwork(weights: weights)
        let tokenizer = try! CLIPTokenizer(vocabularyFile: root + "/Vocab/clip_vocab.json")
        let encoder = try! CLIPTextEncoder(contentsOf: manifest.textEncoder.path)
        let embedder = try! TextEmbedder(
            tokenizer: tokenizer, encoder: encoder, cache: TextEmbeddingCache(directory: nil))
        let engine = try! Engine(network: network, embedder: embedder)
        // The index vocabulary of the reference (make_index_fixtures.py): the built-in classes, then the
        // generic prompt as the reference's text tower embeds it (IndexVocabularyTests: Lookout's own
        // embedding of it equals that one).
        let generic = try! WeightFile.open(root + "/Tests/Fixtures/index/regions.safetensors")
            .view("vocabulary.generic").floats()
        let model = IndexModel(
            detectorFingerprint: weights.fingerprint(), textEncoderFingerprint: encoder.fingerprint,
            vocabulary: "built-in", imageSize: 640, maximumRegions: 64, embeddingSize: 512,
            scoreParameters: network.scoreParameters)
        return Loaded(
            engine: engine, model: model,
            extractor: RegionExtractor(engine: engine, vocabulary: network.builtinText! + generic))
    }()

    static let truth = try! SceneTruth(contentsOf: root + "/examples/scenes/truth.json")

    /// A scratch folder with the first `count` example scenes.
    static func folder(count: Int) throws -> String {
        let folder = NSTemporaryDirectory() + "lookout-index-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileContents.makeDirectories(folder + "/photos/nested")
        for (index, scene) in truth.scenes.prefix(count).enumerated() {
            let name = String(scene.file.split(separator: "/").last!)
            let target = folder + "/photos/" + (index % 2 == 0 ? "" : "nested/") + name
            try FileContents.writeAtomically(try FileContents.read(scene.file), to: target)
        }
        return folder
    }

    static func update(_ index: PhotoIndex, _ folder: String) throws -> PhotoIndex.Summary {
        try index.update(
            root: folder + "/photos", model: loaded.model, regions: { try loaded.extractor.regions(of: $0, name: $1) })
    }

    static func remove(_ folder: String) {
        _ = folder.withCString { system("rm -rf '\(String(cString: $0))'") }
    }

    @Test func searchRanksPhotosThatHoldTheQueryFirst() throws {
        let folder = try Self.folder(count: 24)
        defer { Self.remove(folder) }
        let index = try PhotoIndex(path: folder + "/index.sqlite")
        let summary = try Self.update(index, folder)
        #expect(summary.computed == 24 && summary.failed == 0)
        // Precision at k for every colour–shape label present in the set, k = min(5, photos holding it).
        var hits = 0
        var total = 0
        let labels = Set(Self.truth.scenes.flatMap { $0.objects.map(\.label) }).sorted()
        for label in labels {
            let holding = Set(
                Self.truth.scenes.filter { $0.objects.contains { $0.label == label } }.map {
                    String($0.file.split(separator: "/").last!)
                })
            let k = min(5, holding.count)
            let text = Self.loaded.engine.embedder!.embed([label]).embeddings[0]
            let results = try index.search(text: text, confidence: 0.01, top: k)
            hits += results.filter { holding.contains(String($0.path.split(separator: "/").last!)) }.count
            total += k
        }
        let precision = Double(hits) / Double(total)
        #expect(precision >= 0.8, "precision at k over \(labels.count) labels: \(precision)")
        let statistics = try index.statistics()
        #expect(statistics.files == 24 && statistics.images == 24)
        #expect(try index.integrityCheck() == "ok")
    }

    @Test func updatesAreIncremental() throws {
        let folder = try Self.folder(count: 4)
        defer { Self.remove(folder) }
        let path = folder + "/index.sqlite"
        var summary = try Self.update(try PhotoIndex(path: path), folder)
        #expect(summary.computed == 4)

        summary = try Self.update(try PhotoIndex(path: path), folder)
        #expect(summary.computed == 0 && summary.unchanged == 4)

        // Touched (same content, new mtime), renamed, duplicated: nothing recomputed.
        let photos = folder + "/photos/"
        var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, photos + "scene-0000.jpg", &times, 0) == 0)
        #expect(rename(photos + "scene-0002.jpg", photos + "renamed.jpg") == 0)
        try FileContents.writeAtomically(
            try FileContents.read(photos + "nested/scene-0001.jpg"), to: photos + "copy.jpg")
        // A changed photo, an unreadable one, and a file that is not a photo.
        try FileContents.writeAtomically(
            try FileContents.read(Self.root + "/examples/scenes/scene-0010.jpg"), to: photos + "nested/scene-0003.jpg")
        try FileContents.writeAtomically(Array(repeating: 0xFF, count: 100), to: photos + "broken.jpg")
        try FileContents.writeAtomically(Array("notes".utf8), to: photos + "notes.txt")
        summary = try Self.update(try PhotoIndex(path: path), folder)
        #expect(summary.computed == 1, "\(summary)")
        #expect(summary.reused == 3, "\(summary)")  // touched, renamed, copy
        #expect(summary.unchanged == 1 && summary.failed == 1 && summary.removed == 1 && summary.skippedFiles == 1)
        let failures = try PhotoIndex(path: path).failures()
        #expect(failures.count == 1 && failures[0].path.hasSuffix("broken.jpg"))

        // The failure is remembered, not retried, while the file is unchanged; deleted files leave.
        unlink(photos + "copy.jpg")
        summary = try Self.update(try PhotoIndex(path: path), folder)
        #expect(summary.computed == 0 && summary.stillFailing == 1 && summary.removed == 1, "\(summary)")
        let statistics = try PhotoIndex(path: path).statistics()
        #expect(statistics.files == 4 && statistics.images == 4 && statistics.failedFiles == 1)
    }

    /// Two photos computed at once (each lane an engine with one thread) store what one at a time stores: the
    /// same counts, a copy reused rather than computed twice even when both are in flight, the same failure,
    /// the same search results with the same scores.
    @Test func sideBySideStoresWhatOneAtATimeStores() throws {
        // Eight scenes: scene-0007 (438×652) makes a 14×20 map, where a pool-dependent tiling once gave the
        // one-thread lanes another rounding than the two-thread engine.
        let folder = try Self.folder(count: 8)
        defer { Self.remove(folder) }
        let photos = folder + "/photos/"
        // The copy sorts right after its original, so both are claimed while the original is in flight.
        try FileContents.writeAtomically(
            try FileContents.read(photos + "scene-0000.jpg"), to: photos + "scene-0000b.jpg")
        try FileContents.writeAtomically(Array(repeating: 0xFF, count: 100), to: photos + "broken.jpg")
        let lanes = (0..<2).map { _ in
            let engine = Self.loaded.engine.sharingWeights(pool: ComputePool(threads: 1))
            let extractor = RegionExtractor(engine: engine, vocabulary: Self.loaded.extractor.vocabulary)
            return ComputeLane(regions: { try extractor.regions(of: $0, name: $1) }, imageEmbedding: nil)
        }
        let one = try PhotoIndex(path: folder + "/one.sqlite")
        let first = try Self.update(one, folder)
        let sideBySide = try PhotoIndex(path: folder + "/two.sqlite")
        let second = try sideBySide.update(
            root: folder + "/photos", model: Self.loaded.model,
            regions: { _, _ in
                Issue.record("the lanes compute, not this"); return []
            }, lanes: lanes)
        #expect(first.computed == 8 && first.reused == 1 && first.failed == 1, "\(first)")
        #expect(
            second.computed == first.computed && second.reused == first.reused && second.failed == first.failed,
            "\(second)")
        #expect(try sideBySide.failures().map(\.path) == one.failures().map(\.path))
        let labels = Set(Self.truth.scenes.prefix(8).flatMap { $0.objects.map(\.label) }).sorted()
        #expect(labels.count >= 4)
        for label in labels {
            let text = Self.loaded.engine.embedder!.embed([label]).embeddings[0]
            let a = try one.search(text: text, confidence: 0.01, top: 8)
            let b = try sideBySide.search(text: text, confidence: 0.01, top: 8)
            #expect(a.map(\.path) == b.map(\.path) && a.map(\.score) == b.map(\.score), "\(label)")
        }
    }

    @Test func anotherModelRedoesTheWork() throws {
        let folder = try Self.folder(count: 2)
        defer { Self.remove(folder) }
        let path = folder + "/index.sqlite"
        _ = try Self.update(try PhotoIndex(path: path), folder)
        var other = Self.loaded.model
        other.maximumRegions = 8
        let summary = try PhotoIndex(path: path).update(
            root: folder + "/photos", model: other, regions: { try Self.loaded.extractor.regions(of: $0, name: $1) })
        #expect(summary.computed == 2 && summary.unchanged == 0)
        #expect(try PhotoIndex(path: path).statistics().images == 2)  // the old model's regions are gone
        #expect(try PhotoIndex(path: path).storedModel() == other)
    }

    @Test func badPlacesAreClearErrors() throws {
        func expectError(
            _ fragment: String, path: String, kind: IndexError.Kind = .storage, _ body: () throws -> Void,
            sourceLocation: SourceLocation = #_sourceLocation
        ) {
            do {
                try body()
                Issue.record("expected an error containing \(fragment)", sourceLocation: sourceLocation)
            } catch let error as IndexError {
                #expect(error.path == path && error.kind == kind, sourceLocation: sourceLocation)
                #expect(error.problem.contains(fragment), "\(error.problem)", sourceLocation: sourceLocation)
            } catch {
                Issue.record("not an IndexError: \(error)", sourceLocation: sourceLocation)
            }
        }
        expectError("no index here", path: "/nonexistent-dir/x/index.sqlite", kind: .noIndex) {
            _ = try PhotoIndex(path: "/nonexistent-dir/x/index.sqlite", readOnly: true)
        }
        let folder = try Self.folder(count: 0)
        defer { Self.remove(folder) }
        let index = try PhotoIndex(path: folder + "/index.sqlite")
        expectError("cannot open the folder: No such file or directory", path: folder + "/missing", kind: .folder) {
            _ = try index.update(root: folder + "/missing", model: Self.loaded.model, regions: { _, _ in [] })
        }
        try FileContents.writeAtomically(Array("x".utf8), to: folder + "/file.jpg")
        expectError("not a folder", path: folder + "/file.jpg", kind: .folder) {
            _ = try index.update(root: folder + "/file.jpg", model: Self.loaded.model, regions: { _, _ in [] })
        }
        try FileContents.writeAtomically(
            Array("not a database, just text that is long enough".utf8), to: folder + "/bad.sqlite")
        expectError("not a database", path: folder + "/bad.sqlite") { _ = try PhotoIndex(path: folder + "/bad.sqlite") }
    }

    /// The stored regions score a query as the network's own head does when the neck saw the same texts.
    @Test func regionScoresEqualTheHeadForTheIndexVocabulary() throws {
        let scene = Self.truth.scenes[1]
        let image = try ImageFile.read(scene.file)
        let regions = try Self.loaded.extractor.regions(of: image, name: scene.file)
        #expect(!regions.isEmpty)
        let folder = try Self.folder(count: 0)
        defer { Self.remove(folder) }
        // Score region 0 against the built-in vocabulary entry it matched best: equals its stored score
        // up to the F16 rounding of the embedding.
        let network = Self.loaded.engine.network
        let text = network.builtinText!
        var best: Float = 0
        for k in 0..<network.builtinClassCount {
            let scorer = RegionScorer(
                text: Array(text[(k * 512)..<((k + 1) * 512)]), parameters: network.scoreParameters)
            best = max(best, scorer.score(regions[0]))
        }
        #expect(abs(best - regions[0].vocabularyScore) < 2e-3, "\(best) vs \(regions[0].vocabularyScore)")
    }
}
