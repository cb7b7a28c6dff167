import Foundation
import LookoutDetector
import LookoutTensor
import LookoutTestSupport
import LookoutWeights
import Testing

/// The network against ultralytics' fused model on the same input tensors (reference values from
/// `scripts/reference/make_detector_fixtures.py`): backbone maps (layers 4, 6, 9), neck maps (15, 18, 21)
/// and the raw output (boxes in input pixels, sigmoid scores).
///
/// Tolerances are ten times the reference's own float32 error, measured by the fixture script as the
/// largest difference between the same model run in float32 and in float64 (`reference_error_*` in each
/// fixture's metadata): Lookout computes in float32 with another summation order, so its error against the
/// float32 reference should be of that size, and a wrong operation shows up far above it.
@Suite struct NetworkParityTests {
    static let root = Repository.root
    static let network = try! YOLOWorldNetwork(
        weights: WeightFile.open(root + "/Tests/Fixtures/weights/yolov8n-worldv2-random.pt"))

    static func map(_ view: TensorView) -> FeatureMap {
        FeatureMap(channels: view.shape[1], height: view.shape[2], width: view.shape[3], data: view.floats())
    }

    static func maxError(_ a: [Float], _ b: [Float]) -> Float {
        precondition(a.count == b.count, "sizes \(a.count) and \(b.count) differ")
        return zip(a, b).reduce(0) { max($0, abs($1.0 - $1.1)) }
    }

    /// Ten times the reference's own float32 error recorded under `key` in the fixture's metadata.
    static func tolerance(_ file: WeightFile, _ key: String) -> Float {
        guard let text = file.metadata["reference_error_" + key], let error = Float(text), error > 0 else {
            Issue.record("\(file.path) records no reference_error_\(key)")
            return 0
        }
        return 10 * error
    }

    /// Fixtures whose reference is well conditioned (its own float32 error is under a tenth of the old fixed
    /// tolerances, 0.01 px and 1e-4; see make_detector_fixtures.py). The built-in-text case saturates (every
    /// score near 1) and is compared through the maps only.
    static let fullComparisons = ["n-rocket-416-queries", "n-chelsea-352-queries"]

    /// Backbone and neck maps of one fixture, each within ten times the reference's own error for that layer.
    static func compareMaps(network: YOLOWorldNetwork, fixture file: WeightFile, name: String) throws {
        let input = map(try file.view("input"))
        let textView = try file.view("text")
        let features = network.backbone(input)
        let neck = network.neck(features, text: textView.floats(), classes: textView.shape[1])
        for (map, layer) in zip(features + neck, [4, 6, 9, 15, 18, 21]) {
            let expected = try file.view("layer\(layer)")
            #expect([1, map.channels, map.height, map.width] == expected.shape, "\(name) layer \(layer)")
            let error = maxError(map.data, expected.floats())
            let bound = tolerance(file, "layer\(layer)")
            print("\(name) layer \(layer): max |error| \(error), tolerance \(bound)")
            #expect(error <= bound, "\(name) layer \(layer): max |error| \(error) > \(bound)")
        }
    }

    /// What a prepared image keeps (P3–P5 and layer 12's text-free part) gives the very neck the backbone's maps
    /// give, for two query sets: re-query starts at layer 12's attention with nothing else changed.
    @Test func theKeptTextFreePartGivesTheSameNeck() throws {
        let file = try WeightFile.open(Self.root + "/Tests/Fixtures/detector/n-rocket-416-queries.safetensors")
        let input = Self.map(try file.view("input"))
        let textView = try file.view("text")
        let kept = Self.network.imageFeatures(input)
        #expect(kept.count == 4 && kept.map { $0.channels } == Self.network.keptMaps.map { $0.channels })
        #expect(kept[3].height * 16 == input.height && kept[3].width * 16 == input.width)
        let backbone = Self.network.backbone(input)
        for text in [textView.floats(), textView.floats().map { -$0 }] {
            let classes = textView.shape[1]
            let fromKept = Self.network.neck(kept, text: text, classes: classes)
            let fromBackbone = Self.network.neck(backbone, text: text, classes: classes)
            #expect(zip(fromKept, fromBackbone).allSatisfy { $0.data == $1.data })
        }
    }

    @Test(arguments: ["n-astronaut-320", "n-rocket-416-queries", "n-chelsea-352-queries"])
    func backboneAndNeckMatchUltralytics(fixture: String) throws {
        let file = try WeightFile.open(Self.root + "/Tests/Fixtures/detector/\(fixture).safetensors")
        try Self.compareMaps(network: Self.network, fixture: file, name: fixture)
    }

    /// The raw output (boxes, then scores) within ten times the reference's own error.
    static func compareOutput(network: YOLOWorldNetwork, fixture file: WeightFile, name: String) throws {
        let input = map(try file.view("input"))
        let textView = try file.view("text")
        let classes = textView.shape[1]
        let output = network.head(network.backbone(input), text: textView.floats(), classes: classes)
        let expected = try file.view("output")
        #expect(expected.shape == [1, 4 + classes, output.count / (4 + classes)])
        let reference = expected.floats()
        let anchors = output.count / (4 + classes)
        let boxError = maxError(Array(output[0..<(4 * anchors)]), Array(reference[0..<(4 * anchors)]))
        let scoreError = maxError(Array(output[(4 * anchors)...]), Array(reference[(4 * anchors)...]))
        let boxBound = tolerance(file, "boxes"), scoreBound = tolerance(file, "scores")
        print("\(name): boxes max |error| \(boxError) px (≤ \(boxBound)), scores \(scoreError) (≤ \(scoreBound))")
        #expect(scoreError <= scoreBound, "\(name): scores max |error| \(scoreError) > \(scoreBound)")
        #expect(boxError <= boxBound, "\(name): boxes max |error| \(boxError) px > \(boxBound)")
    }

    @Test(arguments: fullComparisons)
    func outputMatchesUltralytics(fixture: String) throws {
        let file = try WeightFile.open(Self.root + "/Tests/Fixtures/detector/\(fixture).safetensors")
        try Self.compareOutput(network: Self.network, fixture: file, name: fixture)
    }
}
