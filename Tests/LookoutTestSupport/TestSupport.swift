/// Pieces the test suites share (a library target, so that several test targets can use it).

/// A detection as the comparisons see it: its query (by index, -1 when unknown), its label (when known), score
/// and box.
public struct ComparedDetection: CustomStringConvertible, Sendable {
    public var query: Int
    public var label: String?
    public var score: Double
    public var box: [Double]

    public init(query: Int, label: String? = nil, score: Double, box: [Double]) {
        self.query = query
        self.label = label
        self.score = score
        self.box = box
    }

    public var description: String { "\(label ?? "")#\(query) \(score) \(box)" }
}

public enum DetectionComparison {
    /// What differs between two detection lists, in words (empty when they are the same): the count, and each
    /// expected detection without a match. Order is compared up to runs of scores equal within
    /// `scoreTolerance` (saturated scores of 1.0 are exactly equal, and their order then follows float
    /// rounding): each run must hold the same detections, query for query (and label for label where both
    /// sides have one), scores within `scoreTolerance` and boxes within `boxTolerance`.
    public static func mismatches(
        _ actual: [ComparedDetection], _ expected: [ComparedDetection], scoreTolerance: Double, boxTolerance: Double
    ) -> [String] {
        var problems: [String] = []
        if actual.count != expected.count { problems.append("\(actual.count) vs \(expected.count) detections") }
        var start = 0
        while start < min(actual.count, expected.count) {
            var end = start + 1
            while end < expected.count && abs(expected[end].score - expected[start].score) <= scoreTolerance {
                end += 1
            }
            var unmatched = Array(actual[start..<min(end, actual.count)])
            for e in expected[start..<end] {
                let match = unmatched.firstIndex { a in
                    (a.query < 0 || e.query < 0 || a.query == e.query)
                        && (a.label == nil || e.label == nil || a.label == e.label)
                        && abs(a.score - e.score) <= scoreTolerance
                        && zip(a.box, e.box).allSatisfy { abs($0 - $1) <= boxTolerance }
                }
                if let match {
                    unmatched.remove(at: match)
                } else {
                    problems.append("no match for \(e) among positions \(start)..<\(end): \(unmatched)")
                }
            }
            start = end
        }
        return problems
    }
}

/// The repository the tests run from (this file is `Tests/LookoutTestSupport/TestSupport.swift` in it): where
/// the examples, fixtures, models and sources are.
public enum Repository {
    public static let root: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path
    }()
}
