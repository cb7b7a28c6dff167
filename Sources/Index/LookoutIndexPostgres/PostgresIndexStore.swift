import LookoutStore
import LookoutSupport
import NIOCore
import PostgresNIO

#if canImport(Glibc)
    import Glibc
#endif

/// The index in a PostgreSQL database, in the schema `lookout`, shared by any number of workers and searchers.
///
/// Tables as ``SQLiteIndexStore``'s — `meta`, `files` (one row per photo path, with the worker that recorded
/// it and when), `images` (one row per distinct content and model) — plus `work`, the shared job: photos
/// waiting to be indexed, each with the worker holding it and when its lease runs out (the server's clock,
/// so machines' clocks need not agree). With the pgvector extension in the database, `region_vectors` and
/// `image_vectors` hold every region's and photo's embedding under HNSW indexes for searches.
///
/// Every call is one SQL statement (atomic on the server, and harmless to repeat after a lost connection);
/// the schema is created and migrated under an advisory lock, so workers started together do it once.
public final class PostgresIndexStore: IndexStore, @unchecked Sendable {
    public static let schemaVersion = 2
    /// Steps from version n to n + 1: `migrations[n - 1]` upgrades version n (each statement idempotent).
    static let migrations: [[String]] = [
        // 1 → 2: what a prompt-free detector named in the photo (`index --prompt-free`), for search filters.
        ["ALTER TABLE lookout.images ADD COLUMN IF NOT EXISTS labels text"]
    ]
    /// The statements that make the current version (an older database's tables exist: ``migrations`` bring them
    /// up to it).
    static let schema = [
        "CREATE SCHEMA IF NOT EXISTS lookout",
        "CREATE TABLE IF NOT EXISTS lookout.meta (key text PRIMARY KEY, value text NOT NULL)",
        """
        CREATE TABLE IF NOT EXISTS lookout.files (
            path text PRIMARY KEY, size bigint NOT NULL, mtime_ns bigint NOT NULL, hash text, model text NOT NULL,
            status text NOT NULL, error text, worker text, recorded timestamptz NOT NULL DEFAULT now())
        """,
        "CREATE INDEX IF NOT EXISTS files_hash ON lookout.files (hash)",
        "CREATE INDEX IF NOT EXISTS files_recorded ON lookout.files (recorded)",
        """
        CREATE TABLE IF NOT EXISTS lookout.images (
            hash text NOT NULL, model text NOT NULL, width integer NOT NULL, height integer NOT NULL,
            regions bytea NOT NULL, image_embedding bytea, taken bigint, labels text, PRIMARY KEY (hash, model))
        """,
        """
        CREATE TABLE IF NOT EXISTS lookout.work (
            path text PRIMARY KEY, size bigint NOT NULL, mtime_ns bigint NOT NULL, model text NOT NULL,
            worker text, expires timestamptz, claims integer NOT NULL DEFAULT 0,
            queued timestamptz NOT NULL DEFAULT now())
        """,
    ]
    /// An arbitrary number that names Lookout's advisory lock for schema changes.
    static let schemaLock = 0x4C4F_4F4B

    let link: PostgresLink
    public var location: String { link.address.description }
    /// How the connection is encrypted: the `sslmode` asked for and the TLS version and cipher the server
    /// reports ("sslmode=verify-full: encrypted (TLSv1.3, TLS_AES_256_GCM_SHA384), the certificate verified
    /// for host db.example"), or "not encrypted".
    public var connectionSecurity: String { link.securityDescription }
    public var connectionDescription: String { connectionSecurity }
    /// Whether the database has the pgvector extension (then vectors are stored and searched by HNSW).
    public private(set) var hasVectors = false
    /// The dimension of the vector tables (`meta.vector_size`), nil while they do not exist (an index made
    /// before the extension was added, until its model is set again).
    var vectorSize: Int?
    /// The size of `lookout.image_vectors` (the whole-photo tower's; the regions' in indexes made before it was
    /// recorded).
    var imageVectorSize: Int?
    /// The schema version of the database as opened (older than ``schemaVersion`` only when read-only).
    var openedVersion = PostgresIndexStore.schemaVersion
    /// The stored model's score parameters, which fold region vectors (``folded(_:level:_:)``).
    var foldingParameters: [(logitScale: Float, bias: Float)] = []
    /// The IVFFlat lists a region search reads (`ivfflat.probes`, of √rows lists; at 10,000 photos recall@10
    /// was 1.00 from 8 probes of 800, BENCHMARKS.md).
    public var regionProbes = 16
    let leases: LeaseKeeper

    /// Connects to the database at `address` and creates or migrates Lookout's schema (unless `readOnly`:
    /// then a database without it is "no index here").
    /// The most connections a store keeps open unless told otherwise (`serve --db-connections`).
    public static let defaultConnections = 4

    /// `connections`: the most connections it keeps open at once (a pool its threads share).
    public convenience init(
        address: PostgresAddress, readOnly: Bool = false, connections: Int = PostgresIndexStore.defaultConnections
    )
        throws(IndexError)
    {
        try self.init(link: try PostgresLink(address: address, maximumConnections: connections), readOnly: readOnly)
    }

    /// On connections already open (``IndexLocation``'s shared pools).
    init(link: PostgresLink, readOnly: Bool) throws(IndexError) {
        self.link = link
        leases = LeaseKeeper(link: link)
        if readOnly {
            let found = try link.query("SELECT to_regclass('lookout.meta') IS NOT NULL")
            guard try found.first?.value(0, as: Bool.self) == true else {
                throw IndexError(
                    path: location, kind: .noIndex,
                    problem: "no index in this database (run `lookout index FOLDER --db \(location)` first)")
            }
        } else {
            try createSchema()
        }
        try checkVersion()
        hasVectors =
            try link.query("SELECT count(*) FROM pg_extension WHERE extname = 'vector'").first?.value(0, as: Int64.self)
            == 1
        if hasVectors, try meta("vector_layout") == Self.vectorLayout {
            vectorSize = try meta("vector_size").flatMap { Int($0) }
            imageVectorSize = try meta("image_vector_size").flatMap { Int($0) } ?? vectorSize
            foldingParameters = try storedModel()?.scoreParameters ?? []
        }
    }

    private func createSchema() throws(IndexError) {
        // One session: the advisory lock is the session's.
        try link.withSession { () throws(IndexError) in
            try link.query("SELECT pg_advisory_lock(\(Self.schemaLock))")
            defer { _ = try? link.query("SELECT pg_advisory_unlock(\(Self.schemaLock))") }
            for statement in Self.schema { try link.query(statement) }
            if try meta("schema_version") == nil { try setMeta("schema_version", String(Self.schemaVersion)) }
            guard var version = try meta("schema_version").flatMap({ Int($0) }) else { return }
            while version < Self.schemaVersion && version >= 1 {
                for statement in Self.migrations[version - 1] { try link.query(statement) }
                version += 1
                try setMeta("schema_version", String(version))
            }
        }
    }

    private func checkVersion() throws(IndexError) {
        guard let text = try meta("schema_version") else {
            openedVersion = 1  // no version recorded: read only what version 1 has
            return
        }
        guard let version = Int(text), version >= 1 else {
            throw IndexError(
                path: location, kind: .schemaVersion,
                problem: "index schema version \"\(text)\" is not one Lookout wrote")
        }
        if version > Self.schemaVersion {
            throw IndexError(
                path: location, kind: .schemaVersion,
                problem:
                    "index schema version \(version) is newer than this Lookout's (\(Self.schemaVersion)): update Lookout"
            )
        }
        openedVersion = version
    }

    func meta(_ key: String) throws(IndexError) -> String? {
        var binds = PostgresBindings()
        binds.append(key)
        return try link.query("SELECT value FROM lookout.meta WHERE key = $1", binds).first?.value(0, as: String.self)
    }

    func setMeta(_ key: String, _ value: String) throws(IndexError) {
        var binds = PostgresBindings()
        binds.append(key)
        binds.append(value)
        try link.query(
            "INSERT INTO lookout.meta(key, value) VALUES($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            binds)
    }

    public func storedModel() throws(IndexError) -> IndexModel? {
        var values: [String: String] = [:]
        for row in try link.query("SELECT key, value FROM lookout.meta") {
            values[try row.value(0, as: String.self)] = try row.value(1, as: String.self)
        }
        return try IndexModel(settings: values, location: location)
    }

    public func setModel(_ model: IndexModel) throws(IndexError) {
        for (key, value) in model.settings { try setMeta(key, value) }
        if hasVectors { try prepareVectors(model) }
    }

    public func files(withPrefix prefix: String) throws(IndexError) -> [String: StoredFile] {
        var binds = PostgresBindings()
        binds.append(prefix)
        var known: [String: StoredFile] = [:]
        for row in try link.query(
            "SELECT path, size, mtime_ns, hash, model, status FROM lookout.files WHERE starts_with(path, $1)", binds)
        {
            known[try row.value(0, as: String.self)] = try Self.storedFile(row, from: 1)
        }
        return known
    }

    static func storedFile(_ row: PostgresRow, from first: Int) throws(IndexError) -> StoredFile {
        StoredFile(
            size: try row.value(first, as: Int64.self), mtime: try row.value(first + 1, as: Int64.self),
            hash: try row.value(first + 2, as: String?.self), model: try row.value(first + 3, as: String.self),
            failed: try row.value(first + 4, as: String.self) == "failed")
    }

    public func storedFile(at path: String) throws(IndexError) -> StoredFile? {
        var binds = PostgresBindings()
        binds.append(path)
        return try link.query(
            "SELECT size, mtime_ns, hash, model, status FROM lookout.files WHERE path = $1", binds
        ).first.map { row throws(IndexError) in try Self.storedFile(row, from: 0) }
    }

    public func indexedContents(model key: String) throws(IndexError) -> Set<String> {
        var binds = PostgresBindings()
        binds.append(key)
        var indexed = Set<String>()
        for row in try link.query("SELECT hash FROM lookout.images WHERE model = $1", binds) {
            indexed.insert(try row.value(0, as: String.self))
        }
        return indexed
    }

    public func imageEmbedding(hash: String, model key: String) throws(IndexError) -> [UInt16]? {
        var binds = PostgresBindings()
        binds.append(hash)
        binds.append(key)
        guard
            let bytes = try link.query(
                "SELECT image_embedding FROM lookout.images WHERE hash = $1 AND model = $2", binds
            ).first?.value(0, as: ByteBuffer?.self)
        else { return nil }
        return bytes.withUnsafeReadableBytes { raw in
            (0..<(raw.count / 2)).map { UInt16(raw[2 * $0]) | UInt16(raw[2 * $0 + 1]) << 8 }
        }
    }

    public func storedContent(hash: String, model key: String) throws(IndexError) -> PhotoOutcome? {
        var binds = PostgresBindings()
        binds.append(hash)
        binds.append(key)
        let labelsColumn = openedVersion >= 2 ? "labels" : "NULL::text"
        guard
            let row = try link.query(
                "SELECT width, height, regions, taken, \(labelsColumn) FROM lookout.images WHERE hash = $1 AND model = $2",
                binds
            ).first
        else { return nil }
        let cells = row.makeRandomAccess()
        do {
            let regions = try cells[2].decode(ByteBuffer.self)
            return .indexed(
                hash: hash, width: Int(try cells[0].decode(Int32.self)), height: Int(try cells[1].decode(Int32.self)),
                regions: regions.withUnsafeReadableBytes { Array($0.bindMemory(to: UInt8.self)) },
                taken: try cells[3].decode(Int64?.self), labels: try cells[4].decode(String?.self))
        } catch {
            throw IndexError(path: location, problem: "a stored photo cannot be read: \(error)")
        }
    }

    /// One statement: the photo's content (with its vectors), its file row, and its place in the job leave
    /// together, so a photo is either recorded and out of the job or neither.
    public func record(_ photo: FoundPhoto, outcome: PhotoOutcome, model key: String) throws(IndexError) {
        let worker = leases.workerName
        leases.drop(photo.path)
        var binds = PostgresBindings()
        binds.append(photo.path)
        binds.append(photo.size)
        binds.append(photo.mtime)
        binds.append(key)
        binds.append(worker)
        let done = "DELETE FROM lookout.work WHERE path = $1"
        let upsertFile = """
            INSERT INTO lookout.files(path, size, mtime_ns, hash, model, status, error, worker, recorded)
            VALUES($1, $2, $3, $6, $4, $7, $8, $5, now())
            ON CONFLICT (path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns, hash = excluded.hash,
              model = excluded.model, status = excluded.status, error = excluded.error, worker = excluded.worker,
              recorded = excluded.recorded
            """
        switch outcome {
        case .indexed(let hash, let width, let height, let regions, let imageEmbedding, let taken, let labels):
            binds.append(hash)
            binds.append("ok")
            binds.appendNull()
            binds.append(Int32(width))
            binds.append(Int32(height))
            binds.append(ByteBuffer(bytes: regions))
            if let imageEmbedding {
                binds.append(ByteBuffer(bytes: imageEmbedding.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }))
            } else {
                binds.appendNull()
            }
            binds.append(taken)
            binds.append(labels)
            var vectors = ""
            if hasVectors, let vectorSize {
                vectors = try vectorStatements(
                    hash: hash, regions: regions, imageEmbedding: imageEmbedding, embeddingSize: vectorSize,
                    binds: &binds)
            }
            try link.query(
                """
                WITH image AS (
                    INSERT INTO lookout.images(hash, model, width, height, regions, image_embedding, taken, labels)
                    VALUES($6, $4, $9, $10, $11, $12, $13, $14)
                    ON CONFLICT (hash, model) DO UPDATE SET width = excluded.width, height = excluded.height,
                      regions = excluded.regions, image_embedding = excluded.image_embedding, taken = excluded.taken,
                      labels = excluded.labels),
                file AS (\(upsertFile)),
                done AS (\(done))\(vectors)
                SELECT 1
                """, binds)
        case .reused(let hash):
            binds.append(hash)
            binds.append("ok")
            binds.appendNull()
            try link.query("WITH file AS (\(upsertFile)), done AS (\(done)) SELECT 1", binds)
        case .failed(let error):
            binds.appendNull()
            binds.append("failed")
            binds.append(error)
            try link.query("WITH file AS (\(upsertFile)), done AS (\(done)) SELECT 1", binds)
        }
    }

    /// Claims `path` (the per-photo claim of stores without a shared job; PostgreSQL's workers claim from
    /// the job instead, ``claimNext(under:model:worker:lease:)``).
    public func claim(_ path: String, worker: IndexWorker, until expires: Double) throws(IndexError) -> Bool {
        var binds = PostgresBindings()
        binds.append(path)
        binds.append(LeaseKeeper.name(worker))
        binds.append(max(expires - SQLiteIndexStore.now(), 1))
        return try !link.query(
            """
            UPDATE lookout.work SET worker = $2, expires = now() + make_interval(secs => $3), claims = claims + 1
            WHERE path = $1 AND (worker IS NULL OR worker = $2 OR expires < now()) RETURNING 1
            """, binds
        ).isEmpty
    }

    public func release(_ path: String, worker: IndexWorker) throws(IndexError) {
        leases.drop(path)
        var binds = PostgresBindings()
        binds.append(path)
        binds.append(LeaseKeeper.name(worker))
        try link.query("UPDATE lookout.work SET worker = NULL, expires = NULL WHERE path = $1 AND worker = $2", binds)
    }

    public func remove(paths: [String], keepingModel key: String) throws(IndexError) {
        for start in stride(from: 0, to: paths.count, by: 10_000) {
            var binds = PostgresBindings()
            binds.append(Array(paths[start..<min(start + 10_000, paths.count)]))
            try link.query(
                """
                WITH gone AS (DELETE FROM lookout.files WHERE path = ANY($1)),
                unqueued AS (DELETE FROM lookout.work WHERE path = ANY($1))
                SELECT 1
                """, binds)
        }
        var binds = PostgresBindings()
        binds.append(key)
        // Contents no file refers to any more, and other models' (a statement sees the files as they were
        // before it: the deletes above have committed).
        try link.query(
            """
            DELETE FROM lookout.images i WHERE i.model <> $1
               OR NOT EXISTS (SELECT 1 FROM lookout.files f WHERE f.hash = i.hash AND f.status = 'ok')
            """, binds)
        if hasVectors { try pruneVectors(model: key) }
    }

    /// Pages of photos in path order (memory stays bounded however large the index).
    static let page = 256

    public func forEachPhoto(model key: String, _ body: (StoredPhoto) -> Void) throws(IndexError) {
        try forEachPhoto(model: key, contents: nil, body)
    }

    func forEachPhoto(model key: String, contents: Set<String>?, _ body: (StoredPhoto) -> Void) throws(IndexError) {
        // A database of schema 1 opened read-only has no labels column.
        let labelsColumn = openedVersion >= 2 ? "i.labels" : "NULL::text"
        var after = ""
        while true {
            var binds = PostgresBindings()
            binds.append(key)
            // A few hundred contents (the nearest neighbours' photos) come in one query, looked up by hash;
            // the whole index comes in pages, in path order.
            let rows: [PostgresRow]
            if let contents {
                binds.append(Array(contents))
                rows = try link.query(
                    """
                    SELECT f.path, i.width, i.height, i.regions, i.image_embedding, i.taken, f.mtime_ns, \(labelsColumn)
                    FROM lookout.files f JOIN lookout.images i ON i.hash = f.hash AND i.model = f.model
                    WHERE f.status = 'ok' AND f.model = $1 AND f.hash = ANY($2)
                    """, binds)
            } else {
                binds.append(after)
                binds.append(Int64(Self.page))
                rows = try link.query(
                    """
                    SELECT f.path, i.width, i.height, i.regions, i.image_embedding, i.taken, f.mtime_ns, \(labelsColumn)
                    FROM lookout.files f JOIN lookout.images i ON i.hash = f.hash AND i.model = f.model
                    WHERE f.status = 'ok' AND f.model = $1 AND f.path > $2
                    ORDER BY f.path LIMIT $3
                    """, binds)
            }
            for row in rows {
                let cells = row.makeRandomAccess()
                do {
                    let path = try cells[0].decode(String.self)
                    let width = Int(try cells[1].decode(Int32.self))
                    let height = Int(try cells[2].decode(Int32.self))
                    let regions = try cells[3].decode(ByteBuffer.self)
                    let image = try cells[4].decode(ByteBuffer?.self)
                    let taken = try cells[5].decode(Int64?.self)
                    let modified = try cells[6].decode(Int64.self)
                    let labels = try cells[7].decode(String?.self)
                    regions.withUnsafeReadableBytes { blob in
                        func hand(_ whole: UnsafeRawBufferPointer?) {
                            body(
                                StoredPhoto(
                                    path: path, width: width, height: height, regions: blob,
                                    imageEmbedding: whole.flatMap { $0.isEmpty ? nil : $0 }, taken: taken,
                                    modified: modified, labels: labels))
                        }
                        if let image { image.withUnsafeReadableBytes { hand($0) } } else { hand(nil) }
                    }
                    after = path
                } catch {
                    throw IndexError(path: location, problem: "unexpected photo row: \(error)")
                }
            }
            if contents != nil || rows.count < Self.page { return }
        }
    }

    public func statistics() throws(IndexError) -> IndexStatistics {
        guard
            let row = try link.query(
                """
                SELECT (SELECT count(*) FROM lookout.files WHERE status = 'ok'),
                       (SELECT count(*) FROM lookout.files WHERE status = 'failed'),
                       (SELECT count(*) FROM lookout.images),
                       (SELECT coalesce(sum(length(regions)), 0)::bigint FROM lookout.images),
                       (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
                          JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'lookout' AND c.relkind = 'r')
                """
            ).first
        else { throw IndexError(path: location, problem: "no answer to the statistics query") }
        return IndexStatistics(
            files: Int(try row.value(0, as: Int64.self)), failedFiles: Int(try row.value(1, as: Int64.self)),
            images: Int(try row.value(2, as: Int64.self)), regionBytes: Int(try row.value(3, as: Int64.self)),
            databaseBytes: Int(try row.value(4, as: Int64.self)))
    }

    public func failures() throws(IndexError) -> [(path: String, error: String)] {
        try link.query("SELECT path, coalesce(error, '') FROM lookout.files WHERE status = 'failed' ORDER BY path").map
        {
            row throws(IndexError) in (try row.value(0, as: String.self), try row.value(1, as: String.self))
        }
    }

    /// Every file row points at content of its model, and the job holds no photo twice (the primary keys
    /// promise that); "ok" when so.
    public func integrityCheck() throws(IndexError) -> String {
        let orphans =
            try link.query(
                """
                SELECT count(*) FROM lookout.files f WHERE f.status = 'ok'
                  AND NOT EXISTS (SELECT 1 FROM lookout.images i WHERE i.hash = f.hash AND i.model = f.model)
                """
            ).first?.value(0, as: Int64.self) ?? 0
        return orphans == 0 ? "ok" : "\(orphans) file rows without their content"
    }
}
