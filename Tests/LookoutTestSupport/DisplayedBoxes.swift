import LookoutJSON

/// Which boxes of a best-first list a search shows: greedily, each box unless its IoU with a box kept before
/// it exceeds 0.7 (the rule `PhotoIndex.displayedOverlap` states). Written here, apart from Lookout's code,
/// so that the reference's full lists of regions can be held against what searches show.
public enum DisplayedBoxes {
    public static let overlap = 0.7

    public static func iou(_ a: [Double], _ b: [Double]) -> Double {
        let width = max(0, min(a[2], b[2]) - max(a[0], b[0]))
        let height = max(0, min(a[3], b[3]) - max(a[1], b[1]))
        let intersection = width * height
        let union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - intersection
        return union > 0 ? intersection / union : 0
    }

    /// Indices of the boxes shown, in order.
    public static func kept(_ boxes: [[Double]]) -> [Int] {
        var kept: [Int] = []
        for (k, box) in boxes.enumerated() where !kept.contains(where: { iou(boxes[$0], box) > overlap }) {
            kept.append(k)
        }
        return kept
    }

    /// The shown entries of a reference's `detections` array (objects with a `box`).
    public static func kept(detections: JSONNode) -> [JSONNode] {
        let nodes = (0..<detections.count).map { detections[$0] }
        let boxes = nodes.map { node in (0..<node["box"]!.count).map { node["box"]![$0].number! } }
        return kept(boxes).map { nodes[$0] }
    }
}
