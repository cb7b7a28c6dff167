import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutWeights
import Testing

/// The whole pipeline from the photo file (decode, letterbox, network, NMS, original pixels) against
/// ultralytics predict on the same file, and re-query against a fresh run.
@Suite struct EngineTests {
    static let engine = try! Engine(network: NetworkParityTests.network, embedder: nil)

    @Test(arguments: [("n-rocket-416-queries", "rocket.jpg", 416), ("n-chelsea-352-queries", "chelsea.jpg", 352)])
    func fromTheFileMatchesUltralyticsPredict(fixture: String, photo: String, size: Int) throws {
        let file = try SuppressionTests.reference(fixture)
        let text = try file.view("text")
        let labels = (0..<text.shape[1]).map { "query \($0)" }
        let prepared = try Self.engine.prepare(path: NetworkParityTests.root + "/examples/photos/" + photo, size: size)
        #expect(prepared.letterbox.height == (try file.view("input")).shape[2])
        for (confidence, key) in [(Float(0.25), "detections_conf025"), (0.05, "detections_conf005")] {
            var options = SuppressionOptions()
            options.confidence = confidence
            let result = Self.engine.detect(prepared, labels: labels, text: text.floats(), options: options)
            let expected = SuppressionTests.detections(try file.view(key))
            #expect(result.detections.count == expected.count, "\(fixture) conf \(confidence)")
            for (a, e) in zip(result.detections, expected) {
                #expect(a.queryIndex == e.classIndex && abs(a.score - e.score) <= 1e-4)
                #expect(zip(a.box, e.box).allSatisfy { abs($0 - $1) <= 0.01 }, "\(a.box) vs \(e.box)")
            }
        }
    }

    @Test func requeryEqualsAFreshRun() throws {
        let file = try SuppressionTests.reference("n-rocket-416-queries")
        let text = try file.view("text").floats()
        let path = NetworkParityTests.root + "/examples/photos/rocket.jpg"
        let prepared = try Self.engine.prepare(path: path, size: 416)
        var options = SuppressionOptions()
        options.confidence = 0.05
        let labels = ["a", "b", "c", "d", "e"]
        _ = Self.engine.detect(
            prepared, labels: Array(labels.prefix(2)), text: Array(text.prefix(2 * 512)), options: options)
        let requery = Self.engine.detect(prepared, labels: labels, text: text, options: options)
        let fresh = Self.engine.detect(
            try Self.engine.prepare(path: path, size: 416), labels: labels, text: text, options: options)
        #expect(requery.detections == fresh.detections)
        #expect(!fresh.detections.isEmpty)
    }

    @Test func queryParsing() {
        let (queries, empty) = parseQueries(" dog, red car,, dog ,  , cat ")
        #expect(queries == ["dog", "red car", "cat"])
        #expect(empty == 2)
    }
}
