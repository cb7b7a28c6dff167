import Foundation
import LookoutJSON
import LookoutTestSupport
import Testing

/// `--slice` (sliced inference) as processes with the demo model, on two large generated scenes whose shapes are
/// 8-32 pixels (Tests/Fixtures/slicing/small: `scripts/demo/scenes.py --small`). The tiles and merges equal sahi's
/// in SlicingTests; here: that the commands slice, that it finds what the whole photo loses, and that bad values
/// are refused clearly.
@Suite struct SliceCommandTests {
    static let folder = CLI.root + "/Tests/Fixtures/slicing/small"
    static let shapes = EvalCommandTests.shapes

    /// The whole photo at 640 loses the small shapes (they shrink to 2-8 pixels); tiles of 400 find most of them.
    @Test func slicingFindsTheSmallShapesTheWholePhotoLoses() throws {
        let truth = Self.folder + "/instances.json"
        let whole = try CLI.run(["eval", truth, "--images", Self.folder, "--json"])
        #expect(whole.status == 0, "\(whole.stderr)")
        let sliced = try CLI.run(["eval", truth, "--images", Self.folder, "--json", "--slice", "400"])
        #expect(sliced.status == 0, "\(sliced.stderr)")
        #expect(sliced.stderr.contains("merge by nms with iou, as sahi does"), "eval's --conf 0.001 switches the merge")
        let before = try JSONDocument(text: whole.stdout).root["AP"]!.number!
        let after = try JSONDocument(text: sliced.stdout).root["AP"]!.number!
        #expect(before < 0.05, "whole photo: AP \(before)")
        #expect(after > 0.4, "sliced: AP \(after)")
    }

    /// `index --slice`: the regions of the tiles are stored beside the whole photo's, so a search finds the small
    /// shapes a whole-photo index loses (searched by each shape's name, a truth box counts when a box of its photo
    /// overlaps it by IoU 0.5); `search --exact` on it detects sliced as `detect --slice` does; the merge options
    /// are refused, and another slicing is another setting.
    @Test func slicedIndexFindsTheSmallShapes() throws {
        let scratch = try CLI.scratch("sliced-index")
        defer { CLI.remove(scratch) }
        let truth = try JSONDocument(bytes: Array(Data(contentsOf: URL(fileURLWithPath: Self.folder + "/truth.json"))))
            .root
        func found(_ db: String) throws -> Int {
            var matched = 0
            for shape in Self.shapes.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
                let run = try CLI.run(["search", shape, "--db", db, "--conf", "0.1", "--json", "--objects"])
                try #require(run.status == 0, "\(run.stderr)")
                var boxes: [String: [[Float]]] = [:]
                for hit in try Reference.lines(run.stdout) {
                    let detections = hit["detections"]!
                    boxes[String(hit["image"]!.string!.split(separator: "/").last!)] = (0..<detections.count).map {
                        k in (0..<4).map { Float(detections[k]["box"]![$0].number!) }
                    }
                }
                for index in 0..<truth["images"]!.count {
                    let image = truth["images"]![index]
                    let objects = image["objects"]!
                    let name = String(image["file"]!.string!.split(separator: "/").last!)
                    for k in 0..<objects.count where objects[k]["label"]!.string!.hasSuffix(" " + shape) {
                        let box = (0..<4).map { Float(objects[k]["box"]![$0].number!) }
                        if (boxes[name] ?? []).contains(where: { Self.iou(box, $0) > 0.5 }) { matched += 1 }
                    }
                }
            }
            return matched
        }
        let whole = scratch + "/whole.sqlite", sliced = scratch + "/sliced.sqlite"
        #expect(try CLI.run(["index", Self.folder, "--db", whole, "--plain"]).status == 0)
        let indexed = try CLI.run(["index", Self.folder, "--db", sliced, "--plain", "--slice", "400"])
        try #require(indexed.status == 0, "\(indexed.stderr)")
        let (before, after) = (try found(whole), try found(sliced))
        print("index --slice 400: \(after) of 21 small shapes found, \(before) without slicing")
        #expect(before <= 2 && after >= 10, "whole \(before), sliced \(after)")
        // --exact detects sliced, with the index's tiles.
        let exact = try CLI.run(["search", "star", "--db", sliced, "--exact", "--json", "--conf", "0.3"])
        try #require(exact.status == 0, "\(exact.stderr)")
        let best = try #require(try Reference.lines(exact.stdout).first)
        let detect = try CLI.run([
            "detect", best["image"]!.string!, "-q", "star", "--slice", "400", "--conf", "0.3", "--json",
        ])
        let detected = try Reference.lines(detect.stdout)[0]["detections"]!
        #expect(detected.count == best["detections"]!.count && detected.count > 0)
        #expect(detected[0]["score"]!.number == best["score"]!.number)
        let merge = try CLI.run(["index", Self.folder, "--db", sliced, "--slice", "400", "--slice-merge", "nms"])
        #expect(merge.status != 0 && merge.stderr.contains("a search merges nothing"), "\(merge.stderr)")
        let other = try IndexCommandTests.scratch(["scene-0001.jpg"])
        defer { CLI.remove(other) }
        // Without --slice a later run keeps the tiles; --slice off is another setting, refused beside other folders.
        let kept = try CLI.run(["index", other + "/photos", "--db", sliced, "--plain"])
        #expect(kept.status == 0 && kept.stderr.contains("indexing with them again"), "\(kept.stderr)")
        let off = try CLI.run(["index", other + "/photos", "--db", sliced, "--plain", "--slice", "off"])
        #expect(off.status != 0 && off.stderr.contains("slicing 400x400@0.2,0.2 → none"), "\(off.stderr)")
    }

    /// detect --slice reports boxes in the photo's pixels, among them boxes that match the truth, and the same
    /// with the tiles computed side by side (lanes) as one at a time.
    @Test func detectSlicesEachPhoto() throws {
        let photos = [Self.folder + "/scene-0000.jpg", Self.folder + "/scene-0001.jpg"]
        let one = try CLI.run(["detect"] + photos + ["-q", Self.shapes, "--slice", "400", "--json", "--lanes", "1"])
        #expect(one.status == 0, "\(one.stderr)")
        let lanes = try CLI.run(["detect"] + photos + ["-q", Self.shapes, "--slice", "400", "--json", "--lanes", "2"])
        let lines = try Reference.lines(one.stdout)
        let side = try Reference.lines(lanes.stdout)
        #expect(side.map { $0["detections"]!.value.serialized } == lines.map { $0["detections"]!.value.serialized })
        #expect(lines.count == 2)
        let truth = try JSONDocument(bytes: Array(Data(contentsOf: URL(fileURLWithPath: Self.folder + "/truth.json"))))
            .root
        var matched = 0
        var objects = 0
        for (index, line) in lines.enumerated() {
            #expect(line["width"]!.int! > 1000)
            let found = line["detections"]!
            let expected = truth["images"]![index]["objects"]!
            objects += expected.count
            for k in 0..<expected.count {
                let box = (0..<4).map { Float(expected[k]["box"]![$0].number!) }
                let shape = expected[k]["label"]!.string!.split(separator: " ").last.map(String.init)!
                if (0..<found.count).contains(where: { i in
                    found[i]["label"]!.string! == shape
                        && Self.iou(box, (0..<4).map { Float(found[i]["box"]![$0].number!) }) > 0.5
                }) {
                    matched += 1
                }
            }
            let plain = try CLI.run(["detect", photos[index], "-q", Self.shapes, "--json"])
            #expect(try Reference.lines(plain.stdout)[0]["detections"]!.count < found.count)
        }
        #expect(Double(matched) > 0.6 * Double(objects), "\(matched) of \(objects) shapes found")
    }

    /// A frame of a video is sliced as a photo is: detect and track take --slice.
    @Test func videosAreSlicedFrameByFrame() throws {
        let video = CLI.root + "/examples/tracking/shapes.mp4"
        let run = try CLI.run([
            "track", video, "-q", "red circle, blue square", "--slice", "256", "--overlap", "0.25", "--json",
        ])
        #expect(run.status == 0, "\(run.stderr)")
        let frames = try Reference.lines(run.stdout)
        #expect(frames.filter { $0["frame"] != nil }.count == 72)
        var tracked: Set<String> = []
        for frame in frames {
            guard let found = frame["detections"] else { continue }
            for i in 0..<found.count where found[i]["track_id"] != nil { tracked.insert(found[i]["label"]!.string!) }
        }
        #expect(tracked == ["red circle", "blue square"])
    }

    @Test func badSliceValuesAreRefusedClearly() throws {
        let photo = Self.folder + "/scene-0000.jpg"
        let cases: [([String], String)] = [
            (["--slice", "8"], "between 32 and 65536"),
            (["--slice", "640x"], "not a tile size"),
            (["--slice", "640", "--overlap", "1"], "below 1"),
            (["--overlap", "0.3"], "go with --slice"),
            (["--slice", "auto", "--overlap", "0.3"], "brings its own overlap"),
            (["--slice", "640", "--slice-merge", "average"], "greedynmm, nmm or nms"),
            (["--slice", "640", "--slice-metric", "giou"], "ios or iou"),
            (["--slice", "640", "--tile-lanes", "0"], "from 1 to 64"),
            (["--tile-lanes", "2"], "go with --slice"),
        ]
        for (arguments, message) in cases {
            let run = try CLI.run(["detect", photo, "-q", "star"] + arguments)
            #expect(run.status != 0 && run.stderr.contains(message), "\(arguments): \(run.stderr)")
            #expect(!run.stderr.contains("Fatal error"))
        }
        // Tiles of 32 would cut the photo into more than 4096 pieces: that photo fails, and says why.
        let many = try CLI.run(["detect", photo, "-q", "star", "--slice", "32", "--overlap", "0.9"])
        #expect(many.status == 1 && many.stderr.contains("more than 4096 pieces"), "\(many.stderr)")
    }

    static func iou(_ a: [Float], _ b: [Float]) -> Float {
        let w = max(0, min(a[2], b[2]) - max(a[0], b[0]))
        let h = max(0, min(a[3], b[3]) - max(a[1], b[1]))
        let i = w * h
        return i / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - i)
    }
}
