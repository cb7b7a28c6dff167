import LookoutDetector
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

    static func run(_ output: [Float], classes: Int, confidence: Float, file: WeightFile) throws -> [Detection] {
        var options = SuppressionOptions()
        options.confidence = confidence
        let input = try file.view("input")
        let original = try file.view("original_shape").integers()
        let kept = NonMaxSuppression.run(output, classes: classes, options: options)
        return NonMaxSuppression.scaleBoxes(
            kept, inputWidth: input.shape[3], inputHeight: input.shape[2], imageWidth: Int(original[1]),
            imageHeight: Int(original[0]))
    }

    @Test(arguments: NetworkParityTests.fullComparisons)
    func sameInputsGiveTheSameDetections(fixture: String) throws {
        let file = try Self.reference(fixture)
        let classes = try file.view("text").shape[1]
        let output = try file.view("output").floats()
        for (confidence, key) in [(Float(0.25), "detections_conf025"), (0.05, "detections_conf005")] {
            let expected = Self.detections(try file.view(key))
            let actual = try Self.run(output, classes: classes, confidence: confidence, file: file)
            #expect(actual.count == expected.count, "\(fixture) conf \(confidence)")
            #expect(
                actual == expected,
                "\(fixture) conf \(confidence): first difference at \(Array(zip(actual, expected)).firstIndex { $0.0 != $0.1 } ?? -1)"
            )
        }
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
        // Boxes: within 0.01 px in the network's input (letterboxed) pixels, i.e. 0.01 / gain in the
        // original image's pixels (scale_boxes itself is checked exactly in the test above).
        let inputView = try file.view("input")
        let original = try file.view("original_shape").integers()
        let gain = min(Float(inputView.shape[2]) / Float(original[0]), Float(inputView.shape[3]) / Float(original[1]))
        let tolerance = 0.01 / gain
        for (confidence, key) in [(Float(0.25), "detections_conf025"), (0.05, "detections_conf005")] {
            // Detections whose score lies within 1e-4 of the threshold may fall either way.
            let near = { (d: Detection) in abs(d.score - confidence) <= 1e-4 }
            let expected = Self.detections(try file.view(key)).filter { !near($0) }
            let actual = try Self.run(output, classes: classes, confidence: confidence, file: file).filter { !near($0) }
            #expect(
                actual.count == expected.count, "\(fixture) conf \(confidence): \(actual.count) vs \(expected.count)")
            // Order is compared up to runs of scores equal within 1e-4 (saturated scores of 1.0 are exactly
            // equal, and their order then follows float rounding): each run must hold the same detections.
            var start = 0
            while start < min(actual.count, expected.count) {
                var end = start + 1
                while end < expected.count && abs(expected[end].score - expected[start].score) <= 1e-4 { end += 1 }
                var unmatched = Array(actual[start..<min(end, actual.count)])
                for e in expected[start..<end] {
                    let match = unmatched.firstIndex { a in
                        a.classIndex == e.classIndex && abs(a.score - e.score) <= 1e-4
                            && zip(a.box, e.box).allSatisfy { abs($0 - $1) <= tolerance }
                    }
                    #expect(
                        match != nil,
                        "\(fixture) conf \(confidence): no match for \(e) among positions \(start)..<\(end)")
                    if let match { unmatched.remove(at: match) }
                }
                start = end
            }
        }
    }
}
