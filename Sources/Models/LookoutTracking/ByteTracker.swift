/// ByteTrack as ultralytics' `BYTETracker` computes it (ultralytics 8.4, `bytetrack.yaml`): given the same
/// detections frame by frame, the same track ids, in the same order, with the same Kalman boxes. Its two-stage
/// association, activation rules, lost-track buffer and list bookkeeping (quirks included) follow the
/// reference line by line; arithmetic is done in the precision numpy does it in (boxes and IoU in float32, the
/// Kalman filter in float64).
///
/// With `Settings.method = .botSort` it is ultralytics' `BOTSORT` without re-identification (`botsort.yaml`,
/// `with_reid: False`), which ultralytics builds on the same tracker: a Kalman filter over centre, width and
/// height, both velocities of the size cleared for tracks not seen last frame, and the camera's motion (a warp
/// from `CameraMotion`, given with each frame) applied to the predicted tracks before they are matched.
public final class ByteTracker {
    public enum Method: String, Sendable, CaseIterable {
        case byteTrack = "bytetrack"
        case botSort = "botsort"
    }

    /// `bytetrack.yaml` (the thresholds are the same in `botsort.yaml`).
    public struct Settings: Sendable, Equatable {
        public var method = Method.byteTrack
        /// First association: detections at or above this score.
        public var highThreshold: Float = 0.25
        /// Second association: detections above this and below `highThreshold`.
        public var lowThreshold: Float = 0.1
        /// A detection left unmatched starts a track only at or above this score.
        public var newTrackThreshold: Float = 0.25
        /// Frames a lost track is kept for (`track_buffer`).
        public var buffer = 30
        /// The first association's cost limit (`match_thresh`).
        public var matchThreshold = 0.8
        /// Whether the first association's IoU is weighted by the detection's score (`fuse_score`).
        public var fuseScore = true

        public init() {}
    }

    /// One detection of a frame: its box (x1, y1, x2, y2 in pixels), score and class.
    public struct Detection: Sendable, Equatable {
        public var box: [Float]
        public var score: Float
        public var label: Int

        public init(box: [Float], score: Float, label: Int) {
            self.box = box
            self.score = score
            self.label = label
        }
    }

    /// A track reported for a frame: the Kalman filter's box (x1, y1, x2, y2), the id, and the score, class and
    /// index (in the frame's detections) of the detection it last matched.
    public struct Track: Sendable, Equatable {
        public var box: [Float]
        public var id: Int
        public var score: Float
        public var label: Int
        public var detection: Int
    }

    /// What a frame shows, as ultralytics' `track()` reports it: the confirmed tracks; or, when there are none,
    /// nothing while a new track waits for confirmation, else the frame's detections as they came (no ids).
    public enum Frame: Sendable, Equatable {
        case tracks([Track])
        case hidden
        case untracked
    }

    public let settings: Settings
    public private(set) var frame = 0
    private var tracked: [Tracklet] = []
    private var lost: [Tracklet] = []
    private var removed: [Tracklet] = []
    private var lastId = 0
    private let filter: KalmanBoxFilter

    public init(settings: Settings = Settings()) {
        self.settings = settings
        filter = KalmanBoxFilter(layout: settings.method == .botSort ? .widthHeight : .aspectHeight)
    }

    /// Starts again: no tracks, ids from 1 (ultralytics does this for each new video).
    public func reset() {
        tracked = []
        lost = []
        removed = []
        frame = 0
        lastId = 0
    }

    /// Takes the next frame's detections and says what the frame shows. `warp` is the camera's motion since the
    /// previous frame (BoT-SORT; nil: none applied, as ultralytics does without a picture).
    public func update(_ detections: [Detection], warp: CameraWarp? = nil) -> Frame {
        let tracks = step(detections, warp: warp)
        if !tracks.isEmpty { return .tracks(tracks) }
        return tracked.contains { !$0.isActivated } ? .hidden : .untracked
    }

    /// `BYTETracker.update`: the confirmed tracks after this frame, in the tracker's order.
    func step(_ detections: [Detection], warp: CameraWarp? = nil) -> [Track] {
        frame += 1
        var activated: [Tracklet] = []
        var refound: [Tracklet] = []
        var newlyLost: [Tracklet] = []
        var newlyRemoved: [Tracklet] = []

        var high: [Tracklet] = []
        var low: [Tracklet] = []
        let layout = filter.layout
        for (index, detection) in detections.enumerated() {
            let tracklet = Tracklet(detection: detection, index: index, layout: layout)
            let (w, h) = (tracklet.centreBox[2], tracklet.centreBox[3])
            guard w > 0 && h > 0 else { continue }
            if detection.score >= settings.highThreshold {
                high.append(tracklet)
            } else if detection.score > settings.lowThreshold {
                low.append(tracklet)
            }
        }

        let unconfirmed = tracked.filter { !$0.isActivated }
        let confirmed = tracked.filter { $0.isActivated }
        let pool = Self.joined(confirmed, lost)
        for tracklet in pool {
            var state = tracklet.kalman!
            if tracklet.state != .tracked {
                if settings.method == .botSort { state.mean[6] = 0 }
                state.mean[7] = 0
            }
            tracklet.kalman = filter.predict(state)
        }
        if settings.method == .botSort, let warp {
            for tracklet in pool + unconfirmed { tracklet.kalman = Self.moved(tracklet.kalman!, by: warp) }
        }

        // First association: every confirmed or lost track against the confident detections.
        let first = Assignment.solve(
            costs(pool, high, fuse: settings.fuseScore), rows: pool.count, columns: high.count,
            threshold: settings.matchThreshold)
        for (row, column) in first.matches {
            apply(pool[row], high[column], activated: &activated, refound: &refound)
        }

        // Second association: the tracks still unmatched that were tracked last frame, against the doubtful
        // detections, by IoU alone.
        let remaining = first.unmatchedRows.map { pool[$0] }.filter { $0.state == .tracked }
        var stillUnmatched = Array(remaining.indices)
        if !remaining.isEmpty && !low.isEmpty {
            let second = Assignment.solve(
                costs(remaining, low, fuse: false), rows: remaining.count, columns: low.count, threshold: 0.5)
            for (row, column) in second.matches {
                apply(remaining[row], low[column], activated: &activated, refound: &refound)
            }
            stillUnmatched = second.unmatchedRows
        }
        for row in stillUnmatched {
            remaining[row].state = .lost
            newlyLost.append(remaining[row])
        }

        // Tracks seen in one frame only get one more chance, against the confident detections left.
        let left = first.unmatchedColumns.map { high[$0] }
        var leftUnmatched = Array(left.indices)
        if !unconfirmed.isEmpty {
            let third = Assignment.solve(
                costs(unconfirmed, left, fuse: settings.fuseScore), rows: unconfirmed.count, columns: left.count,
                threshold: 0.7)
            for (row, column) in third.matches {
                unconfirmed[row].update(with: left[column], frame: frame, filter: filter)
                activated.append(unconfirmed[row])
            }
            for row in third.unmatchedRows {
                unconfirmed[row].state = .removed
                newlyRemoved.append(unconfirmed[row])
            }
            leftUnmatched = third.unmatchedColumns
        }

        // New tracks from confident detections nothing claimed.
        for column in leftUnmatched {
            let tracklet = left[column]
            guard tracklet.score >= settings.newTrackThreshold else { continue }
            lastId += 1
            tracklet.activate(id: lastId, frame: frame, filter: filter)
            activated.append(tracklet)
        }

        for tracklet in lost where frame - tracklet.frame > settings.buffer {
            tracklet.state = .removed
            newlyRemoved.append(tracklet)
        }

        // `merge_track_pools`, in its order (a track removed in this frame leaves the lost list next frame).
        tracked = tracked.filter { $0.state == .tracked }
        tracked = Self.joined(tracked, activated)
        tracked = Self.joined(tracked, refound)
        lost = Self.subtracted(lost, tracked)
        lost.append(contentsOf: newlyLost)
        lost = Self.subtracted(lost, removed)
        (tracked, lost) = Self.withoutDuplicates(tracked, lost)
        removed.append(contentsOf: newlyRemoved)
        if removed.count > 1000 { removed.removeFirst(removed.count - 1000) }

        return tracked.filter { $0.isActivated }.map { tracklet in
            Track(
                box: tracklet.corners.map { Float($0) }, id: tracklet.id, score: tracklet.score,
                label: tracklet.label, detection: tracklet.index)
        }
    }

    private func apply(_ track: Tracklet, _ detection: Tracklet, activated: inout [Tracklet], refound: inout [Tracklet])
    {
        if track.state == .tracked {
            track.update(with: detection, frame: frame, filter: filter)
            activated.append(track)
        } else {
            track.reactivate(with: detection, frame: frame, filter: filter)
            refound.append(track)
        }
    }

    /// `multi_gmc`: the state carried along by the camera's warp [R | t]. Centre and its velocity turn with R
    /// (the centre also moves by t); width and height, and their velocities, scale by |R| (element-wise).
    static func moved(_ state: KalmanBoxFilter.State, by warp: CameraWarp) -> KalmanBoxFilter.State {
        let w = warp.values
        let r = [w[0], w[1], w[3], w[4]]
        var big = [Double](repeating: 0, count: 64)  // R8: block-diagonal, 2×2 blocks
        for block in 0..<4 {
            let signed = block == 0 || block == 2
            for i in 0..<2 {
                for j in 0..<2 {
                    let value = r[i * 2 + j]
                    big[(block * 2 + i) * 8 + block * 2 + j] = signed ? value : abs(value)
                }
            }
        }
        var mean = [Double](repeating: 0, count: 8)
        for i in 0..<8 {
            var sum = 0.0
            for k in 0..<8 { sum += big[i * 8 + k] * state.mean[k] }
            mean[i] = sum
        }
        mean[0] += w[2]
        mean[1] += w[5]
        var left = [Double](repeating: 0, count: 64)
        for i in 0..<8 {
            for j in 0..<8 {
                var sum = 0.0
                for k in 0..<8 { sum += big[i * 8 + k] * state.covariance[k * 8 + j] }
                left[i * 8 + j] = sum
            }
        }
        var covariance = [Double](repeating: 0, count: 64)
        for i in 0..<8 {
            for j in 0..<8 {
                var sum = 0.0
                for k in 0..<8 { sum += left[i * 8 + k] * big[j * 8 + k] }
                covariance[i * 8 + j] = sum
            }
        }
        return KalmanBoxFilter.State(mean: mean, covariance: covariance)
    }

    /// 1 − IoU between tracks and detections (float32, as `matching.iou_distance`), optionally fused with the
    /// detections' scores (`matching.fuse_score`): 1 − (1 − cost)·score.
    private func costs(_ tracks: [Tracklet], _ detections: [Tracklet], fuse: Bool) -> [Double] {
        let a = tracks.map { $0.corners32 }
        let b = detections.map { $0.corners32 }
        var costs = [Double](repeating: 0, count: a.count * b.count)
        for i in a.indices {
            for j in b.indices {
                var cost: Float = 1 - Self.iou(a[i], b[j])
                if fuse { cost = 1 - (1 - cost) * detections[j].score }
                costs[i * b.count + j] = Double(cost)
            }
        }
        return costs
    }

    /// `bbox_ioa(..., iou=True)` in float32, eps 1e-7.
    static func iou(_ a: [Float], _ b: [Float]) -> Float {
        let w = max(min(a[2], b[2]) - max(a[0], b[0]), 0)
        let h = max(min(a[3], b[3]) - max(a[1], b[1]), 0)
        let intersection = w * h
        let areaB = (b[2] - b[0]) * (b[3] - b[1])
        let areaA = (a[2] - a[0]) * (a[3] - a[1])
        let union = areaB + areaA - intersection
        return intersection / (union + Float(1e-7))
    }

    static func joined(_ a: [Tracklet], _ b: [Tracklet]) -> [Tracklet] {
        let ids = Set(a.map(\.id))
        return a + b.filter { !ids.contains($0.id) }
    }

    static func subtracted(_ a: [Tracklet], _ b: [Tracklet]) -> [Tracklet] {
        let ids = Set(b.map(\.id))
        return a.filter { !ids.contains($0.id) }
    }

    /// `remove_duplicate_stracks`: a tracked and a lost track overlapping by IoU > 0.85 keep the older one.
    static func withoutDuplicates(_ a: [Tracklet], _ b: [Tracklet]) -> ([Tracklet], [Tracklet]) {
        var dropA = Set<Int>()
        var dropB = Set<Int>()
        let boxesB = b.map(\.corners32)
        for (p, first) in a.enumerated() {
            let box = first.corners32
            for (q, second) in b.enumerated() where 1 - iou(box, boxesB[q]) < 0.15 {
                if first.frame - first.startFrame > second.frame - second.startFrame {
                    dropB.insert(q)
                } else {
                    dropA.insert(p)
                }
            }
        }
        return (
            a.enumerated().filter { !dropA.contains($0.offset) }.map(\.element),
            b.enumerated().filter { !dropB.contains($0.offset) }.map(\.element)
        )
    }
}

/// One track (`STrack`): a detection until activated, then a Kalman state.
final class Tracklet {
    enum State { case new, tracked, lost, removed }

    var id = 0
    var state = State.new
    var isActivated = false
    var score: Float
    var label: Int
    var index: Int
    var frame = 0
    var startFrame = 0
    var length = 0
    /// The detection's box as centre x, y, width, height (float32, as `Boxes.xywh`).
    let centreBox: [Float]
    /// Its top-left x, y, width, height (computed in float64 and stored as float32, as `STrack._tlwh`).
    let detectionBox: [Float]
    var kalman: KalmanBoxFilter.State?
    let layout: KalmanBoxFilter.Layout

    init(detection: ByteTracker.Detection, index: Int, layout: KalmanBoxFilter.Layout = .aspectHeight) {
        self.layout = layout
        let b = detection.box
        centreBox = [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2, b[2] - b[0], b[3] - b[1]]
        let c = centreBox.map { Double($0) }
        detectionBox = [Float(c[0] - c[2] / 2), Float(c[1] - c[3] / 2), centreBox[2], centreBox[3]]
        score = detection.score
        label = detection.label
        self.index = index
    }

    /// The box as centre x, y, aspect ratio, height (`tlwh_to_xyah`) or centre x, y, width, height
    /// (`tlwh_to_xywh`): computed in float32 from the top-left form.
    var measurement: [Double] {
        let t = detectionBox
        let x = t[0] + t[2] / 2
        let y = t[1] + t[3] / 2
        switch layout {
        case .aspectHeight: return [Double(x), Double(y), Double(t[2] / t[3]), Double(t[3])]
        case .widthHeight: return [Double(x), Double(y), Double(t[2]), Double(t[3])]
        }
    }

    /// x1, y1, x2, y2: from the Kalman mean (float64) once there is one, else from the detection (float32).
    var corners: [Double] {
        guard let mean = kalman?.mean else {
            let t = detectionBox
            return [Double(t[0]), Double(t[1]), Double(t[0] + t[2]), Double(t[1] + t[3])]
        }
        let w = layout == .aspectHeight ? mean[2] * mean[3] : mean[2]
        let h = mean[3]
        let x = mean[0] - w / 2
        let y = mean[1] - h / 2
        return [x, y, x + w, y + h]
    }

    /// `corners` as the float32 array `iou_distance` compares.
    var corners32: [Float] { corners.map { Float($0) } }

    func activate(id: Int, frame: Int, filter: KalmanBoxFilter) {
        self.id = id
        kalman = filter.initiate(measurement)
        length = 0
        state = .tracked
        if frame == 1 { isActivated = true }
        self.frame = frame
        startFrame = frame
    }

    func reactivate(with detection: Tracklet, frame: Int, filter: KalmanBoxFilter) {
        kalman = filter.update(kalman!, measurement: detection.measurement)
        length = 0
        state = .tracked
        isActivated = true
        self.frame = frame
        score = detection.score
        label = detection.label
        index = detection.index
    }

    func update(with detection: Tracklet, frame: Int, filter: KalmanBoxFilter) {
        self.frame = frame
        length += 1
        kalman = filter.update(kalman!, measurement: detection.measurement)
        state = .tracked
        isActivated = true
        score = detection.score
        label = detection.label
        index = detection.index
    }
}
