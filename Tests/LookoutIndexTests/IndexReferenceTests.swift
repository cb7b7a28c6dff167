import Foundation
import LookoutDetector
import LookoutImage
import LookoutIndex
import LookoutJSON
import LookoutSupport
import LookoutTestSupport
import LookoutWeights
import Testing

/// The index against an independent reference (`scripts/demo/make_index_fixtures.py`: ultralytics' outputs
/// and numpy on the demo model's ultralytics checkpoint): the regions stored for each photo, and the search
/// ranking with its scores for several queries. Photos are compared by name, regions in order.
@Suite(.serialized) struct IndexReferenceTests {
    static let expected = try! JSONDocument(
        bytes: FileContents.read(PhotoIndexTests.root + "/Tests/Fixtures/index/expected.json")
    ).root
    static let embeddings = try! WeightFile.open(PhotoIndexTests.root + "/Tests/Fixtures/index/regions.safetensors")

    static var photos: [String] { (0..<expected["photos"]!.count).map { expected["photos"]![$0].string! } }

    static func floats(_ node: JSONNode) -> [Float] { (0..<node.count).map { Float(node[$0].number!) } }

    @Test func theExtractorsSettingsAreTheReferences() {
        let extractor = PhotoIndexTests.loaded.extractor
        #expect(extractor.imageSize == Int(Self.expected["imgsz"]!.int!))
        #expect(extractor.maximumRegions == Int(Self.expected["max_regions"]!.int!))
        #expect(abs(Double(extractor.minimumScore) - Self.expected["min_score"]!.number!) < 1e-9)
        #expect(abs(Double(extractor.suppressionIoU) - Self.expected["suppression_iou"]!.number!) < 1e-6)
        #expect(IndexVocabulary.genericPrompts == ["object"])
        #expect(
            Self.expected["generic_prompts"]![0].string! == "object" && Self.expected["generic_prompts"]!.count == 1)
        let parameters = PhotoIndexTests.loaded.model.scoreParameters
        let reference = Self.expected["score_parameters"]!
        #expect(parameters.count == reference.count)
        for (k, p) in parameters.enumerated() {
            #expect(abs(Double(p.logitScale) - reference[k][0].number!) < 1e-6)
            #expect(abs(Double(p.bias) - reference[k][1].number!) < 1e-6)
        }
    }

    /// The vocabulary `lookout index` builds (IndexVocabulary: built-in classes, then "object" embedded by
    /// Lookout's text encoder) equals the reference's: the same built-in features, and the reference text
    /// tower's embedding of "object".
    @Test func theIndexVocabularyIsTheReferences() throws {
        let engine = PhotoIndexTests.loaded.engine
        let vocabulary = try IndexVocabulary(engine: engine, classes: nil)
        let builtin = engine.network.builtinText!
        let generic = try Self.embeddings.view("vocabulary.generic").floats()
        #expect(vocabulary.name == "built-in:\(engine.network.builtinClassCount)+object")
        #expect(vocabulary.count == engine.network.builtinClassCount + 1)
        #expect(Array(vocabulary.embeddings.prefix(builtin.count)) == builtin)
        let own = Array(vocabulary.embeddings.suffix(512))
        #expect(
            zip(own, generic).allSatisfy { abs($0 - $1) <= 1e-6 }, "\(zip(own, generic).map { abs($0 - $1) }.max()!)")
    }

    @Test func storedRegionsEqualTheReference() throws {
        var regionsCompared = 0
        // Ten times the reference's own float32 error of the unquantised embeddings: an 8-bit value may be one
        // step off only where the reference's value lies within that distance of a rounding boundary.
        let rounding = try IndexReferenceRounding(root: PhotoIndexTests.root)
        let embeddingTolerance = rounding.tolerance
        var boundaryCases = 0
        for name in Self.photos {
            let path = PhotoIndexTests.root + "/examples/scenes/" + name
            let image = try ImageFile.decode(try FileContents.read(path), name: path)
            let regions = try PhotoIndexTests.loaded.extractor.regions(of: image, name: path)
            let reference = Self.expected["regions"]![name]!
            let levels = reference["levels"]!, scores = reference["scores"]!, boxes = reference["boxes"]!
            #expect(regions.count == levels.count, "\(name): \(regions.count) regions vs \(levels.count)")
            let vectors = try Self.embeddings.view(name + ".embeddings").floats()
            let quantised = try Self.embeddings.view(name + ".quantised").floats()
            let scales = try Self.embeddings.view(name + ".scales").floats()
            let size = 512
            for (k, region) in regions.enumerated() where k < levels.count {
                #expect(Int(region.level) == Int(levels[k].int!), "\(name) region \(k)")
                #expect(abs(Double(region.vocabularyScore) - scores[k].number!) <= 1e-4, "\(name) region \(k)")
                let box = Self.floats(boxes[k])
                #expect(
                    zip(region.box, box).allSatisfy { abs($0 - $1) <= 0.002 },
                    "\(name) region \(k): \(region.box) vs \(box)")
                #expect(region.embedding.count == size)
                #expect(abs(region.scale - scales[k]) <= embeddingTolerance / 127 + 1e-9, "\(name) region \(k) scale")
                var off: [(Int8, Float)] = []
                for d in 0..<min(size, region.embedding.count) {
                    let expected = quantised[k * size + d]
                    if Float(region.embedding[d]) == expected { continue }
                    // One step apart, and the reference's unquantised value within the tolerance of the boundary.
                    if abs(Float(region.embedding[d]) - expected) == 1
                        && rounding.nearBoundary(vectors[k * size + d], scale: scales[k])
                    {
                        boundaryCases += 1
                    } else {
                        off.append((region.embedding[d], expected))
                    }
                }
                #expect(off.isEmpty, "\(name) region \(k): \(off.count) 8-bit values differ: \(off.prefix(8))")
                regionsCompared += 1
            }
        }
        print(
            "index reference: \(regionsCompared) regions, \(boundaryCases) values one step off at a rounding boundary")
        #expect(regionsCompared >= 50)
    }

    /// A cap on the regions per photo (`index --regions N`) keeps the reference's first N: the greedy choice
    /// stops after N.
    @Test func fewerRegionsAreTheReferencesFirst() throws {
        var extractor = PhotoIndexTests.loaded.extractor
        extractor.maximumRegions = 3
        var compared = 0
        for name in Self.photos.prefix(4) {
            let path = PhotoIndexTests.root + "/examples/scenes/" + name
            let regions = try extractor.regions(
                of: try ImageFile.decode(try FileContents.read(path), name: path), name: path)
            let reference = Self.expected["regions"]![name]!
            #expect(regions.count == min(3, reference["levels"]!.count))
            for (k, region) in regions.enumerated() {
                #expect(
                    abs(Double(region.vocabularyScore) - reference["scores"]![k].number!) <= 1e-4, "\(name) region \(k)"
                )
                let box = Self.floats(reference["boxes"]![k])
                #expect(zip(region.box, box).allSatisfy { abs($0 - $1) <= 0.002 }, "\(name) region \(k)")
                compared += 1
            }
        }
        #expect(compared >= 10)
    }

    @Test func searchEqualsTheReferenceRanking() throws {
        let folder = NSTemporaryDirectory() + "lookout-index-reference-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { PhotoIndexTests.remove(folder) }
        try FileContents.makeDirectories(folder + "/photos")
        for name in Self.photos {
            try FileContents.writeAtomically(
                try FileContents.read(PhotoIndexTests.root + "/examples/scenes/" + name), to: folder + "/photos/" + name
            )
        }
        let index = try PhotoIndex(path: folder + "/index.sqlite")
        let summary = try PhotoIndexTests.update(index, folder)
        #expect(summary.computed == Self.photos.count && summary.failed == 0)
        let searches = Self.expected["searches"]!
        #expect(searches.count >= 5)
        var nonEmpty = 0
        let rounding = try IndexReferenceRounding(root: PhotoIndexTests.root)
        // Lookout's stored regions, read back from the index.
        var stored: [String: [IndexReferenceRounding.StoredRegion]] = [:]
        let key = try #require(try index.storedModel()).key
        try index.store.forEachPhoto(model: key) { photo in
            stored[String(photo.path.split(separator: "/").last!)] = IndexReferenceRounding.storedRegions(
                photo.regions, size: 512)
        }
        #expect(stored.count == Self.photos.count)
        var widened = 0, largestAllowance = 0.0
        for s in 0..<searches.count {
            let search = searches[s]
            let query = search["query"]!.string!
            let results = search["results"]!
            let hits = try index.search(
                text: Self.floats(search["embedding"]!), confidence: Float(Self.expected["conf"]!.number!),
                top: Int(Self.expected["top"]!.int!))
            let names = hits.map { String($0.path.split(separator: "/").last!) }
            let expectedNames = (0..<results.count).map { results[$0]["image"]!.string! }
            #expect(names == expectedNames, "\(query): \(names) vs \(expectedNames)")
            if !expectedNames.isEmpty { nonEmpty += 1 }
            for (k, hit) in hits.enumerated() where k < results.count {
                let result = results[k]
                #expect(abs(Double(hit.score) - result["score"]!.number!) <= 1e-4, "\(query) #\(k)")
                // The reference lists every region above the threshold; a search shows near-duplicates once.
                let detections = DisplayedBoxes.kept(detections: result["detections"]!)
                #expect(hit.detections.count == detections.count, "\(query) \(names[k])")
                for (j, detection) in hit.detections.enumerated() where j < detections.count {
                    let box = Self.floats(detections[j]["box"]!)
                    let reference = detections[j]["score"]!.number!
                    let allowance = try rounding.allowance(
                        photo: names[k], box: box, score: reference, query: Self.floats(search["embedding"]!),
                        stored: stored[names[k]] ?? [])
                    if allowance > 0 { (widened, largestAllowance) = (widened + 1, max(largestAllowance, allowance)) }
                    #expect(
                        abs(Double(detection.score) - reference) <= 1e-4 + allowance,
                        "\(query) \(names[k]) #\(j) (allowance for rounding boundaries \(allowance))")
                    #expect(zip(detection.box, box).allSatisfy { abs($0 - $1) <= 0.002 }, "\(query) \(names[k]) #\(j)")
                }
            }
        }
        #expect(nonEmpty >= 4, "most reference searches must find something")
        print(
            "index reference searches: \(widened) detection scores from regions with values on a rounding boundary (largest allowance \(largestAllowance))"
        )
    }
}
