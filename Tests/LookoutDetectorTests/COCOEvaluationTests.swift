import Foundation
import LookoutEngine
import LookoutJSON
import LookoutSupport
import Testing

/// `lookout eval`'s evaluator against pycocotools' COCOeval on the same detections
/// (`scripts/reference/make_coco_eval_fixtures.py`): crowd regions, images without annotations, categories
/// without detections or without ground truth, an unknown category id, ties, more than 100 detections.
@Suite struct COCOEvaluationTests {
    static let folder = NetworkParityTests.root + "/Tests/Fixtures/coco/"

    @Test(arguments: ["basic", "crowd", "sparse", "ties"])
    func equalsPycocotools(dataset: String) throws {
        let truth = try COCODataset.load(path: Self.folder + dataset + "/truth.json")
        let detections = try COCODetection.load(path: Self.folder + dataset + "/detections.json")
        let summary = try COCOEvaluation.evaluate(truth: truth, detections: detections)
        let expected = try JSONDocument(bytes: FileContents.read(Self.folder + dataset + "/expected.json")).root
        let stats = expected["stats"]!
        #expect(stats.count == 12)
        #expect((0..<12).contains { stats[$0].number! > 0 }, "the reference measured nothing")
        let worst = (0..<12).map { abs(summary.stats[$0] - stats[$0].number!) }.max()!
        print("COCO eval [\(dataset)]: max |Lookout − pycocotools| over the 12 numbers = \(worst)")
        for i in 0..<12 {
            let want = stats[i].number!
            #expect(
                abs(summary.stats[i] - want) <= 1e-4,
                "\(dataset) \(COCOEvaluation.statNames[i]): \(summary.stats[i]) against pycocotools \(want)")
        }
        let categories = expected["categories"]!
        #expect(categories.count == summary.categories.count)
        for k in 0..<min(categories.count, summary.categories.count) {
            let row = categories[k], got = summary.categories[k]
            #expect(got.id == row["id"]!.int!)
            #expect(abs(got.ap - row["ap"]!.number!) <= 1e-4, "\(dataset) category \(got.id) AP \(got.ap)")
            #expect(abs(got.ap50 - row["ap50"]!.number!) <= 1e-4, "\(dataset) category \(got.id) AP50 \(got.ap50)")
        }
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
