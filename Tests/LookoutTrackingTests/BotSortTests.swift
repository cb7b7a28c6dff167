import LookoutImage
import LookoutJSON
import LookoutSupport
import LookoutTracking
import LookoutVideo
import Testing

/// BoT-SORT against the reference (`scripts/reference/make_botsort_fixtures.py`): ultralytics 8.4.190's BOTSORT
/// (botsort.yaml, no ReID, sparse-optical-flow GMC in opencv-python 5.0) on detections Lookout recorded from a
/// video seen by a moving camera (examples/tracking/camera.mp4), and on the same detections degraded.
@Suite struct BotSortTests {
    static let reference = try! JSONDocument(
        bytes: FileContents.read(ByteTrackerTests.root + "/Tests/Fixtures/tracking/botsort.json"))
    static let numbers = ByteTrackerTests.numbers

    /// The video's frames, decoded as `lookout track` decodes them.
    static let frames: [Image] = {
        let reader = try! VideoReader(path: ByteTrackerTests.root + "/" + reference.root["video"]!.string!)
        var images: [Image] = []
        while let frame = try! reader.next() { images.append(frame.image) }
        return images
    }()

    static func grey(_ image: Image) -> GreyPicture {
        GreyPicture(bgr: image.pixels, width: image.width, height: image.height).reduced(by: 2)
    }

    static func warp(_ node: JSONNode?) -> CameraWarp? {
        guard let node, node.count == 2 else { return nil }
        return CameraWarp(numbers(node[0]) + numbers(node[1]))
    }

    /// Runs a sequence through BoT-SORT and compares each frame with the reference's; returns the largest box
    /// difference and the ids seen. `warps` gives each frame's camera motion.
    static func compare(_ sequence: String, warps: (Int) -> CameraWarp?) throws -> (box: Double, ids: Int) {
        var settings = ByteTracker.Settings()
        settings.method = .botSort
        let (box, ids, _) = try ByteTrackerTests.compare(
            reference.root[sequence]!, sequence: sequence, tracker: ByteTracker(settings: settings), warps: warps)
        return (box, ids)
    }

    /// The tracker alone: given the warps ultralytics' GMC estimated, the same ids and Kalman boxes.
    @Test(arguments: ["recorded", "stressed"])
    func idsAndBoxesEqualUltralyticsGivenItsWarps(sequence: String) throws {
        let frames = Self.reference.root[sequence]!
        let (worst, ids) = try Self.compare(sequence) { Self.warp(frames[$0]["warp"]) }
        print("BoT-SORT [\(sequence)], reference warps: \(ids) ids, max box difference \(worst) px")
        #expect(worst <= 1e-3)
        #expect(ids >= 6)
    }

    /// Decoding and the grey half-size picture: the very pixels OpenCV's GMC looked at.
    @Test func greyPicturesEqualOpenCVs() throws {
        let sums = Self.reference.root["grey_sums"]!
        try #require(Self.frames.count == sums.count)
        for (f, image) in Self.frames.enumerated() {
            let grey = Self.grey(image)
            var total = 0.0
            var weighted = 0.0
            for y in 0..<grey.height {
                for x in 0..<grey.width {
                    let value = Double(grey.pixels[y * grey.width + x])
                    total += value
                    weighted += value * Double((x * 7 + y * 13) % 101)
                }
            }
            let expected = Self.numbers(sums[f])
            #expect(total == expected[0] && weighted == expected[1], "frame \(f)")
        }
    }

    /// Each step of the motion estimate against OpenCV's on the first frames: the same corners in the same
    /// order, the same points followed and lost (positions to the last bit: the fixed-point interpolation and
    /// the float sums in OpenCV's order), and the warp (to 1e-5: the refinement's geodesic step is noise).
    @Test func motionStepsEqualOpenCVs() throws {
        let steps = Self.reference.root["gmc_steps"]!
        var previous = Self.grey(Self.frames[0])
        var worstPoint = 0.0
        var worstWarp = 0.0
        for s in 0..<steps.count {
            let step = steps[s]
            let corners = CameraMotion.corners(previous)
            let expectedCorners = step["corners"]!
            try #require(corners.count == expectedCorners.count, "step \(s): \(corners.count) corners")
            for (i, corner) in corners.enumerated() {
                let e = Self.numbers(expectedCorners[i])
                try #require(Double(corner.x) == e[0] && Double(corner.y) == e[1], "step \(s) corner \(i)")
            }
            let next = Self.grey(Self.frames[s + 1])
            let moved = CameraMotion.follow(corners, from: previous, to: next)
            let expectedMoved = step["moved"]!
            let status = Self.numbers(step["status"]!)
            var from: [(x: Float, y: Float)] = []
            var to: [(x: Float, y: Float)] = []
            for (i, point) in moved.enumerated() {
                try #require((point != nil) == (status[i] == 1), "step \(s) point \(i): lost or not")
                guard let point else { continue }
                let e = Self.numbers(expectedMoved[i])
                worstPoint = max(worstPoint, abs(Double(point.x) - e[0]), abs(Double(point.y) - e[1]))
                from.append(corners[i])
                to.append(point)
            }
            let warp = try #require(CameraMotion.similarity(from: from, to: to))
            let expected = try #require(Self.warp(step["warp"]))
            for k in 0..<6 { worstWarp = max(worstWarp, abs(warp.values[k] - expected.values[k])) }
            previous = next
        }
        print("GMC steps: points within \(worstPoint) px, warps within \(worstWarp)")
        #expect(worstPoint == 0)
        #expect(worstWarp <= 1e-5)
    }

    /// The whole of it: Lookout's own motion estimate from the decoded frames gives ultralytics' ids.
    @Test(arguments: ["recorded", "stressed"])
    func idsEqualUltralyticsWithLookoutsMotion(sequence: String) throws {
        let frames = Self.reference.root[sequence]!
        let repeats = Int(Self.reference.root["stressed_repeats_first_picture"]!.number!)
        let pictures =
            sequence == "stressed" ? Array(repeating: Self.frames[0], count: repeats) + Self.frames : Self.frames
        try #require(pictures.count == frames.count)
        let motion = CameraMotion()
        var warps: [CameraWarp] = []
        var worstWarp = 0.0
        for (f, image) in pictures.enumerated() {
            let warp = motion.estimate(bgr: image.pixels, width: image.width, height: image.height)
            warps.append(warp)
            let expected = try #require(Self.warp(frames[f]["warp"]))
            for k in 0..<6 { worstWarp = max(worstWarp, abs(warp.values[k] - expected.values[k])) }
        }
        let (worst, ids) = try Self.compare(sequence) { warps[$0] }
        print(
            "BoT-SORT [\(sequence)], Lookout's warps: within \(worstWarp) of OpenCV's; \(ids) ids, max box difference \(worst) px"
        )
        #expect(worstWarp <= 1e-5)
        #expect(worst <= 1e-3)
    }

    /// A still camera gives the identity, a shifted picture its shift, and too few corners the identity.
    @Test func motionOfKnownShifts() {
        var pixels = [UInt8](repeating: 0, count: 200 * 160)
        var state: UInt32 = 7
        for i in pixels.indices {
            state = state &* 1_103_515_245 &+ 12345
            pixels[i] = UInt8(truncatingIfNeeded: state >> 24)
        }
        // Blocky texture: corners everywhere.
        var texture = [UInt8](repeating: 0, count: 200 * 160)
        for y in 0..<160 {
            for x in 0..<200 { texture[y * 200 + x] = pixels[(y / 8) * 200 + x / 8] }
        }
        func shifted(_ dx: Int, _ dy: Int) -> GreyPicture {
            var out = [UInt8](repeating: 0, count: 200 * 160)
            for y in 0..<160 {
                for x in 0..<200 {
                    out[y * 200 + x] = texture[min(max(y - dy, 0), 159) * 200 + min(max(x - dx, 0), 199)]
                }
            }
            return GreyPicture(width: 200, height: 160, pixels: out)
        }
        let motion = CameraMotion(downscale: 1)
        #expect(motion.estimate(shifted(0, 0)) == .identity)
        let still = motion.estimate(shifted(0, 0)).values
        #expect(abs(still[0] - 1) < 1e-9 && abs(still[2]) < 1e-9 && abs(still[5]) < 1e-9)
        let moved = motion.estimate(shifted(3, -2)).values
        #expect(abs(moved[0] - 1) < 1e-3 && abs(moved[1]) < 1e-3)
        #expect(abs(moved[2] - 3) < 0.05 && abs(moved[5] + 2) < 0.05, "\(moved)")
        let flat = CameraMotion(downscale: 1)
        let blank = GreyPicture(width: 64, height: 64, pixels: [UInt8](repeating: 128, count: 64 * 64))
        #expect(flat.estimate(blank) == .identity)
        #expect(flat.estimate(blank) == .identity)
    }
}
