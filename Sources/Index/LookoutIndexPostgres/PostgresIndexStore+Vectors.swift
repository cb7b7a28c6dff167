import LookoutStore
import LookoutSupport
import PostgresNIO

#if canImport(Glibc)
    import Glibc
#endif

/// Searches through pgvector, where the database has the extension (`CREATE EXTENSION vector`, by its owner):
/// every stored region's embedding (dequantised from its 8 bits) goes in `lookout.region_vectors` under an
/// IVFFlat index for inner product (made by `lookout index` once the index holds enough photos, and made again
/// as it grows), and every whole-photo embedding in `lookout.image_vectors` under an HNSW one for cosine. A
/// search asks each index for the nearest vectors to its queries, then reads and scores only the photos that
/// hold them, exactly as a full scan scores them: the answer equals the scan's whenever the photos that would
/// rank first hold one of those vectors (recall@10 is measured in BENCHMARKS.md).
///
/// Region vectors are *folded*: a region of output level l with embedding e is stored as `[s_l·e, b_l]`
/// (`s_l = exp(logitScale_l)`, `b_l` the level's bias; one coordinate more than the embedding), and a query t
/// is asked as `[t, 1]`, so that their inner product is exactly the logit of the head's score. The nearest
/// vectors are then the best-scoring regions across the three levels, whose scales and biases differ.
///
/// Why IVFFlat for regions: one object seen in many photos makes a dense cluster of region vectors whose order
/// is decided by small differences, where HNSW's graph walk stops early (recall@10 0.82 at 10,000 photos, the
/// same at ef_search 1000); IVFFlat reads every vector of the lists it probes, as the SQLite index's region
/// lists do.
///
/// Vectors are written with the photos, so an index made before the extension was added keeps scanning
/// (`meta.vectors` says whether every photo of the model has its vectors); so does one whose region vectors
/// were written unfolded (`meta.vector_layout`), until it is indexed again.
extension PostgresIndexStore: NearestNeighbourStore {
    public var nearestNeighbourKind: String { "pgvector" }
    public var lastNearestNeighbourNote: String? { nil }

    public var defaultCandidates: Int { 400 }

    /// Creates the vector tables for `model`'s embedding size (again, when a new model has another size).
    func prepareVectors(_ model: IndexModel) throws(IndexError) {
        let size = model.embeddingSize
        // An open_clip or SigLIP tower's photo embeddings have their own size.
        let imageSize = model.wholePhotoSize
        let layout = try meta("vector_layout") == Self.vectorLayout
        let current = layout ? vectorSize : nil
        let currentImage = layout ? imageVectorSize : nil
        let photos =
            try link.query("SELECT count(*) FROM lookout.images").first?.value(0, as: Int64.self) ?? 0
        foldingParameters = model.scoreParameters
        if current != size || currentImage != imageSize {
            try link.query("DROP TABLE IF EXISTS lookout.region_vectors")
            try link.query("DROP TABLE IF EXISTS lookout.image_vectors")
            try link.query(
                """
                CREATE TABLE lookout.region_vectors (
                    hash text NOT NULL, model text NOT NULL, region integer NOT NULL, embedding vector(\(size + 1)) NOT NULL,
                    PRIMARY KEY (hash, model, region))
                """)
            try link.query(
                """
                CREATE TABLE lookout.image_vectors (
                    hash text NOT NULL, model text NOT NULL, embedding vector(\(imageSize)) NOT NULL, PRIMARY KEY (hash, model))
                """)
            try link.query(
                "CREATE INDEX image_vectors_hnsw ON lookout.image_vectors USING hnsw (embedding vector_cosine_ops)")
            try setMeta("vector_size", String(size))
            try setMeta("image_vector_size", String(imageSize))
            try setMeta("vector_layout", Self.vectorLayout)
            vectorSize = size
            imageVectorSize = imageSize
        }
        // Photos stored without vectors (before the extension, or under another model) keep this model on
        // the scan until it is indexed anew.
        let previousModel = try meta("vectors_model")
        let previousState = try meta("vectors")
        let complete =
            photos == 0
            || (current == size && currentImage == imageSize && previousModel == model.key
                && previousState == "complete")
        try setMeta("vectors_model", model.key)
        try setMeta("vectors", complete ? "complete" : "partial")
    }

    /// The statements (CTEs, appended after the photo's own) that store one photo's vectors; their values
    /// are appended to `binds`.
    func vectorStatements(
        hash: String, regions: [UInt8], imageEmbedding: [UInt16]?, embeddingSize: Int, binds: inout PostgresBindings
    ) throws(IndexError) -> String {
        var vectors: [[Float]] = []
        var failure: IndexError?
        regions.withUnsafeBytes { blob in
            do throws(IndexError) {
                vectors = try RegionScorer.embeddings(blob: blob, embeddingSize: embeddingSize)
                let quantized = UInt32(littleEndian: blob.loadUnaligned(as: UInt32.self)) & 0x8000_0000 != 0
                let record = quantized ? 28 + embeddingSize : 24 + 2 * embeddingSize
                for r in vectors.indices {
                    vectors[r] = Self.folded(vectors[r], level: Int(blob[4 + r * record + 20]), foldingParameters)
                }
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        var sql = ""
        if !vectors.isEmpty {
            binds.append(vectors.map(Self.literal))
            let index = binds.count
            sql += """
                ,
                region_rows AS (
                    INSERT INTO lookout.region_vectors(hash, model, region, embedding)
                    SELECT $6, $4, (r.n - 1)::integer, r.v::vector FROM unnest($\(index)::text[]) WITH ORDINALITY AS r(v, n)
                    ON CONFLICT (hash, model, region) DO UPDATE SET embedding = excluded.embedding)
                """
        }
        if let imageEmbedding, imageEmbedding.count == (imageVectorSize ?? embeddingSize) {
            binds.append(Self.literal(imageEmbedding.map { Float(Float16(bitPattern: $0)) }))
            sql += """
                ,
                image_row AS (
                    INSERT INTO lookout.image_vectors(hash, model, embedding) VALUES($6, $4, $\(binds.count)::vector)
                    ON CONFLICT (hash, model) DO UPDATE SET embedding = excluded.embedding)
                """
        }
        return sql
    }

    /// How region vectors are stored (``folded(_:level:_:)``); tables of another layout are made anew.
    static let vectorLayout = "folded-v1"
    static let regionIndex = "region_vectors_ivfflat"

    func hasRegionIndex() throws(IndexError) -> Bool {
        try link.query("SELECT to_regclass('lookout.\(Self.regionIndex)') IS NOT NULL").first?.value(0, as: Bool.self)
            == true
    }

    /// Makes the regions' IVFFlat index once the index holds `minimumPhotos` photos of `model`, and again when
    /// the region vectors have doubled or halved since it was made (its lists are k-means centroids of the
    /// vectors there were then: √rows of them). One worker at a time (an advisory lock; the others go on).
    /// What was done, in words, or nil.
    public func updateLists(
        model: IndexModel, minimumPhotos: Int, progress: (String) -> Void = { _ in }
    ) throws(IndexError) -> String? {
        guard hasVectors, try meta("vectors_model") == model.key, try meta("vector_layout") == Self.vectorLayout
        else { return nil }
        // One session: the advisory lock and maintenance_work_mem are the session's.
        return try link.withSession { () throws(IndexError) -> String? in
            try updateListsInSession(model: model, minimumPhotos: minimumPhotos, progress: progress)
        }
    }

    private func updateListsInSession(
        model: IndexModel, minimumPhotos: Int, progress: (String) -> Void
    ) throws(IndexError) -> String? {
        guard try link.query("SELECT pg_try_advisory_lock(74_100_030)").first?.value(0, as: Bool.self) == true else {
            return nil
        }
        defer { _ = try? link.query("SELECT pg_advisory_unlock(74_100_030)") }
        // Indexes of earlier versions: HNSW over the folded region vectors.
        try link.query("DROP INDEX IF EXISTS lookout.region_vectors_hnsw")
        let photos = try link.query("SELECT count(*) FROM lookout.images").first?.value(0, as: Int64.self) ?? 0
        let rows = try link.query("SELECT count(*) FROM lookout.region_vectors").first?.value(0, as: Int64.self) ?? 0
        let madeFor = Int64(try meta("region_index_rows") ?? "") ?? 0
        let exists = try hasRegionIndex()
        if exists && rows <= 2 * madeFor && 2 * rows >= madeFor { return nil }
        guard photos >= minimumPhotos, rows > 0 else { return nil }
        let lists = min(max(Int(Double(rows).squareRoot()), 8), 32_768)
        progress("pgvector: IVFFlat index over \(rows) region vectors (\(lists) lists)")
        let start = Stopwatch.now()
        // Built beside the old one without blocking other workers' inserts (CONCURRENTLY), then swapped in, so
        // searches always have one; a build cut off leaves an invalid `_new` index, dropped by the next.
        let fresh = Self.regionIndex + "_new"
        // pgvector's k-means wants its sample in maintenance_work_mem (about 1.5 GB at 6.4 M vectors, 2,530
        // lists): 1 GB first, then what the server says it needs.
        var memory = 1024
        while true {
            try link.query("SET maintenance_work_mem = '\(memory)MB'")
            try link.query("DROP INDEX IF EXISTS lookout.\(fresh)")
            do {
                try link.query(
                    """
                    CREATE INDEX CONCURRENTLY \(fresh) ON lookout.region_vectors USING ivfflat (embedding vector_ip_ops)
                    WITH (lists = \(lists))
                    """)
                break
            } catch {
                guard let needed = Self.memoryRequired(error.problem), needed >= memory, memory < 64 * 1024 else {
                    throw error
                }
                progress(
                    "pgvector: the IVFFlat build needs \(needed) MB of maintenance_work_mem; building again with it")
                memory = needed + 256
            }
        }
        try link.query("RESET maintenance_work_mem")
        try link.query("DROP INDEX IF EXISTS lookout.\(Self.regionIndex)")
        try link.query("ALTER INDEX lookout.\(fresh) RENAME TO \(Self.regionIndex)")
        try setMeta("region_index_rows", String(rows))
        return "\(exists ? "remade" : "made") pgvector's IVFFlat index over \(rows) region vectors (\(lists) lists) in "
            + "\(((Stopwatch.now() - start) * 10).rounded() / 10) s"
    }

    /// N from pgvector's "memory required is N MB, maintenance_work_mem is M MB".
    static func memoryRequired(_ message: String) -> Int? {
        guard let range = message.firstRange(of: "memory required is ") else { return nil }
        return Int(message[range.upperBound...].prefix { $0.isNumber })
    }

    /// `[s·e, b]` for a region of `level`: its inner product with `[t, 1]` is the head's logit for query t.
    public static func folded(
        _ embedding: [Float], level: Int, _ parameters: [(logitScale: Float, bias: Float)]
    ) -> [Float] {
        let (logitScale, bias) = level < parameters.count ? parameters[level] : (0, 0)
        let scale = expf(logitScale)
        return embedding.map { $0 * scale } + [bias]
    }

    /// pgvector's text form of a vector: `[0.1,-2,…]` (shortest round-tripping decimals, so exact in F32).
    static func literal(_ values: [Float]) -> String {
        "[" + values.map { $0.isFinite ? "\($0)" : "0" }.joined(separator: ",") + "]"
    }

    func pruneVectors(model key: String) throws(IndexError) {
        var binds = PostgresBindings()
        binds.append(key)
        for table in ["region_vectors", "image_vectors"] {
            try link.query(
                """
                DELETE FROM lookout.\(table) v WHERE v.model <> $1
                   OR NOT EXISTS (SELECT 1 FROM lookout.images i WHERE i.hash = v.hash AND i.model = v.model)
                """, binds)
        }
    }

    public func nearestContents(
        regionQueries: [[Float]], imageQueries: [[Float]], model key: String, limit: Int
    )
        throws(IndexError) -> Set<String>?
    {
        guard hasVectors, try meta("vectors_model") == key, try meta("vectors") == "complete",
            try meta("vector_layout") == Self.vectorLayout
        else { return nil }
        // Without the regions' IVFFlat index (too few photos yet), an ORDER BY would read every vector.
        if !regionQueries.isEmpty, try !hasRegionIndex() { return nil }
        // One session: the probes and ef_search settings are the session's.
        return try link.withSession { () throws(IndexError) -> Set<String> in
            try nearestContentsInSession(
                regionQueries: regionQueries, imageQueries: imageQueries, model: key, limit: limit)
        }
    }

    private func nearestContentsInSession(
        regionQueries: [[Float]], imageQueries: [[Float]], model key: String, limit: Int
    ) throws(IndexError) -> Set<String> {
        var contents = Set<String>()
        for (table, operation, queries) in [
            ("region_vectors", "<#>", regionQueries),
            ("image_vectors", "<=>", imageQueries.filter { $0.count == (imageVectorSize ?? $0.count) }),
        ] {
            if !queries.isEmpty {
                // The lists IVFFlat reads per query; ef_search bounds how many candidates HNSW's walk keeps: at
                // least the rows asked for.
                var setting = PostgresBindings()
                setting.append(table == "region_vectors" ? String(regionProbes) : String(min(max(limit, 40), 1000)))
                try link.query(
                    "SELECT set_config('\(table == "region_vectors" ? "ivfflat.probes" : "hnsw.ef_search")', $1, false)",
                    setting)
            }
            for query in queries {
                var binds = PostgresBindings()
                // Region vectors are folded: the query gains the coordinate that carries the level's bias.
                binds.append(Self.literal(table == "region_vectors" ? query + [1] : query))
                binds.append(key)
                binds.append(Int64(limit))
                let rows = try link.query(
                    """
                    SELECT v.hash FROM lookout.\(table) v
                    WHERE v.model = $2 ORDER BY v.embedding \(operation) $1::vector LIMIT $3
                    """, binds)
                for row in rows { contents.insert(try row.value(0, as: String.self)) }
            }
        }
        return contents
    }

    public func forEachPhoto(
        model key: String, contents: Set<String>, _ body: (StoredPhoto) -> Void
    )
        throws(IndexError)
    {
        try forEachPhoto(model: key, contents: Optional(contents), body)
    }
}
