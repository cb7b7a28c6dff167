import ArgumentParser
import Foundation
import LookoutIndex
import LookoutJSON
import LookoutSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Search at scale on the embedded (SQLite) index: the region lists against the full scan, on synthetic
/// libraries of N photos made from a real index (`--base`, the demo scenes indexed by `lookout index`).
///
/// Each synthetic photo holds `--regions` regions, each a real region's embedding (with its output level) plus
/// noise, stored in 8 bits as `lookout index` stores them, and a real whole-photo embedding plus noise. Seeds
/// are drawn unevenly (seed ⌊n·u³⌋ for uniform u), so the first seeds are common and the last ones rare; half
/// of the queries come from the 10% most common seeds and half from the 10% rarest, each a seed with fresh
/// noise. Each size: build the lists (timed), add one photo (timed: record plus list update), then a child
/// process (so that its peak memory is a searching process's alone) times warm searches through the lists
/// and through the scan and measures recall@10 of the lists against the scan.
struct SearchScale: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search-scale",
        abstract: "Search latency and recall@10 of the region lists against the full scan, over synthetic libraries.")
    @Option(help: "Photo counts, comma-separated.") var photos = "10000,100000"
    @Option(help: "An SQLite index whose regions and photo embeddings seed the synthetic ones.")
    var base = "/tmp/lookout-search-scale/scenes.sqlite"
    @Option(help: "Folder for the synthetic databases (each N × 35 KB, and the lists as much again).")
    var folder = "/tmp/lookout-search-scale"
    @Option(help: "Regions per photo.") var regions = 64
    @Option(help: "Queries per measurement (half common, half rare).") var queries = 40
    @Option(
        help:
            "Of those, how many the scan answers too, for recall (default: all; a scan of a million photos takes a minute)."
    )
    var scanQueries: Int?
    @Option(help: "Noise per dimension added to the seed vectors.") var noise: Float = 0.03
    @Option(help: "Lists a search probes (the index's default: 64).") var probes = 64
    @Option(help: "Candidate photos a search re-scores exactly (the index's default: 100).") var candidates = 100
    @Flag(help: "One JSON object per size.") var json = false
    @Flag(help: "Keep region lists already built for this library (no build time then).") var keepLists = false
    @Flag(help: .hidden) var searchOnly = false

    func run() throws {
        try FileContents.makeDirectories(folder)
        for count in photos.split(separator: ",").compactMap({ Int($0) }) {
            let path = "\(folder)/synthetic-\(count)-\(regions).sqlite"
            if searchOnly {
                try search(path: path, count: count)
                continue
            }
            var fields: [(String, JSONValue)] = [
                ("photos", .int(Int64(count))), ("regions_per_photo", .int(Int64(regions))),
            ]
            let seeds = try Seeds(base: base)
            let store = try SQLiteIndexStore(path: path)
            var model = seeds.model
            model.maximumRegions = regions
            model.sceneScore = SceneScore(center: 0, slope: 1)  // the cosine's own order (no saturation ties)
            if try store.storedModel()?.key != model.key || (try store.statistics().files) != count {
                unlink(path)
                unlink(path + "-wal")
                let fresh = try SQLiteIndexStore(path: path)
                try fresh.setModel(model)
                var random = SeededRandom(seed: 20_261_125)
                let start = now()
                for k in 0..<count {
                    let outcome = seeds.photo(&random, regions: regions, noise: noise, hash: "synthetic-\(k)")
                    try fresh.record(
                        FoundPhoto(path: "/synthetic/\(k / 1000)/\(k).jpg", size: 1, mtime: 1), outcome: outcome,
                        model: model.key)
                    if k % 10000 == 9999 && !json { print("  wrote \(k + 1) photos (\(format3(now() - start)) s)") }
                }
                if !json { print("wrote \(count) synthetic photos in \(format3(now() - start)) s") }
            }
            let writer = try SQLiteIndexStore(path: path)
            let statistics = try writer.statistics()
            fields.append(("database_bytes", .int(Int64(statistics.databaseBytes))))
            var start = now()
            if !keepLists || (try? RegionLists(path: writer.listsPath)) == nil {
                unlink(writer.listsPath)
                _ = try writer.updateLists(model: model, minimumPhotos: 0) { if !json { print("  \($0)") } }
                fields.append(("build_s", .double(now() - start)))
            }
            var info = stat()
            stat(writer.listsPath, &info)
            fields.append(("index_bytes", .int(Int64(info.st_size))))

            // One photo added: its record, then the lists brought up to date (an appended tail record).
            var random = SeededRandom(seed: 7)
            let added = seeds.photo(&random, regions: regions, noise: noise, hash: "added-\(count)")
            start = now()
            try writer.record(
                FoundPhoto(path: "/synthetic/added.jpg", size: 1, mtime: 1), outcome: added, model: model.key)
            let recorded = now() - start
            _ = try writer.updateLists(model: model, minimumPhotos: 0)
            fields.append(("add_photo_ms", .double((now() - start) * 1000)))
            fields.append(("add_photo_record_ms", .double(recorded * 1000)))
            start = now()
            _ = try RegionLists(path: writer.listsPath)
            fields.append(("open_lists_ms", .double((now() - start) * 1000)))

            // The searches, in a process of their own.
            let output = "\(folder)/search-\(count).json"
            let arguments = [
                "search-scale", "--photos", String(count), "--base", base, "--folder", folder, "--regions",
                String(regions), "--queries", String(queries), "--scan-queries", String(scanQueries ?? queries),
                "--noise", String(noise), "--probes", String(probes),
                "--candidates", String(candidates), "--search-only",
            ]
            let status = system(
                ([CommandLine.arguments[0]] + arguments).map { "'\($0)'" }.joined(separator: " ") + " > '\(output)'")
            guard status == 0 else { throw ValidationError("the search process failed (\(status))") }
            let bytes = try FileContents.read(output, maximumSize: 1 << 20)
            let text = String(decoding: bytes, as: UTF8.self)
            let document = try bytes.withUnsafeBytes { try JSONDocument(bytes: $0) }
            guard case .object(let members) = document.root.value else {
                throw ValidationError("the search process printed \(text)")
            }
            fields += members
            if json {
                print(JSONValue.object(fields).serialized)
            } else {
                for (key, value) in fields { print("  \(key): \(value.serialized)") }
            }
            fflush(nil)
        }
    }

    /// The child's part: warm searches through the lists, peak memory, then the scan and recall.
    func search(path: String, count: Int) throws {
        let seeds = try Seeds(base: base)
        let store = try SQLiteIndexStore(path: path, readOnly: true)
        store.listProbes = probes
        let index = PhotoIndex(store: store)
        index.nearestNeighbourCandidates = candidates
        var random = SeededRandom(seed: 99)
        let common = max(1, seeds.regions.count / 10)
        var texts: [(vector: [Float], rare: Bool)] = []
        for q in 0..<queries {
            let rare = q % 2 == 1
            let seed =
                rare
                ? seeds.regions.count - 1 - Int(random.next() % UInt64(common)) : Int(random.next() % UInt64(common))
            texts.append((seeds.noisy(seeds.regions[seed].embedding, &random, noise: noise), rare))
        }
        let sceneTexts = (0..<max(queries / 4, 2)).map { _ in
            seeds.noisy(seeds.images[Int(random.next() % UInt64(seeds.images.count))], &random, noise: noise)
        }
        // Warm: every query once through the lists (timed too: the first time, its lists' and photos' pages
        // may still be on disk).
        var firstTimes: [Double] = []
        for text in texts {
            let start = now()
            _ = try index.search(text: text.vector, confidence: 0, top: 10, evidence: .objects)
            firstTimes.append(now() - start)
        }
        var times: [Double] = []
        var found: [[String]] = []
        var read: [Int] = []
        for text in texts {
            let start = now()
            let hits = try index.search(text: text.vector, confidence: 0, top: 10, evidence: .objects)
            times.append(now() - start)
            found.append(hits.map(\.path))
            read.append(index.lastSearchCandidates ?? -1)
        }
        if let note = store.lastListsNote { throw ValidationError("the lists were not used: \(note)") }
        let peak = Self.peakResidentBytes()
        let memory = Self.residentMemory()
        for text in sceneTexts { _ = try index.search(text: text, confidence: 0, top: 10, evidence: .scenes) }
        var sceneFound: [[String]] = []
        var sceneTimes: [Double] = []
        for text in sceneTexts {
            let start = now()
            sceneFound.append(try index.search(text: text, confidence: 0, top: 10, evidence: .scenes).map(\.path))
            sceneTimes.append(now() - start)
        }
        // Both kinds of evidence (the default search): the object queries and the scene queries, each weighing
        // a photo's regions and its whole-photo embedding together.
        let bothTexts = texts.map(\.vector) + sceneTexts
        for text in bothTexts { _ = try index.search(text: text, confidence: 0, top: 10, evidence: .both) }
        var bothFound: [[String]] = []
        var bothTimes: [Double] = []
        for text in bothTexts {
            let start = now()
            bothFound.append(try index.search(text: text, confidence: 0, top: 10, evidence: .both).map(\.path))
            bothTimes.append(now() - start)
        }
        // The scan: the exact answer (kept in a file beside the database, for the same database and queries:
        // a scan of a million photos takes a minute a query, and other settings of the lists reuse it).
        let scanned = min(scanQueries ?? queries, queries)
        let sceneScanned = min(scanned, sceneTexts.count)
        let bothScanned = bothTexts.count - queries + scanned
        let cachePath = "\(path).exact-v2-q\(queries)-s\(scanned)-n\(noise)-c\(try store.changeSequence())"
        var exactAnswers: [[String]] = []
        var exactScenes: [[String]] = []
        var exactBoth: [[String]] = []
        var scanTimes: [Double] = []
        var scanFromFile = false
        if let bytes = try? FileContents.read(cachePath, maximumSize: 64 << 20) {
            for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
                let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
                if fields.first == "S" {
                    exactScenes.append(Array(fields.dropFirst()))
                } else if fields.first == "B" {
                    exactBoth.append(Array(fields.dropFirst()))
                } else if let time = Double(fields.first ?? "") {
                    scanTimes.append(time)
                    exactAnswers.append(Array(fields.dropFirst()))
                }
            }
            scanFromFile =
                exactAnswers.count == scanned && exactScenes.count == sceneScanned && exactBoth.count == bothScanned
        }
        if !scanFromFile {
            index.useNearestNeighbours = false
            exactAnswers = []
            exactScenes = []
            exactBoth = []
            scanTimes = []
            for text in texts.prefix(scanned) {
                let start = now()
                exactAnswers.append(
                    try index.search(text: text.vector, confidence: 0, top: 10, evidence: .objects).map(\.path))
                scanTimes.append(now() - start)
            }
            for text in sceneTexts.prefix(sceneScanned) {
                exactScenes.append(try index.search(text: text, confidence: 0, top: 10, evidence: .scenes).map(\.path))
            }
            // Both: the scanned object queries, then every scene query.
            for text in bothTexts.prefix(scanned) + bothTexts.suffix(sceneTexts.count) {
                exactBoth.append(try index.search(text: text, confidence: 0, top: 10, evidence: .both).map(\.path))
            }
            let lines =
                zip(scanTimes, exactAnswers).map { ([String($0)] + $1).joined(separator: "\t") }
                + exactScenes.map { (["S"] + $0).joined(separator: "\t") }
                + exactBoth.map { (["B"] + $0).joined(separator: "\t") }
            try? FileContents.writeAtomically(Array(lines.map { $0 + "\n" }.joined().utf8), to: cachePath)
        }
        var hits = (all: 0, rare: 0, common: 0)
        var asked = (rare: 0, common: 0)
        for (q, text) in texts.prefix(scanned).enumerated() {
            let same = Set(exactAnswers[q]).intersection(found[q]).count
            hits.all += same
            if text.rare { hits.rare += same; asked.rare += 1 } else { hits.common += same; asked.common += 1 }
        }
        var sceneHits = 0
        for q in 0..<sceneScanned { sceneHits += Set(exactScenes[q]).intersection(sceneFound[q]).count }
        var bothHits = 0
        let bothCompared = Array(bothFound.prefix(scanned) + bothFound.suffix(sceneTexts.count))
        for (exact, found) in zip(exactBoth, bothCompared) { bothHits += Set(exact).intersection(found).count }
        func percentile(_ values: [Double], _ p: Double) -> Double {
            values.sorted()[min(values.count - 1, Int(Double(values.count) * p))] * 1000
        }
        let fields: [(String, JSONValue)] = [
            ("p50_ms", .double(percentile(times, 0.5))), ("p95_ms", .double(percentile(times, 0.95))),
            ("first_time_p50_ms", .double(percentile(firstTimes, 0.5))),
            ("first_time_p95_ms", .double(percentile(firstTimes, 0.95))),
            ("recall_at_10", .double(Double(hits.all) / Double(10 * max(scanned, 1)))),
            ("recall_at_10_common", .double(Double(hits.common) / Double(10 * max(asked.common, 1)))),
            ("recall_at_10_rare", .double(Double(hits.rare) / Double(10 * max(asked.rare, 1)))),
            ("photos_read_median", .int(Int64(read.sorted()[read.count / 2]))),
            ("scenes_p50_ms", .double(percentile(sceneTimes, 0.5))),
            ("scenes_recall_at_10", .double(Double(sceneHits) / Double(10 * max(sceneScanned, 1)))),
            ("both_p50_ms", .double(percentile(bothTimes, 0.5))), ("both_p95_ms", .double(percentile(bothTimes, 0.95))),
            ("both_recall_at_10", .double(Double(bothHits) / Double(10 * max(exactBoth.count, 1)))),
            ("peak_rss_bytes", .int(Int64(peak))),
            ("rss_anonymous_bytes", .int(Int64(memory.anonymous))), ("rss_file_bytes", .int(Int64(memory.file))),
            ("scan_p50_ms", .double(percentile(scanTimes, 0.5))), ("queries", .int(Int64(queries))),
            ("scanned_queries", .int(Int64(scanned))), ("scan_from_earlier_run", .bool(scanFromFile)),
            ("probes", .int(Int64(probes))), ("candidates", .int(Int64(candidates))),
        ]
        print(JSONValue.object(fields).serialized)
    }

    /// This process's resident memory now: its own (heap, stacks) and mapped files' pages (the lists file,
    /// SQLite's map: page cache the kernel may take back).
    static func residentMemory() -> (anonymous: Int, file: Int) {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (0, 0) }
        func value(_ key: String) -> Int {
            for line in status.split(separator: "\n") where line.hasPrefix(key) {
                return (Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "") ?? 0)
                    * 1024
            }
            return 0
        }
        return (value("RssAnon:"), value("RssFile:") + value("RssShmem:"))
    }

    /// This process's peak resident memory (getrusage's maximum resident set).
    static func peakResidentBytes() -> Int {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return usage.ru_maxrss * 1024
    }
}

/// Real region embeddings (with their levels) and photo embeddings of an index, to make synthetic photos of.
struct Seeds {
    let model: IndexModel
    var regions: [(embedding: [Float], level: UInt8)] = []
    var images: [[Float]] = []

    init(base: String) throws {
        if FileSystem.access(base, R_OK) != 0 { try Self.make(base) }
        let index = try PhotoIndex(path: base, readOnly: true)
        guard let model = try index.storedModel() else { throw ValidationError("\(base) holds no photos") }
        self.model = model
        var regions: [(embedding: [Float], level: UInt8)] = []
        var images: [[Float]] = []
        try index.store.forEachPhoto(model: model.key) { photo in
            if let vectors = try? RegionScorer.embeddings(blob: photo.regions, embeddingSize: model.embeddingSize) {
                for (k, vector) in vectors.enumerated() {
                    regions.append((vector, photo.regions[4 + k * (28 + model.embeddingSize) + 20]))
                }
            }
            if let image = photo.imageEmbedding {
                images.append(
                    (0..<(image.count / 2)).map { d in
                        Float(Float16(bitPattern: UInt16(image[2 * d]) | UInt16(image[2 * d + 1]) << 8))
                    })
            }
        }
        guard !regions.isEmpty, !images.isEmpty else {
            throw ValidationError("\(base) holds no regions or no photo embeddings (index it with an image model)")
        }
        self.regions = regions
        self.images = images
    }

    /// The seed index when there is none yet: the example scenes indexed by the `lookout` built beside this
    /// benchmark, with the demo model (regions and whole-photo embeddings).
    static func make(_ base: String) throws {
        let lookout =
            (CommandLine.arguments[0].split(separator: "/", omittingEmptySubsequences: false).dropLast()
            + ["lookout"]).joined(separator: "/")
        guard FileSystem.access(lookout, X_OK) == 0, FileSystem.access("examples/scenes", R_OK) == 0 else {
            throw ValidationError(
                "\(base): no seed index, and none can be made here (it needs \(lookout) and examples/scenes: run "
                    + "from the checkout after `swift build -c release`), or give --base INDEX")
        }
        let folder = base.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        if !folder.isEmpty { try FileContents.makeDirectories(folder) }
        FileHandle.standardError.write(Data("making the seed index \(base) from examples/scenes\n".utf8))
        let status = system("'\(lookout)' index examples/scenes --db '\(base)' --plain >&2")
        guard status == 0 else { throw ValidationError("lookout index examples/scenes failed (\(status))") }
    }

    /// `vector` plus noise (the sum of four uniforms, scaled to `noise` standard deviation), unit length.
    func noisy(_ vector: [Float], _ random: inout SeededRandom, noise: Float) -> [Float] {
        var out = vector
        let step = noise * 3.4641 / 65536  // four uniforms on [0, 65536): variance 4/12 · 65536²
        var d = 0
        while d < out.count {
            let bits = random.next()
            out[d] +=
                (Float(bits & 0xFFFF) + Float((bits >> 16) & 0xFFFF) + Float((bits >> 32) & 0xFFFF)
                    + Float(bits >> 48) - 131_072) * step / 2
            d += 1
        }
        let norm = max(out.reduce(0) { $0 + $1 * $1 }.squareRoot(), 1e-12)
        for d in out.indices { out[d] /= norm }
        return out
    }

    /// A synthetic photo: `regions` regions from seeds drawn unevenly (common first), a photo embedding.
    func photo(_ random: inout SeededRandom, regions count: Int, noise: Float, hash: String) -> PhotoOutcome {
        let list = (0..<count).map { _ -> Region in
            let u = Double(random.next() >> 11) / Double(1 << 53)
            let seed = regions[min(regions.count - 1, Int(Double(regions.count) * u * u * u))]
            let x = Float(random.next() % 500), y = Float(random.next() % 400)
            return Region(
                box: [x, y, x + 100, y + 80], level: seed.level, vocabularyScore: 0.5,
                embedding: noisy(seed.embedding, &random, noise: noise))
        }
        let image = noisy(images[Int(random.next() % UInt64(images.count))], &random, noise: noise)
        return .indexed(
            hash: hash, width: 640, height: 480, regions: Region.encode(list, embeddingSize: model.embeddingSize),
            imageEmbedding: image.map { Float16($0).bitPattern })
    }
}
