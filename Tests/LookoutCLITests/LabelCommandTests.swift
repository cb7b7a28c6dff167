import Foundation
import LookoutJSON
import LookoutSupport
import LookoutTestSupport
import Testing

/// `lookout label`: the example scenes auto-labelled by the demo models into YOLO and COCO data sets. ultralytics'
/// own `check_det_dataset` and a one-epoch train, and pycocotools, read such data sets in
/// scripts/reference/check_label_dataset.py (torch is too large for the suite's environment); here: the layout,
/// that the labels are what `lookout detect` finds, the split, resuming, and refusals.
@Suite struct LabelCommandTests {
    static let scenes = CLI.root + "/examples/scenes"
    static let queries = "circle, square, triangle, star, hexagon, heart, cross, ring"

    static func read(_ path: String) throws -> String {
        String(decoding: try FileContents.read(path), as: UTF8.self)
    }

    @Test func yoloDataSetHoldsWhatDetectFinds() throws {
        let out = try CLI.scratch("label-yolo")
        defer { CLI.remove(out) }
        let run = try CLI.run(["label", Self.scenes, "-q", Self.queries + ", -shape@0.99", "--out", out, "--html"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("24 photos labelled"))
        let yaml = try Self.read(out + "/data.yaml")
        #expect(yaml.contains("train: images/train\nval: images/val\nnames:\n  0: \"circle\""))
        #expect(yaml.contains("  7: \"ring\"\n") && !yaml.contains("  8:"))
        let train = FileSystem.entries(of: out + "/labels/train")!.sorted()
        let val = FileSystem.entries(of: out + "/labels/val")!.sorted()
        #expect(train.count + val.count == 24 && (1...6).contains(val.count))
        for name in train + val {
            let stem = String(name.dropLast(4))
            let split = train.contains(name) ? "train" : "val"
            var info = stat()
            #expect(FileSystem.stat(out + "/images/\(split)/\(stem).jpg", &info) == 0)
        }
        // A photo's label file is lookout detect's --format yolo for it (the classes the non-negative queries).
        let detect = try CLI.scratch("label-detect")
        defer { CLI.remove(detect) }
        let photo = Self.scenes + "/scene-0001.jpg"
        let reference = try CLI.run([
            "detect", photo, "-q", Self.queries + ", -shape@0.99", "--format", "yolo", "--output", detect,
        ])
        #expect(reference.status == 0, "\(reference.stderr)")
        let split = train.contains("scene-0001.txt") ? "train" : "val"
        let labels = try Self.read(out + "/labels/\(split)/scene-0001.txt")
        let detected = try Self.read(detect + "/scene-0001.txt")
        #expect(!labels.isEmpty && labels == detected)
        let sheet = try Self.read(out + "/index.html")
        #expect(sheet.contains("scene-0001.jpg") && sheet.contains("24 photos"))
    }

    @Test func anInterruptedRunResumesAndOtherSettingsAreRefused() throws {
        let out = try CLI.scratch("label-resume")
        defer { CLI.remove(out) }
        let arguments = ["label", Self.scenes, "-q", "star, ring", "--out", out, "--val", "0.2"]
        #expect(try CLI.run(arguments).status == 0)
        let before = FileSystem.entries(of: out + "/labels/train")!.sorted()
        let kept = try FileSystem.entries(of: out + "/labels/train")!.sorted().map {
            try Self.read(out + "/labels/train/" + $0)
        }
        // As if the run had stopped before these two photos.
        _ = FileSystem.unlink(out + "/.lookout-label/scene-0004.jpg.json")
        _ = FileSystem.unlink(out + "/.lookout-label/scene-0005.jpg.json")
        let again = try CLI.run(arguments)
        #expect(again.status == 0 && again.stderr.contains("22 were labelled before and kept"), "\(again.stderr)")
        #expect(FileSystem.entries(of: out + "/labels/train")!.sorted() == before)
        let after = try before.map { try Self.read(out + "/labels/train/" + $0) }
        #expect(after == kept)
        let other = try CLI.run(["label", Self.scenes, "-q", "star", "--out", out])
        #expect(other.status != 0 && other.stderr.contains("other queries or settings"), "\(other.stderr)")
    }

    @Test func cocoDataSetWithMaskOutlines() throws {
        let out = try CLI.scratch("label-coco")
        defer { CLI.remove(out) }
        let run = try CLI.run([
            "label", Self.scenes, "-q", "circle, star, ring", "--model", "demo-yoloe", "--format", "coco", "--out", out,
        ])
        #expect(run.status == 0, "\(run.stderr)")
        var images = 0
        var outlined = 0
        for split in ["train", "val"] {
            let root = try JSONDocument(bytes: FileContents.read(out + "/annotations/instances_\(split).json")).root
            #expect(root["categories"]!.count == 3)
            let ids = Set((0..<root["images"]!.count).map { root["images"]![$0]["id"]!.int! })
            images += ids.count
            let annotations = root["annotations"]!
            for i in 0..<annotations.count {
                let a = annotations[i]
                #expect(ids.contains(a["image_id"]!.int!) && (1...3).contains(a["category_id"]!.int!))
                let box = (0..<4).map { a["bbox"]![$0].number! }
                if let polygon = a["segmentation"]?[0] {
                    outlined += 1
                    #expect(polygon.count >= 6 && polygon.count % 2 == 0)
                    for k in 0..<(polygon.count / 2) {
                        let (x, y) = (polygon[2 * k].number!, polygon[2 * k + 1].number!)
                        #expect(
                            x >= box[0] - 1 && x <= box[0] + box[2] + 1 && y >= box[1] - 1 && y <= box[1] + box[3] + 1)
                    }
                }
            }
        }
        #expect(images == 24 && outlined > 10)
    }

    /// A data set written inside the folder labelled is not labelled itself on the next run.
    @Test func theDataSetInsideThePhotosFolderIsNotAnInput() throws {
        let folder = try CLI.scratch("label-inside")
        defer { CLI.remove(folder) }
        for name in ["scene-0001.jpg", "scene-0002.jpg"] {
            try FileManager.default.copyItem(atPath: Self.scenes + "/" + name, toPath: folder + "/" + name)
        }
        let arguments = ["label", folder, "-q", "star", "--out", folder + "/dataset"]
        #expect(try CLI.run(arguments).status == 0)
        let again = try CLI.run(arguments)
        #expect(again.status == 0 && again.stderr.contains("2 photos labelled"), "\(again.stderr)")
    }

    @Test func badLabelRequestsAreRefusedClearly() throws {
        let cases: [([String], String)] = [
            (["label", Self.scenes, "-q", "star", "--out", "/tmp/x", "--format", "voc"], "yolo or coco"),
            (["label", Self.scenes, "-q", "star", "--out", "/tmp/x", "--val", "1"], "from 0 to 0.9"),
            (["label", CLI.root + "/no-such-folder", "-q", "star", "--out", "/tmp/x"], "no such file or folder"),
            (["label", Self.scenes, "-q", "-star", "--out", "/tmp/x"], "name something to find"),
        ]
        for (arguments, message) in cases {
            let run = try CLI.run(arguments)
            #expect(run.status != 0 && run.stderr.contains(message), "\(arguments): \(run.stderr)")
        }
    }
}
