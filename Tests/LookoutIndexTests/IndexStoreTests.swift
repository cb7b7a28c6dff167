import CSQLite
import Foundation
import LookoutIndex
import LookoutJSON
import LookoutSupport
import Testing

/// The index store seam: a second implementation of ``IndexStore`` (in memory, here) gives the same
/// updates and searches as the SQLite store, so the index's logic depends only on the protocol; and the
/// SQLite store's schema versions.
@Suite(.serialized) struct IndexStoreTests {
    /// An index store in dictionaries.
    final class MemoryStore: IndexStore {
        var model: IndexModel?
        var files: [String: (photo: FoundPhoto, stored: StoredFile, error: String?)] = [:]
        // By "hash|model".
        var images: [String: (width: Int, height: Int, regions: [UInt8], image: [UInt16]?, taken: Int64?)] = [:]

        var location: String { "memory" }
        func storedModel() -> IndexModel? { model }
        func setModel(_ model: IndexModel) { self.model = model }
        func files(withPrefix prefix: String) -> [String: StoredFile] {
            files.filter { $0.key.hasPrefix(prefix) }.mapValues(\.stored)
        }
        func storedFile(at path: String) -> StoredFile? { files[path]?.stored }
        func imageEmbedding(hash: String, model key: String) -> [UInt16]? { images[hash + "|" + key]?.image ?? nil }
        func indexedContents(model key: String) -> Set<String> {
            Set(images.keys.filter { $0.hasSuffix("|" + key) }.map { String($0.split(separator: "|")[0]) })
        }
        func record(_ photo: FoundPhoto, outcome: PhotoOutcome, model key: String) {
            switch outcome {
            case .indexed(let hash, let width, let height, let regions, let image, let taken, _):
                images[hash + "|" + key] = (width, height, regions, image, taken)
                files[photo.path] = (
                    photo, StoredFile(size: photo.size, mtime: photo.mtime, hash: hash, model: key, failed: false), nil
                )
            case .reused(let hash):
                files[photo.path] = (
                    photo, StoredFile(size: photo.size, mtime: photo.mtime, hash: hash, model: key, failed: false), nil
                )
            case .failed(let error):
                files[photo.path] = (
                    photo, StoredFile(size: photo.size, mtime: photo.mtime, hash: nil, model: key, failed: true), error
                )
            }
        }
        func remove(paths: [String], keepingModel key: String) {
            for path in paths { files[path] = nil }
            let referenced = Set(
                files.values.compactMap { $0.stored.failed ? nil : $0.stored.hash.map { $0 + "|" + key } })
            images = images.filter { referenced.contains($0.key) }
        }
        func forEachPhoto(model key: String, _ body: (StoredPhoto) -> Void) {
            for (path, file) in files.sorted(by: { $0.key < $1.key })
            where !file.stored.failed && file.stored.model == key {
                guard let hash = file.stored.hash, let image = images[hash + "|" + key] else { continue }
                let whole = image.image.map { bits in bits.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] } }
                image.regions.withUnsafeBytes { regions in
                    func hand(_ embedding: UnsafeRawBufferPointer?) {
                        body(
                            StoredPhoto(
                                path: path, width: image.width, height: image.height, regions: regions,
                                imageEmbedding: embedding, taken: image.taken, modified: file.photo.mtime))
                    }
                    if let whole { whole.withUnsafeBytes { hand($0) } } else { hand(nil) }
                }
            }
        }
        func statistics() -> IndexStatistics {
            IndexStatistics(
                files: files.values.filter { !$0.stored.failed }.count,
                failedFiles: files.values.filter(\.stored.failed).count,
                images: images.count, regionBytes: images.values.reduce(0) { $0 + $1.regions.count }, databaseBytes: 0)
        }
        func failures() -> [(path: String, error: String)] {
            files.filter(\.value.stored.failed).map { ($0.key, $0.value.error ?? "") }.sorted { $0.0 < $1.0 }
        }
        func integrityCheck() -> String { "ok" }
        var claims: [String: IndexWorker] = [:]
        func claim(_ path: String, worker: IndexWorker, until expires: Double) -> Bool {
            if let holder = claims[path], holder != worker { return false }
            claims[path] = worker
            return true
        }
        func release(_ path: String, worker: IndexWorker) { if claims[path] == worker { claims[path] = nil } }
    }

    @Test func anotherStoreGivesTheSameIndex() throws {
        let folder = try PhotoIndexTests.folder(count: 6)
        defer { PhotoIndexTests.remove(folder) }
        try FileContents.writeAtomically(Array("broken".utf8), to: folder + "/photos/broken.jpg")
        let sqlite = try PhotoIndex(path: folder + "/index.sqlite")
        let memory = PhotoIndex(store: MemoryStore())
        let a = try PhotoIndexTests.update(sqlite, folder)
        let b = try PhotoIndexTests.update(memory, folder)
        #expect(a == b && a.computed == 6 && a.failed == 1)
        for query in ["ring", "red square", "star", "blue shape"] {
            let text = PhotoIndexTests.loaded.engine.embedder!.embed([query]).embeddings[0]
            let x = try sqlite.search(text: text, confidence: 0.05, top: 20)
            let y = try memory.search(text: text, confidence: 0.05, top: 20)
            #expect(x.map(\.path) == y.map(\.path) && x.map(\.score) == y.map(\.score), "\(query)")
            #expect(!x.isEmpty)
        }
        #expect(try sqlite.failures().map(\.path) == memory.failures().map(\.path))
        // A second update does nothing on either; a removed photo leaves both.
        try FileManager.default.removeItem(
            atPath: folder + "/photos/"
                + (try FileManager.default.contentsOfDirectory(atPath: folder + "/photos").sorted().first {
                    $0.hasSuffix(".jpg") && $0 != "broken.jpg"
                }!))
        let c = try PhotoIndexTests.update(sqlite, folder)
        let d = try PhotoIndexTests.update(memory, folder)
        #expect(c == d && c.removed == 1 && c.computed == 0 && c.stillFailing == 1)
        #expect(try sqlite.statistics().files == memory.statistics().files)
    }

    /// A photo's image embedding is stored with its regions and read back bit for bit (absent: nil), in
    /// both stores.
    /// Stores open through the registry keyed by the URL's scheme (issue 50): a path is an SQLite file, a
    /// registered scheme its store, another scheme an error naming it.
    @Test func storesOpenByTheirScheme() throws {
        let path = NSTemporaryDirectory() + "lookout-stores-\(getpid()).sqlite"
        defer { unlink(path) }
        #expect(try IndexStores.open(path) is SQLiteIndexStore)
        #expect(IndexStores.scheme(of: path) == nil && IndexStores.scheme(of: "Memory://x") == "memory")
        #expect(!IndexStores.opens("memory://photos"))
        #expect {
            try IndexStores.open("memory://photos")
        } throws: {
            ($0 as? IndexError)?.problem.contains("memory:// is not a database Lookout knows") == true
        }
        IndexStores.register(["memory"]) { location, options in
            #expect(location == "memory://photos" && options.readOnly)
            return MemoryStore()
        }
        #expect(IndexStores.opens("memory://photos"))
        let store = try IndexStores.open("memory://photos", options: IndexStores.Options(readOnly: true))
        #expect(store is MemoryStore && store.location == "memory")
    }

    @Test func imageEmbeddingsAreKept() throws {
        let folder = try PhotoIndexTests.folder(count: 0)
        defer { PhotoIndexTests.remove(folder) }
        let stores: [any IndexStore] = [try SQLiteIndexStore(path: folder + "/index.sqlite"), MemoryStore()]
        let bits: [UInt16] = (0..<512).map { UInt16(truncatingIfNeeded: $0 &* 40503) }
        for store in stores {
            let photo = FoundPhoto(path: "/p/a.jpg", size: 10, mtime: 20)
            try store.record(
                photo, outcome: .indexed(hash: "h1", width: 4, height: 3, regions: [0, 0, 0, 0], imageEmbedding: bits),
                model: "m")
            try store.record(
                FoundPhoto(path: "/p/b.jpg", size: 1, mtime: 2),
                outcome: .indexed(hash: "h2", width: 4, height: 3, regions: [0, 0, 0, 0]),
                model: "m")
            #expect(try store.imageEmbedding(hash: "h1", model: "m") == bits)
            #expect(try store.imageEmbedding(hash: "h2", model: "m") == nil)
            #expect(try store.imageEmbedding(hash: "h1", model: "other") == nil)
        }
    }

    /// A claim holds against other workers until it runs out or its process is gone; its holder may renew it.
    @Test func claims() throws {
        let folder = try PhotoIndexTests.folder(count: 0)
        defer { PhotoIndexTests.remove(folder) }
        let store = try SQLiteIndexStore(path: folder + "/index.sqlite")
        let a = IndexWorker.current(), b = IndexWorker.current()
        let later = SQLiteIndexStore.now() + 600
        #expect(try store.claim("/p/1.jpg", worker: a, until: later))
        #expect(try !store.claim("/p/1.jpg", worker: b, until: later))
        #expect(try store.claim("/p/1.jpg", worker: a, until: later))
        #expect(try store.claim("/p/2.jpg", worker: b, until: later))
        try store.release("/p/1.jpg", worker: a)
        #expect(try store.claim("/p/1.jpg", worker: b, until: later))
        // Run out.
        #expect(try store.claim("/p/3.jpg", worker: a, until: SQLiteIndexStore.now() - 1))
        #expect(try store.claim("/p/3.jpg", worker: b, until: later))
        // A process that has ended: its claims are free at once.
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/true")
        try child.run()
        child.waitUntilExit()
        let gone = IndexWorker(host: a.host, pid: child.processIdentifier, run: "x")
        #expect(!gone.isAlive && a.isAlive)
        #expect(try store.claim("/p/4.jpg", worker: gone, until: later))
        #expect(try store.claim("/p/4.jpg", worker: a, until: later))
        // Another host's worker is taken to be alive until its claim runs out.
        let remote = IndexWorker(host: a.host + "-elsewhere", pid: gone.pid, run: "y")
        #expect(try store.claim("/p/5.jpg", worker: remote, until: later))
        #expect(try !store.claim("/p/5.jpg", worker: a, until: later))
    }

    /// Writes `version` as the file's schema version, with SQLite itself.
    static func setSchemaVersion(_ version: String, in path: String) {
        var handle: OpaquePointer?
        sqlite3_open(path, &handle)
        sqlite3_exec(handle, "UPDATE meta SET value = '\(version)' WHERE key = 'schema_version'", nil, nil, nil)
        sqlite3_close(handle)
    }

    static func schemaVersion(in path: String) throws -> String? {
        var handle: OpaquePointer?
        sqlite3_open(path, &handle)
        defer { sqlite3_close(handle) }
        var statement: OpaquePointer?
        sqlite3_prepare_v2(handle, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &statement, nil)
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW, let text = sqlite3_column_text(statement, 0) else { return nil }
        return String(cString: text)
    }

    /// Absurd settings in the file are a clear error, not a trap later.
    @Test func damagedSettingsAreAnError() throws {
        let folder = try PhotoIndexTests.folder(count: 2)
        defer { PhotoIndexTests.remove(folder) }
        let path = folder + "/index.sqlite"
        let index = try PhotoIndex(path: path)
        _ = try PhotoIndexTests.update(index, folder)
        var handle: OpaquePointer?
        sqlite3_open(path, &handle)
        sqlite3_exec(
            handle, "UPDATE meta SET value = '4611686018427387904' WHERE key = 'embedding_size'", nil, nil, nil)
        sqlite3_close(handle)
        #expect {
            _ = try PhotoIndex(path: path, readOnly: true).search(
                text: [Float](repeating: 0.1, count: 512), confidence: 0.1, top: 5)
        } throws: { error in
            "\(error)".contains("the index's settings are damaged") && "\(error)".contains(path)
        }
    }

    @Test func schemaVersions() throws {
        let folder = try PhotoIndexTests.folder(count: 0)
        defer { PhotoIndexTests.remove(folder) }
        let path = folder + "/index.sqlite"
        _ = try PhotoIndex(path: path)
        _ = try PhotoIndex(path: path, readOnly: true)
        // A version-1 file (as Lookout wrote it before claims and image embeddings) is read as it is and
        // upgraded when opened for writing.
        let old = folder + "/version1.sqlite"
        var handle: OpaquePointer?
        sqlite3_open(old, &handle)
        sqlite3_exec(
            handle,
            """
            CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE files (path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
                hash TEXT, model TEXT, status TEXT NOT NULL, error TEXT);
            CREATE TABLE images (hash TEXT NOT NULL, model TEXT NOT NULL, width INTEGER NOT NULL, height INTEGER NOT NULL,
                regions BLOB NOT NULL, PRIMARY KEY (hash, model));
            INSERT INTO meta VALUES ('schema_version', '1');
            """, nil, nil, nil)
        sqlite3_close(handle)
        _ = try PhotoIndex(path: old, readOnly: true)
        #expect(try Self.schemaVersion(in: old) == "1")
        // Read as it is: the columns later versions added (image embedding, date taken) read as absent.
        var seen = 0
        try SQLiteIndexStore(path: old, readOnly: true).forEachPhoto(model: "m") { _ in seen += 1 }
        #expect(seen == 0)
        let upgraded = try SQLiteIndexStore(path: old)
        #expect(try Self.schemaVersion(in: old) == "5")
        #expect(try upgraded.changeSequence() == 0)
        // Version 5's prompt-free labels are written and read back with the photo.
        let labels = PhotoLabel.encode([PhotoLabel(name: "dog", score: 0.75, box: [1, 2, 3, 4])])
        try upgraded.record(
            FoundPhoto(path: "/p/dog.jpg", size: 1, mtime: 1),
            outcome: .indexed(hash: "h", width: 4, height: 3, regions: [0, 0, 0, 0], labels: labels), model: "m")
        var read: [PhotoLabel]?
        try upgraded.forEachPhoto(model: "m") { read = $0.labels.flatMap(PhotoLabel.decode) }
        #expect(read == [PhotoLabel(name: "dog", score: 0.75, box: [1, 2, 3, 4])])
        #expect(PhotoLabel.decode("[{\"label\": 3}]") == nil && PhotoLabel.decode("not json") == nil)
        #expect(try upgraded.claim("/p/x.jpg", worker: IndexWorker.current(), until: SQLiteIndexStore.now() + 60))
        #expect(try upgraded.imageEmbedding(hash: "none", model: "m") == nil)
        Self.setSchemaVersion("99", in: path)
        #expect {
            _ = try PhotoIndex(path: path)
        } throws: { error in
            "\(error)"
                == "\(path): index schema version 99 is newer than this Lookout's (\(PhotoIndex.schemaVersion)): update Lookout"
        }
        Self.setSchemaVersion("banana", in: path)
        #expect {
            _ = try PhotoIndex(path: path, readOnly: true)
        } throws: { error in
            "\(error)".contains("index schema version \"banana\" is not one Lookout wrote")
        }
    }
}
