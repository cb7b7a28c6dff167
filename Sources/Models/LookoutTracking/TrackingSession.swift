/// What `lookout track` (and the web page's camera view) do with each frame's detections: ByteTrack or BoT-SORT
/// (with the camera's motion estimated from the frame's pixels), then the line crossings and zone counts of the
/// tracks, and a short trail of where each track has been.
public final class TrackingSession {
    /// One box a frame shows: a track (with its id) or, in a frame ultralytics reports untracked, a detection.
    public struct Shown: Sendable, Equatable {
        public var box: [Float]
        public var score: Float
        public var label: Int
        /// nil for a detection shown without a track.
        public var id: Int?
        /// The index of the detection it came from, in the frame's detections.
        public var detection: Int
    }

    /// A zone's occupancy in a frame: in all, and per class.
    public struct ZoneCount: Sendable, Equatable {
        public var total: Int
        public var perLabel: [Int: Int]
    }

    public struct Frame: Sendable {
        public var shown: [Shown]
        /// Per line, crossings so far per class: into (right → left of start→end) and out of.
        public var lines: [(into: [Int: Int], outOf: [Int: Int])]
        public var zones: [ZoneCount]
    }

    public let tracker: ByteTracker
    /// BoT-SORT's global motion compensation (nil for ByteTrack).
    public let motion: CameraMotion?
    public private(set) var lines: [LineCounter]
    public let zones: [ZoneCounter]
    /// The most zone occupants seen in one frame, per zone.
    public private(set) var zonePeaks: [Int]
    /// Every track id reported so far.
    public private(set) var ids: Set<Int> = []
    /// Recent centres per track id (the last `trailLength` frames it was shown in).
    public private(set) var trails: [Int: [(x: Float, y: Float)]] = [:]
    public let trailLength: Int
    private var lastSeen: [Int: Int] = [:]

    public init(
        settings: ByteTracker.Settings = .init(), lines: [LineCounter] = [], zones: [ZoneCounter] = [],
        trailLength: Int = 30
    ) {
        tracker = ByteTracker(settings: settings)
        motion = settings.method == .botSort ? CameraMotion() : nil
        self.lines = lines
        self.zones = zones
        self.trailLength = trailLength
        zonePeaks = Array(repeating: 0, count: zones.count)
    }

    /// The next frame: its detections and, for BoT-SORT's camera motion, its pixels (interleaved BGR, as Lookout decodes them).
    public func update(_ detections: [ByteTracker.Detection], bgr: [UInt8], width: Int, height: Int) -> Frame {
        update(detections, warp: motion?.estimate(bgr: bgr, width: width, height: height))
    }

    /// The next frame: its detections and the camera's motion since the last one (nil: none applied).
    public func update(_ detections: [ByteTracker.Detection], warp: CameraWarp? = nil) -> Frame {
        var shown: [Shown] = []
        var tracks: [(box: [Float], id: Int, label: Int)] = []
        switch tracker.update(detections, warp: warp) {
        case .tracks(let list):
            for track in list {
                shown.append(
                    Shown(
                        box: track.box, score: track.score, label: track.label, id: track.id, detection: track.detection
                    ))
                tracks.append((track.box, track.id, track.label))
            }
        case .hidden:
            break
        case .untracked:
            shown = detections.enumerated().map {
                Shown(
                    box: $0.element.box, score: $0.element.score, label: $0.element.label, id: nil, detection: $0.offset
                )
            }
        }
        for i in lines.indices {
            if tracks.isEmpty { lines[i].updateEmpty() } else { _ = lines[i].update(tracks) }
        }
        var counts: [ZoneCount] = []
        for (z, zone) in zones.enumerated() {
            let inside = zone.contains(tracks.map(\.box))
            var perLabel: [Int: Int] = [:]
            for (track, isInside) in zip(tracks, inside) where isInside { perLabel[track.label, default: 0] += 1 }
            let total = inside.filter { $0 }.count
            zonePeaks[z] = max(zonePeaks[z], total)
            counts.append(ZoneCount(total: total, perLabel: perLabel))
        }
        for track in tracks {
            lastSeen[track.id] = tracker.frame
            ids.insert(track.id)
            var trail = trails[track.id, default: []]
            trail.append(((track.box[0] + track.box[2]) / 2, (track.box[1] + track.box[3]) / 2))
            if trail.count > trailLength { trail.removeFirst(trail.count - trailLength) }
            trails[track.id] = trail
        }
        // A track not shown for the trail's length is forgotten.
        for (id, frame) in lastSeen where tracker.frame - frame > trailLength {
            trails[id] = nil
            lastSeen[id] = nil
        }
        return Frame(shown: shown, lines: lines.map { ($0.into, $0.outOf) }, zones: counts)
    }
}
