import Foundation
import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutJSON
import LookoutSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The bounded store of image features that re-query runs from.
@Suite struct FeatureStoreTests {
    static let scenes = DemoModelTests.root + "/examples/scenes/"

    static func scratch() -> String {
        let folder = NSTemporaryDirectory() + "lookout-features-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try! FileContents.makeDirectories(folder)
        return folder
    }

    static func files(in folder: String) -> [String] {
        guard let directory = opendir(folder) else { return [] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if !name.hasPrefix(".") { names.append(name) }
        }
        return names
    }

    @Test func memoryIsBoundedLeastRecentlyUsedFirst() throws {
        let engine = DemoModelTests.engine
        let one = try engine.prepare(path: Self.scenes + "scene-0001.jpg")
        let bytes = one.features.reduce(0) { $0 + $1.data.count * 4 }
        // Room for two images of this size, not three.
        let store = FeatureStore(modelKey: "demo", memoryLimit: bytes * 2 + bytes / 2)
        for name in ["scene-0001.jpg", "scene-0002.jpg", "scene-0001.jpg", "scene-0004.jpg", "scene-0001.jpg"] {
            _ = try store.prepared(path: Self.scenes + name, size: 640, engine: engine)
        }
        // 0001 computed, 0002 computed, 0001 hit, 0004 computed (evicts 0002, the least recently used), 0001 hit.
        #expect(store.counters == .init(memoryHits: 2, diskHits: 0, computed: 3, evicted: 1))
        #expect(store.count == 2 && store.memoryBytes <= bytes * 2 + bytes / 2)
        _ = try store.prepared(path: Self.scenes + "scene-0002.jpg", size: 640, engine: engine)
        #expect(store.counters.computed == 4)
    }

    @Test func diskEntriesGiveTheSameDetectionsAndBadOnesAreRecomputed() throws {
        let engine = DemoModelTests.engine
        let folder = Self.scratch()
        defer { _ = system("rm -rf '\(folder)'") }
        let path = Self.scenes + "scene-0003.jpg"
        let queries = ["green circle", "black star", "red square", "ring"]
        let fresh = engine.detect(try engine.prepare(path: path, size: 512), queries: queries)
        _ = try FeatureStore(modelKey: "demo", directory: folder).prepared(path: path, size: 512, engine: engine)
        let reopened = FeatureStore(modelKey: "demo", directory: folder)
        let loaded = try reopened.prepared(path: path, size: 512, engine: engine)
        #expect(reopened.counters.diskHits == 1 && reopened.counters.computed == 0)
        #expect(engine.detect(loaded, queries: queries).detections == fresh.detections)
        #expect(!fresh.detections.isEmpty)

        // Another model or input size does not reuse the entry; a damaged file is recomputed.
        let other = FeatureStore(modelKey: "other", directory: folder)
        _ = try other.prepared(path: path, size: 512, engine: engine)
        #expect(other.counters.computed == 1)
        let names = Self.files(in: folder)
        #expect(names.count == 2)
        for name in names {
            let file = folder + "/" + name
            let bytes = try FileContents.read(file)
            try FileContents.writeAtomically(Array(bytes.prefix(bytes.count / 2)), to: file)
        }
        let damaged = FeatureStore(modelKey: "demo", directory: folder)
        let again = try damaged.prepared(path: path, size: 512, engine: engine)
        #expect(damaged.counters.computed == 1 && damaged.counters.diskHits == 0)
        #expect(engine.detect(again, queries: queries).detections == fresh.detections)
    }

    /// Edited headers (a width of 2^50, other channel counts, map sizes, map counts, sizes that overflow) are
    /// never trusted: the features are computed again and the detections are a fresh run's.
    @Test func editedHeadersAreRecomputedNotTrusted() throws {
        let engine = DemoModelTests.engine
        let folder = Self.scratch()
        defer { _ = system("rm -rf '\(folder)'") }
        let path = Self.scenes + "scene-0003.jpg"
        let queries = ["green circle", "black star", "red square", "ring"]
        let fresh = engine.detect(try engine.prepare(path: path, size: 512), queries: queries)
        _ = try FeatureStore(modelKey: "demo", directory: folder).prepared(path: path, size: 512, engine: engine)
        let file = folder + "/" + Self.files(in: folder)[0]
        let original = try FileContents.read(file)
        // Header: magic (8), width, height, size, count, then channels/height/width per map: Int64 little-endian.
        let edits: [(field: Int, value: Int64)] = [
            (0, 1 << 50), (1, 1 << 50), (0, 0), (3, 2), (3, 1 << 40), (4, 65), (4, 1 << 62), (5, 1 << 31), (6, 3),
            (7, -1),
        ]
        for (field, value) in edits {
            var bytes = original
            withUnsafeBytes(of: value.littleEndian) { raw in
                for k in 0..<8 { bytes[8 + 8 * field + k] = raw[k] }
            }
            try FileContents.writeAtomically(bytes, to: file)
            let store = FeatureStore(modelKey: "demo", directory: folder)
            let prepared = try store.prepared(path: path, size: 512, engine: engine)
            #expect(store.counters.computed == 1 && store.counters.diskHits == 0, "field \(field) = \(value)")
            #expect(
                engine.detect(prepared, queries: queries).detections == fresh.detections, "field \(field) = \(value)")
        }
    }

    @Test func aMissingPhotoIsAnError() {
        let store = FeatureStore(modelKey: "demo")
        #expect(throws: ImageError.self) {
            _ = try store.prepared(path: "/nonexistent/photo.jpg", size: 640, engine: DemoModelTests.engine)
        }
    }
}
