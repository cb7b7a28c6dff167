import ArgumentParser
import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutJSON
import LookoutSupport

#if canImport(Glibc)
    import Glibc
#endif

/// `lookout label`: photos auto-labelled with queries, written as a data set a trainer reads.
struct LabelCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "label",
        abstract: "Label a folder of photos with your queries and write a training data set (YOLO or COCO).",
        discussion: """
            Detects the queries in every photo (as lookout detect does: the query syntax, its per-query \
            thresholds, --conf, --slice) and writes a data set for training a closed-set detector:

              --format yolo (default): OUT/images/{train,val}/, OUT/labels/{train,val}/ (a .txt per photo: \
            "class x_centre y_centre width height" normalised; with a YOLOE model "class x1 y1 x2 y2 …", each \
            mask's outline as YOLO-seg polygons) and OUT/data.yaml (path, train, val, names), as ultralytics \
            trains from.
              --format coco: OUT/images/{train,val}/ and OUT/annotations/instances_{train,val}.json (boxes as \
            [x, y, width, height], a score per box, masks as polygons).

            --val 0.1 puts about a tenth of the photos (chosen by their names, so the same photo always goes the \
            same way) into the validation split. Negative queries (-person) remove boxes and are no class. \
            Photos are copied (hard-linked where the file system allows). An interrupted run resumes: photos \
            already labelled with the same queries and settings are skipped. --html writes OUT/index.html, a \
            contact sheet of every photo with its boxes, to review the labels at a glance.

            Examples:
              lookout label photos -q "dog, cat@0.4, -person" --out dataset
              lookout label drone -q "car, truck" --slice 640 --format coco --out cars --html
            """
    )

    @Argument(help: "Folders (walked for JPEG and PNG files) or photo files.")
    var inputs: [String]

    @Option(
        name: [.customShort("q"), .long], parsing: .unconditional,
        help: "Comma-separated queries in Lookout's syntax (each non-negative query is a class, in order).")
    var queries: String

    @Option(help: ArgumentHelp("The data set's folder (created; a run into it again resumes).", valueName: "dir"))
    var out: String

    @Option(help: ArgumentHelp("yolo or coco.", valueName: "format"))
    var format: String = "yolo"

    @Option(help: ArgumentHelp("The fraction of photos in the validation split (0 to 0.9).", valueName: "fraction"))
    var val: Double = 0.1

    @Flag(help: "Also write OUT/index.html, a contact sheet of the photos with their boxes.")
    var html = false

    @OptionGroup var modelOptions: ModelOptions
    @OptionGroup var slicingOptions: SlicingOptions
    @OptionGroup var thresholds: ThresholdOptions

    func validate() throws {
        guard ["yolo", "coco"].contains(format) else { throw ValidationError("--format \(format): give yolo or coco.") }
        guard val >= 0 && val <= 0.9 else { throw ValidationError("--val is a fraction from 0 to 0.9 (0.1: a tenth).") }
        if inputs.isEmpty { throw ValidationError("Give the folders or photos to label.") }
        _ = try slicingOptions.options()
    }

    /// One photo's labels, as the run keeps them (for resuming and for COCO's files).
    typealias Labelled = TrainingSet.Photo

    func run() throws {
        let (typed, empty) = try QuerySyntax.parseLine(queries)
        if empty > 0 { printError("lookout: ignoring \(empty) empty quer\(empty == 1 ? "y" : "ies")") }
        do {
            try QuerySyntax.check(typed)
        } catch {
            throw ValidationError(error.message)
        }
        guard !typed.isEmpty else { throw ValidationError("no queries: -q needs at least one") }
        let slicing = try slicingOptions.options()
        let engine = try modelOptions.engine()
        let plan = QueryPlan(typed)
        // Classes: the non-negative queries, in order.
        let classes = plan.labels.indices.filter { !plan.negatives.contains($0) }
        let names = classes.map { plan.labels[$0] }
        // The data set's own folder is never an input (a run into a folder inside the photos' would label its copies).
        let photos = try Self.photos(inputs, skipping: out)
        guard !photos.isEmpty else { throw LookoutError("no JPEG or PNG photos in \(inputs.joined(separator: ", "))") }
        // The settings a resumed run must share: the model, the queries, thresholds, slicing, format, split.
        let settings = [
            engine.network.path, engine.arithmetic, queries, "\(thresholds.options(for: engine.network))",
            "\(thresholds.imgsz)", "\(String(describing: slicing))", format, "\(val)",
        ].joined(separator: "\n")
        let state = out + "/.lookout-label"
        try FileContents.makeDirectories(state)
        if let previous = try? FileContents.read(state + "/settings", maximumSize: 1 << 20),
            String(decoding: previous, as: UTF8.self) != settings
        {
            throw LookoutError(
                "\(out) holds a data set labelled with other queries or settings: give a new --out, or remove \(out) first"
            )
        }
        try FileContents.writeAtomically(Array(settings.utf8), to: state + "/settings")
        for split in ["train", "val"] {
            try FileContents.makeDirectories(out + "/images/" + split)
            if format == "yolo" { try FileContents.makeDirectories(out + "/labels/" + split) }
        }
        // A query's own threshold (cat@0.4) is applied by prepare.
        let query = engine.prepare(plan, options: thresholds.options(for: engine.network))
        slicingOptions.explain(slicing, confidence: query.options.confidence)
        let progress = ProgressReporter(
            terminal: isatty(2) == 1, doing: "labelling", did: "labelled", unit: "photos")
        var labelled: [Labelled] = []
        var resumed = 0
        var failures = 0
        for (number, photo) in photos.enumerated() {
            progress.report(done: number, total: photos.count)
            let record = state + "/" + photo.name + ".json"
            if let bytes = try? FileContents.read(record, maximumSize: 64 << 20), let kept = Self.decode(bytes) {
                labelled.append(kept)
                resumed += 1
                continue
            }
            let result: ImageDetections
            do {
                result = try engine.detect(path: photo.path, size: thresholds.imgsz, slicing: slicing, query)
            } catch {
                failures += 1
                printError("lookout: \(error)")
                continue
            }
            let split = TrainingSet.split(photo.name, fraction: val)
            var item = Labelled(name: photo.name, split: split, width: result.width, height: result.height)
            for detection in result.detections {
                guard let classIndex = classes.firstIndex(of: detection.queryIndex) else { continue }
                let outline = TrainingSet.corners(detection.mask?.outline() ?? [])
                item.boxes.append(
                    TrainingSet.Box(
                        classIndex: classIndex, score: detection.score, box: detection.box, outline: outline))
            }
            try Self.copy(photo.path, to: out + "/" + TrainingSet.imagePath(item))
            if format == "yolo" {
                let (path, text) = TrainingSet.yoloLabels(item)
                try FileContents.writeAtomically(Array(text.utf8), to: out + "/" + path)
            }
            // The record last: a photo counts as labelled once its files are there.
            try FileContents.writeAtomically(Array(Self.encode(item).utf8), to: record)
            labelled.append(item)
        }
        progress.finish()
        var set = TrainingSet(format: format == "yolo" ? .yolo : .coco, names: names)
        set.photos = labelled
        if format == "coco" { try FileContents.makeDirectories(out + "/annotations") }
        for (path, contents) in set.summaryFiles(
            root: FileSystem.realpath(out) ?? out, comment: "Written by lookout label: \(queries)")
        {
            try FileContents.writeAtomically(contents, to: out + "/" + path)
        }
        if html {
            try FileContents.writeAtomically(
                Array(Self.contactSheet(labelled, names: names).utf8), to: out + "/index.html")
        }
        let boxes = labelled.reduce(0) { $0 + $1.boxes.count }
        let validation = labelled.filter { $0.split == "val" }.count
        printError(
            "lookout: \(labelled.count) photos labelled (\(labelled.count - validation) train, \(validation) val), \(boxes) boxes in \(names.count) classes"
                + (resumed > 0 ? "; \(resumed) were labelled before and kept" : "") + " → \(out)")
        if failures > 0 {
            printError("lookout: \(failures) of \(photos.count) photos could not be read")
            if labelled.isEmpty { throw ExitCode.failure }
            throw ExitCode.partialFailure
        }
    }

    /// The photos under the inputs (folders walked, hidden names skipped), each with a unique flat name.
    static func photos(_ inputs: [String], skipping: String? = nil) throws -> [(path: String, name: String)] {
        let skipped = skipping.flatMap { FileSystem.realpath($0) }
        var found: [String] = []
        for input in inputs {
            if FileSystem.isDirectory(input) {
                var pending = [input]
                var folders = 0
                while let folder = pending.popLast() {
                    folders += 1
                    guard folders < 100_000 else { break }
                    guard let entries = FileSystem.entries(of: folder) else {
                        throw LookoutError("\(folder): the folder cannot be read")
                    }
                    for entry in entries.sorted() where !entry.hasPrefix(".") {
                        let path = folder + "/" + entry
                        if FileSystem.isDirectory(path) {
                            if let skipped, FileSystem.realpath(path) == skipped { continue }
                            pending.append(path)
                        } else if [".jpg", ".jpeg", ".png"].contains(where: { entry.lowercased().hasSuffix($0) }) {
                            found.append(path)
                        }
                    }
                }
            } else {
                var info = stat()
                guard FileSystem.stat(input, &info) == 0 else { throw LookoutError("\(input): no such file or folder") }
                found.append(input)
            }
        }
        var used: Set<String> = []
        return found.sorted().map { path in
            (path, TrainingSet.uniqueName(String(path.split(separator: "/").last ?? "photo"), taken: &used))
        }
    }

    static func copy(_ from: String, to: String) throws {
        _ = FileSystem.unlink(to)
        let linked = FileName.withSystemName(from) { source in FileName.withSystemName(to) { Glibc.link(source, $0) } }
        if linked == 0 { return }
        try FileContents.writeAtomically(try FileContents.read(from, maximumSize: 1 << 32), to: to)
    }

    static func encode(_ item: Labelled) -> String {
        JSONValue.object([
            ("name", .string(item.name)), ("split", .string(item.split)), ("width", .int(Int64(item.width))),
            ("height", .int(Int64(item.height))),
            (
                "boxes",
                .array(
                    item.boxes.map { box in
                        .object([
                            ("class", .int(Int64(box.classIndex))), ("score", .double(Double(box.score))),
                            ("box", .array(box.box.map { .double(Double($0)) })),
                            ("outline", .array(box.outline.flatMap { [.int(Int64($0.x)), .int(Int64($0.y))] })),
                        ])
                    })
            ),
        ]).serialized
    }

    static func decode(_ bytes: [UInt8]) -> Labelled? {
        guard let root = try? JSONDocument(bytes: bytes).root, let name = root["name"]?.string,
            let split = root["split"]?.string, let width = root["width"]?.int, let height = root["height"]?.int,
            let boxes = root["boxes"]
        else { return nil }
        var item = Labelled(name: name, split: split, width: Int(width), height: Int(height), boxes: [])
        for i in 0..<boxes.count {
            let node = boxes[i]
            guard let classIndex = node["class"]?.int, let score = node["score"]?.number, let box = node["box"],
                box.count == 4, let outline = node["outline"]
            else { return nil }
            let values = (0..<4).compactMap { box[$0].number.map(Float.init) }
            let points = (0..<(outline.count / 2)).compactMap { k -> (x: Int, y: Int)? in
                guard let x = outline[2 * k].int, let y = outline[2 * k + 1].int else { return nil }
                return (Int(x), Int(y))
            }
            guard values.count == 4 else { return nil }
            item.boxes.append(
                TrainingSet.Box(classIndex: Int(classIndex), score: Float(score), box: values, outline: points))
        }
        return item
    }

    /// A page of every photo with its boxes drawn over it (percentages of the photo, so any width works).
    static func contactSheet(_ items: [Labelled], names: [String]) -> String {
        func escaped(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: "\"", with: "&quot;")
        }
        let colours = ["#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6", "#9a6324"]
        var cells = ""
        for item in items {
            var boxes = ""
            for box in item.boxes {
                let b = box.box
                let (w, h) = (Float(item.width), Float(item.height))
                let colour = colours[box.classIndex % colours.count]
                boxes +=
                    "<div class=\"b\" style=\"left:\(b[0] / w * 100)%;top:\(b[1] / h * 100)%;width:\((b[2] - b[0]) / w * 100)%;height:\((b[3] - b[1]) / h * 100)%;border-color:\(colour)\"><span style=\"background:\(colour)\">\(escaped(names[box.classIndex])) \(String(format: "%.2f", box.score))</span></div>"
            }
            cells +=
                "<figure><div class=\"p\"><img src=\"images/\(item.split)/\(escaped(item.name))\" loading=\"lazy\">\(boxes)</div><figcaption>\(escaped(item.name)) · \(item.split) · \(item.boxes.count) boxes</figcaption></figure>\n"
        }
        return """
            <!doctype html><html><head><meta charset="utf-8"><title>Labels</title><style>
            body{font:13px sans-serif;margin:12px}main{display:flex;flex-wrap:wrap;gap:10px}
            figure{margin:0;width:280px}.p{position:relative}.p img{width:100%;display:block}
            .b{position:absolute;border:2px solid;box-sizing:border-box}
            .b span{position:absolute;top:-15px;left:-2px;color:#fff;font-size:10px;padding:0 2px;white-space:nowrap}
            figcaption{color:#555;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
            </style></head><body><h1>\(items.count) photos, \(items.reduce(0) { $0 + $1.boxes.count }) boxes</h1><main>
            \(cells)</main></body></html>
            """
    }
}
