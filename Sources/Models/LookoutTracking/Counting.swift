/// Counting tracked objects as Roboflow's `supervision` does it (0.31): crossings of a line (`LineZone`) and
/// occupancy of a polygon (`PolygonZone`), fed each frame's tracked boxes.

/// A line's crossings per class and direction (`supervision.LineZone` with its defaults: the four corners of a
/// box trigger, one frame on the new side confirms a crossing).
public struct LineCounter: Sendable {
    public let start: (x: Double, y: Double)
    public let end: (x: Double, y: Double)
    /// Crossings from the right of the line (start → end) to its left, per class; and the other way.
    public private(set) var into: [Int: Int] = [:]
    public private(set) var outOf: [Int: Int] = [:]

    private let startLimit: (start: (x: Double, y: Double), end: (x: Double, y: Double))
    private let endLimit: (start: (x: Double, y: Double), end: (x: Double, y: Double))
    private var history: [Int: [Bool]] = [:]
    private var confirmedSide: [Int: Bool] = [:]
    private var absent: [Int: Int] = [:]
    private static let historyLength = 2
    /// Whether a track's side of the line is kept for as long as its id lives (the tracker keeps a hidden track
    /// for its buffer and never reuses an id), so that a crossing made while hidden counts when it shows again.
    /// Off by default: supervision forgets the side after 2 frames without the track.
    public var keepsSides = false

    /// A line of zero length is refused.
    public init?(from start: (x: Double, y: Double), to end: (x: Double, y: Double)) {
        let dx = end.x - start.x
        let dy = end.y - start.y
        let magnitude = (dx * dx + dy * dy).squareRoot()
        guard magnitude > 0 else { return nil }
        self.start = start
        self.end = end
        let perpendicular = (x: -(dy / magnitude), y: dx / magnitude)
        startLimit = (start, (start.x + perpendicular.x, start.y + perpendicular.y))
        endLimit = (end, (end.x - perpendicular.x, end.y - perpendicular.y))
    }

    public var totalIn: Int { into.values.reduce(0, +) }
    public var totalOut: Int { outOf.values.reduce(0, +) }

    /// The frame's tracked boxes (x1, y1, x2, y2) with their ids and classes; returns which crossed in and out.
    public mutating func update(_ tracks: [(box: [Float], id: Int, label: Int)]) -> (in: [Bool], out: [Bool]) {
        var crossedIn = [Bool](repeating: false, count: tracks.count)
        var crossedOut = crossedIn
        evict(present: Set(tracks.map(\.id)))
        for (i, track) in tracks.enumerated() {
            let b = track.box.map { Double($0) }
            let anchors = [(b[0], b[1]), (b[2], b[1]), (b[0], b[3]), (b[2], b[3])]
            let inLimits = anchors.allSatisfy {
                (Self.cross($0, startLimit) > 0) == (Self.cross($0, endLimit) > 0)
            }
            guard inLimits else { continue }
            let sides = anchors.map { Self.cross($0, (start, end)) < 0 }
            let left = sides.contains(true)
            let right = sides.contains(false)
            if left && right { continue }
            var runs = history[track.id, default: []]
            runs.append(left)
            if runs.count > Self.historyLength { runs.removeFirst(runs.count - Self.historyLength) }
            history[track.id] = runs
            let confirmed = confirmedSide[track.id] ?? left
            confirmedSide[track.id] = confirmed
            guard runs.count >= Self.historyLength, left != confirmed else { continue }
            guard runs.dropFirst().allSatisfy({ $0 == left }) else { continue }
            confirmedSide[track.id] = left
            if left {
                into[track.label, default: 0] += 1
                crossedIn[i] = true
            } else {
                outOf[track.label, default: 0] += 1
                crossedOut[i] = true
            }
        }
        return (crossedIn, crossedOut)
    }

    /// A frame without tracks (or without ids) still ages the history.
    public mutating func updateEmpty() { evict(present: []) }

    private mutating func evict(present: Set<Int>) {
        guard !keepsSides else { return }
        for key in Array(history.keys) {
            if present.contains(key) {
                absent[key] = nil
            } else {
                let frames = (absent[key] ?? 0) + 1
                if frames >= Self.historyLength {
                    history[key] = nil
                    confirmedSide[key] = nil
                    absent[key] = nil
                } else {
                    absent[key] = frames
                }
            }
        }
    }

    /// The z of (vector) × (point − vector start): positive to the left of the direction, negative to the right.
    static func cross(
        _ point: (Double, Double), _ vector: (start: (x: Double, y: Double), end: (x: Double, y: Double))
    )
        -> Double
    {
        let vx = vector.end.x - vector.start.x
        let vy = vector.end.y - vector.start.y
        let dx = point.0 - vector.start.x
        let dy = point.1 - vector.start.y
        return vx * dy - vy * dx
    }
}

/// How many tracked objects stand in a polygon (`supervision.PolygonZone` with its defaults: a box's bottom
/// centre, rounded to the nearest pixel (halves to even), inside the polygon's pixels, its edges included).
public struct ZoneCounter: Sendable {
    public let polygon: [(x: Int, y: Int)]

    /// At least three vertices, in pixels.
    public init?(polygon: [(x: Int, y: Int)]) {
        guard polygon.count >= 3 else { return nil }
        self.polygon = polygon
    }

    /// Which of the boxes (x1, y1, x2, y2) are in the zone.
    public func contains(_ boxes: [[Float]]) -> [Bool] {
        boxes.map { box in
            let x = ((box[0] + box[2]) / 2).rounded(.toNearestOrEven)
            let y = box[3].rounded(.toNearestOrEven)
            guard x.isFinite, y.isFinite, x >= 0, y >= 0 else { return false }
            return covers(x: Int(x), y: Int(y))
        }
    }

    /// Whether the pixel (x, y) is among the polygon's pixels as OpenCV's `fillPoly` (8-connected, what
    /// supervision's `polygon_to_mask` calls) makes them: inside by the even-odd rule, or on one of the edges as
    /// `cv2.line` draws them.
    public func covers(x: Int, y: Int) -> Bool {
        var inside = false
        var j = polygon.count - 1
        for i in polygon.indices {
            let (a, b) = (polygon[j], polygon[i])
            if Self.onLine(from: a, to: b, x: x, y: y) { return true }
            if (a.y > y) != (b.y > y) {
                // The edge's x at height y, compared without division.
                let lhs = (x - a.x) * (b.y - a.y)
                let rhs = (b.x - a.x) * (y - a.y)
                if (b.y - a.y > 0) ? lhs < rhs : lhs > rhs { inside.toggle() }
            }
            j = i
        }
        return inside
    }

    /// Whether (x, y) is a pixel of the 8-connected line OpenCV draws from p to q: walked from the left end
    /// along the longer axis, the other coordinate is j·d/D rounded to nearest with halves toward the start.
    static func onLine(from p: (x: Int, y: Int), to q: (x: Int, y: Int), x: Int, y: Int) -> Bool {
        let (a, b) = q.x < p.x ? (q, p) : (p, q)
        let dx = b.x - a.x
        let dy = b.y - a.y
        let sign = dy >= 0 ? 1 : -1
        let rise = abs(dy)
        // ceil((2·j·d − D) / (2·D)): j·d/D rounded, halves down.
        func rounded(_ j: Int, _ d: Int, _ major: Int) -> Int {
            let numerator = 2 * j * d - major
            let denominator = 2 * major
            return numerator >= 0 ? (numerator + denominator - 1) / denominator : -((-numerator) / denominator)
        }
        if rise <= dx {
            guard a.x <= x, x <= b.x else { return false }
            if dx == 0 { return x == a.x && y == a.y }
            return y == a.y + sign * rounded(x - a.x, rise, dx)
        }
        let j = (y - a.y) * sign
        guard 0 <= j, j <= rise else { return false }
        return x == a.x + rounded(j, dx, rise)
    }
}
