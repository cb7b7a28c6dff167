import CLookoutKernels
import Dispatch
import LookoutSupport
import LookoutTensor
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

/// The index's nearest-neighbour structure: an inverted file over every stored region embedding and every
/// whole-photo embedding, in a file beside the SQLite index (`INDEX.sqlite.lists`).
///
/// **Lists.** The vectors are clustered (k-means, L2) into `K` centroids. Each vector goes into the list of its
/// nearest centroid *and of its score group*: one group per detector output level, one for regions of a level
/// the model has no parameters for, one for whole-photo embeddings. A group turns a dot product into the
/// logit of the score a search gives it: `logit = s · ⟨e, t⟩ + b` (the level's `exp(logitScale)` and bias,
/// or the scene score's slope and `−centre · slope`). So a list's priority for a query, `s · ⟨centroid, t⟩ + b`,
/// and an entry's approximate score are both in the one currency the exact search ranks by, and levels with
/// different scales and biases no longer compete on raw inner products.
///
/// **Search.** A query scores every centroid, probes the lists of highest priority, scores their entries from
/// their stored 8-bit values (the same values and scale the full scan reads, so the approximate score is the
/// scan's up to float summation order), and returns the photos of the best entries; the caller re-scores those
/// photos exactly from the database.
///
/// **File.** A header (magic, version, sizes, the database's change sequence it reflects, the model key, two
/// checksums), the centroids, the lists' directory, the photos' content hashes, then the entries list after
/// list (8-bit values, scales, photo numbers): the *base*, written whole by ``build``. Photos added, changed or
/// removed later are appended as checksummed *tail* records (an added photo's entries with their lists; a
/// removal) until the tail grows past a share of the base and the file is built again (written beside, then
/// renamed over). A torn tail record (a killed writer) ends the tail; the database's change log says what to
/// apply again.
public final class RegionLists {
    /// Why a file cannot be used (missing, damaged, another model): the caller rebuilds it, or scans.
    public struct Unusable: Error, CustomStringConvertible {
        public var reason: String
        public var description: String { reason }
    }

    static let magic: UInt64 = 0x3130_5354_5349_4C4B  // "KLISTS01" read little-endian
    static let version: UInt32 = 1
    static let headerSize = 128
    static let hashSize = 64
    static let tailMagic: UInt32 = 0x5254_4B4C
    static let tailHeaderSize = 88

    public let path: String
    public let dimension: Int
    public let centroidCount: Int
    /// Score groups: the detector's output levels, one for other levels, one for whole-photo embeddings.
    public let groups: Int
    public let modelKey: String
    /// The database change sequence (``SQLiteIndexStore/changeSequence()``) the lists reflect.
    public private(set) var sequence: Int64
    public let basePhotos: Int
    public let baseEntries: Int

    let file: MappedFile
    /// The trained centroids, `dimension` values each, one after another.
    public let centroids: [Float]
    let offsets: [Int]
    let codesOffset: Int
    let scalesOffset: Int
    let photosOffset: Int
    let hashesOffset: Int
    let dataChecksum: UInt64

    // The tail, read into memory.
    var tailLists: [UInt32] = []
    var tailScales: [Float] = []
    var tailPhotos: [UInt32] = []
    var tailCodes: [Int8] = []
    var tailHashes: [String] = []
    /// Photo numbers removed or replaced since they were written.
    var deleted: [Bool]
    /// Where the valid tail ends (a writer truncates what follows).
    public private(set) var validEnd: Int

    public var tailEntries: Int { tailLists.count }
    public var photos: Int { basePhotos + tailHashes.count }
    public var listCount: Int { groups * centroidCount }
    public var fileBytes: Int { file.count }

    /// Score groups of a model with `objectLevels` output levels.
    public static func groups(objectLevels: Int) -> Int { max(objectLevels, 1) + 2 }

    // MARK: - Reading

    /// Opens the lists at `path` and checks the header, centroids, directory, photo table and every tail
    /// record (`full`: the entries too, a read of the whole file).
    public init(path: String, full: Bool = false) throws(Unusable) {
        self.path = path
        do {
            file = try MappedFile(path: path)
        } catch {
            throw Unusable(reason: errno == ENOENT ? "missing" : "unreadable (\(error))")
        }
        let bytes = file.bytes
        func u32(_ at: Int) -> UInt32 { UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt32.self)) }
        func u64(_ at: Int) -> UInt64 { UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self)) }
        guard bytes.count >= Self.headerSize, u64(0) == Self.magic else {
            throw Unusable(reason: "damaged (not a region-lists file)")
        }
        guard u32(8) == Self.version else { throw Unusable(reason: "written by another Lookout version") }
        dimension = Int(u32(12))
        centroidCount = Int(u32(16))
        groups = Int(u32(20))
        let photoCount = u64(24), entryCount = u64(32)
        guard dimension > 0, dimension <= 8192, centroidCount > 0, centroidCount <= 1 << 20, groups > 0,
            groups <= 64, photoCount < 1 << 32, entryCount < 1 << 40
        else { throw Unusable(reason: "damaged (impossible sizes in the header)") }
        basePhotos = Int(photoCount)
        baseEntries = Int(entryCount)
        sequence = Int64(bitPattern: u64(40))
        modelKey = String(decoding: (48..<80).map { bytes[$0] }.prefix { $0 != 0 }, as: UTF8.self)
        dataChecksum = u64(80)
        let layout = Self.layout(
            dimension: dimension, centroids: centroidCount, groups: groups, photos: basePhotos, entries: baseEntries)
        guard bytes.count >= layout.end else { throw Unusable(reason: "damaged (truncated)") }
        let structure = lookout_checksum(bytes.baseAddress! + 0, 88, 0)
        let rest = lookout_checksum(
            bytes.baseAddress! + Self.headerSize, layout.codes - Self.headerSize, structure)
        guard rest == u64(88) else { throw Unusable(reason: "damaged (checksum of the header and directory)") }
        centroids = [Float](unsafeUninitializedCapacity: centroidCount * dimension) { buffer, count in
            let source = bytes.baseAddress! + Self.headerSize
            for c in 0..<buffer.count {
                buffer[c] = Float(
                    bitPattern: UInt32(littleEndian: source.loadUnaligned(fromByteOffset: 4 * c, as: UInt32.self)))
            }
            count = buffer.count
        }
        let lists = groups * centroidCount
        offsets = (0...lists).map { Int(u64(layout.directory + 8 * $0)) }
        guard offsets[0] == 0, offsets[lists] == baseEntries, zip(offsets, offsets.dropFirst()).allSatisfy({ $0 <= $1 })
        else { throw Unusable(reason: "damaged (directory)") }
        hashesOffset = layout.hashes
        codesOffset = layout.codes
        scalesOffset = layout.scales
        photosOffset = layout.photos
        if full {
            let data = lookout_checksum(bytes.baseAddress! + layout.codes, layout.end - layout.codes, 0)
            guard data == dataChecksum else { throw Unusable(reason: "damaged (checksum of the entries)") }
        }
        deleted = [Bool](repeating: false, count: basePhotos)
        validEnd = layout.end
        readTail()
        if full {
            for k in 0..<baseEntries where Int(photo(ofBaseEntry: k)) >= basePhotos {
                throw Unusable(reason: "damaged (an entry names photo \(photo(ofBaseEntry: k)))")
            }
        }
    }

    static func layout(
        dimension: Int, centroids: Int, groups: Int, photos: Int, entries: Int
    ) -> (
        directory: Int, hashes: Int, codes: Int, scales: Int, photos: Int, end: Int
    ) {
        let directory = headerSize + 4 * centroids * dimension
        let hashes = directory + 8 * (groups * centroids + 1)
        let codes = (hashes + hashSize * photos + 63) / 64 * 64
        let scales = codes + entries * dimension
        let photoNumbers = scales + 4 * entries
        return (directory, hashes, codes, scales, photoNumbers, photoNumbers + 4 * entries)
    }

    func photo(ofBaseEntry k: Int) -> UInt32 {
        UInt32(littleEndian: file.bytes.loadUnaligned(fromByteOffset: photosOffset + 4 * k, as: UInt32.self))
    }

    /// The content hash of photo number `n`.
    public func hash(ofPhoto n: Int) -> String {
        if n >= basePhotos { return tailHashes[n - basePhotos] }
        let start = hashesOffset + n * Self.hashSize
        return String(
            decoding: UnsafeRawBufferPointer(rebasing: file.bytes[start..<(start + Self.hashSize)]).prefix { $0 != 0 },
            as: UTF8.self)
    }

    /// Reads the tail records after the base, up to the first incomplete or damaged one.
    private func readTail() {
        let bytes = file.bytes
        var at = validEnd
        let entryBytes = 8 + dimension
        while at + Self.tailHeaderSize + 8 <= bytes.count {
            func u32(_ offset: Int) -> UInt32 {
                UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: at + offset, as: UInt32.self))
            }
            guard u32(0) == Self.tailMagic else { break }
            let count = Int(u32(4))
            guard count <= 1 << 20 else { break }
            let length = Self.tailHeaderSize + count * entryBytes
            guard at + length + 8 <= bytes.count else { break }
            let stored = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at + length, as: UInt64.self))
            guard lookout_checksum(bytes.baseAddress! + at, length, 0) == stored else { break }
            let recordSequence = Int64(
                bitPattern: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at + 8, as: UInt64.self)))
            let replaces = u32(16), kind = u32(20)
            let hash = String(
                decoding: UnsafeRawBufferPointer(rebasing: bytes[(at + 24)..<(at + 24 + Self.hashSize)]).prefix {
                    $0 != 0
                }, as: UTF8.self)
            if replaces != UInt32.max, Int(replaces) < deleted.count { deleted[Int(replaces)] = true }
            if kind == 1 {
                let number = UInt32(photos)
                tailHashes.append(hash)
                deleted.append(false)
                let lists = at + Self.tailHeaderSize
                for e in 0..<count {
                    tailLists.append(
                        UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: lists + 4 * e, as: UInt32.self)))
                    tailScales.append(
                        Float(
                            bitPattern: UInt32(
                                littleEndian: bytes.loadUnaligned(
                                    fromByteOffset: lists + 4 * count + 4 * e, as: UInt32.self))))
                    tailPhotos.append(number)
                }
                let codes = lists + 8 * count
                tailCodes += UnsafeRawBufferPointer(rebasing: bytes[codes..<(codes + count * dimension)]).map {
                    Int8(bitPattern: $0)
                }
            }
            sequence = max(sequence, recordSequence)
            at += length + 8
        }
        validEnd = at
    }

    // MARK: - Searching

    /// How one score group turns a dot product into the search's logit.
    public struct Group: Sendable {
        public var index: Int
        public var scale: Float
        public var bias: Float

        public init(index: Int, scale: Float, bias: Float) {
            self.index = index
            self.scale = scale
            self.bias = bias
        }
    }

    /// The score groups of `model` that `objects` and `scenes` ask for.
    public static func searchGroups(model: IndexModel, objects: Bool, scenes: Bool) -> [Group] {
        let levels = max(model.scoreParameters.count, 1)
        var out: [Group] = []
        if objects {
            for level in 0..<levels {
                let (logitScale, bias) =
                    level < model.scoreParameters.count ? model.scoreParameters[level] : (0, 0)
                out.append(Group(index: level, scale: expf(logitScale), bias: bias))
            }
            out.append(Group(index: levels, scale: 1, bias: 0))
        }
        if scenes {
            out.append(
                Group(
                    index: levels + 1, scale: model.sceneScore.slope,
                    bias: -model.sceneScore.center * model.sceneScore.slope))
        }
        return out
    }

    /// The content hashes of the (at most) `limit` photos holding the best-scoring entries of the `probes`
    /// lists of highest priority for `query` (unit length) among `groups`, best first.
    public func candidates(query: [Float], groups: [Group], probes: Int, limit: Int) -> [(hash: String, logit: Float)] {
        precondition(query.count == dimension)
        var dots = [Float](repeating: 0, count: centroidCount)
        centroids.withUnsafeBufferPointer { c in
            query.withUnsafeBufferPointer { q in
                dots.withUnsafeMutableBufferPointer { out in
                    BLAS.gemm(
                        m: centroidCount, n: 1, k: dimension, a: c.baseAddress!, b: q.baseAddress!,
                        c: out.baseAddress!)
                }
            }
        }
        // Lists by priority, the empty ones left out (tail entries count: a list may be empty in the base only).
        var tailCounts: [Int: Int] = [:]
        for list in tailLists { tailCounts[Int(list), default: 0] += 1 }
        var lists = TopSelection(capacity: max(probes, 1))
        for group in groups where group.index < self.groups {
            for c in 0..<centroidCount {
                let list = group.index * centroidCount + c
                guard offsets[list + 1] > offsets[list] || tailCounts[list] != nil else { continue }
                lists.offer(group.scale * dots[c] + group.bias, list)
            }
        }
        let probed = lists.best().map { choice in
            (list: choice.item, group: groups.first { $0.index == choice.item / centroidCount }!)
        }

        // The probed lists' pages asked for at once, before the scoring reaches them.
        for (list, _) in probed {
            let start = offsets[list], count = offsets[list + 1] - start
            guard count > 0 else { continue }
            file.willNeed(offset: codesOffset + start * dimension, length: count * dimension)
            file.willNeed(offset: scalesOffset + 4 * start, length: 4 * count)
            file.willNeed(offset: photosOffset + 4 * start, length: 4 * count)
        }

        // Each photo's best entry (a flat array over photo numbers, and the photos touched).
        var best = [Float](repeating: -.infinity, count: photos)
        var touched: [Int] = []
        var scores: [Float] = []
        let base = file.bytes.baseAddress!
        query.withUnsafeBufferPointer { q in
            for (list, group) in probed {
                let start = offsets[list], count = offsets[list + 1] - start
                guard count > 0 else { continue }
                if scores.count < count { scores = [Float](repeating: 0, count: count) }
                scores.withUnsafeMutableBufferPointer { out in
                    lookout_int8_scores(
                        (base + codesOffset + start * dimension).assumingMemoryBound(to: Int8.self),
                        (base + scalesOffset + 4 * start).assumingMemoryBound(to: Float.self), count, Int32(dimension),
                        q.baseAddress!, out.baseAddress!)
                }
                let numbers = (base + photosOffset + 4 * start).assumingMemoryBound(to: UInt32.self)
                for k in 0..<count {
                    let photo = Int(UInt32(littleEndian: numbers[k]))
                    guard photo < basePhotos, !deleted[photo] else { continue }
                    let logit = group.scale * scores[k] + group.bias
                    if best[photo] == -.infinity { touched.append(photo) }
                    if logit > best[photo] { best[photo] = logit }
                }
            }
            if !tailLists.isEmpty {
                let wanted = Dictionary(uniqueKeysWithValues: probed.map { ($0.list, $0.group) })
                tailCodes.withUnsafeBufferPointer { codes in
                    for k in tailLists.indices {
                        guard let group = wanted[Int(tailLists[k])] else { continue }
                        let photo = Int(tailPhotos[k])
                        guard !deleted[photo] else { continue }
                        var score: Float = 0
                        var scale = tailScales[k]
                        lookout_int8_scores(
                            codes.baseAddress! + k * dimension, &scale, 1, Int32(dimension), q.baseAddress!, &score)
                        let logit = group.scale * score + group.bias
                        if best[photo] == -.infinity { touched.append(photo) }
                        if logit > best[photo] { best[photo] = logit }
                    }
                }
            }
        }
        var chosen = TopSelection(capacity: limit)
        for photo in touched { chosen.offer(best[photo], photo) }
        return chosen.best().map { (hash(ofPhoto: $0.item), $0.value) }
    }

    // MARK: - Entries

    /// One vector to index: its score group, 8-bit values and scale.
    struct Entry {
        var group: Int
        var scale: Float
        var codes: [Int8]
    }

    /// The lists' dimension for `model`: the larger of the regions' and the whole-photo embeddings' sizes; the
    /// smaller are padded with zeros, which keeps every dot product (an open_clip or SigLIP tower embeds in its
    /// own size, the demo's multilingual one in 256 dimensions beside the detector's 512).
    public static func dimension(of model: IndexModel) -> Int { max(model.embeddingSize, model.wholePhotoSize) }

    /// `vector` padded with zeros to `dimension`.
    public static func padded(_ vector: [Float], to dimension: Int) -> [Float] {
        vector.count >= dimension ? vector : vector + [Float](repeating: 0, count: dimension - vector.count)
    }

    /// The entries of one stored content: its regions (either blob format, `regionSize` values each) and
    /// whole-photo embedding (`imageSize` values), each padded to `dimension` values.
    static func entries(
        regions blob: UnsafeRawBufferPointer, image: UnsafeRawBufferPointer?, regionSize: Int, imageSize: Int,
        dimension: Int, objectLevels: Int
    ) -> [Entry] {
        let padding = [Int8](repeating: 0, count: max(dimension - regionSize, 0))
        var out: [Entry] = []
        let levels = max(objectLevels, 1)
        if blob.count >= 4 {
            let header = UInt32(littleEndian: blob.loadUnaligned(as: UInt32.self))
            let quantized = header & Region.quantizedFlag != 0
            let count = Int(header & ~Region.quantizedFlag)
            let record = Region.recordSize(embeddingSize: regionSize, quantized: quantized)
            if blob.count >= 4 + count * record {
                if quantized {
                    for r in 0..<count {
                        let base = 4 + r * record
                        let scale = Float(
                            bitPattern: UInt32(
                                littleEndian: blob.loadUnaligned(fromByteOffset: base + 24, as: UInt32.self)))
                        let codes = (0..<regionSize).map { Int8(bitPattern: blob[base + 28 + $0]) } + padding
                        out.append(Entry(group: min(Int(blob[base + 20]), levels), scale: scale, codes: codes))
                    }
                } else if let vectors = try? RegionScorer.embeddings(blob: blob, embeddingSize: regionSize) {
                    for (r, vector) in vectors.enumerated() {
                        let (codes, scale) = Region.quantize(padded(vector, to: dimension))
                        out.append(
                            Entry(group: min(Int(blob[4 + r * record + 20]), levels), scale: scale, codes: codes))
                    }
                }
            }
        }
        if let image, image.count == 2 * imageSize {
            var vector = (0..<imageSize).map { d in
                Float(
                    Float16(
                        bitPattern: UInt16(littleEndian: image.loadUnaligned(fromByteOffset: 2 * d, as: UInt16.self))))
            }
            let norm = max(vector.reduce(0) { $0 + $1 * $1 }.squareRoot(), 1e-12)
            for d in vector.indices { vector[d] /= norm }
            let (codes, scale) = Region.quantize(padded(vector, to: dimension))
            out.append(Entry(group: levels + 1, scale: scale, codes: codes))
        }
        return out
    }

    /// The nearest centroid (L2) of each of `count` vectors (8-bit values times scales), two threads.
    static func assign(
        codes: UnsafePointer<Int8>, scales: UnsafePointer<Float>, count: Int, dimension: Int, centroids: [Float]
    ) -> [UInt32] {
        let k = centroids.count / dimension
        let norms = (0..<k).map { c in
            (0..<dimension).reduce(Float(0)) { $0 + centroids[c * dimension + $1] * centroids[c * dimension + $1] }
        }
        var out = [UInt32](repeating: 0, count: count)
        let block = 1024
        let blocks = (count + block - 1) / block
        out.withUnsafeMutableBufferPointer { result in
            let target = UncheckedSendable(result.baseAddress!)
            let source = UncheckedSendable((codes, scales))
            centroids.withUnsafeBufferPointer { c in
                let centres = UncheckedSendable(c.baseAddress!)
                DispatchQueue.concurrentPerform(iterations: min(2, blocks)) { worker in
                    var vectors = [Float](repeating: 0, count: block * dimension)
                    var dots = [Float](repeating: 0, count: block * k)
                    var b = worker
                    while b < blocks {
                        let start = b * block, rows = min(block, count - start)
                        for r in 0..<rows {
                            let scale = source.value.1[start + r]
                            let row = source.value.0 + (start + r) * dimension
                            for d in 0..<dimension { vectors[r * dimension + d] = Float(row[d]) * scale }
                        }
                        vectors.withUnsafeBufferPointer { v in
                            dots.withUnsafeMutableBufferPointer { out in
                                BLAS.gemm(
                                    m: rows, n: k, k: dimension, a: v.baseAddress!, b: centres.value, transposeB: true,
                                    c: out.baseAddress!)
                            }
                        }
                        for r in 0..<rows {
                            var bestCentre = 0
                            var bestDistance = Float.infinity
                            for c in 0..<k {
                                let distance = norms[c] - 2 * dots[r * k + c]
                                if distance < bestDistance { (bestCentre, bestDistance) = (c, distance) }
                            }
                            target.value[start + r] = UInt32(bestCentre)
                        }
                        b += 2
                    }
                }
            }
        }
        return out
    }

    /// k-means (L2) on `count` sample vectors: `k` centroids after `iterations` rounds, deterministic.
    static func train(codes: [Int8], scales: [Float], dimension: Int, k: Int, iterations: Int = 8) -> [Float] {
        let count = scales.count
        var random = SplitMix64(seed: 0x4C6F_6F6B_6F75_74)
        var order = Array(0..<count)
        for i in stride(from: count - 1, to: 0, by: -1) { order.swapAt(i, Int(random.next() % UInt64(i + 1))) }
        var centroids = [Float](repeating: 0, count: k * dimension)
        func load(_ sample: Int, into c: Int) {
            for d in 0..<dimension {
                centroids[c * dimension + d] = Float(codes[sample * dimension + d]) * scales[sample]
            }
        }
        for c in 0..<k { load(order[c % count], into: c) }
        for _ in 0..<iterations {
            let assigned = codes.withUnsafeBufferPointer { v in
                scales.withUnsafeBufferPointer { s in
                    assign(
                        codes: v.baseAddress!, scales: s.baseAddress!, count: count, dimension: dimension,
                        centroids: centroids)
                }
            }
            var sums = [Float](repeating: 0, count: k * dimension)
            var members = [Int](repeating: 0, count: k)
            for i in 0..<count {
                let c = Int(assigned[i])
                members[c] += 1
                for d in 0..<dimension { sums[c * dimension + d] += Float(codes[i * dimension + d]) * scales[i] }
            }
            for c in 0..<k {
                if members[c] == 0 {  // an empty cluster takes a random sample
                    load(order[Int(random.next() % UInt64(count))], into: c)
                    continue
                }
                for d in 0..<dimension { centroids[c * dimension + d] = sums[c * dimension + d] / Float(members[c]) }
            }
        }
        return centroids
    }

    /// How many centroids for `entries` vectors: about √entries, at least 8 and at most 4,096.
    static func centroidCount(entries: Int) -> Int {
        min(max(Int(Double(max(entries, 1)).squareRoot()) / 8 * 8, 8), 4096)
    }
}

/// The `capacity` largest of the values offered (ties: the smaller item), through a min-heap.
struct TopSelection {
    let capacity: Int
    private var heap: [(value: Float, item: Int)] = []

    init(capacity: Int) {
        self.capacity = max(capacity, 0)
        heap.reserveCapacity(min(self.capacity, 1 << 12))
    }

    /// Whether `a` ranks below `b`.
    private static func below(_ a: (value: Float, item: Int), _ b: (value: Float, item: Int)) -> Bool {
        a.value != b.value ? a.value < b.value : a.item > b.item
    }

    mutating func offer(_ value: Float, _ item: Int) {
        guard capacity > 0 else { return }
        let entry = (value: value, item: item)
        if heap.count < capacity {
            heap.append(entry)
            var child = heap.count - 1
            while child > 0 {
                let parent = (child - 1) / 2
                guard Self.below(heap[child], heap[parent]) else { break }
                heap.swapAt(child, parent)
                child = parent
            }
            return
        }
        guard Self.below(heap[0], entry) else { return }
        heap[0] = entry
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < heap.count && Self.below(heap[left], heap[smallest]) { smallest = left }
            if right < heap.count && Self.below(heap[right], heap[smallest]) { smallest = right }
            if smallest == parent { break }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }

    /// The values kept, best first.
    func best() -> [(value: Float, item: Int)] { heap.sorted { Self.below($1, $0) } }
}

struct UncheckedSendable<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
