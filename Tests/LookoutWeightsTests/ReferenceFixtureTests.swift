import Foundation
import LookoutJSON
import LookoutSupport
import LookoutWeights
import Testing

/// Weight files written by the reference code (`scripts/reference/make_weight_fixtures.py`): every tensor
/// Lookout reads equals the reference's values after conversion to F32 (CRC-32 of the F32 bytes).
@Suite struct ReferenceFixtureTests {
    static let expected: JSONNode = {
        let bytes = try! FileContents.read(Support.fixture("weights_expected.json"))
        return try! JSONDocument(bytes: bytes).root
    }()

    static let dtypeNames: [String: DType] = [
        "float32": .float32, "float16": .float16, "bfloat16": .bfloat16, "int64": .int64,
    ]

    @Test(arguments: [
        "yolov8n-worldv2-random.pt", "clip-tiny-openai.pt", "clip-tiny-hf.safetensors", "dtypes.safetensors",
    ])
    func everyTensorEqualsTheReference(file: String) throws {
        let weights = try WeightFile.open(Support.fixture(file))
        let tensors = try #require(Self.expected[file]?["tensors"])
        var expectedNames: [String] = []
        var failures: [String] = []
        tensors.forEachMember { key, entry in
            let name = String(decoding: key, as: UTF8.self)
            expectedNames.append(name)
            guard let view = weights.tensors[name] else {
                failures.append("\(name): missing")
                return
            }
            let shape = (0..<entry["shape"]!.count).map { Int(entry["shape"]![$0].int!) }
            if view.shape != shape { failures.append("\(name): shape \(view.shape) vs \(shape)") }
            if view.dtype != Self.dtypeNames[entry["dtype"]!.string!] {
                failures.append("\(name): dtype \(view.dtype) vs \(entry["dtype"]!.string!)")
            }
            let crc =
                view.dtype.isFloatingPoint
                ? Support.crc32(floats: view.floats()) : Support.crc32(integers: view.integers())
            if Int64(crc) != entry["crc32_f32"]!.int! { failures.append("\(name): values differ") }
        }
        #expect(failures.isEmpty, "\(failures.prefix(10))")
        if file == "clip-tiny-openai.pt" {
            // TorchScript archives also hold non-state tensors as attributes (e.g. attention masks).
            #expect(Set(expectedNames).isSubset(of: Set(weights.names)))
        } else {
            #expect(Set(weights.names) == Set(expectedNames))
        }
    }

    @Test func ultralyticsCheckpointAttributes() throws {
        let weights = try WeightFile.open(Support.fixture("yolov8n-worldv2-random.pt"))
        let expected = try #require(Self.expected["yolov8n-worldv2-random.pt"])
        #expect(weights.format == .torchZip)
        let txt = try #require(weights.attributes["txt_feats"])
        #expect(txt.shape == [1, 80, 512])
        #expect(Int64(Support.crc32(floats: txt.floats())) == expected["txt_feats"]!["crc32_f32"]!.int!)
        let stride = try #require(weights.attributes["model.22.stride"])
        #expect(stride.floats() == (0..<3).map { Float(expected["stride"]![$0].number!) })
        let names = try JSONValue(parsing: try #require(weights.metadata["names"]))
        guard case .array(let list) = names else { throw CancellationError() }
        #expect(list.count == 80)
        #expect(list.first == .string(expected["names"]!["0"]!.string!))
        #expect(weights.batchNormEpsilon.count > 50)
        #expect(weights.batchNormEpsilon.values.allSatisfy { $0 == expected["bn_eps"]![0].number! })
        #expect(weights.batchNormEpsilon["model.0.bn"] != nil)
        #expect(weights.metadata["version"] == "8.4.190")
    }

    @Test func safetensorsMetadataAndDtypes() throws {
        let weights = try WeightFile.open(Support.fixture("dtypes.safetensors"))
        #expect(weights.metadata["purpose"] == "dtype coverage")
        let special = try weights.view("f16_special").floats()
        #expect(special[0] == .infinity && special[1] == -.infinity && special[4] == 65504)
        #expect(special[3].sign == .minus)
        #expect(try weights.view("scalar").floats() == [2.5])
        #expect(try weights.view("empty").shape == [0, 4])
        #expect(try weights.view("i64").integers() == Array(-3..<9))
    }

    @Test func canonicalConversionRoundTrips() throws {
        let directory = Support.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for file in ["yolov8n-worldv2-random.pt", "clip-tiny-openai.pt"] {
            let source = try WeightFile.open(Support.fixture(file))
            let output = directory + "/" + file + ".safetensors"
            try source.writeCanonical(to: output)
            let canonical = try WeightFile.open(output)
            #expect(canonical.format == .safetensors)
            for name in source.names {
                let original = source.tensors[name]!
                let converted = try #require(canonical.tensors[name])
                #expect(converted.shape == original.shape, "\(name)")
                if original.dtype.isFloatingPoint {
                    #expect(converted.dtype == .float32)
                    #expect(converted.floats() == original.floats(), "\(name)")
                } else {
                    #expect(converted.integers() == original.integers(), "\(name)")
                }
            }
            // Attributes come back as attributes (not as tensors), BatchNorm epsilons from the metadata.
            #expect(canonical.names.count == source.names.count)
            #expect(Set(canonical.attributes.keys) == Set(source.attributes.keys))
            for (name, view) in source.attributes {
                #expect(canonical.attributes[name]?.floats() == view.floats(), "\(name)")
            }
            #expect(canonical.batchNormEpsilon == source.batchNormEpsilon)
            #expect(canonical.metadata["lookout.format"] == "canonical-1")
            #expect(canonical.metadata["names"] == source.metadata["names"])
        }
    }

    /// `keepHalf`: F16 tensors stay F16 with the same bits (half the file), others as in the F32 form.
    @Test func canonicalConversionCanKeepHalfPrecision() throws {
        let directory = Support.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let source = try WeightFile.open(Support.fixture("yolov8n-worldv2-random.pt"))
        let half = directory + "/half.safetensors", full = directory + "/full.safetensors"
        try source.writeCanonical(to: half, keepHalf: true)
        try source.writeCanonical(to: full)
        let converted = try WeightFile.open(half)
        var halfCount = 0
        for name in source.names {
            let original = source.tensors[name]!
            let view = try #require(converted.tensors[name])
            if original.dtype == .float16 {
                halfCount += 1
                #expect(view.dtype == .float16 && view.halfBits() == original.halfBits(), "\(name)")
            } else if original.dtype.isFloatingPoint {
                #expect(view.floats() == original.floats(), "\(name)")
            }
        }
        #expect(halfCount > 100)
        let sizes = try [half, full].map { try FileManager.default.attributesOfItem(atPath: $0)[.size] as! Int }
        #expect(Double(sizes[0]) < 0.6 * Double(sizes[1]), "\(sizes)")
    }
}
