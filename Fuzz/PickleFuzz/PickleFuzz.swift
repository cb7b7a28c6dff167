// libFuzzer target: any bytes as a pickle, on its own and as the data.pkl of a torch zip checkpoint
// with one 64-byte storage "0". Build and run with scripts/fuzz pickle SECONDS.
import LookoutWeights

@_cdecl("LLVMFuzzerTestOneInput")
public func lookoutFuzzPickle(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let pickle = Array(UnsafeBufferPointer(start: data, count: size))
    _ = try? pickle.withUnsafeBytes { try Unpickler.load($0) }
    let archive = storedZip([("fuzz/data.pkl", pickle), ("fuzz/data/0", [UInt8](repeating: 0x3F, count: 64))])
    if let weights = try? WeightFile.open(MappedFile(contents: archive, name: "fuzz.pt")) {
        for name in weights.names { _ = weights.tensors[name]!.floats() }
        for view in weights.attributes.values { _ = view.floats() }
    }
    return 0
}

/// Stored zip entries with a central directory (CRCs left zero: the reader does not check them).
func storedZip(_ entries: [(String, [UInt8])]) -> [UInt8] {
    var out: [UInt8] = []
    var central: [UInt8] = []
    func put<T: FixedWidthInteger>(_ value: T, _ target: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { target.append(contentsOf: $0) }
    }
    for (name, data) in entries {
        let offset = out.count
        let nameBytes = Array(name.utf8)
        put(UInt32(0x0403_4B50), &out)
        for _ in 0..<5 { put(UInt16(0), &out) }
        put(UInt32(0), &out); put(UInt32(data.count), &out); put(UInt32(data.count), &out)
        put(UInt16(nameBytes.count), &out); put(UInt16(0), &out)
        out += nameBytes + data
        put(UInt32(0x0201_4B50), &central)
        for _ in 0..<6 { put(UInt16(0), &central) }
        put(UInt32(0), &central); put(UInt32(data.count), &central); put(UInt32(data.count), &central)
        put(UInt16(nameBytes.count), &central)
        for _ in 0..<4 { put(UInt16(0), &central) }
        put(UInt32(0), &central); put(UInt32(offset), &central)
        central += nameBytes
    }
    let directory = out.count
    out += central
    put(UInt32(0x0605_4B50), &out); put(UInt16(0), &out); put(UInt16(0), &out)
    put(UInt16(entries.count), &out); put(UInt16(entries.count), &out)
    put(UInt32(central.count), &out); put(UInt32(directory), &out); put(UInt16(0), &out)
    return out
}

// SwiftPM links executables with their entry point renamed to <module>_main; that entry runs libFuzzer's
// driver (libFuzzer's own main() is then not linked in).
@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> Int32
) -> Int32

@_cdecl("fuzz_pickle_main")
func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var count = argc
    var arguments = argv
    return runFuzzerDriver(&count, &arguments, lookoutFuzzPickle)
}
