import Foundation
import LookoutJSON
import LookoutSupport
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
    /// scores equal within the tolerance. Both lists must be non-empty: an empty reference proves nothing.
    static func expectSame(
        _ actual: [Detection], _ expected: [Detection], score: Double, box: Double, _ name: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(!expected.isEmpty, "\(name): empty reference", sourceLocation: sourceLocation)
        #expect(
            actual.count == expected.count,
            "\(name): \(actual.count) vs \(expected.count) detections\n\(actual)\n\(expected)",
            sourceLocation: sourceLocation)
        var start = 0
        while start < min(actual.count, expected.count) {
            var end = start + 1
            while end < expected.count && abs(expected[end].score - expected[start].score) <= score { end += 1 }
            var unmatched = Array(actual[start..<min(end, actual.count)])
            for e in expected[start..<end] {
                let match = unmatched.firstIndex { a in
                    a.label == e.label && (a.query < 0 || e.query < 0 || a.query == e.query)
                        && abs(a.score - e.score) <= score && zip(a.box, e.box).allSatisfy { abs($0 - $1) <= box }
                }
                #expect(match != nil, "\(name): no match for \(e) in \(unmatched)", sourceLocation: sourceLocation)
                if let match { unmatched.remove(at: match) }
            }
            start = end
        }
    }

    /// The JSON objects of a command's standard output, one per line.
    static func lines(_ stdout: String) throws -> [JSONNode] {
        try stdout.split(separator: "\n").map { try JSONDocument(text: String($0)).root }
    }
}
