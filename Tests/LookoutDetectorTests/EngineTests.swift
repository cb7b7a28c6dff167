import Foundation
import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutTensor
import LookoutWeights
import Testing

/// The whole pipeline from the photo file (decode, letterbox, network, NMS, original pixels) against
/// ultralytics predict on the same file, and re-query against a fresh run.
@Suite struct EngineTests {
    static let engine = try! Engine(network: NetworkParityTests.network, embedder: nil)

    @Test(arguments: [("n-rocket-416-queries", "rocket.jpg", 416), ("n-chelsea-352-queries", "chelsea.jpg", 352)])
    func fromTheFileMatchesUltralyticsPredict(fixture: String, photo: String, size: Int) throws {
        let file = try SuppressionTests.reference(fixture)
        let text = try file.view("text")
        let labels = (0..<text.shape[1]).map { "query \($0)" }
        let prepared = try Self.engine.prepare(path: NetworkParityTests.root + "/examples/photos/" + photo, size: size)
        #expect(prepared.letterbox.height == (try file.view("input")).shape[2])
        #expect(prepared.letterbox.width == (try file.view("input")).shape[3])
        let scoreTolerance = NetworkParityTests.tolerance(file, "scores")
        let boxTolerance = try SuppressionTests.boxTolerance(file)
        var compared = 0
        for (name, options, expected) in try SuppressionTests.cases(file) {
            #expect(!expected.isEmpty, "\(fixture) \(name): an empty reference proves nothing")
            let result = Self.engine.detect(prepared, labels: labels, text: text.floats(), options: options)
            #expect(result.detections.allSatisfy { $0.label == labels[$0.queryIndex] })
            SuppressionTests.expectSame(
                result.detections.map { Detection(box: $0.box, score: $0.score, classIndex: $0.queryIndex) }, expected,
                threshold: options.confidence, scoreTolerance: scoreTolerance, boxTolerance: boxTolerance,
                "\(fixture) \(name)")
            compared += expected.count
        }
        #expect(compared > 0)
    }

    @Test func requeryEqualsAFreshRun() throws {
        let file = try SuppressionTests.reference("n-rocket-416-queries")
        let text = try file.view("text").floats()
        let path = NetworkParityTests.root + "/examples/photos/rocket.jpg"
        let prepared = try Self.engine.prepare(path: path, size: 416)
        var options = SuppressionOptions()
        options.confidence = 0.05
        let labels = ["a", "b", "c", "d", "e"]
        let firstSet = Self.engine.detect(
            prepared, labels: Array(labels.prefix(2)), text: Array(text.prefix(2 * 512)), options: options)
        let requery = Self.engine.detect(prepared, labels: labels, text: text, options: options)
        let fresh = Self.engine.detect(
            try Self.engine.prepare(path: path, size: 416), labels: labels, text: text, options: options)
        #expect(requery.detections == fresh.detections)
        #expect(!fresh.detections.isEmpty)
        // The first query set really was another one: its answer differs from the second's.
        #expect(firstSet.detections != requery.detections)
        #expect(Set(requery.detections.map(\.queryIndex)).count > 2)
    }

    /// Several photos at once (``Engine/detect(images:labels:text:options:size:batch:)``): each photo's detections
    /// are those it gets alone, in the order given, whatever the batches (on the CPU one photo at a time; a GPU's
    /// batches are checked by lookout-gpu-check against photos alone).
    @Test func photosDetectedTogetherGetTheirOwnDetections() throws {
        let file = try SuppressionTests.reference("n-rocket-416-queries")
        let text = try file.view("text").floats()
        let labels = ["a", "b", "c", "d", "e"]
        var options = SuppressionOptions()
        options.confidence = 0.05
        let root = NetworkParityTests.root + "/examples/photos/"
        let photos = try ["rocket.jpg", "chelsea.jpg", "rocket.jpg"].map {
            (image: try ImageFile.read(root + $0), name: $0)
        }
        let together = Self.engine.detect(images: photos, labels: labels, text: text, options: options, size: 416)
        let alone = photos.map {
            Self.engine.detect(
                Self.engine.prepare(image: $0.image, name: $0.name, size: 416), labels: labels, text: text,
                options: options)
        }
        #expect(together.map(\.image) == ["rocket.jpg", "chelsea.jpg", "rocket.jpg"])
        #expect(together.map(\.detections) == alone.map(\.detections))
        #expect(together[0].detections != together[1].detections && !together[1].detections.isEmpty)
        #expect(Self.engine.batchLimit == 1, "the CPU computes one photo at a time")
    }

    /// Batches hold photos of one letterboxed size, in the order given, at most `limit` each.
    @Test func batchesGroupPhotosOfOneSize() {
        let shapes = [[640, 480], [480, 640], [640, 480], [640, 480], [480, 640], [640, 640]]
        #expect(Engine.batches(of: shapes, limit: 2) == [[0, 2], [3], [1, 4], [5]])
        #expect(Engine.batches(of: shapes, limit: 32) == [[0, 2, 3], [1, 4], [5]])
        #expect(Engine.batches(of: [], limit: 4).isEmpty)
    }

    /// A batch's maps on the host: each channel holds the images' planes in turn, and unstacking gives them back.
    @Test func stackedMapsHoldEachChannelsPlanesInTurn() {
        let maps = (0..<3).map { n in
            FeatureMap(channels: 2, height: 2, width: 3, data: (0..<12).map { Float(100 * n + $0) })
        }
        let backend = CPUBackend.shared
        let tall = backend.stack(maps)
        #expect((tall.channels, tall.height, tall.width) == (2, 6, 3))
        // Channel 1 of image 2 starts at (1·3 + 2)·6.
        #expect(Array(tall.data[30..<36]) == [206, 207, 208, 209, 210, 211])
        #expect(Array(tall.data[6..<12]) == [100, 101, 102, 103, 104, 105])
        #expect(backend.unstack(tall, images: 3).map(\.data) == maps.map(\.data))
    }

    /// Results and timings are Codable: a program can hand them on as JSON and read them back unchanged.
    @Test func resultsRoundTripThroughCodable() throws {
        let file = try SuppressionTests.reference("n-rocket-416-queries")
        let prepared = try Self.engine.prepare(path: NetworkParityTests.root + "/examples/photos/rocket.jpg", size: 416)
        var options = SuppressionOptions()
        options.confidence = 0.05
        let result = Self.engine.detect(
            prepared, labels: ["a", "b", "c", "d", "e"], text: try file.view("text").floats(), options: options)
        #expect(!result.detections.isEmpty)
        let data = try JSONEncoder().encode(result)
        #expect(try JSONDecoder().decode(ImageDetections.self, from: data) == result)
        let object = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        #expect(
            object?["image"] as? String == result.image
                && (object?["detections"] as? [Any])?.count == result.detections.count)
    }

    /// An engine on a pool of its own, and the async face with several requests at once, give exactly the
    /// detections of the synchronous engine.
    @Test func ownPoolAndAsyncRequestsGiveTheSameDetections() async throws {
        let text = try SuppressionTests.reference("n-rocket-416-queries").view("text").floats()
        let labels = ["a", "b", "c", "d", "e"]
        let options = {
            var options = SuppressionOptions()
            options.confidence = 0.05
            return options
        }()
        let path = NetworkParityTests.root + "/examples/photos/rocket.jpg"
        // The synchronous overloads (an async context would pick the async ones).
        let prepareNow: (Engine) throws -> PreparedImage = { try $0.prepare(path: path, size: 416) }
        let expected = Self.engine.detect(try prepareNow(Self.engine), labels: labels, text: text, options: options)
        #expect(!expected.detections.isEmpty)
        let own = try Engine(network: NetworkParityTests.network, embedder: nil, pool: ComputePool(threads: 3))
        let ownResult = own.detect(try prepareNow(own), labels: labels, text: text, options: options)
        #expect(ownResult.detections == expected.detections)
        let results = try await withThrowingTaskGroup(of: [ImageDetections.Item].self) { group in
            for _ in 0..<3 {
                group.addTask {
                    let prepared = try await Self.engine.prepare(path: path, size: 416)
                    return Self.engine.detect(prepared, labels: labels, text: text, options: options).detections
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 3 && results.allSatisfy { $0 == expected.detections })
        await #expect(throws: ImageError.self) { try await Self.engine.prepare(path: "/nonexistent.jpg") }
    }

    /// The kernel settings an engine is configured with reach its convolutions: every layer lowered (instead of
    /// Winograd's stride-1 3×3) changes the rounding of the raw output, and both equal ultralytics' predict.
    @Test func kernelSettingsSteerTheConvolutions() throws {
        let weights = try WeightFile.open(NetworkParityTests.root + "/Tests/Fixtures/weights/yolov8n-worldv2-random.pt")
        var settings = KernelSettings.environment
        settings.convolution = settings.convolution == .winograd ? .lowered : .winograd
        let other = try Engine(
            network: try YOLOWorldNetwork(weights: weights, kernels: settings), embedder: nil, kernels: settings)
        #expect(other.kernels == settings && Self.engine.kernels == .environment)
        let file = try SuppressionTests.reference("n-rocket-416-queries")
        let text = try file.view("text")
        let path = NetworkParityTests.root + "/examples/photos/rocket.jpg"
        let prepare: (Engine) throws -> PreparedImage = { try $0.prepare(path: path, size: 416) }
        let raw = { (engine: Engine) throws -> [Float] in
            engine.network.score(
                try prepare(engine).features, text: text.floats(), classes: text.shape[1], backend: engine.backend
            ).output
        }
        let (mine, theirs) = (try raw(Self.engine), try raw(other))
        #expect(mine.count == theirs.count && mine != theirs, "the other algorithm rounds otherwise")
        let labels = (0..<text.shape[1]).map { "query \($0)" }
        for (name, options, expected) in try SuppressionTests.cases(file) {
            let result = other.detect(try prepare(other), labels: labels, text: text.floats(), options: options)
            SuppressionTests.expectSame(
                result.detections.map { Detection(box: $0.box, score: $0.score, classIndex: $0.queryIndex) }, expected,
                threshold: options.confidence, scoreTolerance: NetworkParityTests.tolerance(file, "scores"),
                boxTolerance: try SuppressionTests.boxTolerance(file), "\(settings.convolution) \(name)")
        }
    }

    @Test func queryParsing() {
        let (queries, empty) = parseQueries(" dog, red car,, dog ,  , cat ")
        #expect(queries == ["dog", "red car", "cat"])
        #expect(empty == 2)
    }
}
