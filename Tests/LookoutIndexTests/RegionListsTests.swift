import Foundation
import LookoutIndex
import LookoutSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

#if DEBUG
    private let optimizedBuild = false
#else
    private let optimizedBuild = true
#endif

/// A synthetic library made from the real region embeddings of the index reference (the demo model's
/// regions of 11 scenes, `Tests/Fixtures/index`) plus noise: seeds drawn unevenly, so that some are common and
/// some rare, as `lookout-benchmarks search-scale` makes them.
struct SyntheticLibrary {
    static let seeds: [(embedding: [Float], level: UInt8)] = {
        var out: [(embedding: [Float], level: UInt8)] = []
        for name in IndexReferenceTests.photos {
            let vectors = try! IndexReferenceTests.embeddings.view("\(name).embeddings").floats()
            let levels = IndexReferenceTests.expected["regions"]![name]!["levels"]!
            for k in 0..<levels.count {
                out.append((Array(vectors[(k * 512)..<((k + 1) * 512)]), UInt8(levels[k].int!)))
            }
        }
        return out
    }()

    static let model: IndexModel = {
        let parameters = IndexReferenceTests.expected["score_parameters"]!
        var model = IndexModel(
            detectorFingerprint: "synthetic", textEncoderFingerprint: "synthetic", vocabulary: "synthetic",
            imageSize: 640, maximumRegions: 16, embeddingSize: 512,
            scoreParameters: (0..<parameters.count).map {
                (Float(parameters[$0][0].number!), Float(parameters[$0][1].number!))
            })
        model.imageTower = "synthetic"
        model.sceneScore = SceneScore(center: 0, slope: 1)
        return model
    }()

    var random: SplitMix64

    init(seed: UInt64) { random = SplitMix64(seed: seed) }

    /// `vector` plus uniform noise of `noise` standard deviation per dimension, at its own length.
    mutating func noisy(_ vector: [Float], noise: Float = 0.03) -> [Float] {
        let norm = vector.reduce(0) { $0 + $1 * $1 }.squareRoot()
        return vector.map { $0 + norm * noise * 3.4641 * (Float(random.next() >> 40) / Float(1 << 24) - 0.5) }
    }

    /// A seed, the first ones common, the last ones rare.
    mutating func seed() -> (embedding: [Float], level: UInt8) {
        let u = Double(random.next() >> 11) / Double(1 << 53)
        return Self.seeds[min(Self.seeds.count - 1, Int(Double(Self.seeds.count) * u * u * u))]
    }

    mutating func photo(hash: String, regions: Int) -> PhotoOutcome {
        let list = (0..<regions).map { _ -> Region in
            let seed = seed()
            let x = Float(random.next() % 500), y = Float(random.next() % 400)
            return Region(
                box: [x, y, x + 100, y + 80], level: seed.level, vocabularyScore: 0.5, embedding: noisy(seed.embedding))
        }
        var image = noisy(Self.seeds[Int(random.next() % UInt64(Self.seeds.count))].embedding, noise: 0.1)
        let norm = image.reduce(0) { $0 + $1 * $1 }.squareRoot()
        image = image.map { $0 / norm }
        return .indexed(
            hash: hash, width: 640, height: 480, regions: Region.encode(list, embeddingSize: 512),
            imageEmbedding: image.map { Float16($0).bitPattern })
    }

    /// Records `count` photos `/lib/first…` into `store`.
    mutating func fill(_ store: SQLiteIndexStore, from first: Int, count: Int, regions: Int) throws {
        for k in first..<(first + count) {
            try store.record(
                FoundPhoto(path: "/lib/\(k).jpg", size: 1, mtime: 1),
                outcome: photo(hash: "content-\(k)", regions: regions),
                model: Self.model.key)
        }
    }

    /// Query embeddings: noisy copies of common and of rare seeds (unit length).
    mutating func queries(_ count: Int) -> [[Float]] {
        (0..<count).map { q in
            let pick = q % 2 == 0 ? Int(random.next() % 40) : Self.seeds.count - 1 - Int(random.next() % 40)
            let vector = noisy(Self.seeds[pick].embedding)
            let norm = vector.reduce(0) { $0 + $1 * $1 }.squareRoot()
            return vector.map { $0 / norm }
        }
    }
}

/// The region lists (`INDEX.lists`): recall against the exact scan, incremental updates equal to a rebuild,
/// a killed writer, damaged and missing files.
@Suite(.serialized) struct RegionListsTests {
    static func scratch() throws -> String {
        let folder = NSTemporaryDirectory() + "lookout-lists-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileContents.makeDirectories(folder)
        return folder
    }

    /// Paths and scores of a search's hits, and of each hit's boxes.
    static func answer(_ hits: [PhotoIndex.Hit]) -> [String] {
        hits.map { hit in
            "\(hit.path) \(hit.score) " + hit.detections.map { "\($0.score)@\($0.box)" }.joined(separator: ",")
        }
    }

    /// The first line where two sets of answers differ.
    static func difference(_ a: [[String]], _ b: [[String]]) -> String {
        for (x, y) in zip(a, b) where x != y {
            for (u, v) in zip(x, y) where u != v { return "\(u) vs \(v)" }
            return "\(x.count) vs \(y.count) hits"
        }
        return a.count == b.count ? "none" : "\(a.count) vs \(b.count) answers"
    }

    /// Every query's answer through the lists, and whether the lists (not the scan) gave it.
    static func search(
        _ index: PhotoIndex, _ queries: [[Float]], evidence: PhotoIndex.Evidence = .objects
    ) throws
        -> [[String]]
    {
        try queries.map { query in
            let hits = try index.search(text: query, confidence: 0, top: 10, evidence: evidence)
            return answer(hits)
        }
    }

    static func scan(
        _ index: PhotoIndex, _ queries: [[Float]], evidence: PhotoIndex.Evidence = .objects
    ) throws
        -> [[String]]
    {
        index.useNearestNeighbours = false
        defer { index.useNearestNeighbours = true }
        return try search(index, queries, evidence: evidence)
    }

    @Test(.enabled(if: optimizedBuild, "release builds only (swift test -c release)"))
    func recallAgainstTheScanOnTwentyThousandPhotos() throws {
        let folder = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try SQLiteIndexStore(path: folder + "/index.sqlite")
        try store.setModel(SyntheticLibrary.model)
        var library = SyntheticLibrary(seed: 1)
        try library.fill(store, from: 0, count: 20_000, regions: 16)
        let index = PhotoIndex(store: store)
        index.minimumPhotosForLists = 0
        let note = try index.updateLists(model: SyntheticLibrary.model)
        #expect(note?.hasPrefix("built the region lists for 20000 photos") == true, "\(note ?? "nothing")")
        for evidence in [PhotoIndex.Evidence.objects, .scenes, .both] {
            let queries = library.queries(evidence == .objects ? 40 : 10)
            var same = 0
            var read: [Int] = []
            for query in queries {
                let near = try index.search(text: query, confidence: 0, top: 10, evidence: evidence)
                #expect(store.lastListsNote == nil)
                read.append(index.lastSearchCandidates ?? 20_000)
                index.useNearestNeighbours = false
                let exact = try index.search(text: query, confidence: 0, top: 10, evidence: evidence)
                index.useNearestNeighbours = true
                #expect(exact.count == 10)
                same += Set(exact.map(\.path)).intersection(near.map(\.path)).count
                // A photo both return carries the scan's very score.
                for hit in near {
                    if let twin = exact.first(where: { $0.path == hit.path }) { #expect(twin.score == hit.score) }
                }
            }
            let recall = Double(same) / Double(10 * queries.count)
            print(
                "region lists, 20,000 photos, \(evidence.rawValue): recall@10 \(recall), photos read \(read.sorted()[read.count / 2])"
            )
            #expect(recall >= 0.98, "\(evidence.rawValue): recall@10 \(recall)")
            #expect(read.allSatisfy { $0 < 2000 }, "the lists must read a fraction of the photos: \(read)")
        }
    }

    /// A library of 2,500 photos and its lists, with the queries to compare.
    static func smallLibrary(_ folder: String) throws -> (SQLiteIndexStore, PhotoIndex, SyntheticLibrary) {
        let store = try SQLiteIndexStore(path: folder + "/index.sqlite")
        try store.setModel(SyntheticLibrary.model)
        var library = SyntheticLibrary(seed: 2)
        try library.fill(store, from: 0, count: 2500, regions: 4)
        let index = PhotoIndex(store: store)
        index.minimumPhotosForLists = 1000
        #expect(try index.updateLists(model: SyntheticLibrary.model) != nil)
        store.listProbes = 100_000  // every list: the lists must then give the scan's answer exactly
        return (store, index, library)
    }

    /// The lists do not depend on the order the photos were recorded in (photos computed side by side arrive in
    /// any order, so their rowids differ from run to run): the same 1,500 photos recorded forward and reversed train
    /// the same centroids, bit for bit. Drawing the k-means sample in rowid order (as before) fails this.
    @Test func theListsDoNotDependOnTheOrderPhotosWereRecordedIn() throws {
        let folder = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var library = SyntheticLibrary(seed: 3)
        let photos = (0..<1500).map { k in
            (FoundPhoto(path: "/lib/\(k).jpg", size: 1, mtime: 1), library.photo(hash: "content-\(k)", regions: 4))
        }
        var centroids: [[Float]] = []
        for (n, order) in [photos, photos.reversed()].enumerated() {
            let store = try SQLiteIndexStore(path: folder + "/index-\(n).sqlite")
            try store.setModel(SyntheticLibrary.model)
            for (photo, outcome) in order {
                try store.record(photo, outcome: outcome, model: SyntheticLibrary.model.key)
            }
            let index = PhotoIndex(store: store)
            index.minimumPhotosForLists = 1000
            #expect(try index.updateLists(model: SyntheticLibrary.model) != nil)
            centroids.append(try RegionLists(path: store.listsPath).centroids)
        }
        #expect(centroids[0].count >= 512 * 2, "\(centroids[0].count / 512) centroids")
        let differing = zip(centroids[0], centroids[1]).filter { $0 != $1 }.count
        #expect(centroids[0].count == centroids[1].count)
        #expect(differing == 0, "\(differing) centroid values depend on the order of recording")
    }

    @Test func incrementalUpdatesEqualARebuild() throws {
        let folder = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (store, index, seeded) = try Self.smallLibrary(folder)
        var library = seeded
        var queries = library.queries(12)
        // Added, changed (new content at a path), removed. One added photo holds a region unlike any other,
        // and the last query asks for it.
        try library.fill(store, from: 2500, count: 40, regions: 4)
        let norm = SyntheticLibrary.seeds[0].embedding.reduce(0) { $0 + $1 * $1 }.squareRoot()
        var unique = (0..<512).map { _ in Float(library.random.next() >> 40) / Float(1 << 24) - 0.5 }
        let length = unique.reduce(0) { $0 + $1 * $1 }.squareRoot()
        unique = unique.map { $0 / length }
        let lone = Region(box: [1, 2, 3, 4], level: 0, vocabularyScore: 0.5, embedding: unique.map { $0 * norm })
        try store.record(
            FoundPhoto(path: "/lib/unique.jpg", size: 1, mtime: 1),
            outcome: .indexed(
                hash: "unique", width: 640, height: 480, regions: Region.encode([lone], embeddingSize: 512)),
            model: SyntheticLibrary.model.key)
        queries.append(unique)
        for k in [3, 17, 400] {
            try store.record(
                FoundPhoto(path: "/lib/\(k).jpg", size: 2, mtime: 2),
                outcome: library.photo(hash: "changed-\(k)", regions: 4), model: SyntheticLibrary.model.key)
        }
        try store.remove(paths: (10..<30).map { "/lib/\($0).jpg" }, keepingModel: SyntheticLibrary.model.key)
        // Before the lists are brought up to date: the changes come from the database's log.
        let pending = try Self.search(index, queries)
        #expect(store.lastListsNote == nil)
        let appended = try index.updateLists(model: SyntheticLibrary.model)
        #expect(appended == nil, "appended, not rebuilt: \(appended ?? "")")
        let lists = try RegionLists(path: store.listsPath, full: true)
        #expect(lists.tailEntries > 0)
        let updated = try Self.search(index, queries)
        for evidence in [PhotoIndex.Evidence.scenes, .both] {
            #expect(
                try Self.search(index, queries, evidence: evidence) == Self.scan(index, queries, evidence: evidence))
        }
        // A rebuild from the database.
        unlink(store.listsPath)
        let rebuiltNote = try index.updateLists(model: SyntheticLibrary.model)
        #expect(rebuiltNote?.contains("built the region lists") == true)
        #expect(try RegionLists(path: store.listsPath).tailEntries == 0)
        let rebuilt = try Self.search(index, queries)
        let scanned = try Self.scan(index, queries)
        #expect(pending == rebuilt)
        #expect(updated == rebuilt)
        #expect(rebuilt == scanned)
        #expect(scanned.last?.first?.hasPrefix("/lib/unique.jpg") == true, "the added photo is found")
    }

    @Test func aKilledWriterLeavesListsThatSearchLikeARebuild() throws {
        let folder = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (store, index, seeded) = try Self.smallLibrary(folder)
        var library = seeded
        let queries = library.queries(12)
        try library.fill(store, from: 2500, count: 30, regions: 4)
        try index.updateLists(model: SyntheticLibrary.model)
        // A writer killed in its last record: the file ends inside it, and the database holds changes the lists
        // never saw (recorded after).
        var info = stat()
        stat(store.listsPath, &info)
        let complete = Int(info.st_size)
        try library.fill(store, from: 2530, count: 5, regions: 4)
        try index.updateLists(model: SyntheticLibrary.model)
        stat(store.listsPath, &info)
        truncate(store.listsPath, off_t(complete + (Int(info.st_size) - complete) / 3))
        try library.fill(store, from: 2535, count: 5, regions: 4)
        try store.remove(paths: ["/lib/2531.jpg", "/lib/5.jpg"], keepingModel: SyntheticLibrary.model.key)
        let torn = try Self.search(index, queries)
        #expect(store.lastListsNote == nil)
        // The next update cuts the torn record off and applies the log again.
        try index.updateLists(model: SyntheticLibrary.model)
        let repaired = try Self.search(index, queries)
        unlink(store.listsPath)
        try index.updateLists(model: SyntheticLibrary.model)
        let rebuilt = try Self.search(index, queries)
        #expect(torn == rebuilt)
        #expect(repaired == rebuilt)
        // A huge --top through the lists: a long answer, not a trap.
        let everything = try index.search(text: queries[0], confidence: 0, top: Int.max, evidence: .objects)
        #expect(everything.count >= 10 && index.lastSearchCandidates != nil)
        #expect(rebuilt == (try Self.scan(index, queries)))
        #expect(rebuilt.flatMap { $0 }.contains { $0.hasPrefix("/lib/2531.jpg") } == false)
    }

    @Test func aDamagedOrMissingFileIsNoticedAndRebuilt() throws {
        let folder = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (store, index, seeded) = try Self.smallLibrary(folder)
        var library = seeded
        let queries = library.queries(6)
        let scanned = try Self.scan(index, queries)
        for (damage, expected) in [
            ("header", "damaged"), ("directory", "damaged"), ("truncated", "damaged"), ("missing", "missing"),
        ] {
            var bytes = try FileContents.read(store.listsPath, maximumSize: 1 << 30)
            switch damage {
            case "header": bytes[13] ^= 0x40
            case "directory": bytes[128 + 4 * 512 * 64 + 20] ^= 0x01
            case "truncated": bytes.removeLast(bytes.count / 3)
            default: bytes = []
            }
            if damage == "missing" {
                unlink(store.listsPath)
            } else {
                try FileContents.writeAtomically(bytes, to: store.listsPath)
            }
            // Never a wrong answer: the search scans, and says why.
            let answered = try Self.search(index, queries)
            #expect(answered == scanned, "\(damage): \(Self.difference(answered, scanned))")
            #expect(store.lastListsNote?.contains(expected) == true, "\(damage): \(store.lastListsNote ?? "no note")")
            #expect(index.lastSearchCandidates == nil)
            let note = try index.updateLists(model: SyntheticLibrary.model) ?? "nothing"
            #expect(note.contains("built the region lists for 2500 photos"), "\(damage): \(note)")
            if damage != "missing" { #expect(note.contains(expected), "\(note)") }
            #expect(try Self.search(index, queries) == scanned)
            #expect(store.lastListsNote == nil && index.lastSearchCandidates != nil)
        }
        // Damaged entries are found by the full check `lookout index` makes of small files.
        var bytes = try FileContents.read(store.listsPath, maximumSize: 1 << 30)
        bytes[bytes.count - 5000] ^= 0x10
        try FileContents.writeAtomically(bytes, to: store.listsPath)
        #expect(throws: RegionLists.Unusable.self) { try RegionLists(path: store.listsPath, full: true) }
        let repaired = try index.updateLists(model: SyntheticLibrary.model) ?? "nothing"
        #expect(repaired.contains("damaged"), "\(repaired)")
        _ = try RegionLists(path: store.listsPath, full: true)
    }

    @Test func searchShowsNearDuplicateRegionsOnce() throws {
        let folder = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try SQLiteIndexStore(path: folder + "/index.sqlite")
        try store.setModel(SyntheticLibrary.model)
        let seed = SyntheticLibrary.seeds[0]
        // Three near-identical boxes (IoU above 0.7 with the first) and one apart, all scoring alike.
        let boxes: [[Float]] = [
            [100, 100, 200, 200], [102, 101, 201, 203], [98, 99, 199, 198], [300, 300, 380, 360],
        ]
        let regions = boxes.enumerated().map { k, box in
            Region(
                box: box, level: seed.level, vocabularyScore: 0.5,
                embedding: seed.embedding.map { $0 * (1 - 0.01 * Float(k)) })
        }
        try store.record(
            FoundPhoto(path: "/lib/duplicates.jpg", size: 1, mtime: 1),
            outcome: .indexed(
                hash: "dup", width: 640, height: 480, regions: Region.encode(regions, embeddingSize: 512)),
            model: SyntheticLibrary.model.key)
        let norm = seed.embedding.reduce(0) { $0 + $1 * $1 }.squareRoot()
        let query = seed.embedding.map { $0 / norm }
        let index = PhotoIndex(store: store)
        let shown = try index.search(text: query, confidence: 0, top: 5, evidence: .objects)
        #expect(shown.count == 1)
        #expect(shown[0].detections.map(\.box) == [boxes[0], boxes[3]])
        index.displayedOverlap = nil
        let all = try index.search(text: query, confidence: 0, top: 5, evidence: .objects)
        #expect(all[0].detections.count == 4)
        #expect(all[0].score == shown[0].score)
    }
}
