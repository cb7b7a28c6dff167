import Foundation
import LookoutDetector
import LookoutEngine
import LookoutTensor
import LookoutWeights
import Testing

/// The same comparisons as NetworkParityTests and EngineTests on a random yolov8s-worldv2 with calibrated
/// BatchNorm (`Tests/Fixtures/s-scale`, made by `scripts/check-s-parity`): backbone and neck maps, the raw
/// output, and the final detections from the photo file.
///
/// Runs in every build (about 2 s in debug); the README's test command runs it again in release mode, the
/// build users run. `LOOKOUT_S_PARITY_DIR` points it at freshly generated fixtures.
@Suite struct SScaleParityTests {
    static let directory =
        ProcessInfo.processInfo.environment["LOOKOUT_S_PARITY_DIR"] ?? NetworkParityTests.root
        + "/Tests/Fixtures/s-scale"
    static let network = try! YOLOWorldNetwork(weights: WeightFile.open(directory + "/yolov8s-worldv2-random.pt"))

    @Test func theModelIsTheSScale() {
        // s: width multiple 0.5, so the stem has 32 output channels (n: 16).
        #expect(Self.network.embeddingSize == 512)
        #expect(
            Self.network.backbone(
                FeatureMap(channels: 3, height: 64, width: 64, data: [Float](repeating: 0.5, count: 3 * 64 * 64)))[0]
                .channels == 128)
    }

    @Test(arguments: ["s-astronaut-320", "s-rocket-416-queries", "s-chelsea-352-queries"])
    func backboneAndNeckMatchUltralytics(fixture: String) throws {
        let file = try WeightFile.open(Self.directory + "/\(fixture).safetensors")
        try NetworkParityTests.compareMaps(network: Self.network, fixture: file, name: fixture)
    }

    @Test(arguments: [("s-rocket-416-queries", "rocket.jpg", 416), ("s-chelsea-352-queries", "chelsea.jpg", 352)])
    func detectionsMatchUltralyticsPredict(fixture: String, photo: String, size: Int) throws {
        let file = try WeightFile.open(Self.directory + "/\(fixture).safetensors")
        try NetworkParityTests.compareOutput(network: Self.network, fixture: file, name: fixture)
        let text = try file.view("text")
        let classes = text.shape[1]
        let engine = try Engine(network: Self.network, embedder: nil)
        let prepared = try engine.prepare(path: NetworkParityTests.root + "/examples/photos/" + photo, size: size)
        let scored = engine.score(prepared, labels: (0..<classes).map { "q\($0)" }, text: text.floats())
        let scoreTolerance = NetworkParityTests.tolerance(file, "scores")
        let boxTolerance = try SuppressionTests.boxTolerance(file)
        var total = 0
        for (name, options, expected) in try SuppressionTests.cases(file) {
            #expect(!expected.isEmpty, "\(fixture) \(name): an empty reference proves nothing")
            let result = engine.detections(scored, options: options)
            SuppressionTests.expectSame(
                result.detections.map { Detection(box: $0.box, score: $0.score, classIndex: $0.queryIndex) }, expected,
                threshold: options.confidence, scoreTolerance: scoreTolerance, boxTolerance: boxTolerance,
                "\(fixture) \(name)")
            total += expected.count
        }
        print("\(fixture): \(total) reference detections compared")
    }
}
