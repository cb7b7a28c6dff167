import Foundation
import LookoutImage
import LookoutJSON
import LookoutSupport
import Testing

/// The demo model's image tower through the command line: scene search, `similar`, `duplicates`, and photos
/// as queries (`detect --query-image`, `@crop.jpg` in `query`). The tower's numbers are checked against
/// OpenAI's VisionTransformer in `ImageEncoderParityTests`; these tests check what the commands make of them.
@Suite struct ImageTowerCommandTests {
    static let truth = try! JSONDocument(bytes: FileContents.read(CLI.root + "/examples/scenes/truth.json")).root

    /// The truth entry of an example scene.
    static func scene(_ name: String) -> JSONNode {
        let images = truth["images"]!
        return (0..<images.count).map { images[$0] }.first { $0["file"]!.string! == name }!
    }

    static func name(_ path: String) -> String { String(path.split(separator: "/").last!) }

    /// A folder of eight example scenes, a byte-for-byte copy of one and a re-encoded copy of another:
    /// `duplicates` finds exactly those two pairs (default threshold: the one the demo tower's file records),
    /// `similar` ranks the copy right after the photo, and the whole-photo evidence answers background
    /// captions, which no detector region can.
    @Test func demoTowerScenesSimilarAndDuplicates() throws {
        let folder = try IndexCommandTests.scratch((1...8).map { String(format: "scene-%04d.jpg", $0) })
        defer { CLI.remove(folder) }
        let photos = folder + "/photos/"
        try FileManager.default.copyItem(atPath: photos + "scene-0001.jpg", toPath: photos + "same-bytes.jpg")
        let reencoded = try CLI.run(
            ["detect", photos + "scene-0004.jpg", "-q", "nothing", "--conf", "0.99", "--save", folder + "/copy"])
        #expect(reencoded.status == 0, "\(reencoded.stderr)")
        try FileManager.default.moveItem(atPath: folder + "/copy/scene-0004.jpg", toPath: photos + "reencoded.jpg")
        let db = folder + "/index.sqlite"
        let indexed = try CLI.run(["index", photos, "--db", db, "--plain"])
        #expect(indexed.status == 0 && indexed.stderr.contains("10 photos indexed"), "\(indexed.stderr)")

        let duplicates = try CLI.run(["duplicates", "--db", db, "--json"])
        #expect(duplicates.status == 0, "\(duplicates.stderr)")
        let groups = try Reference.lines(duplicates.stdout).map { group in
            let members = group["photos"]!
            return Set((0..<members.count).map { Self.name(members[$0]["image"]!.string!) })
        }
        #expect(
            Set(groups) == [["scene-0001.jpg", "same-bytes.jpg"], ["scene-0004.jpg", "reencoded.jpg"]],
            "\(duplicates.stdout)")
        // Threshold −1 links everything; out of range is a usage error.
        let all = try Reference.lines(try CLI.run(["duplicates", "--db", db, "--json", "--threshold", "-1"]).stdout)
        #expect(all.count == 1 && all[0]["photos"]!.count == 10)
        #expect(try CLI.run(["duplicates", "--db", db, "--threshold", "1.5"]).status == 64)

        let similar = try Reference.lines(
            try CLI.run(["similar", photos + "scene-0004.jpg", "--db", db, "--json", "--top", "3"]).stdout)
        #expect(similar.map { Self.name($0["image"]!.string!) }.prefix(2) == ["scene-0004.jpg", "reencoded.jpg"])

        // Background captions: the best scene-evidence photo has that background.
        for (kind, caption) in [("plain", "plain background"), ("textured", "textured background")] {
            let having = (1...8).filter {
                Self.scene(String(format: "scene-%04d.jpg", $0))["background"]!.string! == kind
            }
            guard !having.isEmpty else { continue }
            let found = try Reference.lines(
                try CLI.run(["search", caption, "--db", db, "--json", "--scenes", "--conf", "0"]).stdout)
            let top = Self.name(found[0]["image"]!.string!)
            let background = Self.scene(top.hasPrefix("scene-") ? top : "scene-0001.jpg")["background"]!.string!
            #expect(
                found[0]["evidence"]!.string! == "scenes"
                    && (top == "same-bytes.jpg" || top == "reencoded.jpg" || background == kind),
                "\(caption): \(top) has a \(background) background")
        }

        // Objects only: no whole-photo embeddings, and the commands that need them say so.
        let plain = folder + "/plain.sqlite"
        #expect(try CLI.run(["index", photos, "--db", plain, "--plain", "--no-image-model"]).status == 0)
        let refused = try CLI.run(["duplicates", "--db", plain])
        #expect(refused.status == 1 && refused.stderr.contains("no whole-photo embeddings"), "\(refused.stderr)")
    }

    /// A crop of one object, written as a JPEG: a photo query finds that object again in its scene (the box
    /// overlaps the object's true box), `query` gives the same answer for `@crop.jpg`, and a crop that
    /// cannot be read, or a file without an image tower, is a clear error.
    @Test func photosAsQueries() throws {
        let folder = try CLI.scratch("photo-queries")
        defer { CLI.remove(folder) }
        let sceneName = "scene-0003.jpg"
        let scenePath = CLI.root + "/examples/scenes/" + sceneName
        let objects = Self.scene(sceneName)["objects"]!
        let boxes = (0..<objects.count).map { Reference.numbers(objects[$0]["box"]!) }
        let box = boxes.max { ($0[2] - $0[0]) * ($0[3] - $0[1]) < ($1[2] - $1[0]) * ($1[3] - $1[1]) }!
        let image = try ImageFile.read(scenePath)
        let (x0, y0) = (Int(box[0]), Int(box[1]))
        let (w, h) = (Int(box[2]) - x0, Int(box[3]) - y0)
        var pixels: [UInt8] = []
        for y in y0..<(y0 + h) {
            let start = (y * image.width + x0) * 3
            pixels += image.pixels[start..<(start + 3 * w)]
        }
        let crop = folder + "/my-crop.jpg"
        try ImageFile.write(Image(width: w, height: h, pixels: pixels), to: crop)

        let detected = try CLI.run(["detect", scenePath, "--query-image", crop, "--json"])
        #expect(detected.status == 0, "\(detected.stderr)")
        let detections = try Reference.lines(detected.stdout)[0]["detections"]!
        #expect(detections.count > 0)
        let first = detections[0]
        #expect(first["label"]!.string! == "my-crop.jpg")
        #expect(Self.iou(Reference.numbers(first["box"]!), box) > 0.5, "\(detected.stdout)")

        let asked = try CLI.run(["query", scenePath, "--json"], input: "@\(crop)\n")
        #expect(asked.status == 0, "\(asked.stderr)")
        let answer = try Reference.lines(asked.stdout)[0]["detections"]!
        #expect(answer.count == detections.count)
        #expect(abs(answer[0]["score"]!.number! - first["score"]!.number!) < 1e-6)

        let missing = try CLI.run(["detect", scenePath, "--query-image", folder + "/absent.jpg"])
        #expect(missing.status == 1 && missing.stderr.contains("absent.jpg"), "\(missing.stderr)")
        let textOnly = CLI.root + "/Models/demo/text-encoder.safetensors"
        let wrong = try CLI.run(["detect", scenePath, "--query-image", crop, "--image-model", textOnly])
        #expect(wrong.status == 1 && wrong.stderr.contains("no CLIP image tower"), "\(wrong.stderr)")
        let noQueries = try CLI.run(["detect", scenePath])
        #expect(noQueries.status == 64 && noQueries.stderr.contains("--query-image"), "\(noQueries.stderr)")
    }

    static func iou(_ a: [Double], _ b: [Double]) -> Double {
        let w = max(0, min(a[2], b[2]) - max(a[0], b[0])), h = max(0, min(a[3], b[3]) - max(a[1], b[1]))
        let inter = w * h
        return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)
    }
}
