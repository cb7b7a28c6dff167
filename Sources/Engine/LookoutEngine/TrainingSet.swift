import LookoutJSON

/// A labelled data set as trainers read it, from detections: YOLO's layout (`images/<split>/`,
/// `labels/<split>/<stem>.txt`, `data.yaml`; YOLOE's masks as YOLO-seg polygons) or COCO's (`images/<split>/`,
/// `annotations/instances_<split>.json`). `lookout label` writes one to a folder; the server's search export packs
/// one into a ZIP archive. The photos themselves are the caller's to copy to ``imagePath(_:)``.
public struct TrainingSet: Sendable {
    public enum Format: String, Sendable, CaseIterable {
        case yolo, coco
    }

    /// One labelled thing: its class (an index into ``names``), score, box (photo pixels) and outline (the mask's
    /// polygon in photo pixels; empty without a mask).
    public struct Box: Sendable {
        public var classIndex: Int
        public var score: Float
        public var box: [Float]
        public var outline: [(x: Int, y: Int)]

        public init(classIndex: Int, score: Float, box: [Float], outline: [(x: Int, y: Int)] = []) {
            self.classIndex = classIndex
            self.score = score
            self.box = box
            self.outline = outline
        }
    }

    /// A photo of the set: its file name in the set (unique), its split (`train` or `val`), size and boxes.
    public struct Photo: Sendable {
        public var name: String
        public var split: String
        public var width: Int
        public var height: Int
        public var boxes: [Box]

        public init(name: String, split: String, width: Int, height: Int, boxes: [Box] = []) {
            self.name = name
            self.split = split
            self.width = width
            self.height = height
            self.boxes = boxes
        }
    }

    public var format: Format
    /// The class names, in class index order.
    public var names: [String]
    public var photos: [Photo] = []

    public init(format: Format, names: [String]) {
        self.format = format
        self.names = names
    }

    /// A photo's name in the set: `base` (a file name), or `stem-2.ext`, `stem-3.ext` … when a name with the same
    /// stem is taken already (case aside), so that no two photos share a label file (`a.jpg` and `a.png` would both
    /// label `a.txt`).
    public static func uniqueName(_ base: String, taken: inout Set<String>) -> String {
        let dot = base.lastIndex(of: ".").flatMap { $0 == base.startIndex ? nil : $0 } ?? base.endIndex
        let (stem, suffix) = (String(base[..<dot]), String(base[dot...]))
        var name = base
        var chosenStem = stem
        var counter = 2
        while taken.contains(chosenStem.lowercased()) {
            chosenStem = stem + "-\(counter)"
            name = chosenStem + suffix
            counter += 1
        }
        taken.insert(chosenStem.lowercased())
        return name
    }

    /// Where a photo goes in the set.
    public static func imagePath(_ photo: Photo) -> String { "images/\(photo.split)/\(photo.name)" }

    /// `train` or `val`, from a hash of the name (FNV-1a): the same name always lands in the same split, and about
    /// `fraction` of the names in `val`.
    public static func split(_ name: String, fraction: Double) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return Double(hash % 10_000) / 10_000 < fraction ? "val" : "train"
    }

    /// An outline without the points in the middle of straight runs (the same polygon, fewer numbers).
    public static func corners(_ points: [(x: Int, y: Int)]) -> [(x: Int, y: Int)] {
        guard points.count > 3 else { return points }
        return points.indices.filter { i in
            let (a, b, c) = (points[(i + points.count - 1) % points.count], points[i], points[(i + 1) % points.count])
            return (b.x - a.x) * (c.y - b.y) != (b.y - a.y) * (c.x - b.x)
        }.map { points[$0] }
    }

    /// YOLO: a photo's label file, `labels/<split>/<stem>.txt`: a line per box, `class x_centre y_centre width
    /// height` normalised to 0–1 (six decimals), or `class x1 y1 x2 y2 …` (the outline, YOLO-seg) for a box with a
    /// mask; a photo without boxes gets an empty file (a background photo).
    public static func yoloLabels(_ photo: Photo) -> (path: String, text: String) {
        let stem = photo.name.lastIndex(of: ".").map { String(photo.name[..<$0]) } ?? photo.name
        let (w, h) = (Double(photo.width), Double(photo.height))
        var text = ""
        for box in photo.boxes {
            let values: [Double]
            if box.outline.count >= 3 {
                values = box.outline.flatMap { [Double($0.x) / w, Double($0.y) / h] }
            } else {
                let b = box.box.map(Double.init)
                values = [(b[0] + b[2]) / 2 / w, (b[1] + b[3]) / 2 / h, (b[2] - b[0]) / w, (b[3] - b[1]) / h]
            }
            text += "\(box.classIndex) " + values.map(fixed).joined(separator: " ") + "\n"
        }
        return ("labels/\(photo.split)/\(stem).txt", text)
    }

    /// The files that describe the whole set, beside the photos and (YOLO) their label files: `data.yaml` (with
    /// `path:` the set's folder when given; without, ultralytics takes the file's own folder), or COCO's
    /// `annotations/instances_train.json` and `instances_val.json`. `comment`: a first line saying what made it.
    public func summaryFiles(root: String? = nil, comment: String = "") -> [(path: String, contents: [UInt8])] {
        switch format {
        case .yolo:
            var yaml = comment.isEmpty ? "" : "# \(comment.split(whereSeparator: \.isNewline).joined(separator: " "))\n"
            if let root { yaml += "path: \(Self.yamlString(root))\n" }
            yaml += "train: images/train\nval: images/val\nnames:\n"
            yaml += names.enumerated().map { "  \($0.offset): \(Self.yamlString($0.element))\n" }.joined()
            return [("data.yaml", Array(yaml.utf8))]
        case .coco:
            return ["train", "val"].map { split in
                (
                    "annotations/instances_\(split).json",
                    Array(Self.coco(photos.filter { $0.split == split }, names: names).serialized.utf8)
                )
            }
        }
    }

    /// COCO instances: images, annotations (`bbox` x, y, width, height; `segmentation` the outline when there is
    /// one; `score` kept), categories numbered from 1.
    public static func coco(_ photos: [Photo], names: [String]) -> JSONValue {
        var images: [JSONValue] = []
        var annotations: [JSONValue] = []
        for (index, photo) in photos.enumerated() {
            images.append(
                .object([
                    ("id", .int(Int64(index + 1))), ("file_name", .string(photo.name)),
                    ("width", .int(Int64(photo.width))), ("height", .int(Int64(photo.height))),
                ]))
            for box in photo.boxes {
                let b = box.box.map(Double.init)
                var fields: [(String, JSONValue)] = [
                    ("id", .int(Int64(annotations.count + 1))), ("image_id", .int(Int64(index + 1))),
                    ("category_id", .int(Int64(box.classIndex + 1))),
                    ("bbox", .array([b[0], b[1], b[2] - b[0], b[3] - b[1]].map { .double($0) })),
                    ("area", .double((b[2] - b[0]) * (b[3] - b[1]))), ("iscrowd", .int(0)),
                    ("score", .double(Double(box.score))),
                ]
                if box.outline.count >= 3 {
                    fields.append(
                        (
                            "segmentation",
                            .array([.array(box.outline.flatMap { [.double(Double($0.x)), .double(Double($0.y))] })])
                        ))
                }
                annotations.append(.object(fields))
            }
        }
        let categories = names.enumerated().map {
            JSONValue.object([("id", .int(Int64($0.offset + 1))), ("name", .string($0.element))])
        }
        return .object([
            ("images", .array(images)), ("annotations", .array(annotations)), ("categories", .array(categories)),
        ])
    }

    /// A YAML double-quoted string.
    public static func yamlString(_ text: String) -> String {
        var quoted = "\""
        for character in text {
            switch character {
            case "\\": quoted += "\\\\"
            case "\"": quoted += "\\\""
            case "\n": quoted += "\\n"
            default: quoted.append(character)
            }
        }
        return quoted + "\""
    }

    /// A normalised coordinate as YOLO label files hold it: clamped to 0–1, six decimals.
    public static func fixed(_ value: Double) -> String {
        let scaled = Int((min(max(value, 0), 1) * 1_000_000).rounded())
        let fraction = String(scaled % 1_000_000)
        return "\(scaled / 1_000_000)." + String(repeating: "0", count: 6 - fraction.count) + fraction
    }
}
