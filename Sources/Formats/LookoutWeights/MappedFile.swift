import LookoutSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A read-only memory map of a whole file, unmapped when the last reference goes.
public final class MappedFile: @unchecked Sendable {
    public let path: String
    public let bytes: UnsafeRawBufferPointer

    public init(path: String) throws(WeightsError) {
        self.path = path
        let descriptor = FileSystem.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)  // a named pipe must not block
        guard descriptor >= 0 else {
            throw WeightsError(path: path, kind: .unreadable, problem: String(cString: strerror(errno)))
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw WeightsError(path: path, kind: .unreadable, problem: String(cString: strerror(errno)))
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw WeightsError(path: path, kind: .unreadable, problem: "not a regular file")
        }
        let size = Int(info.st_size)
        if size == 0 {
            bytes = UnsafeRawBufferPointer(start: nil, count: 0)
            return
        }
        guard let address = mmap(nil, size, PROT_READ, MAP_PRIVATE, descriptor, 0), address != MAP_FAILED else {
            throw WeightsError(
                path: path, kind: .unreadable, problem: "cannot map the file: \(String(cString: strerror(errno)))")
        }
        bytes = UnsafeRawBufferPointer(start: address, count: size)
    }

    /// Maps bytes held in memory (tests, fuzzing): the file is a copy of `contents`.
    public init(contents: [UInt8], name: String) {
        path = name
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(contents.count, 1), alignment: 64)
        buffer.copyBytes(from: contents)
        bytes = UnsafeRawBufferPointer(start: buffer.baseAddress, count: contents.count)
        ownsAllocation = true
    }

    private var ownsAllocation = false

    /// Lets the kernel drop the pages read so far from this process's resident memory (a read-only private
    /// map: they are read again from the page cache if touched). For models that copy what they need at load.
    public func dropResidentPages() {
        guard !ownsAllocation, let base = bytes.baseAddress, bytes.count > 0 else { return }
        _ = madvise(UnsafeMutableRawPointer(mutating: base), bytes.count, Int32(MADV_DONTNEED))
    }

    /// Asks the kernel to read the pages holding `length` bytes from `offset` ahead, all at once
    /// (MADV_WILLNEED): where the file is larger than memory, the disk then reads them side by side instead of
    /// one fault at a time. Nothing for a file read into memory.
    public func willNeed(offset: Int, length: Int) {
        guard !ownsAllocation, let base = bytes.baseAddress else { return }
        let page = max(Int(sysconf(Int32(_SC_PAGESIZE))), 1)
        let first = max(offset, 0) / page * page
        let end = min(offset + length, bytes.count)
        guard end > first else { return }
        _ = madvise(UnsafeMutableRawPointer(mutating: base + first), end - first, Int32(MADV_WILLNEED))
    }

    deinit {
        guard let base = bytes.baseAddress else { return }
        if ownsAllocation {
            UnsafeMutableRawPointer(mutating: base).deallocate()
        } else {
            munmap(UnsafeMutableRawPointer(mutating: base), bytes.count)
        }
    }

    public var count: Int { bytes.count }

    /// Little-endian integer at `offset`; nil when out of bounds.
    func integer<T: FixedWidthInteger>(at offset: Int, as type: T.Type = T.self) -> T? {
        guard offset >= 0, offset <= count - MemoryLayout<T>.size else { return nil }
        return T(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}
