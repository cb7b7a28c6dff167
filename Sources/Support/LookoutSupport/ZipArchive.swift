/// A ZIP archive of stored (uncompressed) files, written in memory: what a browser downloads and every unzip tool
/// opens. Photos are compressed already, so storing costs little and keeps the writer simple. Names are UTF-8
/// (flag bit 11); no ZIP64, so the archive stays below 4 GiB (``maximumSize``).
public struct ZipArchive: Sendable {
    public private(set) var bytes: [UInt8] = []
    private var directory: [UInt8] = []
    private var count = 0

    /// The most bytes an archive may hold (without ZIP64's larger fields).
    public static let maximumSize = Int(UInt32.max) - (1 << 20)

    public init() {}

    /// Whether `size` more bytes (and a name of `nameLength`) still fit.
    public func fits(_ size: Int, nameLength: Int = 256) -> Bool {
        bytes.count + directory.count + size + 2 * (46 + nameLength) + 22 < Self.maximumSize
    }

    /// Appends a file (a path with `/` between folders). Fails when the archive would pass ``maximumSize``.
    public mutating func add(_ path: String, _ contents: [UInt8]) -> Bool {
        let name = Array(path.utf8)
        guard name.count <= 0xFFFF, count < 0xFFFF, fits(contents.count, nameLength: name.count) else { return false }
        let crc = Self.crc32(contents)
        let offset = UInt32(bytes.count)
        // Version 2.0, UTF-8 names, stored, 1980-01-01 00:00 (a fixed time: the same archive every time).
        var local: [UInt8] = []
        Self.put32(0x0403_4b50, &local)
        Self.put16(20, &local)
        Self.put16(0x0800, &local)
        Self.put16(0, &local)
        Self.put16(0, &local)
        Self.put16(0x21, &local)
        Self.put32(crc, &local)
        Self.put32(UInt32(contents.count), &local)
        Self.put32(UInt32(contents.count), &local)
        Self.put16(UInt16(name.count), &local)
        Self.put16(0, &local)
        bytes += local + name + contents
        Self.put32(0x0201_4b50, &directory)
        Self.put16(20, &directory)
        directory += local[4..<28]  // version needed … name length
        Self.put16(0, &directory)  // extra
        Self.put16(0, &directory)  // comment
        Self.put16(0, &directory)  // disk
        Self.put16(0, &directory)  // internal attributes
        Self.put32(0, &directory)  // external attributes
        Self.put32(offset, &directory)
        directory += name
        count += 1
        return true
    }

    /// The finished archive: the files, the central directory and its end record.
    public func finished() -> [UInt8] {
        var end: [UInt8] = []
        Self.put32(0x0605_4b50, &end)
        Self.put16(0, &end)
        Self.put16(0, &end)
        Self.put16(UInt16(count), &end)
        Self.put16(UInt16(count), &end)
        Self.put32(UInt32(directory.count), &end)
        Self.put32(UInt32(bytes.count), &end)
        Self.put16(0, &end)
        return bytes + directory + end
    }

    private static func put16(_ value: UInt16, _ out: inout [UInt8]) {
        out += [UInt8(value & 0xFF), UInt8(value >> 8)]
    }

    private static func put32(_ value: UInt32, _ out: inout [UInt8]) {
        out += [UInt8(value & 0xFF), UInt8((value >> 8) & 0xFF), UInt8((value >> 16) & 0xFF), UInt8(value >> 24)]
    }

    private static let table: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    /// CRC-32 (ISO-HDLC, the one ZIP and PNG use).
    public static func crc32(_ data: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        data.withUnsafeBufferPointer { buffer in
            for byte in buffer { c = table[Int((c ^ UInt32(byte)) & 0xFF)] ^ (c >> 8) }
        }
        return c ^ 0xFFFF_FFFF
    }
}
