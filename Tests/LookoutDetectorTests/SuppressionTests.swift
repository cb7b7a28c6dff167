import Foundation
import LookoutDetector
import LookoutJSON
import LookoutSupport
import LookoutTestSupport
import LookoutWeights
import Testing

/// `non_max_suppression` + `scale_boxes` against ultralytics on the fixtures: first on the reference raw
/// output (same inputs, so the same detections exactly), then end to end on Lookout's own raw output.
@Suite struct SuppressionTests {
    static func reference(_ fixture: String) throws -> WeightFile {
        try WeightFile.open(NetworkParityTests.root + "/Tests/Fixtures/detector/\(fixture).safetensors")
    }

    static func detections(_ view: TensorView) -> [Detection] {
        let values = view.floats()
        return (0..<view.shape[0]).map { row in
            Detection(
                box: Array(values[(row * 6)..<(row * 6 + 4)]), score: values[row * 6 + 4],
                classIndex: Int(values[row * 6 + 5]))
        }
    }

    /// The fixture's reference detections: each threshold in its `confidences` (each with at least one
    /// detection), then class-agnostic NMS and the max-det cap, with the options ultralytics ran them with.
    static func cases(_ file: WeightFile) throws -> [(name: String, options: SuppressionOptions, expected: [Detection])]
    {
        let confidences = try #require(file.metadata["confidences"]).split(separator: ",").map { Float(String($0))! }
        #expect(confidences.count == 2)
        var result: [(String, SuppressionOptions, [Detection])] = []
        for confidence in confidences {
            var options = SuppressionOptions()
            options.confidence = confidence
            let key = "detections_conf" + String(format: "%03d", Int((confidence * 100).rounded()))
            result.append(("conf \(confidence)", options, detections(try file.view(key))))
        }
        var agnostic = SuppressionOptions()
        agnostic.confidence = Float(try #require(file.metadata["agnostic_conf"]))!
        agnostic.agnostic = true
        result.append(("agnostic", agnostic, detections(try file.view("detections_agnostic"))))
        var capped = SuppressionOptions()
        capped.confidence = 0.05
        capped.maximumDetections = Int(try #require(file.metadata["max_det"]))!
        result.append(("max-det \(capped.maximumDetections)", capped, detections(try file.view("detections_maxdet"))))
        return result
    }

    static func run(
        _ output: [Float], classes: Int, options: SuppressionOptions, file: WeightFile
    ) throws -> [Detection] {
        let input = try file.view("input")
        let original = try file.view("original_shape").integers()
        let kept = NonMaxSuppression.run(output, classes: classes, options: options)
        return NonMaxSuppression.scaleBoxes(
            kept, inputWidth: input.shape[3], inputHeight: input.shape[2], imageWidth: Int(original[1]),
            imageHeight: Int(original[0]))
    }

    /// Box tolerance in the original image's pixels: ten times the reference's own float32 error of the raw
    /// boxes (input pixels), divided by the letterbox gain.
    static func boxTolerance(_ file: WeightFile) throws -> Float {
        let input = try file.view("input")
        let original = try file.view("original_shape").integers()
        let gain = min(Float(input.shape[2]) / Float(original[0]), Float(input.shape[3]) / Float(original[1]))
        return NetworkParityTests.tolerance(file, "boxes") / gain
    }

    @Test(arguments: NetworkParityTests.fullComparisons)
    func sameInputsGiveTheSameDetections(fixture: String) throws {
        let file = try Self.reference(fixture)
        let classes = try file.view("text").shape[1]
        let output = try file.view("output").floats()
        let cases = try Self.cases(file)
        #expect(cases.count == 4)
        for (name, options, expected) in cases {
            let actual = try Self.run(output, classes: classes, options: options, file: file)
            #expect(!expected.isEmpty, "\(fixture) \(name): an empty reference proves nothing")
            #expect(actual.count == expected.count, "\(fixture) \(name)")
            #expect(
                actual == expected,
                "\(fixture) \(name): first difference at \(Array(zip(actual, expected)).firstIndex { $0.0 != $0.1 } ?? -1)"
            )
        }
        // The options matter: agnostic NMS keeps fewer boxes than class-aware NMS, the cap keeps max-det.
        #expect(cases[2].expected.count < cases[1].expected.count)
        #expect(cases[3].expected.count == cases[3].options.maximumDetections)
    }

    /// The order NMS takes its candidates in (``NonMaxSuppression/descending(_:count:)``, the radix sort a GPU's
    /// ranking follows): descending score, index order among equal scores, −0 equal to +0, as a comparison sort by
    /// that definition gives; on scores with many ties, negative ones, infinities and both zeros.
    @Test func candidatesInDescendingScoreOrder() {
        var generator = SplitMix64(seed: 5)
        for count in [0, 1, 2, 100, 5000] {
            let scores = (0..<count).map { _ -> Float in
                switch generator.next() % 8 {
                case 0: return 0
                case 1: return -0.0
                case 2: return generator.next() % 2 == 0 ? .infinity : -.infinity
                default: return Float(Int(generator.next() % 64) - 16) / 32
                }
            }
            let expected = scores.indices.sorted {
                scores[$0] > scores[$1] || (scores[$0] == scores[$1] && $0 < $1)
            }
            #expect(NonMaxSuppression.descending(scores, count: count) == expected, "\(count) scores")
        }
    }

    /// A backend's steps (``NonMaxSuppression/apart(corners:scores:offsets:count:threshold:maximum:)`` takes them
    /// on the host as a GPU does: the sort, the arranged boxes, the overlaps mask and the greedy pass over it)
    /// keep exactly what the loop keeps, on thousands of candidates.
    @Test(arguments: NetworkParityTests.fullComparisons)
    func overlapsComputedApartKeepTheSame(fixture: String) throws {
        let file = try Self.reference(fixture)
        let classes = try file.view("text").shape[1]
        let output = try file.view("output").floats()
        for confidence: Float in [0.001, 0.01] {
            for agnostic in [false, true] {
                var options = SuppressionOptions()
                options.confidence = confidence
                options.agnostic = agnostic
                var candidates = 0
                let apart = NonMaxSuppression.run(output, classes: classes, options: options) {
                    candidates = $3
                    return NonMaxSuppression.apart(
                        corners: $0, scores: $1, offsets: $2, count: $3, threshold: $4, maximum: $5)
                }
                let loop = NonMaxSuppression.run(output, classes: classes, options: options)
                #expect(
                    candidates >= NonMaxSuppression.overlapsOnBackend, "\(fixture) \(confidence): the mask path ran")
                #expect(!loop.isEmpty && apart == loop, "\(fixture) conf \(confidence) agnostic \(agnostic)")
            }
        }
    }

    /// Multi-label NMS (`lookout eval`, `detect --multi-label`) equals ultralytics' `non_max_suppression` with
    /// `multi_label=True` on the same raw output (scripts/reference/make_multilabel_fixtures.py), boxes in the
    /// network input's pixels; it keeps boxes single-label NMS does not.
    @Test(arguments: NetworkParityTests.fullComparisons)
    func multiLabelEqualsUltralytics(fixture: String) throws {
        let file = try Self.reference(fixture)
        let classes = try file.view("text").shape[1]
        let output = try file.view("output").floats()
        let reference = try JSONDocument(
            bytes: FileContents.read(NetworkParityTests.root + "/Tests/Fixtures/detector/multilabel.json")
        ).root[fixture]!
        for conf in ["0.05", "0.15"] {
            let rows = reference[conf]!["detections"]!
            let expected = (0..<rows.count).map { r in
                let v = (0..<6).map { Float(rows[r][$0].number!) }
                return Detection(box: Array(v[0..<4]), score: v[4], classIndex: Int(v[5]))
            }
            var options = SuppressionOptions()
            options.confidence = Float(conf)!
            options.multiLabel = true
            let actual = NonMaxSuppression.run(output, classes: classes, options: options)
            #expect(
                !expected.isEmpty && actual == expected,
                "\(fixture) conf \(conf): \(actual.count) against \(expected.count)")
            options.multiLabel = false
            let single = NonMaxSuppression.run(output, classes: classes, options: options)
            if reference[conf]!["second_labels_above"]!.int! > 0 {
                #expect(actual.count > single.count, "\(fixture) conf \(conf): multi-label adds boxes")
            }
        }
    }

    /// The same detections up to the order within runs of equal scores (``DetectionComparison``).
    /// Detections within `scoreTolerance` of `threshold` may fall either way and are left out of both sides.
    static func expectSame(
        _ actualAll: [Detection], _ expectedAll: [Detection], threshold: Float, scoreTolerance: Float,
        boxTolerance: Float, _ name: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let near = { (d: Detection) in abs(d.score - threshold) <= scoreTolerance }
        func compared(_ list: [Detection]) -> [ComparedDetection] {
            list.filter { !near($0) }.map {
                ComparedDetection(query: $0.classIndex, score: Double($0.score), box: $0.box.map(Double.init))
            }
        }
        let problems = DetectionComparison.mismatches(
            compared(actualAll), compared(expectedAll), scoreTolerance: Double(scoreTolerance),
            boxTolerance: Double(boxTolerance))
        #expect(problems.isEmpty, "\(name): \(problems)", sourceLocation: sourceLocation)
    }

    /// `--query-conf`: each query keeps its own threshold. An anchor belongs to its best-scoring query (as
    /// with ultralytics' single-label NMS) and is kept when it beats that query's threshold; with class-aware
    /// NMS a query's detections then depend only on its own candidates, so, with no cap on the count, each
    /// query's result must equal a plain run at its threshold.
    @Test(arguments: NetworkParityTests.fullComparisons)
    func perQueryThresholdsActPerQuery(fixture: String) throws {
        let file = try Self.reference(fixture)
        let classes = try file.view("text").shape[1]
        let output = try file.view("output").floats()
        var options = SuppressionOptions()
        options.confidence = 0.25
        options.perClassConfidence = [0: 0.6, 1: 0.02]
        options.maximumDetections = 1_000_000
        let mixed = NonMaxSuppression.run(output, classes: classes, options: options)
        var checked = 0
        for k in 0..<classes {
            var plain = SuppressionOptions()
            plain.confidence = options.perClassConfidence[k] ?? 0.25
            plain.maximumDetections = 1_000_000
            let alone = NonMaxSuppression.run(output, classes: classes, options: plain).filter { $0.classIndex == k }
            let part = mixed.filter { $0.classIndex == k }
            #expect(part == alone, "\(fixture) query \(k)")
            #expect(part.allSatisfy { $0.score > plain.confidence })
            checked += part.count
        }
        #expect(checked == mixed.count && checked > 0)
        // The thresholds matter: query 1 gains detections below 0.25, query 0 loses those below 0.6.
        var base = SuppressionOptions()
        base.confidence = 0.25
        let baseline = NonMaxSuppression.run(output, classes: classes, options: base)
        #expect(mixed.filter { $0.classIndex == 1 }.count > baseline.filter { $0.classIndex == 1 }.count)
        #expect(mixed.filter { $0.classIndex == 0 }.count <= baseline.filter { $0.classIndex == 0 }.count)
    }

    @Test(arguments: NetworkParityTests.fullComparisons)
    func endToEndMatchesUltralytics(fixture: String) throws {
        let file = try Self.reference(fixture)
        let textView = try file.view("text")
        let classes = textView.shape[1]
        let input = NetworkParityTests.map(try file.view("input"))
        let network = NetworkParityTests.network
        let output = network.head(network.backbone(input), text: textView.floats(), classes: classes)
        let scoreTolerance = NetworkParityTests.tolerance(file, "scores")
        let boxTolerance = try Self.boxTolerance(file)
        for (name, options, expected) in try Self.cases(file) {
            #expect(!expected.isEmpty)
            let actual = try Self.run(output, classes: classes, options: options, file: file)
            Self.expectSame(
                actual, expected, threshold: options.confidence, scoreTolerance: scoreTolerance,
                boxTolerance: boxTolerance, "\(fixture) \(name)")
        }
    }
}
