import Foundation
import LookoutDetector
import LookoutSupport
import LookoutTestSupport
import LookoutWeights
import Testing

/// Weight files whose layers do not fit together, or that hold tensors the detector does not take, are
/// errors naming the file and the layer, never a read out of bounds or a trap. Includes a seeded fuzz of
/// model construction: shapes changed consistently within a layer (weights and their BatchNorm), so that
/// only the checks between layers can catch them.
@Suite struct StrictBindingTests {
    typealias Entry = (name: String, shape: [Int], values: TensorValues)

    static let source = try! WeightFile.open(
        NetworkParityTests.root + "/Tests/Fixtures/weights/yolov8n-worldv2-random.pt")

    /// A network family's loader: binds a file or throws.
    typealias Loader = @Sendable (WeightFile) throws(WeightsError) -> Void
    static let loadWorld: Loader = { file throws(WeightsError) in _ = try YOLOWorldNetwork(weights: file) }

    /// `source` as canonical safetensors entries (attributes under `attribute.`).
    static func entries(of source: WeightFile = source) -> [Entry] {
        var entries: [Entry] = source.names.map { name in
            let view = source.tensors[name]!
            return (name, view.shape, view.dtype.isFloatingPoint ? .float32(view.floats()) : .int64(view.integers()))
        }
        for (name, view) in source.attributes.sorted(by: { $0.key < $1.key }) {
            entries.append(("attribute." + name, view.shape, .float32(view.floats())))
        }
        return entries
    }

    static func write(_ entries: [Entry]) throws -> String {
        let path =
            NSTemporaryDirectory() + "lookout-binding-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).safetensors"
        try SafeTensors.write(entries, metadata: ["lookout.format": "canonical-1"], to: path)
        return path
    }

    /// Loads `entries` as a detector (YOLO-World unless `load` says otherwise) and returns the error's text
    /// (nil when it loaded).
    static func loadError(_ entries: [Entry], load: Loader = loadWorld) throws -> String? {
        try loadFailure(entries, load: load)?.problem
    }

    static func loadFailure(_ entries: [Entry], load: Loader = loadWorld) throws -> WeightsError? {
        let path = try write(entries)
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            try load(WeightFile.open(path))
            return nil
        } catch {
            #expect(error.path == path)
            return error
        }
    }

    /// `entries` with the tensor `name` resized along `axis` to `size` (zeros where new).
    static func resized(_ entries: [Entry], _ name: String, axis: Int, to size: Int) -> [Entry] {
        entries.map { entry in
            guard entry.name == name, case .float32 = entry.values else { return entry }
            var shape = entry.shape
            shape[axis] = size
            return (name, shape, .float32([Float](repeating: 0.01, count: shape.reduce(1, *))))
        }
    }

    @Test func theUnchangedFileLoads() throws {
        #expect(try Self.loadError(Self.entries()) == nil)
    }

    @Test func aTensorTheDetectorDoesNotTakeIsNamed() throws {
        let failure = try Self.loadFailure(Self.entries() + [("model.99.surprise", [2], .float32([1, 2]))])
        #expect(failure?.problem == "1 tensor that a YOLO-World v2 detector does not use: model.99.surprise")
        #expect(failure?.kind == .unusedTensors(["model.99.surprise"]))
    }

    /// Each sort of problem has its kind, for callers that handle them apart.
    @Test func errorKinds() throws {
        let entries = Self.entries()
        let weight = Self.source.tensors["model.4.cv1.conv.weight"]!.shape
        #expect(
            try Self.loadFailure(Self.resized(entries, "model.4.cv1.conv.weight", axis: 1, to: weight[1] + 8))?.kind
                == .layersDoNotConnect)
        #expect(
            try Self.loadFailure(entries.filter { $0.name != "model.8.cv2.bn.running_var" })?.kind
                == .missingTensor("model.8.cv2.bn.running_var"))
        let bias = Self.resized(entries, "model.8.cv2.bn.bias", axis: 0, to: 3)
        let expectedShape = Self.source.tensors["model.8.cv2.bn.bias"]!.shape
        #expect(
            try Self.loadFailure(bias)?.kind
                == .shapeMismatch(tensor: "model.8.cv2.bn.bias", shape: [3], expected: expectedShape))
        #expect(try Self.loadFailure(entries.filter { !$0.name.hasPrefix("model.0.") })?.kind == .wrongModel)
        #expect { try WeightFile.open("/nonexistent.pt") } throws: { ($0 as? WeightsError)?.kind == .unreadable }
        #expect {
            try WeightFile.open(NetworkParityTests.root + "/Tests/Fixtures/image/files/color.png")
        } throws: { ($0 as? WeightsError)?.kind == .unsupportedFormat }
    }

    @Test func layersThatDoNotFitTogetherAreNamed() throws {
        let entries = Self.entries()
        let weight = Self.source.tensors["model.4.cv1.conv.weight"]!.shape
        let wider = Self.resized(entries, "model.4.cv1.conv.weight", axis: 1, to: weight[1] + 8)
        #expect(
            try Self.loadError(wider)
                == "model.4.cv1 takes \(weight[1] + 8) input channels but the layers before it give \(weight[1])")
        let guide = Self.source.tensors["model.15.attn.gl.weight"]!.shape
        let text = Self.resized(entries, "model.15.attn.gl.weight", axis: 1, to: guide[1] - 1)
        #expect(try Self.loadError(text)?.contains("model.15.attn.gl takes \(guide[1] - 1)-d text") == true)
    }

    @Test func strideAttributesMustBeWholeNumbers() throws {
        for bad: [Float] in [[.nan, 16, 32], [8, .infinity, 32], [8, 16, 1e30], [0, 16, 32], [8.5, 16, 32]] {
            let entries = Self.entries().map { entry -> Entry in
                entry.name == "attribute.model.22.stride" ? (entry.name, [3], .float32(bad)) : entry
            }
            #expect(try Self.loadError(entries)?.contains("model.22.stride holds") == true, "\(bad)")
        }
    }

    /// Seeded fuzz: change one convolution's output channels (its weight, bias or BatchNorm consistently), or
    /// drop a tensor the network needs, 40 times. Every such file must be refused with an error, not load and not trap.
    @Test func fuzzedShapesAreRefused() throws {
        try Self.expectFuzzedShapesRefused(source: Self.source, seed: 12, load: Self.loadWorld)
    }

    /// The fuzz for any family: `leftAlone` names tensors the network does not bind (and so are not mutated).
    static func expectFuzzedShapesRefused(
        source: WeightFile, seed: UInt64, leftAlone: (String) -> Bool = { _ in false }, load: Loader,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let entries = Self.entries(of: source)
        let convolutions = entries.map(\.name).filter {
            $0.hasSuffix("conv.weight") && !$0.contains("dfl") && !leftAlone($0)
        }
        // BatchNorm's step counter is not needed, so a file without it loads.
        let needed = entries.map(\.name).filter { !$0.hasSuffix("num_batches_tracked") && !leftAlone($0) }
        var generator = SplitMix64(seed: seed)
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
                let outputs = source.tensors[weight]!.shape[0]
                let size = max(1, outputs + [-2, -1, 1, 3][Int(generator.next() % 4)])
                let prefix = String(weight.dropLast(".conv.weight".count))
                mutated = Self.resized(mutated, weight, axis: 0, to: size)
                for part in ["weight", "bias", "running_mean", "running_var"] {
                    mutated = Self.resized(mutated, "\(prefix).bn.\(part)", axis: 0, to: size)
                }
                description = "\(prefix) with \(size) outputs instead of \(outputs)"
            }
            let problem = try Self.loadError(mutated, load: load)
            #expect(problem != nil, "loaded: \(description)", sourceLocation: sourceLocation)
            if problem != nil { refused += 1 }
        }
        #expect(refused == 40, sourceLocation: sourceLocation)
    }
}
