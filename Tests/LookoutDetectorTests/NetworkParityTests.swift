import Foundation
import LookoutDetector
import LookoutWeights
import Testing

/// The network against ultralytics' fused model on the same input tensors (reference values from
/// `scripts/reference/make_detector_fixtures.py`): backbone and neck maps, and the raw output
/// (boxes in input pixels, sigmoid scores).
@Suite struct NetworkParityTests {
    static let root: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path
    }()
    static let network = try! YOLOWorldNetwork(
        weights: WeightFile.open(root + "/Tests/Fixtures/weights/yolov8n-worldv2-random.pt"))

    static func map(_ view: TensorView) -> FeatureMap {
        FeatureMap(channels: view.shape[1], height: view.shape[2], width: view.shape[3], data: view.floats())
    }

    static func maxError(_ a: [Float], _ b: [Float]) -> Float {
        precondition(a.count == b.count, "sizes \(a.count) and \(b.count) differ")
        return zip(a, b).reduce(0) { max($0, abs($1.0 - $1.1)) }
    }

    /// Fixtures whose reference is well conditioned (its own float32 error, against float64, is under a
    /// tenth of the tolerances; see make_detector_fixtures.py). The built-in-text case saturates and is
    /// compared through the backbone only.
    static let fullComparisons = ["n-rocket-416-queries", "n-chelsea-352-queries"]

    @Test(arguments: ["n-astronaut-320", "n-rocket-416-queries", "n-chelsea-352-queries"])
    func backboneMatchesUltralytics(fixture: String) throws {
        let file = try WeightFile.open(Self.root + "/Tests/Fixtures/detector/\(fixture).safetensors")
        let features = Self.network.backbone(Self.map(try file.view("input")))
        for (map, layer) in zip(features, [4, 6, 9]) {
            let expected = try file.view("layer\(layer)")
            #expect([1, map.channels, map.height, map.width] == expected.shape)
            let error = Self.maxError(map.data, expected.floats())
            #expect(error <= 1e-3, "\(fixture) layer \(layer): max |error| \(error)")
        }
    }

    @Test(arguments: fullComparisons)
    func matchesUltralytics(fixture: String) throws {
        let file = try WeightFile.open(Self.root + "/Tests/Fixtures/detector/\(fixture).safetensors")
        let input = Self.map(try file.view("input"))
        let textView = try file.view("text")
        let classes = textView.shape[1]
        let features = Self.network.backbone(input)
        for (map, layer) in zip(features, [4, 6, 9]) {
            let expected = try file.view("layer\(layer)")
            #expect([1, map.channels, map.height, map.width] == expected.shape)
            let error = Self.maxError(map.data, expected.floats())
            print("\(fixture) layer \(layer): max |error| \(error)")
            #expect(error <= 1e-3)
        }
        let output = Self.network.head(features, text: textView.floats(), classes: classes)
        let expected = try file.view("output")
        #expect(expected.shape == [1, 4 + classes, output.count / (4 + classes)])
        let reference = expected.floats()
        let anchors = output.count / (4 + classes)
        let boxError = Self.maxError(Array(output[0..<(4 * anchors)]), Array(reference[0..<(4 * anchors)]))
        let scoreError = Self.maxError(Array(output[(4 * anchors)...]), Array(reference[(4 * anchors)...]))
        print("\(fixture): boxes max |error| \(boxError) px, scores max |error| \(scoreError)")
        #expect(scoreError <= 1e-4)
        #expect(boxError <= 0.01)
    }
}
