import Foundation
import LookoutDetector
import LookoutEngine
import LookoutWeights
import Testing

/// The s-scale check, run by `scripts/check-s-parity PYTHON` (which sets LOOKOUT_S_PARITY_DIR): the same
/// comparisons as NetworkParityTests and EngineTests on a random yolov8s-worldv2 with calibrated BatchNorm.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["LOOKOUT_S_PARITY_DIR"] != nil))
struct SScaleParityTests {
    static let directory = ProcessInfo.processInfo.environment["LOOKOUT_S_PARITY_DIR"] ?? ""
    static let network = try! YOLOWorldNetwork(weights: WeightFile.open(directory + "/yolov8s-worldv2-random.pt"))

    @Test(arguments: ["s-astronaut-320", "s-rocket-416-queries", "s-chelsea-352-queries"])
    func backboneMatchesUltralytics(fixture: String) throws {
        let file = try WeightFile.open(Self.directory + "/\(fixture).safetensors")
        let features = Self.network.backbone(NetworkParityTests.map(try file.view("input")))
        for (map, layer) in zip(features, [4, 6, 9]) {
            let error = NetworkParityTests.maxError(map.data, try file.view("layer\(layer)").floats())
            print("\(fixture) layer \(layer): max |error| \(error)")
            #expect(error <= 1e-3)
        }
    }

    @Test(arguments: [("s-rocket-416-queries", "rocket.jpg", 416), ("s-chelsea-352-queries", "chelsea.jpg", 352)])
    func detectionsMatchUltralyticsPredict(fixture: String, photo: String, size: Int) throws {
        let file = try WeightFile.open(Self.directory + "/\(fixture).safetensors")
        let text = try file.view("text")
        let classes = text.shape[1]
        let engine = try Engine(network: Self.network, embedder: nil)
        let prepared = try engine.prepare(path: NetworkParityTests.root + "/examples/photos/" + photo, size: size)
        let scored = engine.score(prepared, labels: (0..<classes).map { "q\($0)" }, text: text.floats())
        let reference = try file.view("output").floats()
        let anchors = scored.output.count / (4 + classes)
        let boxError = NetworkParityTests.maxError(
            Array(scored.output[0..<(4 * anchors)]), Array(reference[0..<(4 * anchors)]))
        let scoreError = NetworkParityTests.maxError(
            Array(scored.output[(4 * anchors)...]), Array(reference[(4 * anchors)...]))
        print("\(fixture): raw boxes max |error| \(boxError) px, scores \(scoreError)")
        #expect(boxError <= 0.01 && scoreError <= 1e-4)
        var total = 0
        for (confidence, key) in [(Float(0.25), "detections_conf025"), (0.05, "detections_conf005")] {
            var options = SuppressionOptions()
            options.confidence = confidence
            let result = engine.detections(scored, options: options)
            let expected = SuppressionTests.detections(try file.view(key))
            #expect(result.detections.count == expected.count, "\(fixture) conf \(confidence)")
            total += expected.count
            for (a, e) in zip(result.detections, expected) {
                #expect(a.queryIndex == e.classIndex && abs(a.score - e.score) <= 1e-4)
                #expect(zip(a.box, e.box).allSatisfy { abs($0 - $1) <= 0.01 }, "\(a.box) vs \(e.box)")
            }
        }
        print("\(fixture): \(total) reference detections compared")
        #expect(total > 0)
    }
}
