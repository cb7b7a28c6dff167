#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reading whole files, with errors that name the file and the system's reason.
public enum FileContents {
    public struct FileError: Error, CustomStringConvertible, Sendable {
        public let path: String
        public let reason: String
        public var description: String { "\(path): \(reason)" }

        public init(path: String, reason: String) {
            self.path = path
            self.reason = reason
        }
    }

    /// The bytes of the regular file at `path`.
    public static func read(_ path: String, maximumSize: Int = 1 << 30) throws(FileError) -> [UInt8] {
        // O_NONBLOCK: opening a named pipe must not wait for a writer (it is then refused as not a regular file).
        let descriptor = FileSystem.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { throw FileError(path: path, reason: systemReason()) }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw FileError(path: path, reason: systemReason()) }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw FileError(path: path, reason: "not a regular file")
        }
        let size = Int(info.st_size)
        guard size <= maximumSize else {
            throw FileError(path: path, reason: "file of \(size) bytes is larger than the \(maximumSize)-byte limit")
        }
        var bytes = [UInt8](repeating: 0, count: size)
        var filled = 0
        while filled < size {
            let count = bytes.withUnsafeMutableBytes { systemRead(descriptor, $0.baseAddress! + filled, size - filled) }
            if count < 0 {
                if errno == EINTR { continue }
                throw FileError(path: path, reason: systemReason())
            }
            if count == 0 { break }
            filled += count
        }
        if filled < size { bytes.removeLast(size - filled) }
        return bytes
    }

    /// The first `count` bytes of the regular file at `path` (fewer when it is shorter).
    public static func readPrefix(_ path: String, count: Int) throws(FileError) -> [UInt8] {
        let descriptor = FileSystem.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { throw FileError(path: path, reason: systemReason()) }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw FileError(path: path, reason: "not a regular file")
        }
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = bytes.withUnsafeMutableBytes { systemRead(descriptor, $0.baseAddress! + filled, count - filled) }
            if got < 0 && errno == EINTR { continue }
            if got <= 0 { break }
            filled += got
        }
        return Array(bytes[0..<filled])
    }

    /// Writes `bytes` to `path` by writing a temporary file beside it and renaming it over `path`, so
    /// that readers see the old or the new contents, never a partial file. Creates missing folders.
    public static func writeAtomically(_ bytes: [UInt8], to path: String) throws(FileError) {
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            try makeDirectories(String(path[..<slash]))
        }
        let temporary = path + ".tmp.\(getpid())"
        let descriptor = FileSystem.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw FileError(path: temporary, reason: systemReason()) }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes {
                systemWrite(descriptor, $0.baseAddress! + written, bytes.count - written)
            }
            if count < 0 {
                if errno == EINTR { continue }
                let reason = systemReason()
                close(descriptor)
                _ = FileSystem.unlink(temporary)
                throw FileError(path: temporary, reason: reason)
            }
            written += count
        }
        guard close(descriptor) == 0, FileSystem.rename(temporary, path) == 0 else {
            let reason = systemReason()
            _ = FileSystem.unlink(temporary)
            throw FileError(path: path, reason: reason)
        }
    }

    /// `mkdir -p`.
    public static func makeDirectories(_ path: String) throws(FileError) {
        var info = stat()
        if stat(path, &info) == 0 { return }
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            try makeDirectories(String(path[..<slash]))
        }
        if FileSystem.mkdir(path, 0o755) != 0 && errno != EEXIST { throw FileError(path: path, reason: systemReason()) }
    }

    private static func systemWrite(_ descriptor: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Glibc)
            Glibc.write(descriptor, buffer, count)
        #else
            Darwin.write(descriptor, buffer, count)
        #endif
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
