import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutJSON
import LookoutSupport
import LookoutTestSupport
import LookoutTextEncoder
import LookoutTokenizer
import LookoutWeights
import Testing

/// The embedded demo model (Models/demo) through the same loaders as the official weights: parity with
/// PyTorch on the same files (scripts/demo/make_demo_fixtures.py), and detection quality on held-out
/// generated scenes against the generator's ground truth.
@Suite struct DemoModelTests {
    static let root = Repository.root

    static let engine: Engine = {
        let manifest = try! ModelManifest(directory: root + "/Models/demo")
        let network = try! YOLOWorldNetwork(weights: WeightFile.open(manifest.detector.path))
        let tokenizer = try! CLIPTokenizer(vocabularyFile: root + "/Vocab/clip_vocab.json")
        let encoder = try! CLIPTextEncoder(contentsOf: manifest.textEncoder.path)
        let embedder = try! TextEmbedder(
            tokenizer: tokenizer, encoder: encoder, cache: TextEmbeddingCache(directory: nil))
        return try! Engine(network: network, embedder: embedder)
    }()

    static let expected: JSONDocument = try! JSONDocument(
        bytes: FileContents.read(root + "/Tests/Fixtures/demo/expected.json"))

    static func queries(_ set: String) -> [String] {
        let node = expected.root["query_sets"]![set]!
        return (0..<node.count).map { node[$0].string! }
    }

    /// Against OpenAI's `clip.model` text tower with the same tensors, within ten times that reference's own
    /// float32 error (float32 against float64, recorded by the fixture script).
    @Test(arguments: ["fine", "mixed", "padded"])
    func textEmbeddingsMatchCLIP(set: String) {
        let queries = Self.queries(set)
        let (embeddings, _) = Self.engine.embedder!.embed(queries)
        let reference = Self.expected.root["embeddings"]![set]!
        #expect(reference.count == queries.count && embeddings.count == queries.count)
        var worst: Float = 0
        for (k, row) in embeddings.enumerated() {
            let expected = reference[k]
            #expect(row.count == expected.count && row.count == 512)
            for d in 0..<row.count { worst = max(worst, abs(row[d] - Float(expected[d].number!))) }
        }
        let tolerance = 10 * Float(Self.expected.root["text_reference_error"]!.number!)
        print("demo text [\(set)]: max |Lookout − CLIP| = \(worst), tolerance \(tolerance)")
        #expect(worst <= tolerance, "max |Lookout − CLIP| = \(worst) > \(tolerance)")
    }

    /// Reference detections of a case (a JSON array), in Lookout's terms.
    static func detections(_ node: JSONNode) -> [(box: [Float], score: Float, query: Int)] {
        (0..<node.count).map { k in
            let e = node[k]
            return (
                (0..<4).map { Float(e["box"]![$0].number!) }, Float(e["score"]!.number!), Int(e["query_index"]!.int!)
            )
        }
    }

    /// Lookout's detections against the reference's: the same count, and position by position the same
    /// query, score and box, up to reordering inside runs of scores equal within the tolerance.
    static func expectSame(
        _ actual: [ImageDetections.Item], _ expected: [(box: [Float], score: Float, query: Int)], scoreTolerance: Float,
        boxTolerance: Float, _ name: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let problems = DetectionComparison.mismatches(
            actual.map {
                ComparedDetection(query: $0.queryIndex, score: Double($0.score), box: $0.box.map(Double.init))
            },
            expected.map { ComparedDetection(query: $0.query, score: Double($0.score), box: $0.box.map(Double.init)) },
            scoreTolerance: Double(scoreTolerance), boxTolerance: Double(boxTolerance))
        #expect(problems.isEmpty, "\(name): \(problems)", sourceLocation: sourceLocation)
    }

    /// Tolerances of a case: ten times the reference's own float32 error; boxes in the photo's pixels.
    static func tolerances(_ item: JSONNode, prepared: PreparedImage) -> (score: Float, box: Float) {
        let gain = min(
            Float(prepared.letterbox.height) / Float(prepared.height),
            Float(prepared.letterbox.width) / Float(prepared.width))
        return (
            10 * Float(item["reference_error_scores"]!.number!),
            10 * Float(item["reference_error_boxes"]!.number!) / gain
        )
    }

    @Test(arguments: 0..<5)
    func detectionsMatchUltralyticsPredict(caseIndex: Int) throws {
        #expect(Self.expected.root["cases"]!.count == 5)
        let item = Self.expected.root["cases"]![caseIndex]
        let path = Self.root + "/" + item["image"]!.string!
        let queries = Self.queries(item["queries"]!.string!)
        let prepared = try Self.engine.prepare(path: path, size: Int(item["imgsz"]!.int!))
        let shape = item["input_shape"]!
        #expect(prepared.letterbox.height == Int(shape[0].int!) && prepared.letterbox.width == Int(shape[1].int!))
        let (scoreTolerance, boxTolerance) = Self.tolerances(item, prepared: prepared)
        for confidence in ["0.25", "0.05"] {
            var options = SuppressionOptions()
            options.confidence = Float(confidence)!
            let result = Self.engine.detect(prepared, queries: queries, options: options)
            let expected = Self.detections(item["detections"]![confidence]!)
            #expect(!expected.isEmpty, "\(path) conf \(confidence): an empty reference proves nothing")
            #expect(result.detections.allSatisfy { $0.label == queries[$0.queryIndex] })
            Self.expectSame(
                result.detections, expected, scoreTolerance: scoreTolerance, boxTolerance: boxTolerance,
                "\(path) conf \(confidence)")
        }
    }

    /// Class-agnostic NMS, another IoU threshold and a cap on the count, against ultralytics.
    @Test func suppressionOptionsMatchUltralytics() throws {
        let item = Self.expected.root["cases"]![0]
        let prepared = try Self.engine.prepare(path: Self.root + "/" + item["image"]!.string!, size: 640)
        let (scoreTolerance, boxTolerance) = Self.tolerances(item, prepared: prepared)
        let queries = Self.queries(item["queries"]!.string!)
        var cases: [(String, SuppressionOptions)] = []
        var options = SuppressionOptions()
        options.confidence = 0.01
        cases.append(("conf 0.01", options))
        options.agnostic = true
        cases.append(("agnostic", options))
        options.agnostic = false
        options.iou = 0.1
        cases.append(("iou 0.1", options))
        options.iou = 0.7
        options.maximumDetections = 3
        cases.append(("max-det 3", options))
        var counts: [Int] = []
        for (name, options) in cases {
            let expected = Self.detections(item["options"]![name]!)
            counts.append(expected.count)
            let result = Self.engine.detect(prepared, queries: queries, options: options)
            Self.expectSame(
                result.detections, expected, scoreTolerance: scoreTolerance, boxTolerance: boxTolerance, name)
        }
        #expect(Set(counts).count == 4, "each option changes the reference: \(counts)")
    }

    /// About 20 held-out scenes (examples/scenes, generated with a seed that training never used), all 80
    /// colour–shape captions at once, conf 0.25: precision and recall at IoU 0.5 against the truth.
    @Test func findsTheShapesOfHeldOutScenes() throws {
        let truth = try SceneTruth(contentsOf: Self.root + "/examples/scenes/truth.json")
        #expect(truth.scenes.count >= 20)
        let queries = Self.queries("fine")
        var evaluation = DetectionEvaluation(iouThreshold: 0.5)
        for scene in truth.scenes {
            let prepared = try Self.engine.prepare(path: scene.file, size: 640)
            let result = Self.engine.detect(prepared, queries: queries, options: SuppressionOptions())
            evaluation.add(
                predictions: result.detections.map { .init(label: $0.label, score: $0.score, box: $0.box) },
                truth: scene.objects)
        }
        let (precision, recall) = evaluation.precisionRecall(above: 0.25, over: queries)
        #expect(precision >= 0.8, "precision \(precision)")
        #expect(recall >= 0.8, "recall \(recall)")
    }

    /// Captions that name nothing in the scene stay quiet.
    @Test func unrelatedQueriesFindNothing() throws {
        let prepared = try Self.engine.prepare(path: Self.root + "/examples/scenes/scene-0001.jpg", size: 640)
        let result = Self.engine.detect(prepared, queries: ["dog", "red car", "person"], options: SuppressionOptions())
        #expect(result.detections.isEmpty, "\(result.detections)")
    }
}

@Suite struct EvaluationTests {
    @Test func averagePrecisionOfAHandWorkedCase() {
        var evaluation = DetectionEvaluation(iouThreshold: 0.5)
        let truth: [DetectionEvaluation.Truth] = [
            .init(label: "a", box: [0, 0, 10, 10]), .init(label: "a", box: [20, 20, 30, 30]),
        ]
        evaluation.add(
            predictions: [
                .init(label: "a", score: 0.9, box: [0, 0, 10, 10]),  // TP
                .init(label: "a", score: 0.8, box: [50, 50, 60, 60]),  // FP
                .init(label: "a", score: 0.7, box: [21, 21, 31, 31]),  // TP (IoU 81/119)
                .init(label: "a", score: 0.6, box: [0, 0, 10, 10]),  // FP: already matched
                .init(label: "b", score: 0.95, box: [0, 0, 10, 10]),  // no truth for b
            ], truth: truth)
        // precision 1, 1/2, 2/3, 2/4 at recall 1/2, 1/2, 1, 1 → envelope 1 up to recall 0.5, 2/3 after.
        let ap = evaluation.averagePrecision("a")!
        #expect(abs(ap - (51 + 50 * 2.0 / 3) / 101) < 1e-12)
        #expect(evaluation.averagePrecision("b") == nil)
        let (precision, recall) = evaluation.precisionRecall(above: 0.65, over: ["a"])
        #expect(precision == 2.0 / 3 && recall == 1)
    }
}
