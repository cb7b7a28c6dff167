import LookoutImage
import LookoutJSON
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

/// What the stored regions depend on. A different key means stale regions, recomputed on the next update.
public struct IndexModel: Sendable, Equatable {
    public var detectorFingerprint: String
    public var textEncoderFingerprint: String
    /// Where the index vocabulary came from ("built-in" or a digest of a query file's embeddings).
    public var vocabulary: String
    public var imageSize: Int
    public var maximumRegions: Int
    public var embeddingSize: Int
    public var scoreParameters: [(logitScale: Float, bias: Float)]

    public init(
        detectorFingerprint: String, textEncoderFingerprint: String, vocabulary: String, imageSize: Int,
        maximumRegions: Int, embeddingSize: Int, scoreParameters: [(logitScale: Float, bias: Float)]
    ) {
        self.detectorFingerprint = detectorFingerprint
        self.textEncoderFingerprint = textEncoderFingerprint
        self.vocabulary = vocabulary
        self.imageSize = imageSize
        self.maximumRegions = maximumRegions
        self.embeddingSize = embeddingSize
        self.scoreParameters = scoreParameters
    }

    public var key: String {
        var hash = SHA256()
        hash.update(
            Array("\(detectorFingerprint)|\(textEncoderFingerprint)|\(vocabulary)|\(imageSize)|\(maximumRegions)".utf8))
        return String(hash.finalize().prefix(32))
    }

    var encodedParameters: String {
        scoreParameters.map { "\($0.logitScale.bitPattern),\($0.bias.bitPattern)" }.joined(separator: ";")
    }

    static func decodeParameters(_ text: String) -> [(logitScale: Float, bias: Float)] {
        text.split(separator: ";").compactMap { pair in
            let parts = pair.split(separator: ",").compactMap { UInt32($0) }
            return parts.count == 2 ? (Float(bitPattern: parts[0]), Float(bitPattern: parts[1])) : nil
        }
    }

    public static func == (a: IndexModel, b: IndexModel) -> Bool { a.key == b.key }
}

/// A photo collection's index in one SQLite file.
///
/// Tables: `meta` (schema version, the model that made the regions and how to score them), `files` (one row
/// per photo path: size, modification time, content SHA-256, status and error), `images` (one row per
/// distinct content and model: size and the serialised regions). Renamed or duplicated files share an
/// `images` row, so their work is reused. Every photo is committed in its own transaction (WAL journal):
/// an interrupted run — Ctrl-C, `kill -9`, power loss — leaves a consistent index, and the next run goes on
/// from there.
public final class PhotoIndex {
    public static let schemaVersion = 1
    public let path: String
    let database: Database

    /// Opens (creating it and its folder if needed) the index at `path`.
    public init(path: String, readOnly: Bool = false) throws(IndexError) {
        self.path = path
        if !readOnly, let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            try? FileContents.makeDirectories(String(path[..<slash]))
        }
        if readOnly && access(path, R_OK) != 0 {
            throw IndexError(path: path, problem: "no index here (run `lookout index FOLDER` first, or pass --db)")
        }
        database = try Database(path: path, readOnly: readOnly)
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
            }
            let version = try meta("schema_version")
            if version == nil && !readOnly {
                try setMeta("schema_version", String(Self.schemaVersion))
            } else if let version, version != String(Self.schemaVersion) {
                throw IndexError(
                    path: path,
                    problem:
                        "index schema version \(version), this Lookout reads version \(Self.schemaVersion): delete the file and index again"
                )
            }
        } catch let error as IndexError {
            throw error
        } catch {
            throw IndexError(path: path, problem: "\(error)")
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

    /// The model whose regions the index holds (nil before the first update).
    public func storedModel() throws(IndexError) -> IndexModel? {
        guard let detector = try meta("detector"), let text = try meta("text_encoder"),
            let vocabulary = try meta("vocabulary"), let size = try meta("imgsz").flatMap({ Int($0) }),
            let regions = try meta("max_regions").flatMap({ Int($0) }),
            let embedding = try meta("embedding_size").flatMap({ Int($0) }),
            let parameters = try meta("score_parameters")
        else { return nil }
        return IndexModel(
            detectorFingerprint: detector, textEncoderFingerprint: text, vocabulary: vocabulary, imageSize: size,
            maximumRegions: regions, embeddingSize: embedding, scoreParameters: IndexModel.decodeParameters(parameters))
    }

    func store(_ model: IndexModel) throws(IndexError) {
        try setMeta("detector", model.detectorFingerprint)
        try setMeta("text_encoder", model.textEncoderFingerprint)
        try setMeta("vocabulary", model.vocabulary)
        try setMeta("imgsz", String(model.imageSize))
        try setMeta("max_regions", String(model.maximumRegions))
        try setMeta("embedding_size", String(model.embeddingSize))
        try setMeta("score_parameters", model.encodedParameters)
    }

    // MARK: - Updating

    public struct Progress: Sendable {
        public var done: Int
        public var total: Int
        public var current: String
    }

    public struct Summary: Sendable, Equatable {
        /// Photos whose regions were computed in this run.
        public var computed = 0
        /// Photos new or changed on disk whose content was already indexed (renamed, duplicated, touched).
        public var reused = 0
        public var unchanged = 0
        public var failed = 0
        /// Failures from earlier runs on files that have not changed since.
        public var stillFailing = 0
        public var removed = 0
        /// Files that are not JPEG or PNG, and folders that could not be read.
        public var skippedFiles = 0
        public var unreadableFolders: [String] = []
    }

    /// Brings the index up to date with the photos under `root` (recursively; hidden entries skipped).
    public func update(
        root: String, model: IndexModel, regions: (Image, String) -> [Region],
        progress: (Progress) -> Void = { _ in }
    ) throws -> Summary {
        let root = try canonicalFolder(root)
        var summary = Summary()
        var found: [(path: String, size: Int64, mtime: Int64)] = []
        walk(root, into: &found, summary: &summary)
        found.sort { $0.path < $1.path }

        let stored = try storedModel()
        if stored?.key != model.key { try store(model) }
        let key = model.key

        var known: [String: (size: Int64, mtime: Int64, hash: String, model: String, status: String)] = [:]
        let prefix = root == "/" ? "/" : root + "/"
        let select = try database.prepare(
            "SELECT path, size, mtime_ns, hash, model, status FROM files WHERE substr(path, 1, ?) = ?")
        select.bind([.integer(Int64(prefix.utf8.count)), .text(prefix)])
        while try select.step() {
            known[select.text(0)] = (
                select.integer(1), select.integer(2), select.text(3), select.text(4), select.text(5)
            )
        }
        var indexed = Set<String>()
        let hashes = try database.prepare("SELECT hash FROM images WHERE model = ?")
        hashes.bind([.text(key)])
        while try hashes.step() { indexed.insert(hashes.text(0)) }

        var work: [(path: String, size: Int64, mtime: Int64)] = []
        for file in found {
            if let old = known[file.path], old.size == file.size, old.mtime == file.mtime, old.model == key {
                if old.status == "ok" && indexed.contains(old.hash) {
                    summary.unchanged += 1
                    continue
                }
                if old.status == "failed" {
                    summary.stillFailing += 1
                    continue
                }
            }
            work.append(file)
        }

        let upsertFile = try database.prepare(
            """
            INSERT INTO files(path, size, mtime_ns, hash, model, status, error) VALUES(?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns, hash = excluded.hash,
              model = excluded.model, status = excluded.status, error = excluded.error
            """)
        let insertImage = try database.prepare(
            "INSERT OR REPLACE INTO images(hash, model, width, height, regions) VALUES(?, ?, ?, ?, ?)")
        for (done, file) in work.enumerated() {
            progress(Progress(done: done, total: work.count, current: file.path))
            let fileRow: ([Statement.Value]) -> [Statement.Value] = { tail in
                [.text(file.path), .integer(file.size), .integer(file.mtime)] + tail
            }
            do {
                let bytes = try FileContents.read(file.path, maximumSize: 1 << 30)
                var hasher = SHA256()
                hasher.update(bytes)
                let hash = hasher.finalize()
                if indexed.contains(hash) {
                    try upsertFile.run(fileRow([.text(hash), .text(key), .text("ok"), .null]))
                    summary.reused += 1
                    continue
                }
                let image = try ImageFile.decode(bytes, name: file.path)
                let found = regions(image, file.path)
                let blob = Region.encode(found, embeddingSize: model.embeddingSize)
                try database.transaction {
                    try insertImage.run([
                        .text(hash), .text(key), .integer(Int64(image.width)), .integer(Int64(image.height)),
                        .blob(blob),
                    ])
                    try upsertFile.run(fileRow([.text(hash), .text(key), .text("ok"), .null]))
                }
                indexed.insert(hash)
                summary.computed += 1
            } catch let error as IndexError {
                throw error
            } catch {
                try upsertFile.run(fileRow([.null, .text(key), .text("failed"), .text("\(error)")]))
                summary.failed += 1
            }
        }
        progress(Progress(done: work.count, total: work.count, current: ""))

        let seen = Set(found.map(\.path))
        let delete = try database.prepare("DELETE FROM files WHERE path = ?")
        try database.transaction {
            for path in known.keys where !seen.contains(path) {
                try delete.run([.text(path)])
                summary.removed += 1
            }
            // Regions no file refers to any more, and regions of other models.
            try database.execute(
                "DELETE FROM images WHERE model != '\(key)' OR hash NOT IN (SELECT hash FROM files WHERE status = 'ok' AND hash IS NOT NULL)"
            )
        }
        return summary
    }

    // MARK: - Searching

    public struct Hit: Sendable {
        public var path: String
        public var width: Int
        public var height: Int
        public var score: Float
        public var detections: [(score: Float, box: [Float])]

        public init(path: String, width: Int, height: Int, score: Float, detections: [(score: Float, box: [Float])]) {
            self.path = path
            self.width = width
            self.height = height
            self.score = score
            self.detections = detections
        }
    }

    /// Every indexed photo with a region scoring above `confidence` for the query embedding, best first
    /// (a photo's score is its best region's), at most `top`.
    public func search(text: [Float], confidence: Float, top: Int) throws(IndexError) -> [Hit] {
        guard let model = try storedModel() else { return [] }
        let key = model.key
        let scorer = RegionScorer(text: text, parameters: model.scoreParameters)
        let statement = try database.prepare(
            """
            SELECT f.path, i.width, i.height, i.regions FROM files f JOIN images i ON i.hash = f.hash AND i.model = f.model
            WHERE f.status = 'ok' AND f.model = ?
            """)
        statement.bind([.text(key)])
        var hits: [Hit] = []
        var scratch: [Float] = []
        while try statement.step() {
            let scored = statement.withBlob(3) {
                scorer.score(blob: $0, embeddingSize: model.embeddingSize, scratch: &scratch)
            }
            let kept = scored.filter { $0.score > confidence }.sorted { $0.score > $1.score }
            guard let best = kept.first else { continue }
            hits.append(
                Hit(
                    path: statement.text(0), width: Int(statement.integer(1)), height: Int(statement.integer(2)),
                    score: best.score, detections: kept))
        }
        hits.sort { $0.score != $1.score ? $0.score > $1.score : $0.path < $1.path }
        return Array(hits.prefix(top))
    }

    // MARK: - Reports

    public struct Statistics: Sendable {
        public var files: Int
        public var failedFiles: Int
        public var images: Int
        public var regionBytes: Int
        public var databaseBytes: Int
    }

    public func statistics() throws(IndexError) -> Statistics {
        func count(_ sql: String) throws(IndexError) -> Int {
            let statement = try database.prepare(sql)
            return try statement.step() ? Int(statement.integer(0)) : 0
        }
        var info = stat()
        let size = stat(path, &info) == 0 ? Int(info.st_size) : 0
        var wal = stat()
        let walSize = stat(path + "-wal", &wal) == 0 ? Int(wal.st_size) : 0
        return Statistics(
            files: try count("SELECT count(*) FROM files WHERE status = 'ok'"),
            failedFiles: try count("SELECT count(*) FROM files WHERE status = 'failed'"),
            images: try count("SELECT count(*) FROM images"),
            regionBytes: try count("SELECT coalesce(sum(length(regions)), 0) FROM images"),
            databaseBytes: size + walSize)
    }

    public func failures() throws(IndexError) -> [(path: String, error: String)] {
        let statement = try database.prepare("SELECT path, error FROM files WHERE status = 'failed' ORDER BY path")
        var out: [(String, String)] = []
        while try statement.step() { out.append((statement.text(0), statement.text(1))) }
        return out
    }

    /// Runs SQLite's integrity check: "ok" when the file is sound.
    public func integrityCheck() throws(IndexError) -> String {
        let statement = try database.prepare("PRAGMA integrity_check")
        return try statement.step() ? statement.text(0) : "no answer"
    }

    // MARK: - Files

    private func canonicalFolder(_ path: String) throws(IndexError) -> String {
        guard let resolved = realpath(path, nil) else {
            throw IndexError(path: path, problem: "cannot open the folder: \(String(cString: strerror(errno)))")
        }
        defer { free(resolved) }
        let result = String(cString: resolved)
        var info = stat()
        guard stat(result, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw IndexError(path: path, problem: "not a folder")
        }
        guard let directory = opendir(result) else {
            throw IndexError(path: path, problem: "cannot read the folder: \(String(cString: strerror(errno)))")
        }
        closedir(directory)
        return result
    }

    private func walk(
        _ folder: String, into found: inout [(path: String, size: Int64, mtime: Int64)], summary: inout Summary
    ) {
        var pending = [folder]
        while let current = pending.popLast() {
            guard let directory = opendir(current) else {
                summary.unreadableFolders.append(current)
                continue
            }
            defer { closedir(directory) }
            while let entry = readdir(directory) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
                }
                if name.hasPrefix(".") { continue }
                let path = current == "/" ? "/" + name : current + "/" + name
                var info = stat()
                guard lstat(path, &info) == 0 else { continue }
                let type = info.st_mode & S_IFMT
                if type == S_IFDIR {
                    pending.append(path)
                    continue
                }
                if type == S_IFLNK {  // follow links to files, never to folders (no loops)
                    guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
                } else if type != S_IFREG {
                    continue
                }
                let lower = name.lowercased()
                guard lower.hasSuffix(".jpg") || lower.hasSuffix(".jpeg") || lower.hasSuffix(".png") else {
                    summary.skippedFiles += 1
                    continue
                }
                let mtime = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
                found.append((path, Int64(info.st_size), mtime))
            }
        }
    }
}
