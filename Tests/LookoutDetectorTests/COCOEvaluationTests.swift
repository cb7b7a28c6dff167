import Foundation
import LookoutEngine
import LookoutEvaluation
import LookoutJSON
import LookoutSupport
import Testing

/// `lookout eval`'s evaluator against pycocotools' COCOeval on the same detections
/// (`scripts/reference/make_coco_eval_fixtures.py`): crowd regions, images without annotations, categories
/// without detections or without ground truth, an unknown category id, ties, more than 100 detections.
@Suite struct COCOEvaluationTests {
    static let folder = NetworkParityTests.root + "/Tests/Fixtures/coco/"
    /// What docs/detect-and-queries.md and `eval --help` promise: pycocotools' numbers within float64 rounding (measured 5e-15;
    /// the bound leaves room for another summation order, nothing more).
    static let bound = 1e-12

    /// `segm`: masks (`COCOeval(..., "segm")`), ground truth as polygons, uncompressed and compressed RLE.
    @Test(arguments: ["basic", "crowd", "sparse", "ties", "segm"])
    func equalsPycocotools(dataset: String) throws {
        let truth = try COCODataset.load(path: Self.folder + dataset + "/truth.json")
        let detections = try COCODetection.load(path: Self.folder + dataset + "/detections.json")
        let summary = try COCOEvaluation.evaluate(
            truth: truth, detections: detections, iouType: dataset == "segm" ? .segm : .bbox)
        let expected = try JSONDocument(bytes: FileContents.read(Self.folder + dataset + "/expected.json")).root
        let stats = expected["stats"]!
        #expect(stats.count == 12)
        #expect((0..<12).contains { stats[$0].number! > 0 }, "the reference measured nothing")
        let worst = (0..<12).map { abs(summary.stats[$0] - stats[$0].number!) }.max()!
        print("COCO eval [\(dataset)]: max |Lookout − pycocotools| over the 12 numbers = \(worst)")
        for i in 0..<12 {
            let want = stats[i].number!
            #expect(
                abs(summary.stats[i] - want) <= Self.bound,
                "\(dataset) \(COCOEvaluation.statNames[i]): \(summary.stats[i]) against pycocotools \(want)")
        }
        let categories = expected["categories"]!
        #expect(categories.count == summary.categories.count)
        for k in 0..<min(categories.count, summary.categories.count) {
            let row = categories[k], got = summary.categories[k]
            #expect(got.id == row["id"]!.int!)
            #expect(abs(got.ap - row["ap"]!.number!) <= Self.bound, "\(dataset) category \(got.id) AP \(got.ap)")
            #expect(
                abs(got.ap50 - row["ap50"]!.number!) <= Self.bound, "\(dataset) category \(got.id) AP50 \(got.ap50)")
        }
    }

    /// Polygons rasterised exactly as pycocotools' `frPyObjects` does (random polygons, a point, lines,
    /// collinear vertices, polygons past every border, half-pixel vertices): the same runs, and the compressed
    /// strings decode to them.
    @Test func polygonsRasteriseAsPycocotools() throws {
        let cases = try JSONDocument(bytes: FileContents.read(Self.folder + "segm/rasterised.json")).root
        #expect(cases.count >= 60)
        var differing = 0
        for index in 0..<cases.count {
            let item = cases[index]
            let polygonNode = item["polygon"]!, countsNode = item["counts"]!
            let polygon = (0..<polygonNode.count).map { polygonNode[$0].number! }
            let (height, width) = (Int(item["height"]!.int!), Int(item["width"]!.int!))
            let expected = (0..<countsNode.count).map { Int(countsNode[$0].int!) }
            let mask = COCOMask(polygon: polygon, height: height, width: width)
            let decoded = try COCOMask(compressed: item["compressed"]!.string!, height: height, width: width)
            #expect(decoded.counts == expected, "case \(index): compressed string")
            // pycocotools' own runs may hold zero-length runs that the dense decode merges: compare pixels.
            if mask.pixels != decoded.pixels {
                differing += 1
                Issue.record("case \(index) (\(height)×\(width), \(polygon.count / 2) vertices): pixels differ")
            }
        }
        print("rasterised \(cases.count) polygons, \(differing) differ from pycocotools")
    }

    /// Mask IoU as pycocotools' `iou`: intersection over union, over the detection's area for crowd regions.
    @Test func maskIntersectionsWalkTheRuns() throws {
        let a = COCOMask(height: 4, width: 3, pixels: [1, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1])
        let b = COCOMask(height: 4, width: 3, pixels: [0, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0, 1])
        #expect(a.area == 5 && b.area == 5)
        #expect(a.intersection(b) == 3 && b.intersection(a) == 3)
        #expect(COCOMask(height: 4, width: 3, pixels: a.pixels).counts == a.counts)
        #expect(a.pixels == [1, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1])
        let empty = COCOMask(height: 4, width: 3, pixels: [UInt8](repeating: 0, count: 12))
        #expect(empty.area == 0 && empty.intersection(a) == 0)
    }

    /// A malformed ground-truth file is an error naming the file and the field.
    @Test func malformedFilesNameTheField() throws {
        let folder = FileManager.default.temporaryDirectory.path + "/lookout-coco-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let cases: [(String, String)] = [
            (#"{"images": [], "categories": [{"id": 1, "name": "dog"}]}"#, "\"annotations\" must be an array"),
            (
                #"{"images": [{"id": 1}], "annotations": [], "categories": [{"id": 1, "name": "dog"}]}"#,
                "images[0].file_name"
            ),
            (
                #"{"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": [{"id": 1, "image_id": 1, "category_id": 5, "bbox": [0, 0, 1, 1]}], "categories": [{"id": 1, "name": "dog"}]}"#,
                "annotations[0].category_id 5 is not among the categories"
            ),
            (
                #"{"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1]}], "categories": [{"id": 1, "name": "dog"}]}"#,
                "annotations[0].bbox must be [x, y, width, height]"
            ),
            (#"[1, 2]"#, "must hold a JSON object"),
            (
                #"{"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": [], "categories": []}"#,
                "\"categories\" is empty"
            ),
        ]
        for (index, (text, message)) in cases.enumerated() {
            let path = folder + "/truth-\(index).json"
            try FileContents.writeAtomically(Array(text.utf8), to: path)
            #expect {
                _ = try COCODataset.load(path: path)
            } throws: { error in
                let description = "\(error)"
                return description.contains(message) && description.contains(path)
            }
        }
    }
}
