import LookoutJSON
import LookoutSupport
import LookoutTracking
import Testing

/// ByteTrack and the counts against the reference (`scripts/reference/make_tracking_fixtures.py`): ultralytics
/// 8.4.190's BYTETracker and supervision 0.31.2's LineZone and PolygonZone, run on detections Lookout recorded
/// from a generated video (examples/tracking/shapes.mp4) and on the same detections degraded (dropped,
/// doubtful, jittered, spurious, gaps), so that both associations, loss, re-finding, removal after the buffer,
/// confirmation and the frames without tracks all happen.
@Suite struct ByteTrackerTests {
    static let root: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path
    }()
    static let reference = try! JSONDocument(
        bytes: FileContents.read(root + "/Tests/Fixtures/tracking/bytetrack.json"))

    static func numbers(_ node: JSONNode) -> [Double] { (0..<node.count).map { node[$0].number! } }

    /// Runs a reference sequence (`frames`: each frame's detections, and what ultralytics' tracker showed)
    /// through `tracker` and compares every frame: what it shows, ids in order, scores, classes, detection
    /// indices; `warps` gives each frame's camera motion (BoT-SORT). Returns the largest box difference, the
    /// ids seen and the frames of each kind.
    static func compare(
        _ frames: JSONNode, sequence: String, tracker: ByteTracker, warps: (Int) -> CameraWarp? = { _ in nil }
    ) throws -> (box: Double, ids: Int, kinds: [String: Int]) {
        var worst = 0.0
        var ids = Set<Int>()
        var kinds: [String: Int] = [:]
        for f in 0..<frames.count {
            let frame = frames[f]
            let detections = (0..<frame["detections"]!.count).map { i in
                let row = numbers(frame["detections"]![i])
                return ByteTracker.Detection(
                    box: row[0..<4].map { Float($0) }, score: Float(row[4]), label: Int(row[5]))
            }
            let shown = tracker.update(detections, warp: warps(f))
            let kind = frame["kind"]!.string!
            kinds[kind, default: 0] += 1
            let expected = frame["tracks"]!
            switch shown {
            case .hidden: #expect(kind == "hidden", "\(sequence) frame \(f): hidden, the reference says \(kind)")
            case .untracked:
                #expect(kind == "untracked", "\(sequence) frame \(f): untracked, the reference says \(kind)")
            case .tracks(let tracks):
                try #require(kind == "tracks", "\(sequence) frame \(f): tracks, the reference says \(kind)")
                try #require(
                    tracks.map(\.id) == (0..<expected.count).map { Int(expected[$0][4].number!) },
                    "\(sequence) frame \(f): ids \(tracks.map(\.id))")
                for (i, track) in tracks.enumerated() {
                    let row = numbers(expected[i])
                    ids.insert(track.id)
                    #expect(Double(track.score) == Double(Float(row[5])))
                    #expect(track.label == Int(row[6]))
                    #expect(track.detection == Int(row[7]))
                    for k in 0..<4 { worst = max(worst, abs(Double(track.box[k]) - row[k])) }
                }
            }
        }
        return (worst, ids.count, kinds)
    }

    @Test(arguments: ["recorded", "stressed"])
    func idsAndBoxesEqualUltralytics(sequence: String) throws {
        let frames = Self.reference.root[sequence]!
        #expect(frames.count > 70)
        let (worst, ids, kinds) = try Self.compare(frames, sequence: sequence, tracker: ByteTracker())
        print("ByteTrack [\(sequence)]: \(ids) ids, frames \(kinds), max box difference \(worst) px")
        #expect(worst <= 1e-3)
        #expect(ids >= 7)
        if sequence == "stressed" {
            #expect(kinds["hidden", default: 0] > 0 && kinds["untracked", default: 0] > 0)
        }
    }

    @Test func lineAndZoneCountsEqualSupervision() throws {
        let root = Self.reference.root
        let frames = root["recorded"]!
        let counts = root["counts"]!
        let lines = root["lines"]!
        var counters = (0..<lines.count).map { i -> LineCounter in
            let l = Self.numbers(lines[i])
            return LineCounter(from: (l[0], l[1]), to: (l[2], l[3]))!
        }
        let zonePoints = root["zone"]!
        let zone = ZoneCounter(
            polygon: (0..<zonePoints.count).map { (Int(zonePoints[$0][0].number!), Int(zonePoints[$0][1].number!)) })!
        for f in 0..<frames.count {
            let rows = frames[f]["tracks"]!
            let tracks = (0..<rows.count).map { i -> (box: [Float], id: Int, label: Int) in
                let row = Self.numbers(rows[i])
                return (row[0..<4].map { Float($0) }, Int(row[4]), Int(row[6]))
            }
            let expected = counts[f]
            for l in counters.indices {
                if tracks.isEmpty { counters[l].updateEmpty() } else { _ = counters[l].update(tracks) }
                let want = expected["lines"]![l]
                for (direction, got) in [("in", counters[l].into), ("out", counters[l].outOf)] {
                    var wanted: [Int: Int] = [:]
                    want[direction]!.forEachMember { key, value in
                        wanted[Int(String(decoding: key, as: UTF8.self))!] = Int(value.int!)
                    }
                    #expect(got == wanted, "frame \(f) line \(l) \(direction): \(got) against \(wanted)")
                }
            }
            let inZone = zone.contains(tracks.map(\.box))
            let wantInZone = expected["in_zone"]!
            #expect(inZone == (0..<wantInZone.count).map { wantInZone[$0].bool! }, "frame \(f) zone")
            #expect(inZone.filter { $0 }.count == Int(expected["zone"]!.int!))
        }
        let crossings = counters.map { $0.totalIn + $0.totalOut }.reduce(0, +)
        print("Counts: \(crossings) line crossings over \(counters.count) lines")
        #expect(crossings >= 4, "the reference video should cross the lines")
    }

    @Test func assignmentLeavesCostlyPairsUnmatched() {
        // Row 0 fits column 1 well; row 1's only pair costs more than the limit: left alone.
        let result = Assignment.solve([0.9, 0.1, 0.95, 0.85], rows: 2, columns: 2, threshold: 0.8)
        #expect(result.matches.map { [$0.row, $0.column] } == [[0, 1]])
        #expect(result.unmatchedRows == [1] && result.unmatchedColumns == [0])
        // Two rows wanting one column: the cheaper total wins.
        let shared = Assignment.solve([0.2, 0.3, 0.25, 0.9], rows: 2, columns: 2, threshold: 0.8)
        #expect(shared.matches.map { [$0.row, $0.column] } == [[0, 1], [1, 0]])
        #expect(Assignment.solve([], rows: 0, columns: 3, threshold: 0.8).unmatchedColumns == [0, 1, 2])
    }

    /// Split into groups of cheap pairs, the problem gives the matches of the whole extended problem (dense
    /// costs, and sparse ones as boxes give: most pairs not overlapping at all).
    @Test func groupsGiveTheWholeProblemsMatches() {
        var state: UInt64 = 20_261_125
        func random() -> Double {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Double(state >> 11) / Double(1 << 53)
        }
        var differ = 0, matched = 0
        for trial in 0..<2000 {
            let rows = 1 + Int(random() * 12), columns = 1 + Int(random() * 12)
            let costs = (0..<(rows * columns)).map { _ in
                trial % 2 == 0 ? random() * 1.2 : (random() < 0.2 ? random() * 0.8 : 1.0)
            }
            let split = Assignment.solve(costs, rows: rows, columns: columns, threshold: 0.8)
            if split != Assignment.solveWhole(costs, rows: rows, columns: columns, threshold: 0.8) { differ += 1 }
            matched += split.matches.count
        }
        #expect(differ == 0)
        #expect(matched > 2000, "the problems match something")
    }
}

extension ByteTrackerTests {
    /// The zone's pixels equal supervision's mask (OpenCV's fillPoly) over its whole resolution, for convex,
    /// non-convex and self-crossing polygons.
    @Test func zonePixelsEqualSupervisionsMask() throws {
        let cases = Self.reference.root["zone_cases"]!
        #expect(cases.count >= 10)
        var pixels = 0
        for c in 0..<cases.count {
            let points = cases[c]["polygon"]!
            let zone = ZoneCounter(
                polygon: (0..<points.count).map { (Int(points[$0][0].int!), Int(points[$0][1].int!)) })!
            let rows = cases[c]["rows"]!
            var wrong = 0
            for y in 0..<rows.count {
                for (x, bit) in rows[y].string!.utf8.enumerated() {
                    pixels += 1
                    if zone.covers(x: x, y: y) != (bit == UInt8(ascii: "1")) { wrong += 1 }
                }
            }
            #expect(wrong == 0, "polygon \(c): \(wrong) pixels differ from supervision's mask")
        }
        print("Zone masks: \(pixels) pixels over \(cases.count) polygons")
    }
}
