import LookoutDetector
import LookoutEngine
import LookoutImage
import Testing

/// Lookout's query syntax: how it reads (alternatives, thresholds, negatives, escapes) and what each form
/// does on the demo model, against plain runs of the network.
@Suite struct QuerySyntaxTests {
    @Test func reading() throws {
        func read(_ line: String) throws -> [Query] { try QuerySyntax.parseLine(line).queries }
        #expect(try read("dog, red car") == [Query("dog"), Query("red car")])
        #expect(try read(" sofa | couch |settee ") == [Query(alternatives: ["sofa", "couch", "settee"])])
        #expect(try read("dog@0.4") == [Query(alternatives: ["dog"], threshold: 0.4)])
        #expect(try read("-person, dog") == [Query(alternatives: ["person"], negative: true), Query("dog")])
        #expect(
            try read("-sofa|couch@0.3") == [Query(alternatives: ["sofa", "couch"], threshold: 0.3, negative: true)])
        #expect(
            try read(#"a\, b, c\|d, me\@home, \-x, back\\slash"#) == [
                Query("a, b"), Query("c|d"), Query("me@home"), Query("-x"), Query(#"back\slash"#),
            ])
        // "@" not after text, or not before a number, is the character itself.
        #expect(
            try read("@crop.jpg, me@home, x@5 apples") == [Query("@crop.jpg"), Query("me@home"), Query("x@5 apples")])
        #expect(try read("a,, b, a") == [Query("a"), Query("b")])
        #expect(try QuerySyntax.parseLine("a,, ,b").emptyParts == 2)
        #expect(throws: QuerySyntaxError.self) { try read("dog@1.5") }
        #expect(throws: QuerySyntaxError.self) { try read("-") }
        #expect(throws: QuerySyntaxError.self) { try read("|") }
        // A queries-file line: commas are text.
        #expect(
            try QuerySyntax.parse("cat, black|kitten@0.2")
                == Query(alternatives: ["cat, black", "kitten"], threshold: 0.2))
        for query in try read(#"-\-a|b\@c@0.25, x\,y, \\z"#) { #expect(try QuerySyntax.parse(query.written) == query) }
    }

    static let engine = DemoModelTests.engine
    static let prepared: PreparedImage = {
        let image = try! ImageFile.read(DemoModelTests.root + "/examples/scenes/scene-0003.jpg")
        return engine.prepare(image: image, name: "scene-0003", size: 320)
    }()

    static func boxes(_ result: ImageDetections) -> [String] {
        result.detections.map { "\($0.label) \($0.score) \($0.box)" }.sorted()
    }

    /// `star|circle`: every alternative enters the neck; each anchor takes the best alternative's score,
    /// before thresholds and NMS.
    @Test func alternativesTakeTheBestScoreBeforeSuppression() throws {
        let texts = ["star", "circle", "ring"]
        let features = Self.engine.embedder!.embed(texts).embeddings.flatMap { $0 }
        let raw = Self.engine.score(Self.prepared, labels: texts, text: features).output
        let anchors = raw.count / 7
        var merged = Array(raw[0..<(4 * anchors)])
        merged += (0..<anchors).map { max(raw[4 * anchors + $0], raw[5 * anchors + $0]) }
        merged += raw[(6 * anchors)...]
        let options = SuppressionOptions()
        let box = Self.prepared.letterbox
        let expected = NonMaxSuppression.scaleBoxes(
            NonMaxSuppression.run(merged, classes: 2, options: options), inputWidth: box.width,
            inputHeight: box.height, imageWidth: Self.prepared.width, imageHeight: Self.prepared.height)
        let got = Self.engine.detect(Self.prepared, queries: try QuerySyntax.parseLine("star|circle, ring").queries)
        #expect(got.detections.map(\.box) == expected.map(\.box))
        #expect(got.detections.map(\.score) == expected.map(\.score))
        #expect(got.detections.map(\.label) == expected.map { ["star", "ring"][$0.classIndex] })
        // Not vacuous: the circles are found under the label "star".
        let plain = Self.engine.detect(Self.prepared, queries: ["star", "ring"])
        #expect(
            got.detections.filter { $0.label == "star" }.count > plain.detections.filter { $0.label == "star" }.count)
    }

    /// `shape@T`: that query's boxes are those of a plain run at T; the others' at the global threshold.
    @Test func aQueryThresholdEqualsAPlainRunAtThatThreshold() throws {
        let atDefault = Self.engine.detect(Self.prepared, queries: ["star", "shape"])
        let shapes = atDefault.detections.filter { $0.label == "shape" }.map(\.score)
        // A threshold between the shape boxes' scores, so that it keeps some and drops some.
        try #require(shapes.count >= 2 && shapes.max()! > shapes.min()!, "\(shapes)")
        let threshold = ((shapes.max()! + shapes.min()!) / 2 * 1000).rounded() / 1000
        let got = Self.engine.detect(
            Self.prepared, queries: try QuerySyntax.parseLine("star, shape@\(threshold)").queries)
        var high = SuppressionOptions()
        high.confidence = threshold
        let atHigh = Self.engine.detect(Self.prepared, queries: ["star", "shape"], options: high)
        #expect(
            Self.boxes(got)
                == (Self.boxes(atDefault).filter { $0.hasPrefix("star ") }
                + Self.boxes(atHigh).filter { $0.hasPrefix("shape ") })
                .sorted())
        let kept = got.detections.filter { $0.label == "shape" }.count
        #expect(kept > 0 && kept < shapes.count && got.detections.contains { $0.label == "star" })
    }

    /// `-star`: never reported; a box it outscores with IoU above the NMS threshold goes (per query NMS), or
    /// it suppresses like any query (agnostic).
    @Test(arguments: [false, true])
    func negativeQueriesRemoveWhatTheyOutscore(agnostic: Bool) throws {
        var options = SuppressionOptions()
        options.agnostic = agnostic
        let got = Self.engine.detect(
            Self.prepared, queries: try QuerySyntax.parseLine("shape, -star").queries, options: options)
        let plain = Self.engine.detect(Self.prepared, queries: ["shape", "star"], options: options).detections
        let stars = plain.filter { $0.label == "star" }
        var expected = plain.filter { $0.label == "shape" }
        if !agnostic {
            expected.removeAll { shape in
                stars.contains { star in
                    let a = star.box, b = shape.box
                    let w = max(min(a[2], b[2]) - max(a[0], b[0]), 0), h = max(min(a[3], b[3]) - max(a[1], b[1]), 0)
                    let iou = w * h / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - w * h)
                    return star.score > shape.score && iou > 0.7
                }
            }
        }
        #expect(expected.count < plain.filter { $0.label == "shape" }.count || agnostic, "the negative removes a box")
        #expect(got.detections.map(\.box) == expected.map(\.box))
        #expect(got.detections.allSatisfy { $0.label == "shape" && $0.queryIndex == 0 })
        #expect(!got.detections.isEmpty)
    }
}
