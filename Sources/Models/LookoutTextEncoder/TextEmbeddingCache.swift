import LookoutJSON
import LookoutSupport
import LookoutWeights
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Text embeddings kept in memory and on disk, so a query typed before costs a look-up, not a forward pass.
///
/// Keyed by the text encoder's weights fingerprint, the vocabulary digest and the token ids (so two
/// spellings that tokenize alike share an entry, and a different model never reuses one). On disk, each
/// entry is one small file written beside its final name and renamed into place, so several processes
/// can share the folder and a reader never sees half an entry; each file repeats its token ids and ends
/// with a checksum, and an entry that fails either check is ignored (and recomputed by the caller).
/// Both levels are bounded: memory by entry count, disk by entry count with oldest-first eviction.
public final class TextEmbeddingCache: Sendable {
    public let directory: String?
    public let memoryLimit: Int
    public let diskLimit: Int
    private let memory = Mutex<[String: [Float]]>([:])
    private let writes = Atomic<Int>(0)
    static let magic: [UInt8] = Array("LKTEMB01".utf8)

    /// `directory` nil keeps entries in memory only.
    public init(directory: String?, memoryLimit: Int = 8192, diskLimit: Int = 50_000) {
        self.directory = directory
        self.memoryLimit = memoryLimit
        self.diskLimit = diskLimit
    }

    /// The key of a query for a model: SHA-256 over the model identity and the ids.
    public static func key(model: String, vocabulary: String, ids: [Int32]) -> String {
        var hasher = SHA256()
        hasher.update(Array("\(model)|\(vocabulary)|".utf8))
        ids.withUnsafeBytes { hasher.update($0) }
        return hasher.finalize()
    }

    public func lookup(_ key: String, ids: [Int32], size: Int) -> [Float]? {
        if let hit = memory.withLock({ $0[key] }), hit.count == size { return hit }
        guard let path = path(for: key), let bytes = try? FileContents.read(path, maximumSize: 1 << 20),
            let values = Self.decode(bytes, ids: ids, size: size)
        else { return nil }
        remember(key, values)
        return values
    }

    public func store(_ key: String, ids: [Int32], values: [Float]) {
        remember(key, values)
        guard let path = path(for: key) else { return }
        try? FileContents.writeAtomically(Self.encode(ids: ids, values: values), to: path)
        if writes.add(1, ordering: .relaxed).newValue % 256 == 0 { evict() }
    }

    private func remember(_ key: String, _ values: [Float]) {
        memory.withLock { entries in
            if entries.count >= memoryLimit { entries.removeAll(keepingCapacity: true) }
            entries[key] = values
        }
    }

    private func path(for key: String) -> String? {
        directory.map { "\($0)/\(key.prefix(2))/\(key).emb" }
    }

    static func encode(ids: [Int32], values: [Float]) -> [UInt8] {
        var out = magic
        func put<T: FixedWidthInteger>(_ value: T) {
            withUnsafeBytes(of: value.littleEndian) { out.append(contentsOf: $0) }
        }
        put(UInt32(ids.count))
        put(UInt32(values.count))
        for id in ids { put(id) }
        for value in values { put(value.bitPattern) }
        var hasher = SHA256()
        hasher.update(out)
        out.append(contentsOf: Array(hasher.finalize().utf8.prefix(16)))
        return out
    }

    static func decode(_ bytes: [UInt8], ids: [Int32], size: Int) -> [Float]? {
        let expectedLength = 8 + 8 + 4 * ids.count + 4 * size + 16
        guard bytes.count == expectedLength, Array(bytes.prefix(8)) == magic else { return nil }
        var hasher = SHA256()
        hasher.update(Array(bytes.dropLast(16)))
        guard Array(hasher.finalize().utf8.prefix(16)) == Array(bytes.suffix(16)) else { return nil }
        func read<T: FixedWidthInteger>(_ offset: Int, as: T.Type) -> T {
            bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
        }
        guard read(8, as: UInt32.self) == UInt32(ids.count), read(12, as: UInt32.self) == UInt32(size) else {
            return nil
        }
        for (index, id) in ids.enumerated() where read(16 + 4 * index, as: Int32.self) != id { return nil }
        let start = 16 + 4 * ids.count
        return (0..<size).map { Float(bitPattern: read(start + 4 * $0, as: UInt32.self)) }
    }

    /// Removes the oldest entries (by modification time) while there are more than `diskLimit`.
    public func evict() {
        guard let directory else { return }
        var entries: [(path: String, time: Int)] = []
        for shard in Self.list(directory) where shard.count == 2 {
            for name in Self.list(directory + "/" + shard) where name.hasSuffix(".emb") {
                let path = directory + "/" + shard + "/" + name
                var info = stat()
                if stat(path, &info) == 0 { entries.append((path, Int(info.st_mtim.tv_sec))) }
            }
        }
        guard entries.count > diskLimit else { return }
        entries.sort { $0.time < $1.time }
        for entry in entries.prefix(entries.count - diskLimit * 9 / 10) { unlink(entry.path) }
    }

    static func list(_ directory: String) -> [String] {
        guard let handle = opendir(directory) else { return [] }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
