import Foundation
import LookoutDetector
import LookoutEngine
import LookoutFrames
import LookoutImage
import LookoutSupport
import LookoutTestSupport
import LookoutTracking
import LookoutVideo
import Testing

/// The one frame loop (``FramePipeline``) on the tracking example's 72 frames with the demo model: every frame
/// handed over in order, a taken frame's detections and tracks equal to the engine's and a tracker's fed by
/// hand, cancellation and limits ending the loop where they say, a consumer's error stopping the decoder. The
/// command line's loops over it are tested on a file (VideoCommandTests, TrackCommandTests), a stream
/// (StreamTests: HLS and RTSP) and an upload (ServeCommandTests' video upload against `lookout track`).
@Suite(.serialized) struct FramePipelineTests {
    static let root = Repository.root
    static let video = root + "/examples/tracking/shapes.mp4"
    static let engine: Engine = {
        try! Engine.load(EngineConfiguration(model: .demo, caches: false)).engine
    }()
    static let query = engine.prepare(
        QueryPlan(["red circle", "blue square", "green star"].map { Query($0) }),
        options: SuppressionOptions())

    static func source(every: Int = 1) throws -> VideoReadAhead {
        VideoReadAhead(
            try VideoReader(path: video, threads: 1), selection: FrameSelection(.every(every)), onlySelected: false)
    }

    @Test func takenFramesEqualTheEngineAndATrackerFedByHand() throws {
        let session = TrackingSession(settings: ByteTracker.Settings())
        let pipeline = FramePipeline(
            engine: Self.engine, query: Self.query, imageSize: 640, tracking: session, name: "shapes")
        var seen: [PipelineFrame] = []
        let ending = try pipeline.run(try Self.source(every: 3)) { seen.append($0) }
        #expect(ending == .ended)
        #expect(seen.map(\.frame.index) == Array(0..<72), "every frame, in order")
        #expect(seen.map(\.selected) == (0..<72).map { $0 % 3 == 0 })

        // The same frames decoded, detected and tracked one by one, without the pipeline.
        let reader = try VideoReader(path: Self.video, threads: 1)
        let byHand = TrackingSession(settings: ByteTracker.Settings())
        var compared = 0
        var found = 0
        while let frame = try reader.next() {
            let item = seen[frame.index]
            #expect(item.frame.image == frame.image, "frame \(frame.index)")
            guard frame.index % 3 == 0 else {
                #expect(item.detections == nil && item.tracks == nil)
                continue
            }
            let expected = Self.engine.detect(
                Self.engine.prepare(image: frame.image, name: "shapes", size: 640), Self.query, textEncode: false)
            #expect(item.detections?.detections == expected.detections, "frame \(frame.index)")
            let boxes = expected.detections.map {
                ByteTracker.Detection(box: $0.box, score: $0.score, label: $0.queryIndex)
            }
            let tracked = byHand.update(
                boxes, bgr: frame.image.pixels, width: frame.image.width, height: frame.image.height)
            #expect(item.tracks?.shown == tracked.shown, "frame \(frame.index)")
            compared += 1
            found += expected.detections.count
        }
        #expect(compared == 24)
        #expect(found > 24, "the demo model finds the shapes (\(found) detections)")
        #expect(session.ids == byHand.ids && !session.ids.isEmpty)
    }

    @Test func cancellationEndsBeforeTheNextFrame() throws {
        var pipeline = FramePipeline(engine: Self.engine, query: Self.query, imageSize: 320, name: "shapes")
        var count = 0
        pipeline.isCancelled = { count == 5 }
        let source = try Self.source()
        let ending = try pipeline.run(source) { _ in count += 1 }
        #expect(ending == .cancelled && count == 5)
        #expect(try source.next() == nil, "the source is stopped")
    }

    @Test func limitsEndTheLoopWithTheirError() throws {
        var pipeline = FramePipeline(name: "shapes")
        pipeline.limits = FrameLimits(frames: 10, seconds: 60, framesSetting: "a test's limit", source: "upload")
        var count = 0
        do {
            try pipeline.run(try Self.source()) { _ in count += 1 }
            Issue.record("no error past the limit")
        } catch let error as VideoError {
            #expect(error.kind == .tooLarge && error.problem.contains("more than 10 frames (a test's limit)"))
        }
        #expect(count == 10)

        pipeline.limits = FrameLimits(frames: 1000, seconds: 0.95, framesSetting: "", source: "upload")
        count = 0
        #expect(throws: VideoError.self) { try pipeline.run(try Self.source()) { _ in count += 1 } }
        #expect(count == 12, "the frames before 0.95 s at 12 fps (\(count))")
    }

    @Test func aConsumersErrorStopsTheSource() throws {
        struct Enough: Error {}
        let source = try Self.source()
        var count = 0
        #expect(throws: Enough.self) {
            try FramePipeline(name: "shapes").run(source) { _ in
                count += 1
                if count == 3 { throw Enough() }
            }
        }
        #expect(count == 3)
        #expect(try source.next() == nil, "the source is stopped")
    }
}

/// The one bounded queue every producer and consumer pair uses.
@Suite struct BoundedQueueTests {
    @Test func aFileLosesNothingAndKeepsTheOrder() {
        let queue = BoundedQueue<Int>(capacity: 3)
        let producer = Thread {
            for item in 0..<200 { queue.push(item) }
            queue.close()
        }
        producer.start()
        var taken: [Int] = []
        while let item = queue.pop() {
            taken.append(item)
            if item % 50 == 0 { usleep(2000) }  // a slow consumer: the producer waits
        }
        #expect(taken == Array(0..<200))
        #expect(queue.dropped == 0)
    }

    @Test func aCameraDropsTheOldestAndCountsThem() {
        let queue = BoundedQueue<Int>(capacity: 4, whenFull: .dropOldest)
        for item in 0..<10 { #expect(queue.push(item)) }  // never waits
        queue.close()
        var taken: [Int] = []
        while let item = queue.pop() { taken.append(item) }
        #expect(taken == [6, 7, 8, 9])
        #expect(queue.dropped == 6)
    }

    @Test func aConsumerThatLeavesReleasesAWaitingProducer() {
        let queue = BoundedQueue<Int>(capacity: 1)
        let done = DispatchSemaphore(value: 0)
        let refused = Flag()
        Thread {
            queue.push(0)
            let added = queue.push(1)  // waits: the queue is full
            refused.set(!added)
            done.signal()
        }.start()
        usleep(50_000)
        queue.stop()
        #expect(done.wait(timeout: .now() + 10) == .success, "the producer was released")
        #expect(refused.value)
        #expect(queue.pop() == nil)
        #expect(!queue.push(2))
    }
}

/// A flag set on one thread and read on another.
private final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var stored = false
    func set(_ value: Bool) { lock.withLock { stored = value } }
    var value: Bool { lock.withLock { stored } }
}
