// libFuzzer target: any bytes as a weight file (safetensors header and data, or a zip).
// Build and run with scripts/fuzz safetensors SECONDS.
import LookoutWeights

@_cdecl("LLVMFuzzerTestOneInput")
public func lookoutFuzzSafeTensors(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var bytes: [UInt8] = []
    // Make most inputs reach the safetensors reader: a plausible header length is prepended
    // unless the input already starts like a safetensors or zip file.
    let raw = UnsafeBufferPointer(start: data, count: size)
    if size >= 9 && (raw[8] == UInt8(ascii: "{") || (raw[0] == 0x50 && raw[1] == 0x4B)) {
        bytes = Array(raw)
    } else {
        withUnsafeBytes(of: UInt64(size).littleEndian) { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: raw)
    }
    if let weights = try? WeightFile.open(MappedFile(contents: bytes, name: "fuzz")) {
        for name in weights.names { _ = weights.tensors[name]!.floats() }
    }
    return 0
}

// SwiftPM links executables with their entry point renamed to <module>_main; that entry runs libFuzzer's
// driver (libFuzzer's own main() is then not linked in).
@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> Int32
) -> Int32

@_cdecl("fuzz_safetensors_main")
func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var count = argc
    var arguments = argv
    return runFuzzerDriver(&count, &arguments, lookoutFuzzSafeTensors)
}
