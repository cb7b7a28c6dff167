import ArgumentParser
import LookoutDetector
import LookoutEngine
import LookoutEvaluation
import LookoutImage
import LookoutJSON
import LookoutSupport

#if canImport(Glibc)
    import Glibc
#endif

struct EvalCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "eval",
        abstract: "How good the model is on your data: COCO mAP against COCO-format ground truth.",
        discussion: """
            Detects every category of the ground truth in every image, all categories at once as YOLO-World's \
            open-vocabulary evaluation does (with ultralytics' validator's multi-label NMS: a box may count \
            for several categories; the letterbox is predict's): a category's name is its query, and its LVIS-style "synonyms" \
            are alternatives of that query (each box takes the best score of the name and its synonyms). The \
            detections are then scored as pycocotools' COCOeval scores boxes (on the test suite's data sets the \
            same numbers within 5e-15): AP over IoU 0.50:0.95, AP50, AP75, by object size, and recall at 1, 10 and 100 \
            detections per image; then box AP per category. With a segmentation model (YOLOE) and ground truth \
            whose annotations all have a segmentation, masks are scored too, as COCOeval's iouType="segm" \
            scores them (the same numbers within 5e-15; a detection's mask at the photo's size, as \
            predict(retina_masks=True) gives it); --detections then writes each mask as compressed RLE.

            ANNOTATIONS is COCO's ground-truth format: "images" (id, file_name; width and height for \
            polygon segmentations), "annotations" (id, image_id, category_id, bbox = [x, y, width, height], \
            area, iscrowd; segmentation: polygons or RLE), "categories" (id, name, synonyms). Image files are \
            looked up as IMAGES/file_name.

            Examples:
              lookout eval instances_val2017.json --images val2017 --model yolov8s-worldv2
              lookout eval truth.json --images photos --json --detections detections.json
            """
    )

    @Argument(help: ArgumentHelp("COCO-format ground truth (JSON).", valueName: "annotations"))
    var annotations: String

    @Option(help: ArgumentHelp("Folder holding the images (file_name is relative to it).", valueName: "dir"))
    var images: String

    @OptionGroup var modelOptions: ModelOptions
    @OptionGroup var slicingOptions: SlicingOptions
    @OptionGroup var examples: ExampleOptions

    @Flag(
        help:
            "Categories with examples (--prompt-box) are found by their examples alone, not by their names as well.")
    var examplesOnly = false

    @Option(parsing: .unconditional, help: "Confidence threshold: detections scoring above it are evaluated.")
    var conf: Float = 0.001

    @Option(parsing: .unconditional, help: "IoU above which a lower-scoring box of the same category is suppressed.")
    var iou: Double = 0.7

    @Option(parsing: .unconditional, help: "At most this many detections per image.")
    var maxDet = 300

    @Option(parsing: .unconditional, help: "Network input size: the longer side is scaled to it (multiple of 32).")
    var imgsz = 640

    @Flag(help: "One JSON object with the 12 summary numbers (AP, AP50, …, AR_large) and the per-category APs.")
    var json = false

    @Option(
        help: ArgumentHelp(
            "Also write the detections in COCO's results format (for pycocotools or other tools).", valueName: "file"))
    var detections: String?

    @Flag(help: "Plain progress lines even on a terminal.")
    var plain = false

    func validate() throws {
        try ThresholdOptions.check(conf: conf, iou: iou, maxDet: maxDet, imgsz: imgsz)
        _ = try slicingOptions.options()
        if examplesOnly && examples.promptBoxes.isEmpty {
            throw ValidationError(
                "--examples-only: give the examples with --prompt-image REF.jpg --prompt-box x1,y1,x2,y2:category.")
        }
        if !examples.promptBoxes.isEmpty && examples.promptImages.isEmpty {
            throw ValidationError(
                "eval's examples are drawn on reference photos: name each with --prompt-image before its boxes.")
        }
    }

    func run() throws {
        let truth: COCODataset
        do {
            truth = try COCODataset.load(path: annotations)
        } catch {
            throw LookoutError(error.message)
        }
        var info = stat()
        guard FileSystem.stat(images, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw LookoutError("--images \(images): no such folder")
        }
        let paths = truth.images.map { images + "/" + $0.fileName }
        let missing = paths.filter { FileSystem.stat($0, &info) != 0 }
        guard missing.isEmpty else {
            let shown = missing.prefix(5).map { "  " + Report.visible($0) }.joined(separator: "\n")
            throw LookoutError(
                "\(missing.count) of the \(paths.count) images named in \(annotations) are missing under \(images):\n\(shown)"
                    + (missing.count > 5 ? "\n  …" : ""))
        }
        if let detections {
            // Refuse an unwritable output before the long work, not after (without leaving a file behind).
            let folder = detections.contains("/") ? String(detections[..<detections.lastIndex(of: "/")!]) : "."
            guard FileName.withSystemName(folder.isEmpty ? "/" : folder, { access($0, W_OK) }) == 0 else {
                throw LookoutError("--detections \(detections): its folder cannot be written")
            }
        }
        let engine = try modelOptions.engine()
        let categories = truth.categories.sorted { $0.id < $1.id }
        // A category's name and its synonyms are one query: each box takes the best of their scores.
        // Examples (--prompt-box on reference photos), labelled with category names, join their categories.
        let exampleQueries = try examplesAsQueries(engine: engine)
        for example in exampleQueries where !categories.contains(where: { $0.name == example.label }) {
            throw LookoutError(
                "--prompt-box …:\(example.label): no category of \(annotations) is named \"\(example.label)\" (the label must be a category's name)"
            )
        }
        var plan = QueryPlan()
        for category in categories {
            if examplesOnly, let example = exampleQueries.first(where: { $0.label == category.name }) {
                plan.append(label: category.name, embedding: example.embedding, asIs: example.classEmbedding)
                continue
            }
            var texts: [String] = []
            for text in [category.name] + category.synonyms {
                let trimmed = text.trimmingCharacters(in: " \t")
                if !trimmed.isEmpty && !texts.contains(trimmed) { texts.append(trimmed) }
            }
            plan.append(Query(alternatives: texts))
        }
        if !examplesOnly { engine.add(exampleQueries, to: &plan, combination: try examples.combinationChosen) }
        precondition(plan.count == categories.count)
        var options = SuppressionOptions()
        options.confidence = conf
        options.iou = iou
        options.maximumDetections = maxDet
        options.multiLabel = true  // as ultralytics' validator: a box may count for several categories

        let query = engine.prepare(plan, options: options)
        let slicing = try slicingOptions.options()
        slicingOptions.explain(slicing, confidence: conf)
        let progress = ProgressReporter(
            terminal: !plain && isatty(2) == 1, doing: "evaluating", did: "evaluated", unit: "images")
        progress.report(done: 0, total: paths.count)
        var found: [COCODetection] = []
        for (index, entry) in truth.images.enumerated() {
            let result: ImageDetections
            do {
                result = try engine.detect(
                    image: try ImageFile.read(paths[index]), name: entry.fileName, size: imgsz, slicing: slicing, query)
            } catch {
                progress.finish()
                throw LookoutError("\(error.problem) (image id \(entry.id)); nothing was evaluated")
            }
            for item in result.detections {
                var detection = COCODetection(
                    imageID: entry.id, categoryID: categories[item.queryIndex].id, corners: item.box, score: item.score)
                detection.mask = item.mask.map(COCOMask.init)
                found.append(detection)
            }
            progress.report(done: index + 1, total: paths.count)
        }
        progress.finish()
        if let detections {
            let text = JSONValue.array(found.map(\.json)).serialized + "\n"
            do {
                try FileContents.writeAtomically(Array(text.utf8), to: detections)
            } catch {
                throw LookoutError("--detections \(detections): \(error)")
            }
        }
        let summary: COCOEvaluation.Summary
        // Segmentation mAP too when the model gives masks and the ground truth has them (pycocotools'
        // iouType="segm"; polygons need each image's width and height).
        let masks =
            engine.network.segments && !truth.annotations.isEmpty
            && truth.annotations.allSatisfy { $0.segmentation != nil }
        var segmentation: COCOEvaluation.Summary? = nil
        do {
            summary = try COCOEvaluation.evaluate(truth: truth, detections: found)
            if masks { segmentation = try COCOEvaluation.evaluate(truth: truth, detections: found, iouType: .segm) }
        } catch {
            throw LookoutError(error.message)
        }
        if engine.network.segments && !masks {
            printError(
                "lookout: the ground truth has no segmentation for every annotation: boxes are evaluated, masks are not"
            )
        }
        if json {
            var fields = zip(COCOEvaluation.statNames, summary.stats).map { ($0.0, JSONValue.double($0.1)) }
            fields.append(
                (
                    "categories",
                    .array(
                        summary.categories.map { c in
                            .object([
                                ("id", .int(c.id)), ("name", .string(c.name)), ("AP", .double(c.ap)),
                                ("AP50", .double(c.ap50)), ("instances", .int(Int64(c.truth))),
                                ("detections", .int(Int64(c.detections))),
                            ])
                        })
                ))
            if let segmentation {
                var segm = zip(COCOEvaluation.statNames, segmentation.stats).map { ($0.0, JSONValue.double($0.1)) }
                segm.append(
                    (
                        "categories",
                        .array(
                            segmentation.categories.map { c in
                                .object([("id", .int(c.id)), ("AP", .double(c.ap)), ("AP50", .double(c.ap50))])
                            })
                    ))
                fields.append(("segm", .object(segm)))
            }
            fields.append(("images", .int(Int64(truth.images.count))))
            fields.append(("detections", .int(Int64(found.count))))
            print(JSONValue.object(fields).serialized)
            return
        }
        print(
            "\(truth.images.count) images, \(truth.annotations.count) annotations, \(categories.count) categories, \(found.count) detections"
        )
        if segmentation != nil { print("boxes (iouType=bbox):") }
        for line in COCOEvaluation.summaryLines(summary.stats) { print(line) }
        if let segmentation {
            print("masks (iouType=segm):")
            for line in COCOEvaluation.summaryLines(segmentation.stats) { print(line) }
        }
        print("")
        let width = min(40, max(8, summary.categories.map { Report.displayWidth($0.name) }.max() ?? 8))
        // Per category: box AP (and with masks, mask AP beside it).
        let maskAPs = segmentation?.categories
        print(
            "category".padded(to: width) + "      id  box AP    AP50"
                + (maskAPs == nil ? "" : "  mask AP    AP50") + "  instances  detections")
        for c in summary.categories {
            let ap = c.ap < 0 ? "     -" : COCOEvaluation.format3(c.ap).leftPadded(to: 6)
            let ap50 = c.ap50 < 0 ? "     -" : COCOEvaluation.format3(c.ap50).leftPadded(to: 6)
            var maskColumns = ""
            if let mask = maskAPs?.first(where: { $0.id == c.id }) {
                maskColumns =
                    "   " + (mask.ap < 0 ? "     -" : COCOEvaluation.format3(mask.ap).leftPadded(to: 6)) + "  "
                    + (mask.ap50 < 0 ? "     -" : COCOEvaluation.format3(mask.ap50).leftPadded(to: 6))
            }
            print(
                Report.visible(c.name).padded(to: width) + String(c.id).leftPadded(to: 8) + "  " + ap + "  "
                    + ap50 + maskColumns + String(c.truth).leftPadded(to: 11) + String(c.detections).leftPadded(to: 12))
        }
    }
}

extension String {
    /// Padded with spaces on the right to `width` terminal columns.
    func padded(to width: Int) -> String {
        let columns = Report.displayWidth(self)
        return columns >= width ? self : self + String(repeating: " ", count: width - columns)
    }

    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}

extension EvalCommand {
    /// The examples' queries, one per label (none without --prompt-box).
    fileprivate func examplesAsQueries(engine: Engine) throws -> [ExampleQuery] {
        let groups = try examples.groups()
        guard !groups.isEmpty else { return [] }
        // Eval's examples are all on reference photos (validate() asks for --prompt-image).
        return try examples.queries(
            groups, engine: engine, imgsz: imgsz, imageModel: nil, configuration: modelOptions.configuration,
            searched: { preconditionFailure("eval's examples are on reference photos") }, searchedPath: nil)
    }
}
