import Foundation
import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Sliced inference against the `sahi` library (Tests/Fixtures/slicing/sahi.json, written by
/// scripts/reference/make_slicing_fixtures.py with sahi itself): its tiles, and its merges of the same per-tile
/// boxes; then the engine's sliced detection on the demo model against the same steps taken one by one.
@Suite struct SlicingTests {
    struct Fixture: Decodable {
        struct Tiles: Decodable {
            let width: Int
            let height: Int
            let sliceWidth: Int?
            let sliceHeight: Int?
            let overlapWidth: Double?
            let overlapHeight: Double?
            let auto: Bool?
            let tiles: [[Int]]
        }
        struct Found: Decodable {
            let box: [Float]
            let score: Float
            let category: Int
        }
        struct Result: Decodable {
            let method: String
            let metric: String
            let classAgnostic: Bool
            let threshold: Float
            let merged: [[Double]]
        }
        struct Scene: Decodable {
            let width: Int
            let height: Int
            let tiles: [[Int]]
            let perTile: [[Found]]
            let whole: [Found]
            let candidates: Int
            let results: [Result]
        }
        let sahi: String
        let tiles: [Tiles]
        let merges: [Scene]
    }

    static let fixture: Fixture = {
        let url = URL(fileURLWithPath: Repository.root + "/Tests/Fixtures/slicing/sahi.json")
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try! decoder.decode(Fixture.self, from: Data(contentsOf: url))
    }()

    @Test func tilesAreSahis() throws {
        #expect(Self.fixture.tiles.count >= 20)
        for item in Self.fixture.tiles {
            let options = SliceOptions(
                size: item.auto == true
                    ? .automatic : .fixed(width: item.sliceWidth!, height: item.sliceHeight!),
                overlapWidth: item.overlapWidth ?? 0.2, overlapHeight: item.overlapHeight ?? 0.2)
            let tiles = try Slicing.tiles(width: item.width, height: item.height, options: options)
            #expect(
                tiles.map { [$0.x1, $0.y1, $0.x2, $0.y2] } == item.tiles,
                "\(item.width)×\(item.height) \(options.size)")
        }
    }

    @Test func aPhotoSmallerThanATileIsOneTile() throws {
        let tiles = try Slicing.tiles(
            width: 600, height: 400, options: SliceOptions(size: .fixed(width: 640, height: 640)))
        #expect(tiles == [Tile(x1: 0, y1: 0, x2: 600, y2: 400)])
    }

    @Test func tooManyTilesOrBadSizesAreRefused() throws {
        #expect(throws: SliceError.self) {
            try Slicing.tiles(width: 20000, height: 20000, options: SliceOptions(size: .fixed(width: 32, height: 32)))
        }
        #expect(throws: SliceError.self) { try SliceOptions(size: .fixed(width: 8, height: 640)).validated() }
        #expect(throws: SliceError.self) {
            try SliceOptions(size: .fixed(width: 640, height: 640), overlapWidth: 1).validated()
        }
        #expect(throws: SliceError.self) { try SliceOptions.parseSize("640x") }
        #expect(try SliceOptions.parseSize("512") == .fixed(width: 512, height: 512))
        #expect(try SliceOptions.parseSize("640X480") == .fixed(width: 640, height: 480))
        #expect(try SliceOptions.parseSize("auto") == .automatic)
    }

    /// The per-tile boxes of each scene, placed in the photo as sahi places them, then merged under every method,
    /// metric, class mode and threshold: the same boxes, scores and queries, in the same order.
    @Test func mergesAreSahis() throws {
        var compared = 0
        var mergedAway = 0
        for scene in Self.fixture.merges {
            var candidates: [MergeBox] = []
            let parts =
                zip(scene.tiles, scene.perTile).map { tile, found in
                    (Optional(Tile(x1: tile[0], y1: tile[1], x2: tile[2], y2: tile[3])), found)
                } + [(nil, scene.whole)]
            for (tile, found) in parts {
                for item in found {
                    guard
                        let box = Slicing.place(
                            item.box, from: tile, photoWidth: scene.width, photoHeight: scene.height)
                    else { continue }
                    candidates.append(MergeBox(box: box, score: item.score, category: item.category))
                }
            }
            #expect(candidates.count == scene.candidates)
            for result in scene.results {
                let merge = SliceMerge(
                    method: SliceMerge.Method(rawValue: result.method)!,
                    metric: SliceMerge.Metric(rawValue: result.metric)!,
                    threshold: result.threshold, classAgnostic: result.classAgnostic)
                let merged = Slicing.merge(candidates, merge)
                let got = merged.map {
                    $0.merged.box.map(Double.init) + [Double($0.merged.score), Double($0.merged.category)]
                }
                let expected = result.merged.map { row in row.map { Double(Float($0)) } }
                #expect(
                    got == expected,
                    "\(result.method) \(result.metric) agnostic \(result.classAgnostic) \(result.threshold)")
                compared += 1
                mergedAway += candidates.count - merged.count
            }
        }
        #expect(compared >= 200)
        #expect(mergedAway > 1000)  // the merges did merge
    }

    static let engine = DemoModelTests.engine

    /// Two scenes side by side in one wide photo, so that tiles cut through objects.
    static func widePhoto() throws -> Image {
        let a = try ImageFile.read(Repository.root + "/examples/scenes/scene-0001.jpg")
        let b = try ImageFile.read(Repository.root + "/examples/scenes/scene-0005.jpg")
        let height = max(a.height, b.height)
        var pixels = [UInt8](repeating: 90, count: (a.width + b.width) * height * 3)
        for (image, offset) in [(a, 0), (b, a.width)] {
            for row in 0..<image.height {
                let target = (row * (a.width + b.width) + offset) * 3
                pixels.replaceSubrange(
                    target..<(target + image.width * 3),
                    with: image.pixels[(row * image.width * 3)..<((row + 1) * image.width * 3)])
            }
        }
        return Image(width: a.width + b.width, height: height, pixels: pixels)
    }

    /// The engine's sliced detection is the tiles cut, each detected, placed and merged (and the whole photo),
    /// taken here step by step through the public pieces; a second query set on the kept tiles equals a fresh
    /// sliced detection.
    @Test func slicedDetectionIsTheStepsOneByOne() throws {
        let engine = Self.engine
        let photo = try Self.widePhoto()
        let options = SliceOptions(size: .fixed(width: 320, height: 320), overlapWidth: 0.25, overlapHeight: 0.25)
        let sliced = try engine.prepare(image: photo, name: "wide", size: 320, slicing: options)
        #expect(sliced.tiles.count > 4 && sliced.whole != nil)
        for queries in [["green star", "blue circle", "ring"], ["red square", "shape"]] {
            let query = engine.prepare(QueryPlan(queries.map { Query($0) }))
            let result = engine.detect(sliced, query)
            var candidates: [MergeBox] = []
            let parts = sliced.tiles.map(Optional.some) + [nil]
            for tile in parts {
                let image =
                    tile.map { photo.cropped(x: $0.x1, y: $0.y1, width: $0.width, height: $0.height) } ?? photo
                let found = engine.detect(engine.prepare(image: image, name: "part", size: 320), query)
                for item in found.detections {
                    guard
                        let box = Slicing.place(
                            item.box, from: tile, photoWidth: photo.width, photoHeight: photo.height)
                    else { continue }
                    candidates.append(MergeBox(box: box, score: item.score, category: item.queryIndex))
                }
            }
            let expected = Slicing.merge(candidates, SliceMerge()).map(\.merged)
            #expect(!expected.isEmpty)
            #expect(
                result.detections.map { MergeBox(box: $0.box, score: $0.score, category: $0.queryIndex) } == expected)
            #expect(result.detections.allSatisfy { $0.label == queries[$0.queryIndex] })
            // The same query on freshly prepared tiles: re-query changed nothing.
            let fresh = engine.detect(
                try engine.prepare(image: photo, name: "wide", size: 320, slicing: options), query)
            #expect(fresh.detections == result.detections)
        }
    }

    /// A photo smaller than a tile is one tile, the whole photo, with no second standard prediction; sahi still
    /// merges its boxes.
    @Test func aPhotoSmallerThanATileIsItsOwnDetectionMerged() throws {
        let engine = Self.engine
        let photo = try ImageFile.read(Repository.root + "/examples/scenes/scene-0001.jpg")
        let options = SliceOptions(size: .fixed(width: 4000, height: 4000))
        let sliced = try engine.prepare(image: photo, name: "small", size: 640, slicing: options)
        #expect(sliced.tiles.count == 1 && sliced.whole == nil)
        let query = engine.prepare(QueryPlan(["green star", "blue circle", "ring", "shape"].map { Query($0) }))
        let plain = engine.detect(engine.prepare(image: photo, name: "small", size: 640), query)
        let merged = Slicing.merge(
            plain.detections.map { MergeBox(box: $0.box, score: $0.score, category: $0.queryIndex) }, SliceMerge())
        #expect(engine.detect(sliced, query).detections.map(\.box) == merged.map(\.merged.box))
    }

    /// `lookout query --slice`: a session keeps every tile's features; a second question and new thresholds on
    /// them equal a fresh sliced detection, also after the store dropped the tiles (they are prepared again).
    @Test func aQuerySessionReusesTheTiles() throws {
        let engine = Self.engine
        let folder = NSTemporaryDirectory() + "lookout-slicing-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/wide.png"
        try ImageFile.write(try Self.widePhoto(), to: path)
        let options = SliceOptions(size: .fixed(width: 320, height: 320), overlapWidth: 0.25, overlapHeight: 0.25)
        for memory in [1 << 30, 1] {
            let store = FeatureStore(modelKey: "demo", memoryLimit: memory)
            let session = QuerySession(engine: engine, store: store, imageSize: 320, slicing: options)
            #expect(session.add([path]).failures.isEmpty)
            let fresh = try engine.prepare(path: path, size: 320, slicing: options)
            for queries in [["green star", "ring"], ["blue circle", "shape"]] {
                let answer = session.ask(queries)
                let query = engine.prepare(QueryPlan(queries.map { Query($0) }))
                #expect(answer.results[0].detections == engine.detect(fresh, query).detections)
                #expect(!answer.results[0].detections.isEmpty)
            }
            var lower = SuppressionOptions()
            lower.confidence = 0.15
            let again = try #require(session.rethreshold(lower))
            var query = engine.prepare(QueryPlan(["blue circle", "shape"].map { Query($0) }))
            query.options = lower
            #expect(again[0].detections == engine.detect(fresh, query).detections)
        }
    }

    /// YOLOE's masks move with their tiles' boxes: each at the photo's size, its pixels inside its box; the union of
    /// two masks holds exactly the pixels of either.
    @Test func masksMoveWithTheirBoxes() throws {
        let engine = ExamplesTests.engine
        let photo = try Self.widePhoto()
        let options = SliceOptions(size: .fixed(width: 320, height: 320), overlapWidth: 0.25, overlapHeight: 0.25)
        let sliced = try engine.prepare(image: photo, name: "wide", size: 320, slicing: options)
        let query = engine.prepare(QueryPlan(["star", "circle", "ring", "square"].map { Query($0) }))
        let found = engine.detect(sliced, query).detections
        #expect(found.count >= 4)
        for item in found {
            let mask = try #require(item.mask)
            #expect(mask.width == photo.width && mask.height == photo.height && mask.area > 0)
            for y in mask.top..<(mask.top + mask.windowHeight) {
                for x in mask.left..<(mask.left + mask.windowWidth) where mask.pixel(x: x, y: y) != 0 {
                    #expect(
                        Float(x) >= item.box[0] - 1 && Float(x) <= item.box[2] + 1 && Float(y) >= item.box[1] - 1
                            && Float(y) <= item.box[3] + 1)
                }
            }
        }
        let a = BinaryMask(
            width: 10, height: 8, left: 1, top: 2, windowWidth: 3, windowHeight: 2, pixels: [1, 0, 1, 0, 1, 0])
        let b = BinaryMask(
            width: 10, height: 8, left: 3, top: 3, windowWidth: 2, windowHeight: 3, pixels: [1, 1, 0, 1, 1, 0])
        let union = a.union(b)
        for y in 0..<8 {
            for x in 0..<10 {
                #expect(union.pixel(x: x, y: y) == max(a.pixel(x: x, y: y), b.pixel(x: x, y: y)))
            }
        }
    }
}
