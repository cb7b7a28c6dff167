import LookoutDetector
import LookoutImage
import LookoutJSON
import LookoutSupport
import LookoutTensor
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

/// Prepared images (backbone outputs P3, P4, P5) kept for re-query: in memory up to a byte bound, least
/// recently used first out, and optionally on disk, so that a new query set skips the backbone.
///
/// An entry belongs to a photo file as it was (path, size, modification time), an input size and a model
/// (`modelKey`, e.g. the detector's fingerprint). Disk entries hold the features as F32, exactly: a
/// re-query from disk gives the same detections as a fresh run. A disk entry that does not read back
/// (truncated, corrupt, another version) is recomputed and rewritten.
public final class FeatureStore: @unchecked Sendable {
    public struct Counters: Sendable, Equatable {
        public var memoryHits = 0
        public var diskHits = 0
        public var computed = 0
        public var evicted = 0

        public init(memoryHits: Int = 0, diskHits: Int = 0, computed: Int = 0, evicted: Int = 0) {
            self.memoryHits = memoryHits
            self.diskHits = diskHits
            self.computed = computed
            self.evicted = evicted
        }
    }

    public let memoryLimit: Int
    public let directory: String?
    public let diskLimit: Int
    public let modelKey: String
    public private(set) var counters = Counters()

    private var entries: [String: (prepared: PreparedImage, bytes: Int, used: Int)] = [:]
    private var clock = 0
    private var bytes = 0
    private let lock = Mutex()

    /// `memoryLimit` and `diskLimit` in bytes; `directory` nil keeps everything in memory.
    public init(modelKey: String, memoryLimit: Int = 1 << 30, directory: String? = nil, diskLimit: Int = 4 << 30) {
        self.modelKey = modelKey
        self.memoryLimit = memoryLimit
        self.directory = directory
        self.diskLimit = diskLimit
        if let directory { try? FileContents.makeDirectories(directory) }
    }

    public var memoryBytes: Int { lock.locked { bytes } }
    public var count: Int { lock.locked { entries.count } }

    /// The prepared image for `path` at `size`: from memory, else from disk, else computed by `engine`.
    public func prepared(path: String, size: Int, engine: Engine) throws(ImageError) -> PreparedImage {
        var info = stat()
        guard FileSystem.stat(path, &info) == 0 else {
            throw ImageError(path: path, kind: .unreadable, problem: String(cString: strerror(errno)))
        }
        let mtime = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
        let key = "\(modelKey)|\(size)|\(info.st_size)|\(mtime)|\(path)"
        if let hit = lock.locked({ () -> PreparedImage? in
            guard var entry = entries[key] else { return nil }
            clock += 1
            entry.used = clock
            entries[key] = entry
            counters.memoryHits += 1
            return entry.prepared
        }) {
            return hit
        }
        let file = directory.map { $0 + "/" + Self.fileName(key) }
        if let file, let loaded = Self.load(file, name: path, size: size, maps: engine.network.keptMaps) {
            lock.locked { counters.diskHits += 1 }
            insert(loaded, key: key)
            return loaded
        }
        let prepared = try engine.prepare(path: path, size: size)
        lock.locked { counters.computed += 1 }
        insert(prepared, key: key)
        if let file {
            Self.save(prepared, size: size, to: file)
            trimDisk()
        }
        return prepared
    }

    /// Features kept in memory under a caller's key (a server keeps uploads by their digest), counting
    /// towards the same bound; nil once dropped.
    public func kept(key: String) -> PreparedImage? {
        lock.locked {
            guard var entry = entries["kept|" + key] else { return nil }
            clock += 1
            entry.used = clock
            entries["kept|" + key] = entry
            counters.memoryHits += 1
            return entry.prepared
        }
    }

    /// A sliced photo kept under `key` (``keep(_:key:)``), nil when any of its parts was dropped.
    public func kept(sliced key: String) -> SlicedImage? {
        guard let (shell, count) = lock.locked({ shells[key] }) else { return nil }
        var parts: [PreparedImage] = []
        for index in 0..<count {
            guard let part = kept(key: "slice|\(key)|\(index)") else { return nil }
            parts.append(part)
        }
        var sliced = shell
        sliced.parts = Array(parts[..<shell.tiles.count])
        sliced.whole = count > shell.tiles.count ? parts.last : nil
        return sliced
    }

    /// Keeps a sliced photo's parts (each tile's features, and the whole photo's) in memory under `key`, within the
    /// same bound as every other photo: a part dropped makes ``kept(sliced:)`` nil, and the photo is prepared again.
    public func keep(_ sliced: SlicedImage, key: String) {
        let parts = sliced.parts + (sliced.whole.map { [$0] } ?? [])
        var shell = sliced
        shell.parts = []
        shell.whole = nil
        lock.locked { shells[key] = (shell, parts.count) }
        for (index, part) in parts.enumerated() { keep(part, key: "slice|\(key)|\(index)") }
    }

    /// Sliced photos without their features, by key: a few hundred bytes each.
    private var shells: [String: (SlicedImage, Int)] = [:]

    /// Keeps `prepared` in memory under `key` (``kept(key:)``), dropping the least recently used beyond the bound.
    public func keep(_ prepared: PreparedImage, key: String) {
        lock.locked { counters.computed += 1 }
        insert(prepared, key: "kept|" + key)
    }

    private func insert(_ prepared: PreparedImage, key: String) {
        // From the shapes: a map on a GPU would be copied back to count its values.
        let size = prepared.features.reduce(0) { $0 + $1.channels * $1.plane * 4 }
        lock.locked {
            clock += 1
            if let old = entries[key] { bytes -= old.bytes }
            entries[key] = (prepared, size, clock)
            bytes += size
            while bytes > memoryLimit, entries.count > 1,
                let oldest = entries.filter({ $0.key != key }).min(by: { $0.value.used < $1.value.used })
            {
                bytes -= oldest.value.bytes
                entries[oldest.key] = nil
                counters.evicted += 1
            }
        }
    }

    static func fileName(_ key: String) -> String {
        var hash = SHA256()
        hash.update(Array(key.utf8))
        return String(hash.finalize().prefix(40)) + ".features"
    }

    static let magic: [UInt8] = Array("LKFEAT01".utf8)

    /// Layout: magic, then Int64 little-endian width, height, size, map count, and per map channels, height,
    /// width, then every map's F32 values.
    static func save(_ prepared: PreparedImage, size: Int, to path: String) {
        var bytes = magic
        func append(_ value: Int) { withUnsafeBytes(of: Int64(value).littleEndian) { bytes += $0 } }
        append(prepared.width)
        append(prepared.height)
        append(size)
        append(prepared.features.count)
        for map in prepared.features {
            append(map.channels)
            append(map.height)
            append(map.width)
        }
        for map in prepared.features {
            map.data.withUnsafeBytes { bytes += $0 }
        }
        try? FileContents.writeAtomically(bytes, to: path)
    }

    /// A disk entry, or nil when it is missing or not exactly what the network would have made for a photo of
    /// its recorded size (any damage or edit: the features are then computed again).
    static func load(_ path: String, name: String, size: Int, maps: [(channels: Int, stride: Int)]) -> PreparedImage? {
        guard let bytes = try? FileContents.read(path, maximumSize: 1 << 32) else { return nil }
        return decode(bytes, name: name, size: size, maps: maps)
    }

    /// A feature file's contents (`save`'s layout), or nil when they are not exactly what the network makes
    /// for a photo of the recorded size at `size` with `maps` (channels and stride of each; a file of another
    /// set of maps, such as one written before layer 12's text-free part was kept, is computed again).
    public static func decode(
        _ bytes: [UInt8], name: String, size: Int, maps: [(channels: Int, stride: Int)]
    ) -> PreparedImage? {
        let channels = maps.map(\.channels)
        guard bytes.count > 40, Array(bytes.prefix(8)) == magic, (32...8192).contains(size) else { return nil }
        var offset = 8
        func next() -> Int? {
            guard offset + 8 <= bytes.count else { return nil }
            defer { offset += 8 }
            return Int(
                Int64(littleEndian: bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: Int64.self) }))
        }
        guard let width = next(), let height = next(), let stored = next(), stored == size, let count = next(),
            count == channels.count, (1...100_000).contains(width), (1...100_000).contains(height),
            width * height <= ImageFile.defaultPixelLimit
        else { return nil }
        // The maps the network keeps for that photo, each at its stride of the letterboxed input.
        let letterbox = Letterbox(width: width, height: height, size: size)
        var shapes: [(Int, Int, Int)] = []
        for (expected, stride) in maps {
            guard let c = next(), let h = next(), let w = next(), c == expected, (1...65_536).contains(c),
                h == letterbox.height / stride,
                w == letterbox.width / stride
            else { return nil }
            shapes.append((c, h, w))
        }
        let total = shapes.reduce(0) { $0 + $1.0 * $1.1 * $1.2 }
        guard bytes.count == offset + total * 4 else { return nil }
        var maps: [FeatureMap] = []
        for (c, h, w) in shapes {
            var data = [Float](repeating: 0, count: c * h * w)
            data.withUnsafeMutableBytes { target in
                bytes.withUnsafeBytes { source in
                    target.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[offset..<offset + c * h * w * 4]))
                }
            }
            offset += c * h * w * 4
            maps.append(FeatureMap(channels: c, height: h, width: w, data: data))
        }
        return PreparedImage(
            name: name, width: width, height: height, letterbox: Letterbox(width: width, height: height, size: size),
            features: maps, timings: StageTimings())
    }

    /// Deletes the least recently written feature files beyond the disk bound.
    private func trimDisk() {
        guard let directory, let names = FileSystem.entries(of: directory) else { return }
        var files: [(path: String, size: Int, time: Int)] = []
        for name in names where name.hasSuffix(".features") {
            var info = stat()
            let path = directory + "/" + name
            if FileSystem.stat(path, &info) == 0 { files.append((path, Int(info.st_size), Int(info.st_mtim.tv_sec))) }
        }
        var total = files.reduce(0) { $0 + $1.size }
        for file in files.sorted(by: { $0.time < $1.time }) where total > diskLimit {
            _ = FileSystem.unlink(file.path)
            total -= file.size
        }
    }
}

/// A pthread mutex with a closure helper.
final class Mutex: @unchecked Sendable {
    // Allocated, so that the mutex never moves (as ComputePool keeps its own).
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    init() { pthread_mutex_init(mutex, nil) }
    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }
    func locked<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
