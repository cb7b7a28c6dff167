#if canImport(Glibc)
    import Glibc
#endif

/// Bytes that FFmpeg reads as a file, though no folder names it: written to a private temporary file that is
/// unlinked as soon as it is made, and read through its open descriptor's name (`/proc/self/fd/N`). Nothing is
/// left behind whatever ends the work or the process; the bytes go when this is released.
public final class UnlinkedFile {
    public enum Problem: Error, Sendable {
        /// No temporary file could be made in the folder.
        case cannotCreate
        /// The bytes could not all be written (a full disk).
        case cannotWrite
    }

    /// The name to open it by, valid while this lives.
    public let path: String
    private let descriptor: Int32

    /// `directory`: where the file is made (and at once unlinked), e.g. `NSTemporaryDirectory()`.
    public init(bytes: [UInt8], directory: String) throws(Problem) {
        var template = Array((directory + "/lookout-upload-XXXXXX").utf8CString)
        let descriptor = mkstemp(&template)
        guard descriptor >= 0 else { throw .cannotCreate }
        unlink(template)
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + written, $0.count - written) }
            guard count > 0 else {
                close(descriptor)
                throw .cannotWrite
            }
            written += count
        }
        self.descriptor = descriptor
        path = "/proc/self/fd/\(descriptor)"
    }

    deinit { close(descriptor) }
}
