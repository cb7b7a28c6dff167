import LookoutJSON
import LookoutSupport

/// A binary copy of a validated vocabulary, so that a process start does not parse 1.5 MB of JSON.
///
/// The cache file is named after a digest of the JSON file's bytes, so an edited vocabulary gets a new
/// entry; it holds the token table and merge table arrays as they are in memory, and a checksum. A cache
/// that is missing, unreadable, truncated or corrupt is ignored and rewritten (atomically: written
/// beside and renamed). The JSON file stays the source of truth.
extension CLIPVocabulary {
    static let cacheMagic: [UInt8] = Array("LKTVOCAB".utf8)
    static let cacheVersion: UInt32 = 1

    /// Loads the vocabulary at `path`, using (and filling) a binary cache under `cacheDirectory`.
    /// Without a cache directory this is ``init(contentsOf:)``.
    public static func load(
        contentsOf path: String, cacheDirectory: String?
    ) throws(VocabularyError)
        -> CLIPVocabulary
    {
        let json: [UInt8]
        do {
            json = try FileContents.read(path, maximumSize: 256 << 20)
        } catch {
            throw VocabularyError(path: path, kind: .unreadable, problem: error.reason)
        }
        guard let cacheDirectory else { return try CLIPVocabulary(json: json, path: path) }
        let digest = ContentDigest(json)
        let cachePath = cacheDirectory + "/clip-vocab-\(digest.hex).bin"
        if let bytes = try? FileContents.read(cachePath), let cached = CLIPVocabulary(cache: bytes, digest: digest) {
            return cached
        }
        let vocabulary = try CLIPVocabulary(json: json, path: path, digest: digest)
        try? FileContents.writeAtomically(vocabulary.cacheBytes(digest: digest), to: cachePath)
        return vocabulary
    }

    func cacheBytes(digest: ContentDigest) -> [UInt8] {
        var writer = BinaryWriter()
        writer.bytes(Self.cacheMagic)
        writer.integer(Self.cacheVersion)
        writer.integer(digest.high)
        writer.integer(digest.low)
        writer.integer(startOfText)
        writer.integer(endOfText)
        writer.integer(Int64(contextLength))
        writer.integer(Int64(mergeCount))
        writer.array(byteSymbol)
        writer.array(byteEndSymbol)
        let storage = table.storage
        writer.array(storage.bytes)
        writer.array(storage.offsets)
        writer.array(storage.slots)
        writer.array(merges.keys)
        writer.array(merges.values)
        writer.integer(ContentDigest(writer.output).low)
        return writer.output
    }

    init?(cache bytes: [UInt8], digest: ContentDigest) {
        var checksum = BinaryReader(bytes.suffix(8))
        guard bytes.count > 8, ContentDigest(bytes.dropLast(8)).low == checksum.integer() else { return nil }
        var reader = BinaryReader(bytes.dropLast(8))
        guard reader.bytes(8) == Self.cacheMagic, reader.integer() == Self.cacheVersion,
            reader.integer() == digest.high, reader.integer() == digest.low,
            let startOfText: Int32 = reader.integer(), let endOfText: Int32 = reader.integer(),
            let contextLength: Int64 = reader.integer(), let mergeCount: Int64 = reader.integer(),
            let byteSymbol: [Int32] = reader.array(), let byteEndSymbol: [Int32] = reader.array(),
            let tokenBytes: [UInt8] = reader.array(), let offsets: [Int32] = reader.array(),
            let slots: [Int32] = reader.array(), let keys: [UInt64] = reader.array(),
            let values: [UInt64] = reader.array(), reader.isAtEnd,
            let table = TokenTable(bytes: tokenBytes, offsets: offsets, slots: slots),
            let merges = PairTable(keys: keys, values: values),
            byteSymbol.count == 256, byteEndSymbol.count == 256,
            (byteSymbol + byteEndSymbol + [startOfText, endOfText]).allSatisfy({ $0 >= 0 && Int($0) < table.count }),
            (2...65536).contains(contextLength)
        else { return nil }
        self.table = table
        self.digest = digest.hex
        self.merges = merges
        self.byteSymbol = byteSymbol
        self.byteEndSymbol = byteEndSymbol
        self.startOfText = startOfText
        self.endOfText = endOfText
        self.contextLength = Int(contextLength)
        self.mergeCount = Int(mergeCount)
    }
}

/// A 128-bit FNV-1a digest of a file's bytes: identifies content for cache keys (not a security hash).
struct ContentDigest: Equatable, Sendable {
    let high: UInt64
    let low: UInt64

    init<Bytes: Sequence<UInt8>>(_ bytes: Bytes) {
        var a: UInt64 = 0xCBF2_9CE4_8422_2325
        var b: UInt64 = 0x6C62_272E_07BB_0142
        for byte in bytes {
            a = (a ^ UInt64(byte)) &* 0x100_0000_01B3
            b = (b ^ UInt64(byte)) &* 0x0000_0100_0000_0193 ^ (b >> 47)
        }
        high = a
        low = b
    }

    var hex: String {
        [high, low].map { value in
            let digits = String(value, radix: 16)
            return String(repeating: "0", count: 16 - digits.count) + digits
        }.joined()
    }
}

struct BinaryWriter {
    var output: [UInt8] = []

    mutating func bytes(_ values: [UInt8]) { output.append(contentsOf: values) }

    mutating func integer<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { output.append(contentsOf: $0) }
    }

    mutating func array<T: FixedWidthInteger>(_ values: [T]) {
        integer(UInt64(values.count))
        for value in values { integer(value) }
    }
}

struct BinaryReader {
    private let data: [UInt8]
    private var position = 0

    init<Bytes: Collection<UInt8>>(_ bytes: Bytes) { data = Array(bytes) }

    var isAtEnd: Bool { position == data.count }

    mutating func bytes(_ count: Int) -> [UInt8]? {
        guard count >= 0, data.count - position >= count else { return nil }
        defer { position += count }
        return Array(data[position..<(position + count)])
    }

    mutating func integer<T: FixedWidthInteger>() -> T? {
        let size = MemoryLayout<T>.size
        guard data.count - position >= size else { return nil }
        var value = T.zero
        withUnsafeMutableBytes(of: &value) { target in
            data.withUnsafeBytes { source in
                target.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[position..<(position + size)]))
            }
        }
        position += size
        return T(littleEndian: value)
    }

    mutating func array<T: FixedWidthInteger>() -> [T]? {
        guard let count: UInt64 = integer(), count <= UInt64((data.count - position) / MemoryLayout<T>.size) else {
            return nil
        }
        let size = MemoryLayout<T>.size
        var values = [T](repeating: .zero, count: Int(count))
        values.withUnsafeMutableBytes { target in
            data.withUnsafeBytes { source in
                target.copyMemory(
                    from: UnsafeRawBufferPointer(rebasing: source[position..<(position + Int(count) * size)]))
            }
        }
        position += Int(count) * size
        if T.self != UInt8.self && UInt32(1).littleEndian != 1 {
            values = values.map { T(littleEndian: $0) }
        }
        return values
    }
}
