#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reading whole files, with errors that name the file and the system's reason.
public enum FileContents {
    public struct ReadError: Error, CustomStringConvertible, Sendable {
        public let path: String
        public let reason: String
        public var description: String { "\(path): \(reason)" }
    }

    /// The bytes of the regular file at `path`.
    public static func read(_ path: String, maximumSize: Int = 1 << 30) throws(ReadError) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ReadError(path: path, reason: systemReason()) }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw ReadError(path: path, reason: systemReason()) }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw ReadError(path: path, reason: "not a regular file")
        }
        let size = Int(info.st_size)
        guard size <= maximumSize else {
            throw ReadError(path: path, reason: "file of \(size) bytes is larger than the \(maximumSize)-byte limit")
        }
        var bytes = [UInt8](repeating: 0, count: size)
        var filled = 0
        while filled < size {
            let count = bytes.withUnsafeMutableBytes { systemRead(descriptor, $0.baseAddress! + filled, size - filled) }
            if count < 0 {
                if errno == EINTR { continue }
                throw ReadError(path: path, reason: systemReason())
            }
            if count == 0 { break }
            filled += count
        }
        if filled < size { bytes.removeLast(size - filled) }
        return bytes
    }

    private static func systemRead(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
        #if canImport(Glibc)
            Glibc.read(descriptor, buffer, count)
        #else
            Darwin.read(descriptor, buffer, count)
        #endif
    }

    static func systemReason() -> String {
        String(cString: strerror(errno))
    }
}
