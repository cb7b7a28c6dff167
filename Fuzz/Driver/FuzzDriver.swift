// libFuzzer driver for every target in LookoutFuzzing (FuzzTarget): the target is named by
// $LOOKOUT_FUZZ_TARGET. Build and run with scripts/fuzz TARGET SECONDS.
import LookoutFuzzing

#if canImport(Glibc)
    import Glibc
#endif

nonisolated(unsafe) private var selected: FuzzTarget = .safetensors

@_cdecl("LLVMFuzzerTestOneInput")
public func lookoutFuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    selected.run(Array(UnsafeBufferPointer(start: data, count: size)))
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

@_cdecl("lookout_fuzz_main")
func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    let name = getenv("LOOKOUT_FUZZ_TARGET").map { String(cString: $0) } ?? ""
    guard let target = FuzzTarget(rawValue: name) else {
        let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
        let message = Array("lookout-fuzz: set LOOKOUT_FUZZ_TARGET to one of: \(names)\n".utf8)
        _ = message.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        return 64
    }
    selected = target
    var count = argc
    var arguments = argv
    return runFuzzerDriver(&count, &arguments, lookoutFuzzOneInput)
}
