import Foundation
import LookoutJSON
import LookoutSupport
import LookoutTestSupport
import Testing

/// Reference outputs computed by the reference implementations (scripts/demo/make_demo_fixtures.py,
/// scripts/demo/make_index_fixtures.py), and comparisons of the command line's JSON output with them.
enum Reference {
    struct Detection: CustomStringConvertible {
        var label: String
        var query: Int
        var score: Double
        var box: [Double]
        var description: String { "\(label)#\(query) \(score) \(box)" }
    }

    static let demo = try! JSONDocument(bytes: FileContents.read(CLI.root + "/Tests/Fixtures/demo/expected.json")).root
    static let index = try! JSONDocument(bytes: FileContents.read(CLI.root + "/Tests/Fixtures/index/expected.json"))
        .root

    static func strings(_ node: JSONNode) -> [String] { (0..<node.count).map { node[$0].string! } }
    static func numbers(_ node: JSONNode) -> [Double] { (0..<node.count).map { node[$0].number! } }

    static func demoQueries(_ set: String) -> [String] { strings(demo["query_sets"]![set]!) }

    /// A demo case's reference detections (`detections` of a threshold, or `options` of a name).
    static func demoDetections(_ node: JSONNode, queries: [String]) -> [Detection] {
        (0..<node.count).map { k in
            let e = node[k]
            let query = Int(e["query_index"]!.int!)
            return Detection(label: queries[query], query: query, score: e["score"]!.number!, box: numbers(e["box"]!))
        }
    }

    /// Detections of one `lookout detect --json` / `lookout query --json` object.
    static func detections(of object: JSONNode) -> [Detection] {
        let list = object["detections"]!
        return (0..<list.count).map { k in
            let d = list[k]
            return Detection(
                label: d["label"]!.string!, query: Int(d["query_index"]?.int ?? -1), score: d["score"]!.number!,
                box: numbers(d["box"]!))
        }
    }

    /// Tolerances of a demo case: ten times the reference's own float32 error, boxes in the photo's pixels.
    static func tolerances(case item: JSONNode, width: Int, height: Int) -> (score: Double, box: Double) {
        let shape = numbers(item["input_shape"]!)
        let gain = min(shape[0] / Double(height), shape[1] / Double(width))
        return (10 * item["reference_error_scores"]!.number!, 10 * item["reference_error_boxes"]!.number! / gain)
    }

    /// The same detections (label, query index where both have one, score, box), up to the order within runs of
    /// scores equal within the tolerance (``DetectionComparison``). The reference must be non-empty: an empty
    /// reference proves nothing.
    static func expectSame(
        _ actual: [Detection], _ expected: [Detection], score: Double, box: Double, _ name: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(!expected.isEmpty, "\(name): empty reference", sourceLocation: sourceLocation)
        func compared(_ list: [Detection]) -> [ComparedDetection] {
            list.map { ComparedDetection(query: $0.query, label: $0.label, score: $0.score, box: $0.box) }
        }
        let problems = DetectionComparison.mismatches(
            compared(actual), compared(expected), scoreTolerance: score, boxTolerance: box)
        #expect(problems.isEmpty, "\(name): \(problems)", sourceLocation: sourceLocation)
    }

    /// The JSON objects of a command's standard output, one per line.
    static func lines(_ stdout: String) throws -> [JSONNode] {
        try stdout.split(separator: "\n").map { try JSONDocument(text: String($0)).root }
    }
}
