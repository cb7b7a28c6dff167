import Foundation
import LookoutJSON
import LookoutWeights

enum Support {
    static let repositoryRoot: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path
    }()
    static let fixtures = repositoryRoot + "/Tests/Fixtures/weights"

    static func fixture(_ name: String) -> String { fixtures + "/" + name }

    static func bytes(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: fixture(name))))
    }

    /// A fresh temporary folder.
    static func temporaryDirectory() -> String {
        let path = NSTemporaryDirectory() + "lookout-weights-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// CRC-32 (IEEE, as zlib.crc32) of `bytes`.
    static func crc32<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = (crc >> 1) ^ (0xEDB8_8320 & (0 &- (crc & 1))) }
        }
        return ~crc
    }

    static func crc32(floats: [Float]) -> UInt32 {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(floats.count * 4)
        for value in floats { withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) } }
        return crc32(bytes)
    }

    static func crc32(integers: [Int64]) -> UInt32 {
        var bytes: [UInt8] = []
        for value in integers { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
        return crc32(bytes)
    }

    /// A minimal zip writer (stored entries), for building malformed checkpoints in tests.
    static func zip(_ entries: [(String, [UInt8])]) -> [UInt8] {
        var out: [UInt8] = []
        var central: [UInt8] = []
        func u16(_ value: Int, _ target: inout [UInt8]) {
            withUnsafeBytes(of: UInt16(value).littleEndian) { target.append(contentsOf: $0) }
        }
        func u32(_ value: Int, _ target: inout [UInt8]) {
            withUnsafeBytes(of: UInt32(value).littleEndian) { target.append(contentsOf: $0) }
        }
        for (name, data) in entries {
            let offset = out.count
            let nameBytes = Array(name.utf8)
            let crc = Int(crc32(data))
            u32(0x0403_4B50, &out); u16(20, &out); u16(0, &out); u16(0, &out); u16(0, &out); u16(0, &out)
            u32(crc, &out); u32(data.count, &out); u32(data.count, &out); u16(nameBytes.count, &out); u16(0, &out)
            out += nameBytes
            out += data
            u32(0x0201_4B50, &central); u16(20, &central); u16(20, &central); u16(0, &central); u16(0, &central)
            u16(0, &central); u16(0, &central); u32(crc, &central); u32(data.count, &central); u32(data.count, &central)
            u16(nameBytes.count, &central); u16(0, &central); u16(0, &central); u16(0, &central); u16(0, &central)
            u32(0, &central); u32(offset, &central)
            central += nameBytes
        }
        let directoryOffset = out.count
        out += central
        u32(0x0605_4B50, &out); u16(0, &out); u16(0, &out); u16(entries.count, &out); u16(entries.count, &out)
        u32(central.count, &out); u32(directoryOffset, &out); u16(0, &out)
        return out
    }

    /// Pickle bytes for a torch.save state dict `{name: tensor}` whose single tensor is `storage` viewed with
    /// `size`/`stride`/`offset` (protocol 2, the opcodes torch.save uses).
    static func stateDictPickle(
        name: String = "w", storageKey: String = "0", storageType: String = "FloatStorage", numel: Int, size: [Int],
        stride: [Int], offset: Int = 0
    ) -> [UInt8] {
        var p: [UInt8] = [0x80, 0x02, 0x7D]  // PROTO 2, EMPTY_DICT
        func unicode(_ text: String) {
            let b = Array(text.utf8); p.append(0x58); withUnsafeBytes(of: UInt32(b.count).littleEndian) { p += $0 };
            p += b
        }
        func int(_ value: Int) {
            if let small = Int32(exactly: value) {
                p.append(0x4A); withUnsafeBytes(of: small.littleEndian) { p += $0 }
            } else {
                p += [0x8A, 8]; withUnsafeBytes(of: Int64(value).littleEndian) { p += $0 }  // LONG1
            }
        }
        func global(_ module: String, _ name: String) { p.append(0x63); p += Array("\(module)\n\(name)\n".utf8) }
        unicode(name)
        global("torch._utils", "_rebuild_tensor_v2")
        p.append(0x28)  // MARK (arguments tuple)
        p.append(0x28)  // MARK (persistent id tuple)
        unicode("storage"); global("torch", storageType); unicode(storageKey); unicode("cpu"); int(numel)
        p.append(0x74)  // TUPLE
        p.append(0x51)  // BINPERSID
        int(offset)
        p.append(0x28); for value in size { int(value) }; p.append(0x74)
        p.append(0x28); for value in stride { int(value) }; p.append(0x74)
        p.append(0x89)  // NEWFALSE
        global("collections", "OrderedDict"); p.append(0x29); p.append(0x52)  // OrderedDict()
        p.append(0x74)  // TUPLE (arguments)
        p.append(0x52)  // REDUCE
        p.append(0x73)  // SETITEM
        p.append(0x2E)  // STOP
        return p
    }

    static func floatBytes(_ values: [Float]) -> [UInt8] {
        var out: [UInt8] = []
        for value in values { withUnsafeBytes(of: value.bitPattern.littleEndian) { out += $0 } }
        return out
    }
}
