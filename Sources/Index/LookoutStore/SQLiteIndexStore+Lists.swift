import CLookoutKernels
import LookoutSupport
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

/// The SQLite index's region lists (``RegionLists``, in `INDEX.lists` beside it): built from the database,
/// kept up to date from its change log, and asked for the candidates of a search.
///
/// The database is the truth. Every insertion or deletion of an `images` row writes a row of `changes` in the
/// same transaction (triggers), so whatever a run did before it was killed is in the log; the lists record the
/// last change they reflect, and bringing them up to date replays the log after it. A search on lists that
/// are behind also reads the photos changed since, so its answer never depends on how far behind they are.
extension SQLiteIndexStore: NearestNeighbourStore {
    public var nearestNeighbourKind: String { "region lists" }
    public var lastNearestNeighbourNote: String? { lastListsNote }

    /// The lists' approximate scores are the scan's own 8-bit scores, so the photos of the best 100 entries
    /// hold the top 10 (recall@10 1.00 at 10,000 to 1,000,000 synthetic photos, BENCHMARKS.md).
    public var defaultCandidates: Int { 100 }

    public var listsPath: String { path + ".lists" }

    /// The last change recorded in the database (0 for none; always 0 for files older than version 4).
    public func changeSequence() throws(IndexError) -> Int64 {
        guard version >= 4 else { return 0 }
        let statement = try database.prepare("SELECT coalesce(max(seq), 0) FROM changes")
        return try statement.step() ? statement.integer(0) : 0
    }

    /// The contents of `key` added, changed or removed after change `sequence`, each once, oldest first, with
    /// the last change that touched them.
    func changedContents(
        since sequence: Int64, model key: String
    ) throws(IndexError) -> [(hash: String, sequence: Int64)] {
        guard version >= 4 else { return [] }
        let statement = try database.prepare(
            "SELECT hash, max(seq) AS last FROM changes WHERE seq > ? AND model = ? GROUP BY hash ORDER BY last")
        statement.bind([.integer(sequence), .text(key)])
        var out: [(String, Int64)] = []
        while try statement.step() { out.append((statement.text(0), statement.integer(1))) }
        return out
    }

    /// Calls `body` with each stored content of the model `key` (rowid order): hash, regions, image embedding.
    func forEachContent(
        model key: String, rowids: [Int64]? = nil,
        _ body: (String, UnsafeRawBufferPointer, UnsafeRawBufferPointer?) throws(IndexError) -> Void
    ) throws(IndexError) {
        let image = version >= 2 ? "image_embedding" : "NULL"
        if let rowids {
            let statement = try database.prepare("SELECT hash, regions, \(image) FROM images WHERE rowid = ?")
            for rowid in rowids {
                statement.reset()
                statement.bind([.integer(rowid)])
                guard try statement.step() else { continue }
                try visit(statement)
            }
            return
        }
        let statement = try database.prepare(
            "SELECT hash, regions, \(image) FROM images WHERE model = ? ORDER BY rowid")
        statement.bind([.text(key)])
        while try statement.step() { try visit(statement) }

        func visit(_ statement: Statement) throws(IndexError) {
            let hash = statement.text(0)
            var failure: IndexError?
            statement.withBlob(1) { regions in
                statement.withBlob(2) { whole in
                    do throws(IndexError) {
                        try body(hash, regions, whole.isEmpty ? nil : whole)
                    } catch {
                        failure = error
                    }
                }
            }
            if let failure { throw failure }
        }
    }

    // MARK: - Keeping the lists

    /// What ``updateLists(model:minimumPhotos:progress:)`` did, in words for the person who ran `lookout
    /// index` (nil: nothing worth saying).
    public func updateLists(
        model: IndexModel, minimumPhotos: Int, progress: (String) -> Void = { _ in }
    ) throws(IndexError) -> String? {
        guard version >= 4 else { return nil }
        let lock = try ListsLock(path: listsPath + ".lock")
        defer { lock.release() }
        let lists: RegionLists
        do {
            // The entries' checksum too while that is a quick read (a damaged entry could only cost recall:
            // every answer is scored from the database).
            var info = stat()
            let small = FileSystem.stat(listsPath, &info) == 0 && info.st_size < 128 << 20
            lists = try RegionLists(path: listsPath, full: small)
        } catch {
            let photos = try contentCount(model: model.key)
            guard photos >= minimumPhotos else {
                if error.reason != "missing" { unlink(listsPath) }
                return nil
            }
            let why = error.reason == "missing" ? "" : " (they were \(error.reason))"
            let start = Stopwatch.now()
            let built = try buildLists(model: model, progress: progress)
            return
                "built the region lists for \(photos) photos\(why): \(built.baseEntries) vectors in \(built.listCount) lists, "
                + "\(Self.megabytes(built.fileBytes)), \(Self.seconds(Stopwatch.now() - start))"
        }
        guard lists.modelKey == model.key, lists.dimension == RegionLists.dimension(of: model),
            lists.groups == RegionLists.groups(objectLevels: model.scoreParameters.count)
        else {
            let start = Stopwatch.now()
            let built = try buildLists(model: model, progress: progress)
            return "rebuilt the region lists for another model: \(built.baseEntries) vectors, "
                + Self.seconds(Stopwatch.now() - start)
        }
        let changes = try changedContents(since: lists.sequence, model: model.key)
        // Past a share of the base, a rebuild costs less than the tail would cost every search.
        let pending = lists.tailEntries + changes.count * (model.maximumRegions + 1)
        if pending > max(lists.baseEntries / 10, 200_000) {
            let start = Stopwatch.now()
            let built = try buildLists(model: model, progress: progress)
            return "rebuilt the region lists (\(changes.count) photos changed since the last build): "
                + "\(built.baseEntries) vectors, \(Self.seconds(Stopwatch.now() - start))"
        }
        if !changes.isEmpty { try appendChanges(changes, to: lists, model: model) }
        return nil
    }

    /// Appends to `lists` one tail record per changed content: its entries (it is in the database) or its
    /// removal (it is not), each replacing what the lists held for that content before.
    func appendChanges(
        _ changes: [(hash: String, sequence: Int64)], to lists: RegionLists, model: IndexModel
    ) throws(IndexError) {
        let live = lists.liveNumbers(of: Set(changes.map(\.hash)))
        var records: [UInt8] = []
        let select = try database.prepare(
            "SELECT regions, \(version >= 2 ? "image_embedding" : "NULL") FROM images WHERE hash = ? AND model = ?")
        for change in changes {
            select.reset()
            select.bind([.text(change.hash), .text(model.key)])
            var entries: [RegionLists.Entry]?
            if try select.step() {
                entries = select.withBlob(0) { regions in
                    select.withBlob(1) { whole in
                        RegionLists.entries(
                            regions: regions, image: whole.isEmpty ? nil : whole, regionSize: model.embeddingSize,
                            imageSize: model.wholePhotoSize, dimension: lists.dimension,
                            objectLevels: model.scoreParameters.count)
                    }
                }
            }
            records += lists.tailRecord(
                hash: change.hash, sequence: change.sequence, replaces: live[change.hash], entries: entries)
        }
        let descriptor = FileSystem.open(listsPath, O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw IndexError(path: listsPath, problem: "cannot write: \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        // A torn record after the valid tail (a killed writer) is cut off first.
        let written = records.withUnsafeBytes { bytes in
            ftruncate(descriptor, off_t(lists.validEnd)) == 0
                && pwrite(descriptor, bytes.baseAddress, bytes.count, off_t(lists.validEnd)) == bytes.count
                && fsync(descriptor) == 0
        }
        guard written else {
            throw IndexError(path: listsPath, problem: "cannot write: \(String(cString: strerror(errno)))")
        }
    }

    func contentCount(model key: String) throws(IndexError) -> Int {
        let statement = try database.prepare("SELECT count(*) FROM images WHERE model = ?")
        statement.bind([.text(key)])
        return try statement.step() ? Int(statement.integer(0)) : 0
    }

    /// Builds the lists from every content of `model`, in a file written beside and renamed over the old.
    /// Two reads of the database in one snapshot: the first assigns each vector its list (after k-means on a
    /// sample of photos), the second writes each where its list's place is.
    @discardableResult
    func buildLists(model: IndexModel, progress: (String) -> Void) throws(IndexError) -> RegionLists {
        let key = model.key
        let dimension = RegionLists.dimension(of: model)
        let levels = model.scoreParameters.count
        let groups = RegionLists.groups(objectLevels: levels)
        try database.execute("BEGIN")
        defer { try? database.execute("COMMIT") }
        let sequence = try changeSequence()
        // In the order of the photos' content hashes, not of their rowids: photos indexed side by side (lanes)
        // arrive in any order, and the lists must not depend on it.
        let rowidStatement = try database.prepare("SELECT rowid FROM images WHERE model = ? ORDER BY hash")
        rowidStatement.bind([.text(key)])
        var rowids: [Int64] = []
        while try rowidStatement.step() { rowids.append(rowidStatement.integer(0)) }
        let estimated = rowids.count * (model.maximumRegions + 1)
        let k = RegionLists.centroidCount(entries: estimated)

        // k-means on the vectors of a sample of photos (about 40 per centroid).
        progress("region lists: training \(k) centroids")
        var random = SplitMix64(seed: 20_261_125)
        var positions = Array(rowids.indices)
        let wantedRows = min(rowids.count, max(1, 40 * k / max(model.maximumRegions, 1)))
        for i in 0..<wantedRows {
            positions.swapAt(i, i + Int(random.next() % UInt64(rowids.count - i)))
        }
        var sampleCodes: [Int8] = []
        var sampleScales: [Float] = []
        let sample = positions.prefix(wantedRows).sorted().map { rowids[$0] }
        try forEachContent(model: key, rowids: sample) { _, regions, image in
            for entry in RegionLists.entries(
                regions: regions, image: image, regionSize: model.embeddingSize, imageSize: model.wholePhotoSize,
                dimension: dimension, objectLevels: levels)
            {
                sampleCodes += entry.codes
                sampleScales.append(entry.scale)
            }
        }
        let centroids =
            sampleScales.isEmpty
            ? [Float](repeating: 0, count: dimension)
            : RegionLists.train(
                codes: sampleCodes, scales: sampleScales, dimension: dimension, k: min(k, sampleScales.count))
        let centroidCount = centroids.count / dimension

        // Pass 1: every vector's list.
        var lists: [UInt32] = []
        lists.reserveCapacity(estimated)
        var hashes: [String] = []
        var pendingCodes: [Int8] = []
        var pendingScales: [Float] = []
        var pendingGroups: [Int] = []
        func flush() {
            guard !pendingScales.isEmpty else { return }
            let nearest = pendingCodes.withUnsafeBufferPointer { c in
                pendingScales.withUnsafeBufferPointer { s in
                    RegionLists.assign(
                        codes: c.baseAddress!, scales: s.baseAddress!, count: s.count, dimension: dimension,
                        centroids: centroids)
                }
            }
            for (g, c) in zip(pendingGroups, nearest) { lists.append(UInt32(g * centroidCount) + c) }
            pendingCodes.removeAll(keepingCapacity: true)
            pendingScales.removeAll(keepingCapacity: true)
            pendingGroups.removeAll(keepingCapacity: true)
        }
        var done = 0
        try forEachContent(model: key) { hash, regions, image in
            hashes.append(hash)
            for entry in RegionLists.entries(
                regions: regions, image: image, regionSize: model.embeddingSize, imageSize: model.wholePhotoSize,
                dimension: dimension, objectLevels: levels)
            {
                pendingCodes += entry.codes
                pendingScales.append(entry.scale)
                pendingGroups.append(entry.group)
            }
            if pendingScales.count >= 8192 { flush() }
            done += 1
            if done % 5000 == 0 { progress("region lists: assigned \(done) of \(rowids.count) photos") }
        }
        flush()

        // Places: list after list.
        let listCount = groups * centroidCount
        var offsets = [Int](repeating: 0, count: listCount + 1)
        for list in lists { offsets[Int(list) + 1] += 1 }
        for l in 0..<listCount { offsets[l + 1] += offsets[l] }
        let layout = RegionLists.layout(
            dimension: dimension, centroids: centroidCount, groups: groups, photos: hashes.count, entries: lists.count)
        let temporary = listsPath + ".new-\(getpid())"
        let output = try OutputMap(path: temporary, size: layout.end)
        defer { unlink(temporary) }
        let bytes = output.bytes
        func put<T: FixedWidthInteger>(_ value: T, at offset: Int) {
            bytes.storeBytes(of: value.littleEndian, toByteOffset: offset, as: T.self)
        }
        for (c, value) in centroids.enumerated() { put(value.bitPattern, at: RegionLists.headerSize + 4 * c) }
        for (l, offset) in offsets.enumerated() { put(UInt64(offset), at: layout.directory + 8 * l) }
        for (n, hash) in hashes.enumerated() {
            for (j, byte) in hash.utf8.prefix(RegionLists.hashSize).enumerated() {
                bytes[layout.hashes + n * RegionLists.hashSize + j] = byte
            }
        }

        // Pass 2: each vector where its list's place is.
        progress("region lists: writing \(lists.count) vectors")
        var cursor = offsets
        var entryIndex = 0
        var photo: UInt32 = 0
        try forEachContent(model: key) { hash, regions, image in
            for entry in RegionLists.entries(
                regions: regions, image: image, regionSize: model.embeddingSize, imageSize: model.wholePhotoSize,
                dimension: dimension, objectLevels: levels)
            {
                guard entryIndex < lists.count else { break }
                let list = Int(lists[entryIndex])
                let place = cursor[list]
                cursor[list] += 1
                entry.codes.withUnsafeBytes { source in
                    UnsafeMutableRawBufferPointer(rebasing: bytes[(layout.codes + place * dimension)...])
                        .copyMemory(from: source)
                }
                put(entry.scale.bitPattern, at: layout.scales + 4 * place)
                put(photo, at: layout.photos + 4 * place)
                entryIndex += 1
            }
            photo += 1
        }
        guard entryIndex == lists.count, Int(photo) == hashes.count else {
            throw IndexError(path: path, problem: "the index changed while its region lists were built")
        }

        // Header and checksums.
        put(RegionLists.magic, at: 0)
        put(RegionLists.version, at: 8)
        put(UInt32(dimension), at: 12)
        put(UInt32(centroidCount), at: 16)
        put(UInt32(groups), at: 20)
        put(UInt64(hashes.count), at: 24)
        put(UInt64(lists.count), at: 32)
        put(UInt64(bitPattern: sequence), at: 40)
        for (j, byte) in key.utf8.prefix(32).enumerated() { bytes[48 + j] = byte }
        let base = bytes.baseAddress!
        put(lookout_checksum(base + layout.codes, layout.end - layout.codes, 0), at: 80)
        let structure = lookout_checksum(base, 88, 0)
        put(lookout_checksum(base + RegionLists.headerSize, layout.codes - RegionLists.headerSize, structure), at: 88)
        try output.finish()
        guard rename(temporary, listsPath) == 0 else {
            throw IndexError(path: listsPath, problem: "cannot replace: \(String(cString: strerror(errno)))")
        }
        try setMeta("region_lists", "yes")
        do {
            return try RegionLists(path: listsPath)
        } catch {
            throw IndexError(path: listsPath, problem: "the region lists just written are \(error.reason)")
        }
    }

    static func megabytes(_ bytes: Int) -> String { "\((bytes + 524_288) / 1_048_576) MB" }
    static func seconds(_ value: Double) -> String { "\((value * 10).rounded() / 10) s" }

    // MARK: - Searching

    public func nearestContents(
        regionQueries: [[Float]], imageQueries: [[Float]], model key: String, limit: Int
    ) throws(IndexError) -> Set<String>? {
        lastListsNote = nil
        guard version >= 4, let model = try storedModel(), model.key == key else { return nil }
        guard let lists = try currentLists(model: model) else { return nil }
        let changed = try changedContents(since: lists.sequence, model: key)
        if changed.count > 50_000 {
            lastListsNote =
                "the region lists are \(changed.count) photos behind the index: searched every photo (`lookout index` updates them)"
            return nil
        }
        var contents = Set(changed.map(\.hash))
        var queries: [(vector: [Float], objects: Bool, scenes: Bool)] = regionQueries.map { ($0, true, false) }
        for query in imageQueries {
            if let same = queries.firstIndex(where: { $0.vector == query }) {
                queries[same].scenes = true
            } else {
                queries.append((query, false, true))
            }
        }
        // Objects and scenes each with their own probes and candidates: their scores are on other scales, and in
        // one shared budget the region lists' entries crowded the whole-photo ones out.
        for query in queries where query.vector.count <= lists.dimension {
            let vector = RegionLists.padded(query.vector, to: lists.dimension)
            for (objects, scenes) in [(true, false), (false, true)]
            where (objects && query.objects) || (scenes && query.scenes) {
                let groups = RegionLists.searchGroups(model: model, objects: objects, scenes: scenes)
                for candidate in lists.candidates(
                    query: vector, groups: groups, probes: listProbes, limit: limit)
                {
                    contents.insert(candidate.hash)
                }
            }
        }
        return contents
    }

    /// The lists for `model`, opened again when the file changed; nil (with ``lastListsNote`` when the index
    /// should have them) when there are none to use.
    func currentLists(model: IndexModel) throws(IndexError) -> RegionLists? {
        var info = stat()
        guard FileSystem.stat(listsPath, &info) == 0 else {
            openLists = nil
            if try meta("region_lists") == "yes" {
                lastListsNote = "the region lists are missing: searched every photo (`lookout index` rebuilds them)"
            }
            return nil
        }
        let identity = [
            UInt64(info.st_ino), UInt64(info.st_size), UInt64(info.st_mtim.tv_sec), UInt64(info.st_mtim.tv_nsec),
        ]
        if let open = openLists, open.identity == identity { return open.lists }
        do {
            let lists = try RegionLists(path: listsPath)
            guard lists.modelKey == model.key, lists.dimension == RegionLists.dimension(of: model),
                lists.groups == RegionLists.groups(objectLevels: model.scoreParameters.count)
            else {
                lastListsNote =
                    "the region lists belong to another model: searched every photo (`lookout index` rebuilds them)"
                return nil
            }
            openLists = (identity, lists)
            return lists
        } catch {
            openLists = nil
            lastListsNote = "the region lists are \(error.reason): searched every photo (`lookout index` rebuilds them)"
            return nil
        }
    }

    public func forEachPhoto(
        model key: String, contents: Set<String>, _ body: (StoredPhoto) -> Void
    ) throws(IndexError) {
        let image = version >= 2 ? "i.image_embedding" : "NULL"
        let taken = version >= 3 ? "i.taken" : "NULL"
        let labels = version >= 5 ? "i.labels" : "NULL"
        let statement = try database.prepare(
            """
            SELECT f.path, i.width, i.height, i.regions, \(image), \(taken), f.mtime_ns, \(labels) FROM files f
            JOIN images i ON i.hash = f.hash AND i.model = f.model
            WHERE f.status = 'ok' AND f.model = ? AND f.hash = ?
            """)
        for hash in contents.sorted() {
            statement.reset()
            statement.bind([.text(key), .text(hash)])
            while try statement.step() { Self.visitPhoto(statement, body) }
        }
    }
}

extension RegionLists {
    /// The photo number each of `hashes` holds now (its latest, not removed), where it has one.
    ///
    /// A pass over the base's hash table comparing first words (8 bytes) only; a match is then compared
    /// whole. One photo at a million photos: about a millisecond.
    func liveNumbers(of hashes: Set<String>) -> [String: UInt32] {
        var out: [String: UInt32] = [:]
        guard !hashes.isEmpty else { return out }
        let prefixes = Array(Set(hashes.map { Self.prefix(Array($0.utf8)) })).sorted()
        let table = file.bytes.baseAddress! + hashesOffset
        deleted.withUnsafeBufferPointer { deleted in
            for n in 0..<basePhotos {
                let word = UInt64(littleEndian: table.loadUnaligned(fromByteOffset: n * Self.hashSize, as: UInt64.self))
                guard Self.sortedContains(prefixes, word), !deleted[n] else { continue }
                let hash = hash(ofPhoto: n)
                if hashes.contains(hash) { out[hash] = UInt32(n) }
            }
        }
        for (k, hash) in tailHashes.enumerated() where hashes.contains(hash) && !deleted[basePhotos + k] {
            out[hash] = UInt32(basePhotos + k)
        }
        return out
    }

    static func sortedContains(_ sorted: [UInt64], _ value: UInt64) -> Bool {
        var low = 0, high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle] < value { low = middle + 1 } else { high = middle }
        }
        return low < sorted.count && sorted[low] == value
    }

    static func prefix(_ bytes: [UInt8]) -> UInt64 {
        var word: UInt64 = 0
        for (j, byte) in bytes.prefix(8).enumerated() { word |= UInt64(byte) << (8 * j) }
        return word
    }

    /// One tail record: the content's entries with their lists (nil entries: a removal).
    func tailRecord(hash: String, sequence: Int64, replaces: UInt32?, entries: [Entry]?) -> [UInt8] {
        var record: [UInt8] = []
        func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { record += $0 } }
        let added = entries != nil
        let entries = entries ?? []
        append(Self.tailMagic)
        append(UInt32(entries.count))
        append(UInt64(bitPattern: sequence))
        append(replaces ?? UInt32.max)
        append(UInt32(added ? 1 : 0))
        var hashBytes = Array(hash.utf8.prefix(Self.hashSize))
        hashBytes += [UInt8](repeating: 0, count: Self.hashSize - hashBytes.count)
        record += hashBytes
        if !entries.isEmpty {
            let codes = entries.flatMap(\.codes)
            let scales = entries.map(\.scale)
            let nearest = codes.withUnsafeBufferPointer { c in
                scales.withUnsafeBufferPointer { s in
                    Self.assign(
                        codes: c.baseAddress!, scales: s.baseAddress!, count: s.count, dimension: dimension,
                        centroids: centroids)
                }
            }
            for (entry, centre) in zip(entries, nearest) { append(UInt32(entry.group * centroidCount) + centre) }
            for scale in scales { append(scale.bitPattern) }
            record += codes.map { UInt8(bitPattern: $0) }
        }
        let checksum = record.withUnsafeBytes { lookout_checksum($0.baseAddress!, $0.count, 0) }
        append(checksum)
        return record
    }
}

/// An exclusive lock on a file beside the lists: one writer at a time (several `lookout index` runs).
struct ListsLock {
    let descriptor: Int32

    init(path: String) throws(IndexError) {
        descriptor = FileSystem.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw IndexError(path: path, problem: "cannot lock the region lists: \(String(cString: strerror(errno)))")
        }
        while flock(descriptor, LOCK_EX) != 0 && errno == EINTR {}
    }

    func release() {
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }
}

/// A new file of a given size, mapped for writing, then synced.
final class OutputMap {
    let path: String
    let descriptor: Int32
    let bytes: UnsafeMutableRawBufferPointer

    init(path: String, size: Int) throws(IndexError) {
        self.path = path
        descriptor = FileSystem.open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw IndexError(path: path, problem: "cannot write: \(String(cString: strerror(errno)))")
        }
        guard ftruncate(descriptor, off_t(size)) == 0,
            let address = mmap(nil, max(size, 1), PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0),
            address != MAP_FAILED
        else {
            let problem = String(cString: strerror(errno))
            close(descriptor)
            throw IndexError(path: path, problem: "cannot write: \(problem)")
        }
        bytes = UnsafeMutableRawBufferPointer(start: address, count: size)
    }

    func finish() throws(IndexError) {
        let synced = msync(bytes.baseAddress, bytes.count, MS_SYNC) == 0 && fsync(descriptor) == 0
        munmap(bytes.baseAddress, max(bytes.count, 1))
        close(descriptor)
        guard synced else { throw IndexError(path: path, problem: "cannot write: \(String(cString: strerror(errno)))") }
    }
}
