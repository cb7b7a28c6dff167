import LookoutEngine
import LookoutEvaluation
import LookoutJSON
import LookoutSupport

/// Detections in other tools' formats: CSV rows, one COCO dataset, YOLO label files.
enum Export {
    static let csvHeader = "image,width,height,label,query_index,score,x1,y1,x2,y2"

    /// One row per box (RFC 4180: fields with commas, quotes or line breaks quoted).
    static func csv(_ result: ImageDetections) -> String {
        func field(_ text: String) -> String {
            guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return text }
            return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
        }
        var out = ""
        for item in result.detections {
            let numbers = ([item.score] + item.box).map { "\($0)" }
            out +=
                ([
                    field(FileName.shown(result.image)), "\(result.width)", "\(result.height)", field(item.label),
                    "\(item.queryIndex)",
                ] + numbers).joined(separator: ",") + "\r\n"
        }
        return out
    }

    /// One COCO dataset: `images` (ids from 1 in the order given, file_name as given), `categories` (the
    /// queries, id = query index + 1; negative queries and the padding query left out) and `annotations` with `bbox` = [x, y, w, h]
    /// and `score` (and with a segmentation model `segmentation`, the mask as compressed RLE, and `area` its pixels).
    static func coco(_ results: [ImageDetections], labels: [String], leftOut: Set<Int>) -> JSONValue {
        var images: [JSONValue] = [], annotations: [JSONValue] = []
        for (index, result) in results.enumerated() {
            images.append(
                .object([
                    ("id", .int(Int64(index + 1))), ("file_name", .string(result.image)),
                    ("width", .int(Int64(result.width))), ("height", .int(Int64(result.height))),
                ]))
            for item in result.detections {
                let detection = COCODetection(
                    imageID: Int64(index + 1), categoryID: Int64(item.queryIndex + 1), corners: item.box,
                    score: item.score)
                var fields: [(String, JSONValue)] = [
                    ("id", .int(Int64(annotations.count + 1))), ("image_id", .int(detection.imageID)),
                    ("category_id", .int(detection.categoryID)),
                    ("bbox", .array(detection.box.map { .double($0) })),
                    ("area", .double(item.mask.map { Double($0.area) } ?? detection.box[2] * detection.box[3])),
                    ("iscrowd", .int(0)), ("score", .double(detection.score)),
                ]
                // With a segmentation model: the mask as COCO's compressed RLE, and its pixel count as the area.
                if let mask = item.mask { fields.insert(("segmentation", DetectionJSON.mask(mask)), at: 4) }
                annotations.append(.object(fields))
            }
        }
        let categories = labels.enumerated().filter { !leftOut.contains($0.offset) }.map { index, label in
            JSONValue.object([("id", .int(Int64(index + 1))), ("name", .string(label))])
        }
        return .object([
            ("images", .array(images)), ("categories", .array(categories)), ("annotations", .array(annotations)),
        ])
    }

    /// `DIR/<photo's name without extension>.txt`: a line per box, `class x_centre y_centre width height`
    /// normalised to 0–1 (six decimals), the class the query index; an image without boxes gets an empty file.
    /// Two photos of the same name in one run get -2, -3, … .
    static func writeYOLO(
        _ result: ImageDetections, source: String, into directory: String, names: inout Set<String>
    ) throws {
        let base = source == "-" ? "stdin" : String(source.split(separator: "/").last ?? "image")
        var stem = base
        if let dot = base.lastIndex(of: "."), dot != base.startIndex { stem = String(base[..<dot]) }
        var name = stem + ".txt"
        var counter = 2
        while names.contains(name) || name == "classes.txt" {
            name = "\(stem)-\(counter).txt"
            counter += 1
        }
        names.insert(name)
        let width = Double(result.width), height = Double(result.height)
        var text = ""
        for item in result.detections {
            let b = item.box.map(Double.init)
            let values = [
                (b[0] + b[2]) / 2 / width, (b[1] + b[3]) / 2 / height, (b[2] - b[0]) / width, (b[3] - b[1]) / height,
            ]
            text += "\(item.queryIndex) " + values.map(TrainingSet.fixed).joined(separator: " ") + "\n"
        }
        try FileContents.writeAtomically(Array(text.utf8), to: directory + "/" + name)
    }
}
