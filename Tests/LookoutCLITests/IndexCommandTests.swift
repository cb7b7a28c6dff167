import Foundation
import LookoutImage
import LookoutIndex
import LookoutJSON
import LookoutSupport
import LookoutTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `lookout index` and `lookout search` as processes with the demo model, against the independent index
/// reference (Tests/Fixtures/index, scripts/demo/make_index_fixtures.py): the search ranking, scores and
/// boxes, `--exact` against ultralytics predict on the candidates; and the index's options, environment,
/// failures, interruption and errors.
@Suite struct IndexCommandTests {
    static let root = CLI.root
    static let photos = Reference.strings(Reference.index["photos"]!)

    /// A scratch folder with `photos/` holding the reference photos (or the named ones).
    static func scratch(_ names: [String] = photos) throws -> String {
        let folder = try CLI.scratch("index-cli")
        try FileManager.default.createDirectory(atPath: folder + "/photos", withIntermediateDirectories: true)
        for name in names {
            try FileManager.default.copyItem(
                atPath: root + "/examples/scenes/" + name, toPath: folder + "/photos/" + name)
        }
        return folder
    }

    static func name(_ path: String) -> String { String(path.split(separator: "/").last!) }

    /// Runs `lookout` with `arguments` (an `index` run) and kills it with SIGKILL once `db` holds `committed`
    /// photos (polled, not timed): whether it was still running to be killed.
    static func killIndexing(_ arguments: [String], home: String, db: String, once committed: Int) throws -> Bool {
        let process = Process()
        process.executableURL = CLI.executable
        process.arguments = arguments
        process.environment = CLI.environment(home: home)
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        var files = 0
        let deadline = Date().addingTimeInterval(300)
        while files < committed && process.isRunning && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.02)
            files = (try? PhotoIndex(path: db, readOnly: true).statistics().files) ?? 0
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        return process.terminationReason == .uncaughtSignal
    }

    /// A search's JSON lines against a reference list of results (photos by name, in order).
    /// `quantised`: the query's reference embedding when the scores come from the index's 8-bit regions (not
    /// `--exact`): a region with values on a rounding boundary may then score within `IndexReferenceRounding`'s
    /// allowance of the reference.
    static let rounding = try! IndexReferenceRounding(root: CLI.root)

    static func expectResults(
        _ stdout: String, _ results: JSONNode, _ label: String,
        quantised: (query: [Float], stored: [String: [IndexReferenceRounding.StoredRegion]])? = nil
    ) throws {
        let lines = try Reference.lines(stdout)
        let names = lines.map { name($0["image"]!.string!) }
        let expectedNames = (0..<results.count).map { results[$0]["image"]!.string! }
        #expect(names == expectedNames, "\(label): \(names) vs \(expectedNames)")
        for (line, k) in zip(lines, 0..<results.count) {
            let result = results[k]
            #expect(abs(line["score"]!.number! - result["score"]!.number!) <= 1e-4, "\(label) \(names[k])")
            // The reference lists every region above the threshold; a search shows near-duplicates once.
            let detections = line["detections"]!, reference = DisplayedBoxes.kept(detections: result["detections"]!)
            #expect(detections.count == reference.count, "\(label) \(names[k])")
            for j in 0..<min(detections.count, reference.count) {
                let a = Reference.numbers(detections[j]["box"]!), b = Reference.numbers(reference[j]["box"]!)
                let score = reference[j]["score"]!.number!
                let allowance =
                    try quantised.map {
                        try Self.rounding.allowance(
                            photo: names[k], box: b.map { Float($0) }, score: score, query: $0.query,
                            stored: $0.stored[names[k]] ?? [])
                    } ?? 0
                #expect(
                    abs(detections[j]["score"]!.number! - score) <= 1e-4 + allowance,
                    "\(label) \(names[k]) #\(j) (allowance for rounding boundaries \(allowance))")
                #expect(zip(a, b).allSatisfy { abs($0 - $1) <= 0.002 }, "\(label) \(names[k]) #\(j): \(a) vs \(b)")
            }
        }
    }

    @Test func searchAndExactEqualTheReference() throws {
        let folder = try Self.scratch()
        defer { CLI.remove(folder) }
        let db = folder + "/index.sqlite"
        // Objects only: the reference is the region index (the whole-photo evidence has its own tests).
        let indexed = try CLI.run(["index", folder + "/photos", "--db", db, "--plain", "--no-image-model"])
        #expect(indexed.status == 0, "\(indexed.stderr)")
        #expect(
            indexed.stderr.contains(
                "\(db): \(Self.photos.count) photos indexed (\(Self.photos.count) computed, 0 reused"))
        let searches = Reference.index["searches"]!
        // The regions as `index` stored them (for the allowance at rounding boundaries).
        var stored: [String: [IndexReferenceRounding.StoredRegion]] = [:]
        let index = try PhotoIndex(path: db)
        try index.store.forEachPhoto(model: try #require(try index.storedModel()).key) { photo in
            stored[Self.name(photo.path)] = IndexReferenceRounding.storedRegions(photo.regions, size: 512)
        }
        #expect(stored.count == Self.photos.count)
        var found = 0
        for s in 0..<searches.count {
            let search = searches[s]
            let query = search["query"]!.string!
            let plain = try CLI.run(["search", query, "--db", db, "--json"])
            #expect(plain.status == 0, "\(plain.stderr)")
            try Self.expectResults(
                plain.stdout, search["results"]!, query,
                quantised: (Reference.numbers(search["embedding"]!).map { Float($0) }, stored))
            let exact = try CLI.run(["search", query, "--db", db, "--json", "--exact"])
            #expect(exact.status == 0, "\(exact.stderr)")
            try Self.expectResults(exact.stdout, search["exact"]!, query + " --exact")
            found += search["results"]!.count + search["exact"]!.count
        }
        #expect(found >= 20)
        // The plain listing: score, path and box count, then each box.
        let ring = try CLI.run(["search", "ring", "--db", db])
        let first = searches[1]["results"]![0]
        #expect(searches[1]["query"]!.string! == "ring")
        let head = ring.stdout.split(separator: "\n").first.map(String.init) ?? ""
        let count = DisplayedBoxes.kept(detections: first["detections"]!).count
        #expect(
            head.hasSuffix("\(folder)/photos/\(first["image"]!.string!)  (\(count) box\(count == 1 ? "" : "es"))"),
            "\(head)")
        #expect(abs(Double(head.split(separator: " ")[0])! - first["score"]!.number!) <= 0.0006)
        let nothing = try CLI.run(["search", "dog", "--db", db])
        #expect(nothing.status == 0 && nothing.stdout == "nothing found for \"dog\" above conf 0.1\n")
        // --conf: a higher cutoff keeps the reference's photos whose best region beats it, boxes above it.
        let strict = try CLI.run(["search", "ring", "--db", db, "--json", "--conf", "0.5"])
        let lines = try Reference.lines(strict.stdout)
        let results = searches[1]["results"]!
        let expected = (0..<results.count).map { results[$0] }.filter { $0["score"]!.number! > 0.5 }
        #expect(lines.map { Self.name($0["image"]!.string!) } == expected.map { $0["image"]!.string! })
        #expect(!expected.isEmpty && expected.count < results.count)
        for line in lines {
            let detections = line["detections"]!
            #expect(
                detections.count > 0 && (0..<detections.count).allSatisfy { detections[$0]["score"]!.number! > 0.5 })
        }
        let html = folder + "/sheet.html"
        let sheet = try CLI.run(["search", "ring", "--db", db, "--html", html])
        #expect(sheet.status == 0)
        let page = try String(contentsOfFile: html, encoding: .utf8)
        #expect(page.components(separatedBy: "data:image/jpeg;base64,").count == results.count + 1)
    }

    /// $LOOKOUT_DB names the database when --db is not given; --regions caps the regions per photo;
    /// another --imgsz is another model (everything recomputed).
    @Test func environmentRegionsAndInputSize() throws {
        let names = Array(Self.photos.prefix(4))
        let folder = try Self.scratch(names)
        defer { CLI.remove(folder) }
        let db = folder + "/by-environment.sqlite"
        let environment = ["LOOKOUT_DB": db]
        let indexed = try CLI.run(["index", folder + "/photos", "--plain", "--regions", "2"], environment: environment)
        #expect(indexed.status == 0, "\(indexed.stderr)")
        #expect(FileManager.default.fileExists(atPath: db))
        #expect(indexed.stderr.contains("\(db): 4 photos indexed (4 computed"))
        let search = try CLI.run(
            ["search", "shape", "--json", "--conf", "0.0001", "--top", "10"], environment: environment)
        #expect(search.status == 0, "\(search.stderr)")
        let lines = try Reference.lines(search.stdout)
        #expect(lines.count == 4)
        // Each photo keeps its first two reference regions (the greedy choice stops after two).
        for line in lines {
            let regions = Reference.index["regions"]![Self.name(line["image"]!.string!)]!["boxes"]!
            let boxes = (0..<line["detections"]!.count).map { Reference.numbers(line["detections"]![$0]["box"]!) }
            #expect(boxes.count == min(2, regions.count))
            for box in boxes {
                #expect(
                    (0..<min(2, regions.count)).contains { k in
                        zip(box, Reference.numbers(regions[k])).allSatisfy { abs($0 - $1) <= 0.002 }
                    })
            }
        }
        let again = try CLI.run(["index", folder + "/photos", "--plain", "--regions", "2"], environment: environment)
        #expect(again.stderr.contains("4 photos indexed (0 computed, 0 reused, 4 unchanged"), "\(again.stderr)")
        let resized = try CLI.run(["index", folder + "/photos", "--plain", "--imgsz", "320"], environment: environment)
        #expect(resized.stderr.contains("4 photos indexed (4 computed"), "\(resized.stderr)")
    }

    /// `--fast-decode`: a photo four times the reference photo's size, decoded at 1/4, gives the reference regions
    /// in its own pixels (four times the reference boxes, IoU ≥ 0.8); `--timings` says where the time went; tiles
    /// and a reduced decode are refused together.
    @Test func fastDecodeKeepsBoxesInThePhotosPixels() throws {
        let name = Self.photos[0]
        let folder = try Self.scratch([name])
        defer { CLI.remove(folder) }
        let photo = try ImageFile.read(folder + "/photos/" + name)
        let big = photo.resizedBilinear(width: photo.width * 4, height: photo.height * 4)
        try Data(try ImageFile.encode(big, format: .jpeg(quality: 95), name: name))
            .write(to: URL(fileURLWithPath: folder + "/photos/" + name))
        let db = folder + "/fast.sqlite"
        let indexed = try CLI.run(
            ["index", folder + "/photos", "--plain", "--regions", "2", "--fast-decode", "--timings", "--db", db])
        #expect(indexed.status == 0, "\(indexed.stderr)")
        #expect(indexed.stderr.contains("time by stage") && indexed.stderr.contains("decode:"), "\(indexed.stderr)")
        let search = try CLI.run(["search", "shape", "--json", "--conf", "0.0001", "--top", "10", "--db", db])
        let lines = try Reference.lines(search.stdout)
        #expect(lines.count == 1, "\(search.stderr)")
        let reference = Reference.index["regions"]![name]!["boxes"]!
        func iou(_ a: [Double], _ b: [Double]) -> Double {
            let w = max(0, min(a[2], b[2]) - max(a[0], b[0])), h = max(0, min(a[3], b[3]) - max(a[1], b[1]))
            let union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - w * h
            return union > 0 ? w * h / union : 0
        }
        for line in lines {
            let boxes = (0..<line["detections"]!.count).map { Reference.numbers(line["detections"]![$0]["box"]!) }
            #expect(!boxes.isEmpty)
            for box in boxes {
                let best = (0..<reference.count).map { iou(box, Reference.numbers(reference[$0]).map { $0 * 4 }) }
                    .max()!
                #expect(best >= 0.8, "\(box): IoU \(best) with the reference boxes × 4")
            }
        }
        let tiled = try CLI.run(["index", folder + "/photos", "--plain", "--fast-decode", "--slice", "640", "--db", db])
        #expect(tiled.status != 0 && tiled.stderr.contains("--fast-decode"), "\(tiled.stderr)")
    }

    /// `--classes FILE` (comments and blank lines ignored) is recorded with the index: another list
    /// re-indexes every photo, as another model does; a shipped list is named by keyword; a missing, empty
    /// or binary list is refused naming the file. Searching a shape the list leaves out still finds it.
    @Test func classesChooseTheIndexVocabulary() throws {
        let names = ["scene-0001.jpg", "scene-0003.jpg", "scene-0005.jpg"]
        let folder = try Self.scratch(names)
        defer { CLI.remove(folder) }
        let db = folder + "/index.sqlite"
        let classes = folder + "/classes.txt"
        // The open-vocabulary fixture's list (every colour, five shapes: no star, heart or cross), with
        // more comments, blank lines and padding.
        let list = try String(
            contentsOfFile: Self.root + "/Tests/Fixtures/open-vocabulary/classes.txt", encoding: .utf8)
        try ("# more comment\n\n" + list.split(separator: "\n").map { "  \($0)  " }.joined(separator: "\n") + "\n\n")
            .write(toFile: classes, atomically: true, encoding: .utf8)
        let first = try CLI.run(["index", folder + "/photos", "--db", db, "--classes", classes, "--plain"])
        #expect(first.status == 0 && first.stderr.contains("3 photos indexed (3 computed"), "\(first.stderr)")
        // Shapes the list leaves out are found first where the scenes hold them (examples/scenes/truth.json).
        for (query, holder) in [
            ("green star", "scene-0001.jpg"), ("black star", "scene-0003.jpg"), ("white heart", "scene-0005.jpg"),
            ("orange cross", "scene-0001.jpg"),
        ] {
            let search = try CLI.run(["search", query, "--db", db, "--json", "--conf", "0"])
            let ranked = try Reference.lines(search.stdout).map { Self.name($0["image"]!.string!) }
            #expect(ranked.first == holder, "\(query): \(ranked)")
        }

        let same = try CLI.run(["index", folder + "/photos", "--db", db, "--classes", classes, "--plain"])
        #expect(same.stderr.contains("(0 computed, 0 reused, 3 unchanged"), "\(same.stderr)")
        try "red circle\nblue square\n".write(toFile: classes, atomically: true, encoding: .utf8)  // other classes
        let other = try CLI.run(["index", folder + "/photos", "--db", db, "--classes", classes, "--plain"])
        #expect(other.status == 0 && other.stderr.contains("(3 computed"), "\(other.stderr)")
        let builtin = try CLI.run(["index", folder + "/photos", "--db", db, "--plain"])
        #expect(builtin.status == 0 && builtin.stderr.contains("(3 computed"), "\(builtin.stderr)")

        let shipped = try CLI.run(["index", folder + "/photos", "--db", folder + "/coco.sqlite", "--classes", "coco"])
        #expect(shipped.status == 0, "\(shipped.stderr)")

        try "# nothing but comments\n\n".write(toFile: folder + "/empty.txt", atomically: true, encoding: .utf8)
        try Data([0, 159, 146, 150]).write(to: URL(fileURLWithPath: folder + "/binary.txt"))
        for (list, message) in [
            (folder + "/missing.txt", "missing.txt: No such file or directory (--classes takes a file"),
            (folder + "/empty.txt", "empty.txt: no class names in it"),
            (folder + "/binary.txt", "binary.txt: not text"),
        ] {
            let refused = try CLI.run(["index", folder + "/photos", "--db", folder + "/x.sqlite", "--classes", list])
            #expect(refused.status == 1 && refused.stderr.contains(message), "\(refused.stderr)")
        }
    }

    /// `index --image-model` stores whole-photo embeddings (the tiny random CLIP tower here: mechanics, not
    /// retrieval quality): `similar` puts the photo itself first at cosine 1 and its re-encoded copy next;
    /// search reports both kinds of evidence and scores the better one; --objects and --scenes weigh one.
    @Test func wholePhotoEmbeddingsSimilarAndScenes() throws {
        let folder = try Self.scratch(["scene-0001.jpg", "scene-0002.jpg", "scene-0003.jpg"])
        defer { CLI.remove(folder) }
        // A re-encoded copy: the same pixels through the PNG encoder.
        let copy = try CLI.run(
            [
                "detect", folder + "/photos/scene-0001.jpg", "-q", "nothing here", "--conf", "0.99", "--save",
                folder + "/copy",
            ])
        #expect(copy.status == 0, "\(copy.stderr)")
        try FileManager.default.moveItem(atPath: folder + "/copy/scene-0001.jpg", toPath: folder + "/photos/copy.jpg")
        let db = folder + "/index.sqlite"
        let tiny = CLI.root + "/Tests/Fixtures/weights/clip-tiny-openai.pt"
        let indexed = try CLI.run(["index", folder + "/photos", "--db", db, "--image-model", tiny, "--plain"])
        #expect(indexed.status == 0 && indexed.stderr.contains("4 photos indexed"), "\(indexed.stderr)")

        let similar = try CLI.run(["similar", folder + "/photos/scene-0001.jpg", "--db", db, "--json"])
        #expect(similar.status == 0, "\(similar.stderr)")
        let ranked = try Reference.lines(similar.stdout)
        #expect(ranked.count == 4)
        #expect(Self.name(ranked[0]["image"]!.string!) == "scene-0001.jpg" && ranked[0]["cosine"]!.number! > 0.9999)
        #expect(Self.name(ranked[1]["image"]!.string!) == "copy.jpg", "\(similar.stdout)")
        #expect(zip(ranked, ranked.dropFirst()).allSatisfy { $0["cosine"]!.number! >= $1["cosine"]!.number! })

        let both = try Reference.lines(try CLI.run(["search", "red star", "--db", db, "--json", "--conf", "0"]).stdout)
        #expect(both.count == 4)
        for hit in both {
            let object = hit["object_score"]!.number ?? -1, scene = hit["scene_score"]!.number ?? -1
            #expect(abs(hit["score"]!.number! - max(object, scene)) < 1e-9)
            #expect(hit["evidence"]!.string! == (scene > object ? "scenes" : "objects"))
        }
        let scenes = try Reference.lines(
            try CLI.run(["search", "red star", "--db", db, "--json", "--scenes", "--conf", "0"]).stdout)
        #expect(
            scenes.count == 4 && scenes.allSatisfy { $0["object_score"]!.kind == .null && $0["detections"]!.count == 0 }
        )
        let objects = try Reference.lines(
            try CLI.run(["search", "red star", "--db", db, "--json", "--objects", "--conf", "0"]).stdout)
        #expect(objects.allSatisfy { $0["scene_score"]!.kind == .null })

        let plainDB = folder + "/plain.sqlite"
        _ = try CLI.run(["index", folder + "/photos", "--db", plainDB, "--plain", "--no-image-model"])
        let none = try CLI.run(["similar", folder + "/photos/scene-0001.jpg", "--db", plainDB])
        #expect(none.status == 1 && none.stderr.contains("holds no whole-photo embeddings"), "\(none.stderr)")
        let noScenes = try CLI.run(["search", "red star", "--db", plainDB, "--scenes"])
        #expect(noScenes.status == 1 && noScenes.stderr.contains("--image-model"), "\(noScenes.stderr)")
        let both2 = try CLI.run(["search", "red star", "--db", db, "--scenes", "--objects"])
        #expect(both2.status == 64, "\(both2.stderr)")
    }

    /// A JPEG with an EXIF DateTimeOriginal (an APP1 segment inserted after SOI; little-endian TIFF).
    static func withDateTaken(_ jpeg: [UInt8], _ date: String) -> [UInt8] {
        func u16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
        func u32(_ v: Int) -> [UInt8] { u16(v & 0xFFFF) + u16(v >> 16) }
        let text = Array(date.utf8) + [0]
        // TIFF: header (8), IFD0 at 8 with one entry (ExifIFD pointer), Exif IFD at 26 with one entry, text at 44.
        var tiff: [UInt8] = [0x49, 0x49, 0x2A, 0x00] + u32(8)
        tiff += u16(1) + u16(0x8769) + u16(4) + u32(1) + u32(26) + u32(0)
        tiff += u16(1) + u16(0x9003) + u16(2) + u32(text.count) + u32(44) + u32(0)
        tiff += text
        let payload = Array("Exif".utf8) + [0, 0] + tiff
        return [0xFF, 0xD8, 0xFF, 0xE1] + [UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 0xFF)] + payload
            + jpeg.dropFirst(2)
    }

    /// `--in`, `--after` and `--before` keep the photos under a folder and taken in a period: the EXIF date
    /// when the photo has one, else the file's time; bad dates and missing folders are refused.
    @Test func searchFiltersByFolderAndDate() throws {
        let folder = try CLI.scratch("filters")
        defer { CLI.remove(folder) }
        let jpeg = Array(try Data(contentsOf: URL(fileURLWithPath: Self.root + "/examples/scenes/scene-0001.jpg")))
        try FileManager.default.createDirectory(atPath: folder + "/photos/x", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: folder + "/photos/y", withIntermediateDirectories: true)
        try Data(Self.withDateTaken(jpeg, "2021:07:04 10:00:00")).write(
            to: URL(fileURLWithPath: folder + "/photos/x/a.jpg"))
        try Data(Self.withDateTaken(jpeg, "2023:01:15 18:30:00")).write(
            to: URL(fileURLWithPath: folder + "/photos/y/b.jpg"))
        try Data(jpeg).write(to: URL(fileURLWithPath: folder + "/photos/y/c.jpg"))
        // c.jpg has no EXIF date: its file time, 2022-03-01 12:00 UTC.
        var times = [timeval(tv_sec: 1_646_136_000, tv_usec: 0), timeval(tv_sec: 1_646_136_000, tv_usec: 0)]
        #expect(utimes(folder + "/photos/y/c.jpg", &times) == 0)
        let db = folder + "/index.sqlite"
        let indexed = try CLI.run(["index", folder + "/photos", "--db", db, "--plain"], environment: ["TZ": "UTC"])
        #expect(indexed.status == 0, "\(indexed.stderr)")
        func found(_ extra: [String]) throws -> [String] {
            let result = try CLI.run(
                ["search", "blue circle", "--db", db, "--json", "--min-score", "0"] + extra, environment: ["TZ": "UTC"])
            #expect(result.status == 0, "\(extra): \(result.stderr)")
            return try Reference.lines(result.stdout).map { Self.name($0["image"]!.string!) }.sorted()
        }
        #expect(try found([]) == ["a.jpg", "b.jpg", "c.jpg"])
        #expect(try found(["--after", "2022"]) == ["b.jpg", "c.jpg"])
        #expect(try found(["--before", "2022-01-01"]) == ["a.jpg"])
        #expect(try found(["--after", "2021-07-04", "--before", "2021-07-05"]) == ["a.jpg"])
        #expect(try found(["--after", "2022-03-01 11:59", "--before", "2022-03-01 12:01"]) == ["c.jpg"])
        #expect(try found(["--in", folder + "/photos/y"]) == ["b.jpg", "c.jpg"])
        #expect(try found(["--in", folder + "/photos/y", "--before", "2023"]) == ["c.jpg"])
        let badDate = try CLI.run(["search", "ring", "--db", db, "--after", "last tuesday"])
        #expect(badDate.status == 64 && badDate.stderr.contains("not a date"), "\(badDate.stderr)")
        let noFolder = try CLI.run(["search", "ring", "--db", db, "--in", folder + "/nowhere"])
        #expect(noFolder.status == 1 && noFolder.stderr.contains("no such folder"), "\(noFolder.stderr)")
    }

    @Test func failuresAreRecordedAndListed() throws {
        let folder = try Self.scratch(["scene-0001.jpg"])
        defer { CLI.remove(folder) }
        try FileManager.default.copyItem(
            atPath: Self.root + "/Tests/Fixtures/image/files/truncated.jpg", toPath: folder + "/photos/broken.jpg")
        try "not a photo".write(toFile: folder + "/photos/notes.txt", atomically: true, encoding: .utf8)
        let db = folder + "/index.sqlite"
        let run = try CLI.run(["index", folder + "/photos", "--db", db, "--plain"])
        #expect(run.status == 2, "partial failure: \(run.stderr)")
        #expect(run.stderr.contains("1 photo indexed (1 computed"), "\(run.stderr)")
        #expect(run.stderr.contains("1 file could not be indexed"))
        #expect(run.stderr.contains("1 file skipped: not JPEG, PNG or a video"))
        let list = try CLI.run(["index", "--failures", "--db", db])
        #expect(list.status == 0)
        let lines = list.stdout.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].hasPrefix("\(folder)/photos/broken.jpg: "), "\(list.stdout)")
        #expect(lines.first?.components(separatedBy: "broken.jpg").count == 2, "the path once: \(list.stdout)")
        #expect(lines.first?.contains("truncated") == true || lines.first?.contains("decode") == true, "\(list.stdout)")
        let clean = try Self.scratch(["scene-0002.jpg"])
        defer { CLI.remove(clean) }
        _ = try CLI.run(["index", clean + "/photos", "--db", clean + "/index.sqlite"])
        let none = try CLI.run(["index", "--failures", "--db", clean + "/index.sqlite"])
        #expect(none.stdout == "no failures recorded in \(clean)/index.sqlite\n")
    }

    /// `kill -9` while indexing, once the database holds a few photos (polled, not timed), then a resumed
    /// run completes the index without redoing what was committed.
    @Test func killedMidwayThenResumedGivesACompleteIndex() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.root + "/examples/scenes").filter {
            $0.hasSuffix(".jpg")
        }
        let folder = try Self.scratch(names)
        defer { CLI.remove(folder) }
        let home = try CLI.scratch("home")
        defer { CLI.remove(home) }
        let db = folder + "/index.sqlite"
        let killed = try Self.killIndexing(
            ["index", folder + "/photos", "--db", db, "--plain"], home: home, db: db, once: 3)
        #expect(killed, "the run ended before it could be killed")
        let atKill = try PhotoIndex(path: db, readOnly: true).statistics().files
        #expect(atKill >= 3 && atKill < names.count, "\(atKill) of \(names.count) committed when killed")

        let resumed = try CLI.run(["index", folder + "/photos", "--db", db, "--plain"], home: home)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stderr.contains("\(names.count) photos indexed ("), "\(resumed.stderr)")
        let computed = resumed.stderr.components(separatedBy: "photos indexed (").dropFirst().first
            .flatMap { Int($0.split(separator: " ")[0]) }
        #expect(
            computed != nil && computed! <= names.count - atKill,
            "the resumed run redid committed work: \(resumed.stderr)")
        #expect(try PhotoIndex(path: db, readOnly: true).integrityCheck() == "ok")
    }

    /// `kill -9` while `lookout index` updates an index that keeps region lists (`--lists-from`, so that a few
    /// photos have them), then searches through the lists: the photos committed before the kill are found
    /// (the database's change log covers what the lists missed), and after the resumed run they equal the
    /// scan's answers and those of lists rebuilt from nothing.
    @Test func killedUpdateLeavesRegionListsThatSearchLikeARebuild() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.root + "/examples/scenes").filter {
            $0.hasSuffix(".jpg")
        }.sorted()
        let folder = try Self.scratch(Array(names.prefix(8)))
        defer { CLI.remove(folder) }
        let home = try CLI.scratch("home")
        defer { CLI.remove(home) }
        let db = folder + "/index.sqlite"
        let indexing = ["index", folder + "/photos", "--db", db, "--plain", "--lists-from", "4"]
        let first = try CLI.run(indexing, home: home)
        #expect(first.stderr.contains("built the region lists for 8 photos"), "\(first.stderr)")
        let queries = ["red star", "blue circle", "green triangle", "yellow square"]
        func answers(_ extra: [String] = []) throws -> [String] {
            try queries.map { query in
                let result = try CLI.run(
                    ["search", query, "--db", db, "--json", "--conf", "0.01", "--top", "40"] + extra, home: home)
                #expect(result.status == 0, "\(result.stderr)")
                #expect(
                    result.stderr.contains("region lists: ") == extra.isEmpty && !result.stderr.contains("scan"),
                    "\(result.stderr)")
                return result.stdout
            }
        }

        // Two photos removed, the rest of the scenes added; the update killed once a few are committed.
        for name in names.prefix(2) { unlink(folder + "/photos/" + name) }
        for name in names.dropFirst(8) {
            try FileManager.default.copyItem(
                atPath: Self.root + "/examples/scenes/" + name, toPath: folder + "/photos/" + name)
        }
        #expect(
            try Self.killIndexing(indexing, home: home, db: db, once: 11), "the run ended before it could be killed")
        let atKill = try PhotoIndex(path: db, readOnly: true).statistics().files
        #expect(atKill >= 11 && atKill < names.count - 2, "\(atKill) photos when killed")
        #expect(try answers() == (try answers(["--scan"])), "after the kill")

        let resumed = try CLI.run(indexing, home: home)
        #expect(resumed.status == 0 && !resumed.stderr.contains("region lists"), "\(resumed.stderr)")
        let appended = try answers()
        #expect(appended == (try answers(["--scan"])))
        unlink(db + ".lists")
        let rebuilt = try CLI.run(indexing, home: home)
        #expect(rebuilt.stderr.contains("built the region lists for \(names.count - 2) photos"), "\(rebuilt.stderr)")
        #expect(appended == (try answers()))
        #expect(appended.joined().contains(names[0]) == false && appended.joined().contains(names.last!))
    }

    /// Two `lookout index` runs on one database at the same moment share the work: every photo is computed
    /// once, by one of them, and both finish with the whole folder indexed.
    @Test func twoRunsAtOnceShareTheWork() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.root + "/examples/scenes").filter {
            $0.hasSuffix(".jpg")
        }
        let folder = try Self.scratch(names)
        defer { CLI.remove(folder) }
        let db = folder + "/index.sqlite"
        _ = try PhotoIndex(path: db)  // the schema in place before both start
        final class Results: @unchecked Sendable {
            let lock = NSLock()
            var values: [CLI.Result] = []
        }
        let results = Results()
        DispatchQueue.concurrentPerform(iterations: 2) { _ in
            let result = try? CLI.run(["index", folder + "/photos", "--db", db, "--plain"])
            if let result { results.lock.withLock { results.values.append(result) } }
        }
        let both = results.values
        #expect(both.count == 2 && both.allSatisfy { $0.status == 0 }, "\(both.map(\.stderr))")
        let computed = both.compactMap { result in
            result.stderr.components(separatedBy: "photos indexed (").dropFirst().first.flatMap {
                Int($0.split(separator: " ")[0])
            }
        }
        #expect(computed.count == 2 && computed.reduce(0, +) == names.count, "\(both.map(\.stderr))")
        #expect(try PhotoIndex(path: db, readOnly: true).statistics().files == names.count)
    }

    @Test func clearErrors() throws {
        let folder = try CLI.scratch("index-errors")
        defer { CLI.remove(folder) }
        let missing = try CLI.run(["search", "red star", "--db", folder + "/nothing/index.sqlite"])
        #expect(
            missing.status != 0 && missing.stderr.contains("no index here")
                && missing.stderr.contains(folder + "/nothing/index.sqlite"))
        let empty = try CLI.run(["search", "  ", "--db", folder + "/x.sqlite"])
        #expect(empty.status != 0 && empty.stderr.contains("The query is empty"))
        let top = try CLI.run(["search", "ring", "--db", folder + "/x.sqlite", "--top", "0"])
        #expect(top.status != 0 && top.stderr.contains("--top must be positive"))
        let nonexistent = folder + "/no-such-folder"
        let noFolder = try CLI.run(["index", nonexistent, "--db", folder + "/x.sqlite"])
        #expect(noFolder.status != 0 && noFolder.stderr.contains(nonexistent))
        let noArgument = try CLI.run(["index", "--db", folder + "/x.sqlite"])
        #expect(noArgument.status != 0 && noArgument.stderr.contains("Give the folder to index"))
        // An index made with another model is refused by search.
        let photos = try Self.scratch(["scene-0002.jpg"])
        defer { CLI.remove(photos) }
        let made = try CLI.run(["index", photos + "/photos", "--db", photos + "/index.sqlite"])
        #expect(made.status == 0, "\(made.stderr)")
        let other = try CLI.run(
            [
                "search", "ring", "--db", photos + "/index.sqlite", "--detector",
                Self.root + "/Tests/Fixtures/weights/yolov8n-worldv2-random.pt",
                "--text-model", Self.root + "/Tests/Fixtures/weights/clip-tiny-openai.pt",
            ])
        #expect(other.status != 0 && other.stderr.contains("was indexed with another model"), "\(other.stderr)")
    }
}
