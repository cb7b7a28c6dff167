import ArgumentParser
import LookoutIndex
import LookoutIndexPostgres
import LookoutSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Search latency on a PostgreSQL index with pgvector, HNSW against the full scan, and recall@10 of the
/// HNSW path against the scan, at growing numbers of synthetic photos (scripts/bench/pg_search.sh starts
/// the server and runs it).
///
/// Synthetic photos are made from a real index (`--base`, the demo scenes): each region is a real region's
/// embedding plus Gaussian noise (so the vectors cluster as real ones do, rather than spreading uniformly),
/// each whole-photo embedding a real one plus noise. Rows go in with COPY (psql), the indexes are built after
/// each load (the regions' IVFFlat as `lookout index` makes it, HNSW for photos), and queries are real region
/// and photo embeddings with fresh noise.
struct PostgresSearch: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pg-search",
        abstract: "PostgreSQL search latency (pgvector's indexes vs scan) and recall@10 over synthetic photos.")

    @Option(help: "A PostgreSQL database with the vector extension (emptied first).") var db: String
    @Option(help: "An SQLite index whose regions and photo embeddings seed the synthetic ones.") var base: String
    @Option(help: "Photo counts, ascending, comma-separated (rows are added up to each).")
    var photos = "10000,100000,1000000"
    @Option(help: "Regions per photo at each count, comma-separated (0: scenes only).") var regions = "64,0,0"
    @Option(help: "Queries per measurement.") var queries = 20
    @Option(help: "Noise per dimension added to the seed vectors.") var noise: Float = 0.03
    @Option(help: "psql to load with.") var psql = "psql"
    @Option(help: "Scratch folder for the COPY files.") var scratch = "/tmp/lookout-pg-search"
    @Option(help: "IVFFlat lists probed per region query, comma-separated (each measured).")
    var probes = "8,16,32,64"

    func run() throws {
        let counts = photos.split(separator: ",").compactMap { Int($0) }
        let regionCounts = regions.split(separator: ",").compactMap { Int($0) }
        guard counts.count == regionCounts.count else {
            throw ValidationError("--photos and --regions differ in length")
        }
        try FileContents.makeDirectories(scratch)

        // Seeds: the base index's regions (dequantised) and photo embeddings.
        let seedIndex = try PhotoIndex(path: base, readOnly: true)
        guard var model = try seedIndex.storedModel() else { throw ValidationError("\(base) holds no photos") }
        var seedRegions: [(embedding: [Float], level: UInt8)] = []
        var seedImages: [[Float]] = []
        try seedIndex.store.forEachPhoto(model: model.key) { photo in
            if let vectors = try? RegionScorer.embeddings(blob: photo.regions, embeddingSize: model.embeddingSize) {
                for (k, vector) in vectors.enumerated() {
                    let record = 28 + model.embeddingSize
                    seedRegions.append((vector, photo.regions[4 + k * record + 20]))
                }
            }
            if let image = photo.imageEmbedding {
                seedImages.append(
                    (0..<(image.count / 2)).map { d in
                        Float(Float16(bitPattern: UInt16(image[2 * d]) | UInt16(image[2 * d + 1]) << 8))
                    })
            }
        }
        print("seeds: \(seedRegions.count) regions, \(seedImages.count) photo embeddings from \(base)")
        var random = SeededRandom(seed: 20_261_124)
        func noisy(_ vector: [Float]) -> [Float] {
            var out = vector.map { $0 + noise * random.gaussian() }
            let norm = max(out.reduce(0) { $0 + $1 * $1 }.squareRoot(), 1e-12)
            for d in out.indices { out[d] /= norm }
            return out
        }

        // A fresh index holding the base's model (its score parameters and embedding size).
        let store = try PostgresIndexStore(address: try PostgresAddress(url: db))
        guard store.hasVectors else { throw ValidationError("\(db): no vector extension (CREATE EXTENSION vector)") }
        model.maximumRegions = max(regionCounts.max() ?? 1, 1)
        // Scene scores as the cosine's own order (the demo tower's steep mapping saturates at 1 for the
        // synthetic photos near a query, and ties would make the top ten a matter of path order).
        model.sceneScore = SceneScore(center: 0, slope: 1)
        try store.setModel(model)
        for table in ["files", "images", "work", "region_vectors", "image_vectors"] {
            try sql("TRUNCATE lookout.\(table)")
        }
        let key = model.key
        let index = PhotoIndex(store: store)

        var have = 0
        for (count, regionsPerPhoto) in zip(counts, regionCounts) {
            // Load the rows up to `count`, without the HNSW indexes (built after, in bulk).
            var start = now()
            try sql("DROP INDEX IF EXISTS lookout.region_vectors_hnsw")
            try sql("DROP INDEX IF EXISTS lookout.region_vectors_ivfflat")
            try sql("DROP INDEX IF EXISTS lookout.image_vectors_hnsw")
            // In chunks of 10,000 photos, so that the COPY files stay a few GB (a whole 100,000-photo load
            // of 64 regions each would be about 36 GB of text).
            for chunkStart in stride(from: have, to: count, by: 10_000) {
                let files = try CopyFile(scratch + "/files.tsv")
                let images = try CopyFile(scratch + "/images.tsv")
                let regionRows = try CopyFile(scratch + "/regions.tsv")
                let imageRows = try CopyFile(scratch + "/image_vectors.tsv")
                for k in chunkStart..<min(chunkStart + 10_000, count) {
                    let hash = "synthetic-\(k)"
                    let list = (0..<regionsPerPhoto).map { _ -> Region in
                        let seed = seedRegions[Int(random.next() % UInt64(seedRegions.count))]
                        let x = Float(random.next() % 500)
                        let y = Float(random.next() % 400)
                        return Region(
                            box: [x, y, x + 100, y + 80], level: seed.level, vocabularyScore: 0.5,
                            embedding: noisy(seed.embedding))
                    }
                    let image = noisy(seedImages[Int(random.next() % UInt64(seedImages.count))])
                    let halves = image.map { Float16($0).bitPattern }
                    files.line(["/synthetic/\(k / 1000)/\(k).jpg", "1", "1", hash, key, "ok"])
                    images.line([
                        hash, key, "640", "480",
                        CopyFile.bytea(Region.encode(list, embeddingSize: model.embeddingSize)),
                        CopyFile.bytea(halves.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }),
                    ])
                    for (r, region) in list.enumerated() {
                        let folded = PostgresIndexStore.folded(
                            region.dequantized, level: Int(region.level), model.scoreParameters)
                        regionRows.line([hash, key, String(r), vectorText(folded)])
                    }
                    imageRows.line([hash, key, vectorText(halves.map { Float(Float16(bitPattern: $0)) })])
                }
                for file in [files, images, regionRows, imageRows] { file.close() }
                try sql("\\copy lookout.files(path, size, mtime_ns, hash, model, status) FROM '\(files.path)'")
                try sql(
                    "\\copy lookout.images(hash, model, width, height, regions, image_embedding) FROM '\(images.path)'")
                try sql("\\copy lookout.region_vectors(hash, model, region, embedding) FROM '\(regionRows.path)'")
                try sql("\\copy lookout.image_vectors(hash, model, embedding) FROM '\(imageRows.path)'")
                for file in [files, images, regionRows, imageRows] { unlink(file.path) }
            }
            have = count
            let loaded = now() - start
            start = now()
            // The regions' IVFFlat index as `lookout index` makes it.
            if regionsPerPhoto > 0 {
                try sql("DELETE FROM lookout.meta WHERE key = 'region_index_rows'")
                _ = try store.updateLists(model: model, minimumPhotos: 0)
            }
            let regionBuild = now() - start
            start = now()
            try sql(
                "SET maintenance_work_mem = '4GB'; SET max_parallel_maintenance_workers = 1; CREATE INDEX image_vectors_hnsw ON lookout.image_vectors USING hnsw (embedding vector_cosine_ops)"
            )
            let imageBuild = now() - start
            try sql("VACUUM ANALYZE")
            let vectorsHeld = try sql("SELECT count(*) FROM lookout.region_vectors")
            print(
                "\(count) photos (\(vectorsHeld.filter(\.isNumber)) region vectors): loaded in \(format3(loaded)) s, IVFFlat built in \(format3(regionBuild)) s (regions), HNSW in \(format3(imageBuild)) s (photos)"
            )

            for evidence in [PhotoIndex.Evidence.objects, .scenes] {
                let seeds = evidence == .objects ? seedRegions.map(\.embedding) : seedImages
                if evidence == .objects && regionsPerPhoto == 0 { continue }
                let texts = (0..<queries).map { _ in noisy(seeds[Int(random.next() % UInt64(seeds.count))]) }
                // Objects: each probe count of the IVFFlat index; scenes: HNSW.
                let probeCounts = evidence == .objects ? probes.split(separator: ",").compactMap { Int($0) } : [0]
                var scanTimes: [Double] = []
                var exacts: [[PhotoIndex.Hit]] = []
                for text in texts {
                    index.useNearestNeighbours = false
                    let clock = now()
                    exacts.append(try index.search(text: text, confidence: 0, top: 10, evidence: evidence))
                    scanTimes.append(now() - clock)
                }
                index.useNearestNeighbours = true
                func median(_ values: [Double]) -> String { format3(values.sorted()[values.count / 2] * 1000) }
                func p95(_ values: [Double]) -> String {
                    format3(values.sorted()[min(values.count - 1, Int(Double(values.count) * 0.95))] * 1000)
                }
                print("  \(evidence.rawValue): scan median \(median(scanTimes)) ms (p95 \(p95(scanTimes)))")
                for probeCount in probeCounts {
                    if probeCount > 0 { store.regionProbes = probeCount }
                    var hits = 0
                    var tiedHits = 0
                    var nearTimes: [Double] = []
                    for (text, exact) in zip(texts, exacts) {
                        let clock = now()
                        let near = try index.search(text: text, confidence: 0, top: 10, evidence: evidence)
                        nearTimes.append(now() - clock)
                        guard index.lastSearchCandidates != nil else {
                            throw ValidationError("the search did not go through pgvector's index")
                        }
                        hits += Set(exact.map(\.path)).intersection(near.map(\.path)).count
                        // Photos whose scores tie with the exact tenth are as good an answer as it.
                        let tenth = exact.count == 10 ? exact[9].score : 0
                        tiedHits += near.filter { $0.score >= tenth }.count
                    }
                    let how = probeCount > 0 ? "IVFFlat, \(probeCount) probes" : "HNSW"
                    print(
                        "    \(how): median \(median(nearTimes)) ms (p95 \(p95(nearTimes))), recall@10 \(format3(Double(hits) / Double(10 * queries))) (\(format3(Double(tiedHits) / Double(10 * queries))) counting ties with the tenth) over \(queries) queries"
                    )
                }
            }
        }
    }

    /// Runs psql with `command` on the database (the COPY files are read by psql, on this machine).
    @discardableResult
    func sql(_ command: String) throws -> String {
        let output = scratch + "/psql.out"
        let quoted =
            "'" + command.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
        let status = system("\(psql) '\(db)' -qAtX -v ON_ERROR_STOP=1 -c \(quoted) > '\(output)' 2>&1")
        let text =
            (try? FileContents.read(output, maximumSize: 1 << 20)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        guard status == 0 else { throw ValidationError("psql \(command.prefix(80)): \(text)") }
        return text
    }

    func vectorText(_ values: [Float]) -> String { "[" + values.map { "\($0)" }.joined(separator: ",") + "]" }
}

/// A COPY text-format file written line by line.
final class CopyFile {
    let path: String
    private let file: UnsafeMutablePointer<FILE>

    init(_ path: String) throws {
        self.path = path
        guard let file = fopen(path, "w") else { throw ValidationError("cannot write \(path)") }
        self.file = file
    }

    func line(_ fields: [String]) { fputs(fields.joined(separator: "\t") + "\n", file) }
    func close() { fclose(file) }

    /// bytea in COPY text: `\\x` and hex digits.
    static func bytea(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8](repeating: 0, count: 3 + 2 * bytes.count)
        out[0] = UInt8(ascii: "\\")
        out[1] = UInt8(ascii: "\\")
        out[2] = UInt8(ascii: "x")
        for (k, byte) in bytes.enumerated() {
            out[3 + 2 * k] = digits[Int(byte >> 4)]
            out[4 + 2 * k] = digits[Int(byte & 15)]
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// The deterministic generator the benchmarks load their rows with, so runs load the same rows.
typealias SeededRandom = SplitMix64

extension SplitMix64 {
    /// A standard normal sample (Box–Muller).
    mutating func gaussian() -> Float {
        let u = max(Double(next() >> 11) / Double(1 << 53), 1e-300)
        let v = Double(next() >> 11) / Double(1 << 53)
        return Float((-2 * log(u)).squareRoot() * cos(2 * Double.pi * v))
    }
}
