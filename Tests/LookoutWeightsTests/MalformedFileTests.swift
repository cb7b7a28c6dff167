import Foundation
import LookoutJSON
import LookoutWeights
import Testing

/// Bad files are errors that say what is wrong: never a crash, a hang, or code execution.
@Suite struct MalformedFileTests {
    func open(_ bytes: [UInt8], name: String = "test.pt") throws(WeightsError) -> WeightFile {
        try WeightFile.open(MappedFile(contents: bytes, name: name))
    }

    func expectError(_ bytes: [UInt8], containing fragment: String, sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            _ = try open(bytes)
            Issue.record("expected an error containing \(fragment)", sourceLocation: sourceLocation)
        } catch {
            #expect(error.path == "test.pt", sourceLocation: sourceLocation)
            #expect(error.problem.contains(fragment), "\(error.problem)", sourceLocation: sourceLocation)
        }
    }

    @Test func pickleThatReducesOsSystemRunsNothing() throws {
        let marker = "/tmp/lookout-pickle-executed"
        try? FileManager.default.removeItem(atPath: marker)
        #expect(throws: WeightsError.self) { try WeightFile.open(Support.fixture("evil-reduce.pt")) }
        // Read the pickle itself: the call is recorded as an inert object.
        let archive = try Support.bytes("evil-reduce.pt")
        let start = archive.firstIndex(of: 0x80)!
        let document = try archive[start...].withUnsafeBytes { try Unpickler.load($0) }
        let value = document.root
        let object = try #require(value.dict?["model"]?.object)
        #expect(object.module == "posix" && object.name == "system")
        #expect(object.arguments.first?.string == "touch /tmp/lookout-pickle-executed")
        #expect(!FileManager.default.fileExists(atPath: marker))
    }

    @Test(arguments: [0.0, 0.01, 0.3, 0.5, 0.9, 0.999])
    func truncatedCheckpoint(fraction: Double) throws {
        let bytes = try Support.bytes("yolov8n-worldv2-random.pt")
        let cut = Array(bytes.prefix(Int(Double(bytes.count) * fraction)))
        #expect(throws: WeightsError.self) { try open(cut) }
    }

    @Test(arguments: [0.1, 0.5, 0.99])
    func truncatedSafetensors(fraction: Double) throws {
        let bytes = try Support.bytes("clip-tiny-hf.safetensors")
        #expect(throws: WeightsError.self) { try open(Array(bytes.prefix(Int(Double(bytes.count) * fraction)))) }
    }

    @Test func wrongMagic() {
        expectError(Array("GIF89a not a model at all".utf8), containing: "not a weight file")
        expectError([], containing: "not a weight file")
    }

    @Test func unknownOpcode() {
        let zip = Support.zip([("archive/data.pkl", [0x80, 0x02, 0xFF, 0x2E])])
        expectError(zip, containing: "unknown opcode 0xff")
    }

    @Test func missingStorageEntry() {
        let pickle = Support.stateDictPickle(storageKey: "7", numel: 4, size: [4], stride: [1])
        let zip = Support.zip([("archive/data.pkl", pickle), ("archive/data/0", Support.floatBytes([1, 2, 3, 4]))])
        expectError(zip, containing: "storage entry data/7 is missing")
    }

    @Test func wellFormedHandMadeCheckpointLoads() throws {
        let pickle = Support.stateDictPickle(numel: 6, size: [2, 2], stride: [1, 2], offset: 1)
        let zip = Support.zip([
            ("archive/data.pkl", pickle), ("archive/data/0", Support.floatBytes([0, 1, 2, 3, 4, 5])),
        ])
        let weights = try open(zip)
        // Column-major view starting at element 1: [[1, 3], [2, 4]].
        #expect(try weights.view("w").floats() == [1, 3, 2, 4])
    }

    @Test func outOfRangeShapeStrideOrOffset() {
        for (size, stride, offset) in [([10], [1], 0), ([2, 2], [1, 4], 0), ([4], [1], 3), ([2], [1 << 40], 0)] {
            let pickle = Support.stateDictPickle(numel: 4, size: size, stride: stride, offset: offset)
            let zip = Support.zip([("archive/data.pkl", pickle), ("archive/data/0", Support.floatBytes([1, 2, 3, 4]))])
            expectError(zip, containing: "tensor w")
        }
    }

    @Test func storageSmallerThanItsDeclaredCount() {
        let pickle = Support.stateDictPickle(numel: 8, size: [4], stride: [1])
        let zip = Support.zip([("archive/data.pkl", pickle), ("archive/data/0", Support.floatBytes([1, 2, 3, 4]))])
        expectError(zip, containing: "elements need")
    }

    @Test func deeplyNestedPickleIsReleasedWithoutRecursion() throws {
        let depth = 1_000_000
        var pickle: [UInt8] = [0x80, 0x02]
        pickle += [UInt8](repeating: 0x5D, count: depth)  // EMPTY_LIST × depth
        pickle += [UInt8](repeating: 0x61, count: depth - 1)  // APPEND × (depth − 1): each list into the one below
        pickle.append(0x2E)
        let document = try pickle.withUnsafeBytes { try Unpickler.load($0) }
        let value = document.root  // the document keeps the graph; when it goes, cycles are broken
        #expect(value.tuple?.count == 1)
        // Same with tuples (TUPLE1 around TUPLE1 …).
        let tuples: [UInt8] = [0x80, 0x02, 0x29] + [UInt8](repeating: 0x85, count: depth) + [0x2E]
        _ = try tuples.withUnsafeBytes { try Unpickler.load($0) }
        // And inside a checkpoint: an error (no tensors), not a crash.
        expectError(Support.zip([("archive/data.pkl", pickle)]), containing: "neither")
    }

    @Test func cyclicPickleDoesNotHang() throws {
        // l = []; l.append(l); {"model": l}
        let pickle: [UInt8] =
            [0x80, 0x02, 0x7D, 0x58, 5, 0, 0, 0] + Array("model".utf8) + [
                0x5D, 0x71, 0x00, 0x68, 0x00, 0x61, 0x73, 0x2E,
            ]
        let document = try pickle.withUnsafeBytes { try Unpickler.load($0) }
        let value = document.root  // the document keeps the graph; when it goes, cycles are broken
        #expect(value.dict?["model"]?.tuple?.count == 1)
        expectError(Support.zip([("archive/data.pkl", pickle)]), containing: "no tensors")
    }

    /// Found by the fuzzer (LeakSanitizer): a list appended to itself leaked when the pickle then failed.
    /// The document now empties every container it made, on success when it goes and at once on failure.
    @Test func cyclesAreFreedWithTheDocument() throws {
        weak var list: PickleList?
        do {
            // l = []; l.append(l); {"model": l}
            let pickle: [UInt8] =
                [0x80, 0x02, 0x7D, 0x58, 5, 0, 0, 0] + Array("model".utf8) + [
                    0x5D, 0x71, 0x00, 0x68, 0x00, 0x61, 0x73, 0x2E,
                ]
            let document = try pickle.withUnsafeBytes { try Unpickler.load($0) }
            if case .list(let value) = document.root.dict!["model"]! { list = value }
            #expect(list != nil)
        }
        #expect(list == nil)
        // The fuzzer's input: the same cycle, then an invalid opcode.
        let leaked: [UInt8] = Array("(dp0\nVa\np1\n(lp2\nI1\na2a3.".utf8)
        #expect(throws: PickleError.self) { try leaked.withUnsafeBytes { try Unpickler.load($0) } }
    }

    @Test func truncatedAndLyingPickles() {
        for bytes: [UInt8] in [
            [0x80, 0x02],  // no STOP
            [0x80, 0x02, 0x58, 0xFF, 0xFF, 0xFF, 0x7F, 0x61],  // BINUNICODE longer than the data
            [0x80, 0x02, 0x68, 0x05, 0x2E],  // BINGET of a memo never stored
            [0x80, 0x02, 0x61, 0x2E],  // APPEND on an empty stack
            [0x80, 0x02, 0x74, 0x2E],  // TUPLE without MARK
            [0x80, 0x02, 0x4E, 0x4E, 0x2E],  // two values at STOP
            [0x80, 0x02, 0x8E] + [UInt8](repeating: 0xFF, count: 8) + [0x2E],  // BINBYTES8 of 2^64−1 bytes
        ] {
            #expect(throws: PickleError.self) { try bytes.withUnsafeBytes { try Unpickler.load($0) } }
        }
    }

    // MARK: safetensors headers that lie

    static func safetensors(header: String, data: [UInt8]) -> [UInt8] {
        let json = Array(header.utf8)
        var out: [UInt8] = []
        withUnsafeBytes(of: UInt64(json.count).littleEndian) { out += $0 }
        return out + json + data
    }

    @Test func safetensorsHeaderLies() {
        let data = Support.floatBytes([1, 2, 3, 4])
        let cases: [(String, String)] = [
            (#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,32]}}"#, "outside"),
            (#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}}"#, "do not hold"),
            (
                #"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#,
                "overlap"
            ),
            (#"{"a":{"dtype":"Q8","shape":[4],"data_offsets":[0,16]}}"#, "unsupported dtype"),
            (#"{"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}}"#, "non-negative"),
            (#"{"a":{"dtype":"F32","shape":[4]}}"#, "data_offsets"),
            (#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[16,0]}}"#, "outside"),
            (#"{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}}"#, "too large"),
            (#"{"a": [1, 2"#, "not valid JSON"),
            (#"[1, 2]"#, "not a JSON object"),
        ]
        for (header, fragment) in cases {
            expectError(Self.safetensors(header: header, data: data), containing: fragment)
        }
        var huge: [UInt8] = []
        withUnsafeBytes(of: UInt64(1 << 40).littleEndian) { huge += $0 }
        huge += Array("{}".utf8)
        expectError(huge, containing: "header size")
        var past: [UInt8] = []
        withUnsafeBytes(of: UInt64(1000).littleEndian) { past += $0 }
        past += Array("{}".utf8)
        expectError(past, containing: "runs past the end")
    }
}
