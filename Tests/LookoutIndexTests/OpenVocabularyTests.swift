import Foundation
import LookoutEngine
import LookoutIndex
import LookoutSupport
import Testing

#if DEBUG
    private let optimizedBuild = false
#else
    private let optimizedBuild = true
#endif

/// Folder search finds what the index's classes do not name (issue 15). 160 held-out demo scenes
/// (Tests/Fixtures/open-vocabulary) are indexed with `--classes` naming every colour with five of the
/// eight shapes; each of the 80 colour–shape queries is then searched, and its photo-level average
/// precision measured against the scenes' truth.
///
/// It indexes 320 photos: release builds only (scripts/test runs it with `-c release`).
@Suite(.serialized, .enabled(if: optimizedBuild, "release builds only (swift test -c release)"))
struct OpenVocabularyTests {

    static let fixtures = PhotoIndexTests.root + "/Tests/Fixtures/open-vocabulary"
    static let unnamedShapes: Set<String> = ["star", "heart", "cross"]

    struct Measured {
        var named: [Double] = []
        var unnamed: [Double] = []
        var meanNamed: Double { named.reduce(0, +) / Double(max(1, named.count)) }
        var meanUnnamed: Double { unnamed.reduce(0, +) / Double(max(1, unnamed.count)) }
    }

    /// Indexes the scenes with `extractor` and measures every query that some scene holds.
    static func measure(_ extractor: RegionExtractor, vocabulary: String) throws -> Measured {
        let truth = try SceneTruth(contentsOf: fixtures + "/scenes/truth.json")
        let folder = NSTemporaryDirectory() + "lookout-open-vocabulary-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { PhotoIndexTests.remove(folder) }
        try FileContents.makeDirectories(folder)
        let index = try PhotoIndex(path: folder + "/index.sqlite")
        var model = PhotoIndexTests.loaded.model
        model.vocabulary = vocabulary
        model.maximumRegions = extractor.maximumRegions
        let summary = try index.update(
            root: fixtures + "/scenes", model: model, regions: { try extractor.regions(of: $0, name: $1) })
        #expect(summary.computed == truth.scenes.count && summary.failed == 0)
        var holders: [String: Set<String>] = [:]
        for scene in truth.scenes {
            for object in scene.objects { holders[object.label, default: []].insert(scene.file) }
        }
        var measured = Measured()
        let embedder = PhotoIndexTests.loaded.engine.embedder!
        for (query, relevant) in holders.sorted(by: { $0.key < $1.key }) {
            let text = embedder.embed([query]).embeddings[0]
            let ranked = try index.search(text: text, confidence: 0, top: truth.scenes.count).map(\.path)
            let precision = SearchEvaluation.averagePrecision(ranked: ranked, relevant: relevant)
            let shape = String(query.split(separator: " ").last!)
            if unnamedShapes.contains(shape) {
                measured.unnamed.append(precision)
            } else {
                measured.named.append(precision)
            }
        }
        return measured
    }

    static func classes() throws -> [String] {
        try ClassList.load(fixtures + "/classes.txt").names
    }

    @Test func theClassListLeavesOutThreeShapes() throws {
        let names = try Self.classes()
        #expect(names.count == 50)
        #expect(!names.contains { Self.unnamedShapes.contains(String($0.split(separator: " ").last!)) })
    }

    /// Unnamed shapes are found nearly as well as named ones: at least 0.9 mean AP, within 0.05.
    @Test func unnamedCategoriesAreFoundAsWellAsNamedOnes() throws {
        let engine = PhotoIndexTests.loaded.engine
        let vocabulary = try IndexVocabulary(engine: engine, classes: try Self.classes())
        let extractor = RegionExtractor(engine: engine, vocabulary: vocabulary.embeddings)
        let measured = try Self.measure(extractor, vocabulary: vocabulary.name)
        print(
            "open vocabulary: named mAP \(measured.meanNamed) over \(measured.named.count) queries, "
                + "unnamed mAP \(measured.meanUnnamed) over \(measured.unnamed.count)")
        #expect(measured.named.count >= 40 && measured.unnamed.count >= 25)
        #expect(measured.meanUnnamed >= 0.9, "unnamed mAP \(measured.meanUnnamed)")
        #expect(measured.meanNamed - measured.meanUnnamed <= 0.05, "named \(measured.meanNamed)")
    }

    /// The measurement can fail: the former region choice (score floor 0.005, suppression at IoU 0.6, 32
    /// regions, no generic prompt) leaves most regions of unnamed shapes out, and its unnamed mAP is far
    /// below the bar.
    @Test func theFormerRegionChoiceMissesUnnamedCategories() throws {
        let engine = PhotoIndexTests.loaded.engine
        let names = try Self.classes()
        var extractor = RegionExtractor(
            engine: engine, vocabulary: engine.embedder!.embed(names).embeddings.flatMap { $0 })
        extractor.minimumScore = 0.005
        extractor.suppressionIoU = 0.6
        extractor.maximumRegions = 32
        let measured = try Self.measure(extractor, vocabulary: "former")
        print("former region choice: named mAP \(measured.meanNamed), unnamed mAP \(measured.meanUnnamed)")
        #expect(measured.meanUnnamed < 0.8, "unnamed mAP \(measured.meanUnnamed)")
    }
}
