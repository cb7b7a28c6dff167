import LookoutJSON
import LookoutSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The index in one SQLite file.
///
/// Tables: `meta` (schema version, the model that made the regions and how to score them), `files` (one row
/// per photo path: size, modification time, content SHA-256, model, status and error), `images` (one row per
/// distinct content and model: size and the serialised regions). Renamed or duplicated files share an
/// `images` row. WAL journal; every photo is its own transaction. Every SQL value is a bound parameter.
///
/// Schema versions: a file of an older version is migrated in place by ``migrations`` when opened for
/// writing, and read as it is otherwise (every version so far reads the same); a newer one is refused.
public final class SQLiteIndexStore: IndexStore {
    public static let schemaVersion = 5
    /// Steps from version n to n + 1, each run in one transaction: `migrations[n - 1]` upgrades version n.
    static let migrations: [String] = [
        // 1 → 2: claims, for several processes indexing one database; a photo's image embedding.
        """
        CREATE TABLE IF NOT EXISTS claims (
            path TEXT PRIMARY KEY, worker TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, expires REAL NOT NULL);
        ALTER TABLE images ADD COLUMN image_embedding BLOB;
        """,
        // 2 → 3: when a photo was taken (its EXIF date), for search filters.
        """
        ALTER TABLE images ADD COLUMN taken INTEGER;
        """,
        // 3 → 4: the change log the region lists are kept up to date from (``RegionLists``): every insertion
        // and deletion of a stored content, in the transaction that makes it.
        """
        CREATE TABLE IF NOT EXISTS changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT, hash TEXT NOT NULL, model TEXT NOT NULL);
        CREATE TRIGGER IF NOT EXISTS images_inserted AFTER INSERT ON images
            BEGIN INSERT INTO changes(hash, model) VALUES (new.hash, new.model); END;
        CREATE TRIGGER IF NOT EXISTS images_deleted AFTER DELETE ON images
            BEGIN INSERT INTO changes(hash, model) VALUES (old.hash, old.model); END;
        """,
        // 4 → 5: what a prompt-free detector named in the photo (`index --prompt-free`), for search filters.
        """
        ALTER TABLE images ADD COLUMN labels TEXT;
        """,
    ]
    /// The schema version of the open file (older than ``schemaVersion`` only when opened read-only).
    private(set) var version = SQLiteIndexStore.schemaVersion

    public let path: String
    public var location: String { path }
    let database: Database

    /// How many region lists a search probes (``RegionLists``), per query.
    public var listProbes = 64
    /// Why the last search read every photo although the index keeps region lists (missing, damaged,
    /// behind), for the person searching; nil when it used them or the index has none.
    public internal(set) var lastListsNote: String?
    /// The region lists last opened, with the file's identity (inode, size, modification time) then.
    var openLists: (identity: [UInt64], lists: RegionLists)?

    /// Opens (creating it and its folder if needed) the index at `path`.
    public init(path: String, readOnly: Bool = false) throws(IndexError) {
        self.path = path
        if !readOnly, let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            try? FileContents.makeDirectories(String(path[..<slash]))
        }
        var info = stat()
        if FileSystem.stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR {
            throw IndexError(
                path: path, kind: .noIndex,
                problem: "a folder, not an index file (--db takes a file, e.g. \(path)/index.sqlite)")
        }
        if readOnly && FileSystem.access(path, R_OK) != 0 {
            throw IndexError(
                path: path, kind: .noIndex, problem: "no index here (run `lookout index FOLDER` first, or pass --db)")
        }
        var database = try Database(path: path, readOnly: readOnly)
        if readOnly, (try? database.prepare("SELECT count(*) FROM meta").step()) == nil {
            // A WAL index in a place this process may not write (no -shm file can be made): read it as an
            // immutable file instead.
            database = try Database(path: path, readOnly: true, immutable: true)
        }
        self.database = database
        do {
            if !readOnly {
                try database.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
                try database.execute(
                    """
                    CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                    CREATE TABLE IF NOT EXISTS files (
                        path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
                        hash TEXT, model TEXT, status TEXT NOT NULL, error TEXT);
                    CREATE INDEX IF NOT EXISTS files_hash ON files(hash);
                    CREATE TABLE IF NOT EXISTS images (
                        hash TEXT NOT NULL, model TEXT NOT NULL, width INTEGER NOT NULL, height INTEGER NOT NULL,
                        regions BLOB NOT NULL, PRIMARY KEY (hash, model));
                    """)
                if try meta("schema_version") == nil { try database.execute(Self.migrations.joined(separator: "\n")) }
            }
            try migrate(readOnly: readOnly)
        } catch let error as IndexError {
            throw error
        } catch {
            throw IndexError(path: path, problem: "\(error)")
        }
    }

    private func migrate(readOnly: Bool) throws(IndexError) {
        guard let text = try meta("schema_version") else {
            if !readOnly { try setMeta("schema_version", String(Self.schemaVersion)) }
            return
        }
        defer { if readOnly { self.version = Int(text) ?? Self.schemaVersion } }
        guard var version = Int(text), version >= 1 else {
            throw IndexError(
                path: path, kind: .schemaVersion, problem: "index schema version \"\(text)\" is not one Lookout wrote")
        }
        if version > Self.schemaVersion {
            throw IndexError(
                path: path,
                problem:
                    "index schema version \(version) is newer than this Lookout's (\(Self.schemaVersion)): update Lookout"
            )
        }
        guard version < Self.schemaVersion, !readOnly else { return }
        while version < Self.schemaVersion {
            let step = Self.migrations[version - 1]
            do {
                try database.transaction {
                    try database.execute(step)
                    try setMeta("schema_version", String(version + 1))
                }
            } catch {
                throw IndexError(path: path, problem: "upgrading the index from version \(version): \(error)")
            }
            version += 1
        }
    }

    func meta(_ key: String) throws(IndexError) -> String? {
        let statement = try database.prepare("SELECT value FROM meta WHERE key = ?")
        statement.bind([.text(key)])
        return try statement.step() ? statement.text(0) : nil
    }

    func setMeta(_ key: String, _ value: String) throws(IndexError) {
        try database.prepare(
            "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"
        )
        .run([.text(key), .text(value)])
    }

    public func storedModel() throws(IndexError) -> IndexModel? {
        let statement = try database.prepare("SELECT key, value FROM meta")
        var values: [String: String] = [:]
        while try statement.step() { values[statement.text(0)] = statement.text(1) }
        return try IndexModel(settings: values, location: path)
    }

    public func setModel(_ model: IndexModel) throws(IndexError) {
        for (key, value) in model.settings { try setMeta(key, value) }
    }

    public func files(withPrefix prefix: String) throws(IndexError) -> [String: StoredFile] {
        let select = try database.prepare(
            "SELECT path, size, mtime_ns, hash, model, status FROM files WHERE substr(path, 1, ?) = ?")
        select.bind([.integer(Int64(prefix.utf8.count)), .text(prefix)])
        var known: [String: StoredFile] = [:]
        while try select.step() {
            known[select.text(0)] = StoredFile(
                size: select.integer(1), mtime: select.integer(2), hash: select.isNull(3) ? nil : select.text(3),
                model: select.text(4), failed: select.text(5) == "failed")
        }
        return known
    }

    public func storedFile(at path: String) throws(IndexError) -> StoredFile? {
        let select = try database.prepare("SELECT size, mtime_ns, hash, model, status FROM files WHERE path = ?")
        select.bind([.text(path)])
        guard try select.step() else { return nil }
        return StoredFile(
            size: select.integer(0), mtime: select.integer(1), hash: select.isNull(2) ? nil : select.text(2),
            model: select.text(3), failed: select.text(4) == "failed")
    }

    public func imageEmbedding(hash: String, model key: String) throws(IndexError) -> [UInt16]? {
        let select = try database.prepare("SELECT image_embedding FROM images WHERE hash = ? AND model = ?")
        select.bind([.text(hash), .text(key)])
        guard try select.step(), !select.isNull(0) else { return nil }
        return select.withBlob(0) { raw in
            (0..<(raw.count / 2)).map { UInt16(raw[2 * $0]) | UInt16(raw[2 * $0 + 1]) << 8 }
        }
    }

    public func storedContent(hash: String, model key: String) throws(IndexError) -> PhotoOutcome? {
        let taken = version >= 3 ? "taken" : "NULL"
        let labels = version >= 5 ? "labels" : "NULL"
        let select = try database.prepare(
            "SELECT width, height, regions, \(taken), \(labels) FROM images WHERE hash = ? AND model = ?")
        select.bind([.text(hash), .text(key)])
        guard try select.step() else { return nil }
        return .indexed(
            hash: hash, width: Int(select.integer(0)), height: Int(select.integer(1)),
            regions: select.withBlob(2) { Array($0.bindMemory(to: UInt8.self)) },
            taken: select.isNull(3) ? nil : select.integer(3), labels: select.isNull(4) ? nil : select.text(4))
    }

    public func indexedContents(model key: String) throws(IndexError) -> Set<String> {
        let hashes = try database.prepare("SELECT hash FROM images WHERE model = ?")
        hashes.bind([.text(key)])
        var indexed = Set<String>()
        while try hashes.step() { indexed.insert(hashes.text(0)) }
        return indexed
    }

    private lazy var upsertFile = try? database.prepare(
        """
        INSERT INTO files(path, size, mtime_ns, hash, model, status, error) VALUES(?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT(path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns, hash = excluded.hash,
          model = excluded.model, status = excluded.status, error = excluded.error
        """)
    private lazy var insertImage = try? database.prepare(
        "INSERT OR REPLACE INTO images(hash, model, width, height, regions, image_embedding, taken, labels) VALUES(?, ?, ?, ?, ?, ?, ?, ?)"
    )

    public func record(_ photo: FoundPhoto, outcome: PhotoOutcome, model key: String) throws(IndexError) {
        guard let upsertFile, let insertImage else { throw IndexError(path: path, problem: database.lastError) }
        let file: [Statement.Value] = [.text(photo.path), .integer(photo.size), .integer(photo.mtime)]
        do {
            switch outcome {
            case .indexed(let hash, let width, let height, let regions, let imageEmbedding, let taken, let labels):
                let image: Statement.Value =
                    imageEmbedding.map { bits in .blob(bits.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }) } ?? .null
                try database.transaction {
                    try insertImage.run(
                        [
                            .text(hash), .text(key), .integer(Int64(width)), .integer(Int64(height)), .blob(regions),
                            image, taken.map { .integer($0) } ?? .null, labels.map { .text($0) } ?? .null,
                        ])
                    try upsertFile.run(file + [.text(hash), .text(key), .text("ok"), .null])
                }
            case .reused(let hash):
                try upsertFile.run(file + [.text(hash), .text(key), .text("ok"), .null])
            case .failed(let error):
                try upsertFile.run(file + [.null, .text(key), .text("failed"), .text(error)])
            }
        } catch let error as IndexError {
            throw error
        } catch {
            throw IndexError(path: path, problem: "\(error)")
        }
    }

    // Prepared once: claims are taken and given up once per photo.
    private lazy var selectClaim = try? database.prepare("SELECT worker, host, pid, expires FROM claims WHERE path = ?")
    private lazy var upsertClaim = try? database.prepare(
        "INSERT INTO claims(path, worker, host, pid, expires) VALUES(?, ?, ?, ?, ?) "
            + "ON CONFLICT(path) DO UPDATE SET worker = excluded.worker, host = excluded.host, pid = excluded.pid, "
            + "expires = excluded.expires")
    private lazy var deleteClaim = try? database.prepare("DELETE FROM claims WHERE path = ? AND worker = ?")

    public func claim(_ path: String, worker: IndexWorker, until expires: Double) throws(IndexError) -> Bool {
        let me = "\(worker.host):\(worker.pid):\(worker.run)"
        guard let select = selectClaim, let upsert = upsertClaim else {
            throw IndexError(path: path, problem: database.lastError)
        }
        do {
            return try database.transaction { () throws(IndexError) -> Bool in
                select.bind([.text(path)])
                defer { select.reset() }
                if try select.step() {
                    let holder = IndexWorker(
                        host: select.text(1), pid: Int32(truncatingIfNeeded: select.integer(2)), run: "")
                    let mine = select.text(0) == me
                    let expired = select.real(3) < Self.now()
                    if !mine && !expired && holder.isAlive { return false }
                }
                try upsert.run([
                    .text(path), .text(me), .text(worker.host), .integer(Int64(worker.pid)), .real(expires),
                ])
                return true
            }
        } catch let error as IndexError {
            throw error
        } catch {
            throw IndexError(path: self.path, problem: "\(error)")
        }
    }

    public func release(_ path: String, worker: IndexWorker) throws(IndexError) {
        guard let deleteClaim else { throw IndexError(path: self.path, problem: database.lastError) }
        try deleteClaim.run([.text(path), .text("\(worker.host):\(worker.pid):\(worker.run)")])
    }

    /// Seconds since 1970 (claims' clock).
    public static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) * 1e-9
    }

    public func remove(paths: [String], keepingModel key: String) throws(IndexError) {
        let delete = try database.prepare("DELETE FROM files WHERE path = ?")
        let prune = try database.prepare(
            "DELETE FROM images WHERE model != ? OR hash NOT IN (SELECT hash FROM files WHERE status = 'ok' AND hash IS NOT NULL)"
        )
        do {
            try database.transaction {
                for path in paths { try delete.run([.text(path)]) }
                try prune.run([.text(key)])
            }
        } catch let error as IndexError {
            throw error
        } catch {
            throw IndexError(path: path, problem: "\(error)")
        }
    }

    public func forEachPhoto(model key: String, _ body: (StoredPhoto) -> Void) throws(IndexError) {
        // Files of older schema versions (opened read-only) lack the later columns: they read as NULL.
        let image = version >= 2 ? "i.image_embedding" : "NULL"
        let taken = version >= 3 ? "i.taken" : "NULL"
        let labels = version >= 5 ? "i.labels" : "NULL"
        let statement = try database.prepare(
            """
            SELECT f.path, i.width, i.height, i.regions, \(image), \(taken), f.mtime_ns, \(labels) FROM files f
            JOIN images i ON i.hash = f.hash AND i.model = f.model
            WHERE f.status = 'ok' AND f.model = ?
            """)
        statement.bind([.text(key)])
        while try statement.step() { Self.visitPhoto(statement, body) }
    }

    /// A row of path, width, height, regions, image embedding, taken, modification time and labels as a photo.
    static func visitPhoto(_ statement: Statement, _ body: (StoredPhoto) -> Void) {
        let path = statement.text(0)
        let (width, height) = (Int(statement.integer(1)), Int(statement.integer(2)))
        let takenValue: Int64? = statement.isNull(5) ? nil : statement.integer(5)
        let modified = statement.integer(6)
        let labels: String? = statement.isNull(7) ? nil : statement.text(7)
        statement.withBlob(3) { regions in
            statement.withBlob(4) { whole in
                body(
                    StoredPhoto(
                        path: path, width: width, height: height, regions: regions,
                        imageEmbedding: whole.isEmpty ? nil : whole, taken: takenValue, modified: modified,
                        labels: labels))
            }
        }
    }

    public func statistics() throws(IndexError) -> IndexStatistics {
        func count(_ sql: String) throws(IndexError) -> Int {
            let statement = try database.prepare(sql)
            return try statement.step() ? Int(statement.integer(0)) : 0
        }
        // The database as it is once the write-ahead log is folded in (its pages), not the file plus the log:
        // the log holds every version of a page written since the last checkpoint (issue 49: 2.6× the file).
        // With the region lists' file beside it.
        var lists = stat()
        let listsSize = FileSystem.stat(listsPath, &lists) == 0 ? Int(lists.st_size) : 0
        let pages = try count("PRAGMA page_count") * count("PRAGMA page_size")
        return IndexStatistics(
            files: try count("SELECT count(*) FROM files WHERE status = 'ok'"),
            failedFiles: try count("SELECT count(*) FROM files WHERE status = 'failed'"),
            images: try count("SELECT count(*) FROM images"),
            regionBytes: try count("SELECT coalesce(sum(length(regions)), 0) FROM images"),
            databaseBytes: pages + listsSize)
    }

    public func failures() throws(IndexError) -> [(path: String, error: String)] {
        let statement = try database.prepare("SELECT path, error FROM files WHERE status = 'failed' ORDER BY path")
        var out: [(String, String)] = []
        while try statement.step() { out.append((statement.text(0), statement.text(1))) }
        return out
    }

    public func integrityCheck() throws(IndexError) -> String {
        let statement = try database.prepare("PRAGMA integrity_check")
        return try statement.step() ? statement.text(0) : "no answer"
    }
}
