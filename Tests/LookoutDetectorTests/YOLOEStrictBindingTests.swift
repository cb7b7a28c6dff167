import Foundation
import LookoutDetector
import LookoutTestSupport
import LookoutWeights
import Testing

/// YOLOE files that do not fit together, hold what the network does not take, or are not YOLOE at all are
/// refused with an error naming the file and the layer, as YOLO-World files are (``StrictBindingTests``).
@Suite struct YOLOEStrictBindingTests {
    typealias Entry = StrictBindingTests.Entry

    static let path = NetworkParityTests.root + "/Tests/Fixtures/yoloe/yoloe-11n-seg-random.pt"
    static let source = try! WeightFile.open(path)

    static let loadYOLOE: StrictBindingTests.Loader = { file throws(WeightsError) in
        _ = try YOLOENetwork(weights: file)
    }

    static func entries() -> [Entry] { StrictBindingTests.entries(of: source) }

    static func loadError(_ entries: [Entry]) throws -> String? {
        try StrictBindingTests.loadError(entries, load: loadYOLOE)
    }

    @Test func theUnchangedFileLoadsAsSafetensors() throws {
        #expect(try Self.loadError(Self.entries()) == nil)
    }

    @Test func anUntakenTensorAndAnotherFamilyAreNamed() throws {
        var entries = Self.entries()
        entries.append(("model.23.extra.weight", [2], .float32([1, 2])))
        #expect(try Self.loadError(entries)?.contains("model.23.extra.weight") == true)
        do {
            _ = try YOLOENetwork(
                weights: WeightFile.open(NetworkParityTests.root + "/Tests/Fixtures/weights/yolov8n-worldv2-random.pt"))
            Issue.record("a YOLO-World file loaded as YOLOE")
        } catch {
            #expect(error.kind == .wrongModel && error.problem.contains("not a YOLOE model"), "\(error)")
        }
        // And the file opens as the family it is.
        #expect(try openDetector(WeightFile.open(Self.path)).familyName == "YOLOE-11")
    }

    @Test func layersThatDoNotFitTogetherAreNamed() throws {
        let entries = Self.entries()
        let weight = Self.source.tensors["model.10.cv1.conv.weight"]!.shape
        let wider = StrictBindingTests.resized(entries, "model.10.cv1.conv.weight", axis: 1, to: weight[1] + 8)
        #expect(
            try Self.loadError(wider)
                == "model.10.cv1 takes \(weight[1] + 8) input channels but the layers before it give \(weight[1])")
        let text = StrictBindingTests.resized(entries, "model.23.reprta.m.w12.weight", axis: 1, to: 500)
        #expect(try Self.loadError(text) != nil)
    }

    @Test func aTruncatedCheckpointIsRefused() throws {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: Self.path))
        let path = NSTemporaryDirectory() + "lookout-yoloe-truncated-\(getpid()).pt"
        try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(throws: WeightsError.self) { _ = try YOLOENetwork(weights: WeightFile.open(path)) }
    }

    /// YOLOE-26's own parts: Proto26's refining convolutions and the one-to-one head are checked like the rest,
    /// and its training-only `semseg` branch is the one thing not read.
    @Test func yoloe26PartsThatDoNotFitAreNamed() throws {
        let source = try WeightFile.open(NetworkParityTests.root + "/Tests/Fixtures/yoloe/yoloe-26n-seg-random.pt")
        let entries = StrictBindingTests.entries(of: source)
        #expect(try Self.loadError(entries) == nil)
        for name in ["model.23.proto.feat_refine.1.conv.weight", "model.23.one2one_cv2.1.0.conv.weight"] {
            let width = source.tensors[name]!.shape[1]
            let layer = name.replacingOccurrences(of: ".conv.weight", with: "")
            #expect(
                try Self.loadError(StrictBindingTests.resized(entries, name, axis: 1, to: width + 8))
                    == "\(layer) takes \(width + 8) input channels but the layers before it give \(width)")
        }
        let withoutTwinBias = entries.filter { $0.0 != "model.23.one2one_cv4.2.bias" }
        #expect(try Self.loadError(withoutTwinBias)?.contains("model.23.one2one_cv4.2.bias") == true)
        #expect(try openDetector(source).familyName == "YOLOE-26")
        try StrictBindingTests.expectFuzzedShapesRefused(
            source: source, seed: 26, leftAlone: { $0.hasPrefix("attribute.") || $0.contains(".proto.semseg.") },
            load: Self.loadYOLOE)
    }

    /// The seeded fuzz of ``StrictBindingTests``: 40 mutations, every file refused (SAVPE's tensors included); the
    /// attributes are left alone.
    @Test func fuzzedShapesAreRefused() throws {
        try StrictBindingTests.expectFuzzedShapesRefused(
            source: Self.source, seed: 31, leftAlone: { $0.hasPrefix("attribute.") },
            load: Self.loadYOLOE)
    }
}
