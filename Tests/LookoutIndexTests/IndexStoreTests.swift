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
        var images: [String: (width: Int, height: Int, regions: [UInt8])] = [:]  // by "hash|model"

        var location: String { "memory" }
        func storedModel() -> IndexModel? { model }
        func setModel(_ model: IndexModel) { self.model = model }
        func files(withPrefix prefix: String) -> [String: StoredFile] {
            files.filter { $0.key.hasPrefix(prefix) }.mapValues(\.stored)
        }
        func indexedContents(model key: String) -> Set<String> {
            Set(images.keys.filter { $0.hasSuffix("|" + key) }.map { String($0.split(separator: "|")[0]) })
        }
        func record(_ photo: FoundPhoto, outcome: PhotoOutcome, model key: String) {
            switch outcome {
            case .indexed(let hash, let width, let height, let regions):
                images[hash + "|" + key] = (width, height, regions)
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
        func forEachPhoto(model key: String, _ body: (String, Int, Int, UnsafeRawBufferPointer) -> Void) {
            for (path, file) in files.sorted(by: { $0.key < $1.key })
            where !file.stored.failed && file.stored.model == key {
                guard let hash = file.stored.hash, let image = images[hash + "|" + key] else { continue }
                image.regions.withUnsafeBytes { body(path, image.width, image.height, $0) }
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

    /// Writes `version` as the file's schema version, with SQLite itself.
    static func setSchemaVersion(_ version: String, in path: String) {
        var handle: OpaquePointer?
        sqlite3_open(path, &handle)
        sqlite3_exec(handle, "UPDATE meta SET value = '\(version)' WHERE key = 'schema_version'", nil, nil, nil)
        sqlite3_close(handle)
    }

    @Test func schemaVersions() throws {
        let folder = try PhotoIndexTests.folder(count: 0)
        defer { PhotoIndexTests.remove(folder) }
        let path = folder + "/index.sqlite"
        _ = try PhotoIndex(path: path)
        _ = try PhotoIndex(path: path, readOnly: true)
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
