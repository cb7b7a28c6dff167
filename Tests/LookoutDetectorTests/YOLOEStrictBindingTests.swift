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

    static func entries() -> [Entry] {
        var entries: [Entry] = source.names.map { name in
            let view = source.tensors[name]!
            return (name, view.shape, view.dtype.isFloatingPoint ? .float32(view.floats()) : .int64(view.integers()))
        }
        for (name, view) in source.attributes.sorted(by: { $0.key < $1.key }) {
            entries.append(("attribute." + name, view.shape, .float32(view.floats())))
        }
        return entries
    }

    static func loadError(_ entries: [Entry]) throws -> String? {
        let path = try StrictBindingTests.write(entries)
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            _ = try YOLOENetwork(weights: WeightFile.open(path))
            return nil
        } catch {
            #expect(error.path == path)
            return error.problem
        }
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

    /// Seeded fuzz as for YOLO-World: one convolution's outputs changed consistently (weight and BatchNorm), or a
    /// needed tensor dropped, 40 times; every file refused. SAVPE (visual prompts, not run yet) is left alone.
    @Test func fuzzedShapesAreRefused() throws {
        let entries = Self.entries()
        let convolutions = entries.map(\.name).filter {
            $0.hasSuffix("conv.weight") && !$0.contains("dfl") && !$0.contains(".savpe.")
        }
        let needed = entries.map(\.name).filter {
            !$0.hasSuffix("num_batches_tracked") && !$0.contains(".savpe.") && !$0.hasPrefix("attribute.")
        }
        var generator = SplitMix64(seed: 31)
        var refused = 0
        for round in 0..<40 {
            var mutated = entries
            let description: String
            if round % 4 == 3 {
                let victim = needed[Int(generator.next() % UInt64(needed.count))]
                mutated.removeAll { $0.name == victim }
                description = "without \(victim)"
            } else {
                let weight = convolutions[Int(generator.next() % UInt64(convolutions.count))]
                let outputs = Self.source.tensors[weight]!.shape[0]
                let size = max(1, outputs + [-2, -1, 1, 3][Int(generator.next() % 4)])
                let prefix = String(weight.dropLast(".conv.weight".count))
                mutated = StrictBindingTests.resized(mutated, weight, axis: 0, to: size)
                for part in ["weight", "bias", "running_mean", "running_var"] {
                    mutated = StrictBindingTests.resized(mutated, "\(prefix).bn.\(part)", axis: 0, to: size)
                }
                description = "\(prefix) with \(size) outputs instead of \(outputs)"
            }
            let problem = try Self.loadError(mutated)
            #expect(problem != nil, "loaded: \(description)")
            if problem != nil { refused += 1 }
        }
        #expect(refused == 40)
    }
}
