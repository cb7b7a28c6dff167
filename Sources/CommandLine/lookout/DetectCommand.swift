import ArgumentParser
import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutJSON
import LookoutSupport
import LookoutTensor
import LookoutTextEncoder
import LookoutVideo
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

struct DetectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "detect",
        abstract: "Find what you describe in photos and videos.",
        discussion: """
            Queries are comma-separated ("dog, red car"), or one per line in --queries-file. Results match \
            ultralytics YOLO-World predict: letterbox, text-guided network, class-aware NMS, boxes in the \
            photo's pixels.

            Without --model or --detector/--text-model, the demo model in Models/demo is used: it knows \
            coloured shapes only.

            Examples:
              lookout detect examples/scenes/scene-0001.jpg -q "green star, blue circle, ring" --save out
              lookout detect --model yolov8s-worldv2 photo.jpg -q "dog, red car"
              lookout detect --model yolov8s-worldv2 *.jpg -q person --conf 0.1 --json
              lookout detect photos/*.jpg -q "sofa|couch, dog@0.4, -cat" --format csv > boxes.csv
              lookout detect photos/*.jpg --queries-file classes.txt --format yolo --output labels
              lookout detect drone.jpg -q "car, person" --slice 640 --overlap 0.2   (small objects: tiles)
              lookout detect clip.mp4 -q "dog, ball" --fps 2 --json > frames.jsonl
              lookout detect clip.mp4 -q "dog" --save out   (out/clip.mp4: every frame, boxes drawn)
            """
    )

    @Argument(
        help:
            "JPEG or PNG files, videos (MP4, MOV, MKV, WebM, AVI: a line per processed frame) or a camera (/dev/video0); - reads one image from standard input."
    )
    var images: [String]

    @OptionGroup var frameOptions: FrameOptions
    @OptionGroup var streamOptions: StreamOptions

    @Option(
        name: [.customShort("q"), .long], parsing: .unconditional,
        help:
            "Comma-separated queries in Lookout's syntax: sofa|couch (alternatives), dog@0.4 (its own threshold), -person (negative: never reported, removes the boxes it outscores), \\, \\| \\@ \\- for the characters."
    )
    var queries: String?

    @Option(
        help: ArgumentHelp(
            "A file with one query per line in the syntax of -q, commas being text there (- reads standard input).",
            valueName: "path"))
    var queriesFile: String?

    @Option(
        name: .customLong("query-image"),
        help: ArgumentHelp(
            "A photo of what to find (crop it to the object): its CLIP image embedding is the query, labelled with its file name. Repeatable; with or without -q.",
            valueName: "path"))
    var queryImages: [String] = []

    @OptionGroup var examples: ExampleOptions

    /// `x1,y1,x2,y2[:label]` values as prompts (label "object" by default).
    static func visualPrompts(_ promptBoxes: [String]) throws -> [VisualPrompt] {
        try promptBoxes.map { text in
            let (numbers, label) =
                text.firstIndex(of: ":").map { (text[..<$0], String(text[text.index(after: $0)...])) }
                ?? (Substring(text), "object")
            let values = numbers.split(separator: ",", omittingEmptySubsequences: false).map {
                Float($0.trimmingCharacters(in: .whitespaces))
            }
            guard values.count == 4, values.allSatisfy({ $0 != nil && $0!.isFinite }),
                values[2]! > values[0]!, values[3]! > values[1]!,
                !label.trimmingCharacters(in: .whitespaces).isEmpty
            else {
                throw ValidationError(
                    "--prompt-box \(text): expected x1,y1,x2,y2[:label] with x1 < x2 and y1 < y2 (pixels), e.g. 120,40,260,310:dog"
                )
            }
            return VisualPrompt(box: values.map { $0! }, label: label.trimmingCharacters(in: .whitespaces))
        }
    }

    @OptionGroup var modelOptions: ModelOptions
    @OptionGroup var slicingOptions: SlicingOptions
    @OptionGroup var thresholds: ThresholdOptions
    @OptionGroup var queryThresholds: QueryThresholdOptions
    @OptionGroup var imagePromptOptions: ImagePromptOptions
    @OptionGroup var textEmbeddings: TextEmbeddingOptions

    @Flag(help: "One JSON object per image per line instead of a table (the same as --format json).")
    var json = false

    @Option(
        help: ArgumentHelp(
            "table, json (a line per image), csv (a row per box), coco (one COCO dataset with scores, at the end) or yolo (a .txt per image in --output, normalised boxes, the query index as class).",
            valueName: "format"))
    var format: OutputFormat?

    @Option(help: ArgumentHelp("The folder --format yolo writes into (created if needed).", valueName: "dir"))
    var output: String?

    enum OutputFormat: String, ExpressibleByArgument, CaseIterable {
        case table, json, csv, coco, yolo
    }

    /// What is printed: --format, or --json.
    var chosenFormat: OutputFormat { format ?? (json ? .json : .table) }

    @Option(
        help: ArgumentHelp(
            "Write each image with its boxes drawn into this folder (created if needed), as JPEG or PNG like the input; a name already taken gets -2, -3, … (no file is ever replaced, the photos included).",
            valueName: "dir"))
    var save: String?

    @Flag(
        help:
            "Every query above its threshold at a place is a box, not only the best one (ultralytics' validator; lookout eval uses it)."
    )
    var multiLabel = false

    @Flag(
        help:
            "Append the \" \" padding query of the official YOLO-World demos (changes the other scores); its boxes are not shown."
    )
    var pad = false

    @Option(
        help: ArgumentHelp(
            "Images computed at once when there are several, each on one thread (default: one per CPU; 1 computes one at a time with every core). Results are printed in the order given.",
            valueName: "n"))
    var lanes: Int?

    func validate() throws {
        if images.isEmpty { throw ValidationError("Give at least one image.") }
        if let lanes, !(1...64).contains(lanes) { throw ValidationError("--lanes must be between 1 and 64.") }
        if queries != nil && queriesFile != nil {
            throw ValidationError("Give the queries with -q \"a, b\" or --queries-file FILE, not both.")
        }
        // A --detector may be prompt-free (YOLOE -pf), which takes no queries: run() tells once it is loaded.
        if !hasQueries && modelOptions.detector == nil { throw ValidationError(Self.noQueries) }
        _ = try slicingOptions.options()
        if images.filter({ $0 == "-" }).count > 1 {
            throw ValidationError("- (an image from standard input) can be given once.")
        }
        if images.contains("-") && queriesFile == "-" {
            throw ValidationError("Standard input can hold the image or the queries, not both (- twice).")
        }
        if json && format != nil && format != .json {
            throw ValidationError("--json is --format json: give one format.")
        }
        if chosenFormat == .yolo && output == nil {
            throw ValidationError("--format yolo writes a .txt per image: name the folder with --output DIR.")
        }
        if output != nil && chosenFormat != .yolo {
            throw ValidationError("--output is the folder of --format yolo; other formats print to standard output.")
        }
    }

    var hasQueries: Bool {
        queries != nil || queriesFile != nil || !queryImages.isEmpty || textEmbeddings.path != nil
            || !examples.promptBoxes.isEmpty
    }

    static let noQueries =
        "Give the queries with -q \"a, b\", --queries-file FILE, --query-image CROP.jpg, --text-embeddings FILE or --prompt-box x1,y1,x2,y2 (YOLOE)."

    func run() throws {
        let slicing = try slicingOptions.options()
        let typed = queries == nil && queriesFile == nil ? [] : try queryList()
        var plan = QueryPlan(typed)
        if pad && !typed.contains(where: { $0.alternatives == [PaddingQuery.text] }) {
            plan.append(Query(PaddingQuery.text))
        }
        do throws(QuerySyntaxError) {
            try QuerySyntax.check(typed, others: queryImages.count, added: plan.count - typed.count)
        } catch {
            throw ValidationError(error.message)
        }
        let engine = try modelOptions.engine(
            textEmbeddings: textEmbeddings.path != nil || !examples.promptBoxes.isEmpty, promptFree: true)
        if let names = engine.network.promptFreeNames {
            guard !hasQueries && !pad else {
                throw ValidationError(
                    "\(modelOptions.detector ?? "the detector") is a prompt-free model: it names what it sees with its own \(names.count) names and takes no queries (-q, --queries-file, --query-image, --text-embeddings, --pad)."
                )
            }
            plan = .promptFree(names)
        } else if !hasQueries {
            throw ValidationError(Self.noQueries)
        }
        try textEmbeddings.apply(to: &plan, typed: !typed.isEmpty, engine: engine)
        warnAboutLongQueries(plan.texts, engine: engine)
        let textQueries = plan.count
        for prompt in try imagePromptOptions.embed(queryImages, model: modelOptions, engine: engine) {
            plan.append(label: prompt.label, embedding: prompt.embedding)
        }
        // Photo queries (--query-image) have their own threshold; visual prompts take the global one, as
        // ultralytics' predict gives them.
        let photoQueries = textQueries..<plan.count
        // Boxes drawn on the one photo searched: its features serve the prompts and the detection alike.
        var promptPhoto: PreparedImage? = nil
        var cropQueries: [Int] = []
        let groups = try examples.groups()
        if !groups.isEmpty {
            if groups[0].image == nil {
                guard images.count == 1, images[0] != "-", !VideoDetection.isVideo(images[0]) else {
                    throw ValidationError(
                        "--prompt-box without --prompt-image draws on the photo searched: give one photo, or name the photo the boxes are drawn on with --prompt-image REF.jpg."
                    )
                }
            }
            let queries = try examples.queries(
                groups, engine: engine, imgsz: thresholds.imgsz, imageModel: imagePromptOptions.imageModel,
                configuration: modelOptions.configuration,
                searched: {
                    let prepared = try engine.prepare(path: images[0], size: thresholds.imgsz)
                    promptPhoto = prepared
                    return prepared
                }, searchedPath: images.first)
            // YOLO-World's crop queries of their own (labels not typed) take --image-query-conf, as photo queries.
            let before = plan.count
            let typedLabels = Set(plan.labels)
            engine.add(queries, to: &plan, combination: try examples.combinationChosen)
            if queries.contains(where: { !$0.classEmbedding }) {
                cropQueries = (before..<plan.count).filter { !typedLabels.contains(plan.labels[$0]) }
            }
        }
        if engine.embedder == nil, let typed = plan.texts.indices.first(where: { plan.embedded[$0] == nil }) {
            throw ValidationError(
                "\"\(plan.texts[typed])\" is typed: typed queries need the detector's text tower (--text-model FILE) or its embeddings in --text-embeddings FILE."
            )
        }
        // Thresholds: the global one, a query's own (dog@0.4, applied by prepare), then --query-conf; photo
        // queries their own.
        var query = engine.prepare(plan, options: thresholds.options(for: engine.network))
        query.options = try queryThresholds.apply(to: query.options, queries: plan.labels)
        query.options.multiLabel = multiLabel
        slicingOptions.explain(slicing, confidence: query.options.confidence)
        for index in Array(photoQueries) + cropQueries where query.options.perClassConfidence[index] == nil {
            query.options.perClassConfidence[index] = imagePromptOptions.imageQueryConf
        }
        var failures = 0
        var saveFailures = 0
        var savedNames: Set<String> = []
        if let save { try FileContents.makeDirectories(save) }
        var wroteHeader = false
        var collected: [ImageDetections] = []
        var labelNames: Set<String> = []
        if chosenFormat == .yolo, let output {
            try FileContents.makeDirectories(output)
            // The class names, one per line in query order (the class of a box is its query index).
            let names = plan.labels.map { $0.replacingOccurrences(of: "\n", with: " ") }.joined(separator: "\n") + "\n"
            try FileContents.writeAtomically(Array(names.utf8), to: output + "/classes.txt")
        }
        // Several images: computed side by side, one per lane (an engine with one thread each), and taken
        // here in the order given. Standard input is read here, one image at a time.
        // Videos are read frame by frame with every core; photos go to the lanes (`photos` numbers them).
        let videos = images.map { $0 != "-" && VideoDetection.isVideo($0) }
        let photos = images.indices.filter { !videos[$0] }
        if videos.contains(true) && ![.table, .json].contains(chosenFormat) {
            throw ValidationError(
                "Video frames print as a table or as JSON lines (--json); not as --format \(chosenFormat).")
        }
        let laneCount = images.contains("-") ? 1 : min(lanes ?? ComputePool.availableCPUs(), photos.count)
        let imgsz = thresholds.imgsz
        let sideBySide: LanePipeline<Result<ImageDetections, ImageError>>? =
            laneCount > 1
            ? LanePipeline(count: photos.count, lanes: laneCount) {
                let own = engine.sharingWeights(pool: ComputePool(threads: 1))
                return { index in
                    do throws(ImageError) {
                        return .success(
                            try own.detect(path: images[photos[index]], size: imgsz, slicing: slicing, query))
                    } catch {
                        return .failure(error)
                    }
                }
            } : nil
        var photoNumber = 0
        for (index, path) in images.enumerated() {
            if videos[index] {
                let video = VideoDetection(
                    path: path, engine: engine, query: query, imgsz: imgsz, slicing: slicing,
                    selection: frameOptions.selection, format: chosenFormat,
                    pad: pad,
                    saveTo: save.map {
                        Self.unusedName(
                            for: String(path.split(separator: "/").last ?? "video"), extension: ".mp4", in: $0,
                            names: &savedNames)
                    }, progress: isatty(2) == 1, timeout: streamOptions.timeout, reconnects: streamOptions.reconnect)
                do {
                    try video.run()
                } catch {
                    failures += 1
                    printError("lookout: \(error)")
                    if chosenFormat == .json {
                        print(
                            JSONValue.object([
                                ("video", .string(URLText.redacted(path))), ("error", .string(error.problem)),
                            ])
                            .serialized)
                    }
                }
                continue
            }
            let result: ImageDetections
            var piped: Image?
            do {
                if let sideBySide {
                    photoNumber += 1
                    result = try sideBySide.result(photoNumber - 1).get()
                } else {
                    if path == "-" {
                        let image = try ImageFile.decode(Self.standardInput(maximumSize: 1 << 30), name: "-")
                        result = try engine.detect(image: image, name: "-", size: imgsz, slicing: slicing, query)
                        piped = image
                    } else if let promptPhoto, slicing == nil {
                        result = engine.detect(promptPhoto, query, textEncode: false)
                    } else {
                        result = try engine.detect(path: path, size: imgsz, slicing: slicing, query)
                    }
                }
            } catch {
                failures += 1
                printError("lookout: \(error)")
                // In JSON, every photo gets its line: those that failed say why.
                if chosenFormat == .json {
                    print(JSONValue.object([("image", .string(path)), ("error", .string(error.problem))]).serialized)
                }
                continue
            }
            let shown = pad ? result.droppingPadding() : result
            switch chosenFormat {
            case .table: print(Report.table(shown), terminator: "")
            case .json: print(Report.json(shown), terminator: "")
            case .csv:
                if !wroteHeader { print(Export.csvHeader, terminator: "\r\n") }
                wroteHeader = true
                print(Export.csv(shown), terminator: "")
            case .coco: collected.append(shown)
            case .yolo:
                do {
                    try Export.writeYOLO(shown, source: path, into: output!, names: &labelNames)
                } catch {
                    saveFailures += 1
                    printError("lookout: \(error)")
                }
            }
            if let save {
                do {
                    try saveAnnotated(shown, source: path, image: piped, into: save, names: &savedNames)
                } catch {
                    saveFailures += 1
                    printError("lookout: could not save the annotated copy: \(error)")
                }
            }
        }
        if chosenFormat == .csv && !wroteHeader { print(Export.csvHeader, terminator: "\r\n") }
        if chosenFormat == .coco {
            print(
                Export.coco(
                    collected, labels: plan.labels,
                    leftOut: plan.negatives.union(pad ? [plan.labels.firstIndex(of: PaddingQuery.text)!] : [])
                ).serialized)
        }
        if failures > 0 {
            let what = videos.contains(true) ? (photos.isEmpty ? "videos" : "images and videos") : "images"
            printError("lookout: \(failures) of \(images.count) \(what) could not be read")
        }
        if saveFailures > 0 { printError("lookout: \(saveFailures) annotated copies could not be written") }
        if failures == images.count { throw ExitCode.failure }  // nothing done
        if failures + saveFailures > 0 { throw ExitCode.partialFailure }
    }

    /// Standard input to its end (at most 1 MiB).
    static func standardInput(maximumSize: Int = 1 << 20) -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while bytes.count < maximumSize {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(0, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += buffer[0..<count]
        }
        return bytes
    }

    /// `DIR/<stem of name><ext>`, numbered (-2, -3, …) where that name is taken: in this run (`names`, which
    /// receives it) or by any file already in DIR, so no file is ever replaced (the photos themselves when OUT
    /// is their folder, earlier outputs).
    static func unusedName(
        for name: String, extension ext: String, in directory: String, names: inout Set<String>
    ) -> String {
        var stem = name
        if let dot = name.lastIndex(of: "."), dot != name.startIndex { stem = String(name[..<dot]) }
        let folder = directory.hasSuffix("/") ? directory : directory + "/"
        var chosen = stem + ext
        var counter = 2
        while names.contains(chosen) || exists(folder + chosen) {
            chosen = "\(stem)-\(counter)\(ext)"
            counter += 1
        }
        names.insert(chosen)
        return folder + chosen
    }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return FileSystem.lstat(path, &info) == 0
    }

    /// Writes `DIR/<name of the photo>` (JPEG unless the photo is a PNG), numbered (-2, -3, …) where that name
    /// is taken: in this run, or by any file already in DIR, so no file is ever replaced.
    private func saveAnnotated(
        _ result: ImageDetections, source: String, image piped: Image?, into directory: String,
        names: inout Set<String>
    ) throws {
        let image = try piped ?? ImageFile.read(source)
        let masks = result.detections.compactMap { item in
            item.mask.map { Report.tint($0, colorIndex: item.queryIndex) }
        }
        let annotated = (masks.isEmpty ? image : image.tinted(with: masks)).annotated(with: Report.annotations(result))
        let base = source == "-" ? "stdin.jpg" : String(source.split(separator: "/").last ?? "image")
        let output = Self.unusedName(
            for: base, extension: base.lowercased().hasSuffix(".png") ? ".png" : ".jpg", in: directory,
            names: &names)
        try ImageFile.write(annotated, to: output)
        if chosenFormat == .table { print("  saved \(Report.visible(output))") }
    }

    private func queryList() throws -> [Query] {
        do {
            if let queriesFile {
                let bytes =
                    queriesFile == "-"
                    ? Self.standardInput() : try FileContents.read(queriesFile, maximumSize: 1 << 20)
                guard let lines = parseQueriesFile(bytes) else {
                    throw LookoutError("\(queriesFile): not text (a queries file holds one query per line, in UTF-8)")
                }
                var list: [Query] = []
                for (number, line) in lines.enumerated() {
                    // `# …` lines are comments, as in --classes FILE (an escaped \# starts a query).
                    if line.trimmingCharacters(in: .whitespaces).hasPrefix("#") { continue }
                    do {
                        if let query = try QuerySyntax.parse(line), !list.contains(query) { list.append(query) }
                    } catch {
                        throw LookoutError("\(queriesFile), query \(number + 1): \(error.message)")
                    }
                }
                guard !list.isEmpty else { throw LookoutError("\(queriesFile): no queries (one per line)") }
                return list
            }
            let (list, empty) = try QuerySyntax.parseLine(queries!)
            if empty > 0 {
                printError("lookout: ignoring \(empty) empty quer\(empty == 1 ? "y" : "ies") in \"\(queries!)\"")
            }
            guard !list.isEmpty else {
                throw LookoutError("no queries: -q needs at least one non-empty, comma-separated query")
            }
            return list
        } catch let error as QuerySyntaxError {
            throw ValidationError(error.message)
        }
    }
}

extension ExitCode {
    /// Some inputs could not be used; the others were (documented in `lookout --help`).
    static let partialFailure = ExitCode(2)
}
