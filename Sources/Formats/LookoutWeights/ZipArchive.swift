/// A reader for the zip container of PyTorch checkpoints, over a memory-mapped file.
///
/// Reads the central directory (ZIP64 included) and gives each entry's byte range. Only stored
/// (uncompressed) entries can be read, which is how `torch.save` writes them; every offset and size is
/// checked against the file before use.
struct ZipArchive {
    struct Entry {
        let name: String
        let method: UInt16
        let compressedSize: Int
        let size: Int
        let localHeaderOffset: Int
    }

    let file: MappedFile
    let entries: [Entry]
    private let index: [String: Int]

    init(_ file: MappedFile) throws(WeightsError) {
        func fail(_ problem: String) -> WeightsError { WeightsError(path: file.path, problem: "zip: \(problem)") }
        self.file = file
        // End of central directory: 22 bytes plus up to 65,535 bytes of comment, at the end.
        var eocd = -1
        var position = file.count - 22
        let lowest = max(0, file.count - 22 - 65_535)
        while position >= lowest {
            if file.integer(at: position, as: UInt32.self) == 0x0605_4B50 {
                eocd = position
                break
            }
            position -= 1
        }
        guard eocd >= 0 else { throw fail("no end-of-central-directory record (file truncated?)") }
        guard let count16 = file.integer(at: eocd + 10, as: UInt16.self),
            let size32 = file.integer(at: eocd + 12, as: UInt32.self),
            let offset32 = file.integer(at: eocd + 16, as: UInt32.self)
        else { throw fail("end-of-central-directory record cut short") }
        var count = Int(count16)
        var directorySize = Int(size32)
        var directoryOffset = Int(offset32)
        if count == 0xFFFF || directorySize == 0xFFFF_FFFF || directoryOffset == 0xFFFF_FFFF {
            let locator = eocd - 20
            guard file.integer(at: locator, as: UInt32.self) == 0x0706_4B50,
                let record = file.integer(at: locator + 8, as: UInt64.self), record < UInt64(file.count),
                file.integer(at: Int(record), as: UInt32.self) == 0x0606_4B50,
                let count64 = file.integer(at: Int(record) + 32, as: UInt64.self),
                let size64 = file.integer(at: Int(record) + 40, as: UInt64.self),
                let offset64 = file.integer(at: Int(record) + 48, as: UInt64.self),
                count64 < 10_000_000, size64 < UInt64(file.count), offset64 < UInt64(file.count)
            else { throw fail("damaged ZIP64 end-of-central-directory record") }
            count = Int(count64)
            directorySize = Int(size64)
            directoryOffset = Int(offset64)
        }
        guard directoryOffset >= 0, directorySize >= 0, directoryOffset + directorySize <= file.count,
            count <= directorySize / 46 + 1
        else { throw fail("central directory lies outside the file") }

        var entries: [Entry] = []
        entries.reserveCapacity(count)
        var index: [String: Int] = [:]
        var cursor = directoryOffset
        for _ in 0..<count {
            guard file.integer(at: cursor, as: UInt32.self) == 0x0201_4B50,
                let method = file.integer(at: cursor + 10, as: UInt16.self),
                let compressed32 = file.integer(at: cursor + 20, as: UInt32.self),
                let size32 = file.integer(at: cursor + 24, as: UInt32.self),
                let nameLength = file.integer(at: cursor + 28, as: UInt16.self),
                let extraLength = file.integer(at: cursor + 30, as: UInt16.self),
                let commentLength = file.integer(at: cursor + 32, as: UInt16.self),
                let offset32 = file.integer(at: cursor + 42, as: UInt32.self)
            else { throw fail("damaged central directory entry") }
            let nameStart = cursor + 46
            let extraStart = nameStart + Int(nameLength)
            let next = extraStart + Int(extraLength) + Int(commentLength)
            guard next <= file.count else { throw fail("central directory entry runs past the end of the file") }
            let name = String(decoding: file.bytes[nameStart..<extraStart], as: UTF8.self)
            var compressed = Int(compressed32)
            var size = Int(size32)
            var offset = Int(offset32)
            // ZIP64 extended information: 8-byte values for the fields saturated above, in this order.
            var extra = extraStart
            while extra + 4 <= extraStart + Int(extraLength) {
                guard let id = file.integer(at: extra, as: UInt16.self),
                    let length16 = file.integer(at: extra + 2, as: UInt16.self)
                else { throw fail("extra field runs past the end of the file") }
                let length = Int(length16)
                if id == 0x0001 {
                    var field = extra + 4
                    for target in 0..<3 {
                        let saturated = [size32, compressed32, offset32][target] == 0xFFFF_FFFF
                        guard saturated else { continue }
                        guard field + 8 <= extra + 4 + length, let value = file.integer(at: field, as: UInt64.self),
                            value < UInt64(Int.max / 2)
                        else { throw fail("damaged ZIP64 extra field of \(name)") }
                        switch target {
                        case 0: size = Int(value)
                        case 1: compressed = Int(value)
                        default: offset = Int(value)
                        }
                        field += 8
                    }
                }
                extra += 4 + length
            }
            index[name] = entries.count
            entries.append(
                Entry(name: name, method: method, compressedSize: compressed, size: size, localHeaderOffset: offset))
            cursor = next
        }
        self.entries = entries
        self.index = index
    }

    func entry(_ name: String) -> Entry? {
        index[name].map { entries[$0] }
    }

    /// The byte range of a stored entry's data in the file.
    func dataRange(_ entry: Entry) throws(WeightsError) -> Range<Int> {
        func fail(_ problem: String) -> WeightsError {
            WeightsError(path: file.path, problem: "zip entry \(entry.name): \(problem)")
        }
        guard entry.method == 0 else {
            throw fail("compressed (method \(entry.method)); PyTorch checkpoints store entries uncompressed")
        }
        let header = entry.localHeaderOffset
        guard header >= 0, file.integer(at: header, as: UInt32.self) == 0x0403_4B50,
            let nameLength = file.integer(at: header + 26, as: UInt16.self),
            let extraLength = file.integer(at: header + 28, as: UInt16.self)
        else { throw fail("no local header at offset \(header)") }
        let start = header + 30 + Int(nameLength) + Int(extraLength)
        guard entry.size == entry.compressedSize, start <= file.count, entry.size <= file.count - start else {
            throw fail("data (\(entry.size) bytes at \(start)) runs past the end of the \(file.count)-byte file")
        }
        return start..<(start + entry.size)
    }
}
