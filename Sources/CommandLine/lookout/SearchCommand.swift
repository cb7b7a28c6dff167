import ArgumentParser
import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutIndex
import LookoutJSON
import LookoutSupport
import LookoutTextEncoder

#if canImport(Glibc)
    import Glibc
#endif

struct SearchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search",
        abstract: "Find photos in the index by text: ranked photos with the matching boxes.",
        discussion: """
            Scores the stored regions of the indexed photos against the query, as the detector's \
            contrastive head would, and lists the photos best first with the boxes above --conf (a box \
            overlapping a better one by more than IoU 0.7 is shown once). The query embedding comes from the \
            text-embedding cache. An index of 2,000 photos or more keeps region lists beside it \
            (INDEX.lists, built and kept up to date by `lookout index`): a search then scores only the \
            regions nearest the query and the photos holding them, exactly as the full scan scores them; \
            --scan reads every photo instead, for comparison. The index was built with the detector's neck \
            conditioned on its built-in vocabulary, so these scores approximate what a fresh detection with \
            the query gives; --exact re-runs the real, query-conditioned detector on the best candidates \
            (about 0.2 s per photo for the demo model) and ranks by its scores.

            An index made with --image-model also holds each photo's whole-image CLIP embedding: a photo then \
            scores the better of its best region and its scene score (the cosine of photo and query, mapped \
            to 0–1 by sigmoid((cosine − centre) · slope), fitted for the demo tower and stored with it; 0.25 and \
            40 for OpenAI's), so scenes ("beach at sunset") are found as well as \
            objects; --objects or --scenes weighs one alone. JSON lines say which evidence decided \
            ("evidence": "objects" or "scenes") with both scores.

            The query may name alternatives, sofa|couch|settee (each region takes the best of their scores), \
            and its own threshold, dog@0.4 (instead of --conf); \\| and \\@ stand for the characters.

            By example: --prompt-image REF.jpg followed by its --prompt-box x1,y1,x2,y2 boxes (repeatable, on \
            one photo or several) searches for what the boxes hold (YOLOE: their visual prompt embeddings averaged \
            over the photos; YOLO-World: their crops' CLIP image embeddings), the query only naming it; \
            --combine-examples best|mean joins the query's words to them as detect does.

            --in, --after and --before keep the photos under a folder and taken in a period (the EXIF date \
            when the photo has one, as written; else the file's modification time on this machine's clock).

            Examples:
              lookout search "red star"
              lookout search "red car" --db photos.sqlite --top 50 --json
              lookout search "ring" --html rings.html
              lookout search "sofa|couch@0.3"
              lookout search "dog" --in ~/Pictures --after 2024-06-01 --before 2024-07
              lookout search mug --prompt-image a.jpg --prompt-box 10,20,90,120 --prompt-image b.jpg --prompt-box 5,5,60,70
            """
    )

    @Argument(help: "What to look for (one query).")
    var query: String

    @OptionGroup var database: IndexDatabaseOption

    @OptionGroup var modelOptions: ModelOptions

    @Option(help: "Photos to list.")
    var top = 20

    @Option(
        name: [.customLong("conf"), .customLong("min-score")],
        help:
            "Evidence scoring above this is shown (boxes, scenes); photos without any are not listed. --min-score is the same."
    )
    var conf: Float = 0.1

    @OptionGroup var filters: PhotoFilterOptions

    @Flag(
        help:
            "Read and score every indexed photo instead of those the region lists (SQLite) or pgvector's indexes (PostgreSQL) point to: the exact scan, slower, for comparison."
    )
    var scan = false

    @Flag(help: "Re-score the best candidates with the real query-conditioned detector.")
    var exact = false

    @Flag(help: "Weigh only the regions (objects), not the whole-photo embeddings.")
    var objects = false

    @Flag(help: "Weigh only the whole-photo embeddings (scenes; an index made with --image-model).")
    var scenes = false

    @Flag(help: "One JSON object per photo per line, best first.")
    var json = false

    @Option(
        help: ArgumentHelp("Also write a self-contained HTML contact sheet (thumbnails with boxes).", valueName: "file")
    )
    var html: String?

    @OptionGroup(title: "Examples (search by example)") var examples: ExampleOptions

    @Option(
        help: ArgumentHelp(
            "YOLO-World: the CLIP image tower that embeds the examples' crops (default: the model's own: the demo model's, the manifest's image_encoder, or --text-model when it is OpenAI's ViT-B-32.pt).",
            valueName: "path"))
    var imageModel: String?

    func validate() throws {
        guard !modelOptions.endToEnd else {
            throw ValidationError(
                "--end-to-end is for detect, query, track, serve and eval: an index stores the one-to-many head's regions and a search ranks them as that head's NMS would."
            )
        }
        guard top > 0 else { throw ValidationError("--top must be positive.") }
        guard conf >= 0 && conf < 1 else { throw ValidationError("--conf must be in [0, 1).") }
        guard !query.trimmingCharacters(in: " \t\n").isEmpty else { throw ValidationError("The query is empty.") }
        if objects && scenes {
            throw ValidationError("--objects and --scenes each weigh one kind: give one, or neither.")
        }
        if exact && scenes { throw ValidationError("--exact re-runs the detector on objects: not with --scenes.") }
        if !examples.promptBoxes.isEmpty && examples.promptImages.isEmpty {
            throw ValidationError(
                "Search by example takes the photo each box is drawn on: --prompt-image REF.jpg, then its --prompt-box x1,y1,x2,y2."
            )
        }
        if !examples.promptBoxes.isEmpty && (exact || scenes) {
            throw ValidationError("A search by example weighs the stored regions alone: not with --exact or --scenes.")
        }
        if examples.combination != nil && examples.promptBoxes.isEmpty {
            throw ValidationError("--combine-examples joins the query's words with examples: give --prompt-box too.")
        }
        let named = (try? QuerySyntax.single(query))?.label ?? query
        for box in try examples.prompts() where box.label != "object" && box.label != named {
            throw ValidationError(
                "--prompt-box …:\(box.label): a search looks for one thing, the query \"\(query)\": leave the boxes' labels out."
            )
        }
    }

    func run() throws {
        let path = try database.shown()
        let index = try database.open(readOnly: true)
        index.useNearestNeighbours = !scan
        guard let stored = try index.storedModel() else {
            throw LookoutError("\(path) holds no indexed photos yet: run `lookout index FOLDER` first")
        }
        try filters.check(stored, path: path)
        let (engine, detectorFingerprint) = try modelOptions.load()
        let embedder = engine.embedder!
        guard embedder.encoder.fingerprint == stored.textEncoderFingerprint,
            detectorFingerprint == stored.detectorFingerprint
        else {
            let same = stored.modelArguments.map { "search with `\($0)`" } ?? "search with the model it was made with"
            throw LookoutError(
                "\(path) was indexed with another model: \(same), or index the folder again with this one")
        }
        if stored.precision != engine.arithmetic {
            let now = engine.arithmetic
            printError(
                "lookout: \(path) was indexed in \(stored.precision), and this search computes in \(now): the "
                    + "stored regions keep their \(stored.precision) values, and \(now) applies only to what is "
                    + "computed now (the query's embedding, --exact). Index the folder again with --precision "
                    + "\(IndexModel.precisionOption(now)) for \(now) regions.")
        }
        let parsed: Query
        do throws(QuerySyntaxError) {
            parsed = try QuerySyntax.single(query)
        } catch {
            throw ValidationError(error.message)
        }
        guard !parsed.negative else {
            throw ValidationError(
                "A negative query (-\(parsed.label)) finds nothing by itself: search for what you want.")
        }
        let conf = parsed.threshold ?? self.conf
        var clock = Stopwatch()
        // What the stored regions are scored against: YOLOE's get_tpe of the text (YOLO-World's text as it is), or
        // the examples' visual prompt embedding, which the head scores as it is.
        let texts: [[Float]]
        let byExample = !examples.promptBoxes.isEmpty
        if byExample {
            texts = try exampleAlternatives(parsed, engine: engine, imageSize: stored.imageSize)
        } else {
            texts = embedder.embed(parsed.alternatives).embeddings.map(engine.regionQuery)
        }
        let embedSeconds = clock.lap()
        if scenes && stored.imageTower == nil {
            throw LookoutError.noImageTower(path)
        }
        let evidence: PhotoIndex.Evidence = objects || exact || byExample ? .objects : scenes ? .scenes : .both
        // An index whose image tower has its own text tower (open_clip, SigLIP) scores scenes in that tower's space:
        // the query embedded by it, not by the detector's text encoder.
        var sceneTexts: [[Float]]?
        if evidence != .objects, let towerPath = stored.imageTowerPath,
            let text = try ImageTower.sceneText(towerPath, tokenizer: embedder.tokenizer)
        {
            // The towers share one file: the text tower's fingerprint is the image tower's the index recorded.
            guard text.fingerprint == stored.imageTower else {
                throw LookoutError(
                    "\(towerPath) has changed since \(path) was indexed with it: index the folder again for scene search"
                )
            }
            sceneTexts = text.embed(parsed.alternatives)
        }
        var hits = try index.search(
            alternatives: texts, scenes: sceneTexts, confidence: exact ? min(conf, 0.01) : conf,
            top: exact ? max(top > Int.max / 3 ? Int.max : top * 3, 30) : top, evidence: evidence,
            filter: try filters.filter())
        let searchSeconds = clock.lap()
        if let note = (index.store as? any NearestNeighbourStore)?.lastNearestNeighbourNote {
            printError("lookout: \(note)")
        }
        let missing = hits.filter { $0.fileState == .missing }
        if !missing.isEmpty {
            printError(
                "lookout: left out \(missing.count) photo\(missing.count == 1 ? "" : "s") deleted or moved since indexing "
                    + "(\(missing[0].path)\(missing.count > 1 ? ", …" : "")); `lookout index` prunes them")
            hits.removeAll { $0.fileState == .missing }
        }
        if exact {
            let rescored = index.exact(
                hits, query: parsed, engine: engine, confidence: conf, imageSize: stored.imageSize,
                slicing: stored.slicing.flatMap { SliceOptions(tiling: $0) })
            for failure in rescored.failures { printError("lookout: \(failure.error)") }
            hits = Array(rescored.hits.prefix(top))
        }
        let exactSeconds = clock.lap()
        let changed = hits.filter { $0.fileState == .changed }
        if !changed.isEmpty && !exact {
            printError(
                "lookout: \(changed.count) photo\(changed.count == 1 ? "" : "s") changed since indexing, their boxes may "
                    + "not fit (\(changed[0].path)\(changed.count > 1 ? ", …" : "")): run `lookout index` on the folder"
            )
        }
        for hit in hits {
            if json {
                let detections = hit.detections.map { item -> JSONValue in
                    .object([
                        ("label", .string(parsed.label)), ("score", DetectionJSON.number(item.score)),
                        ("box", .array(item.box.map(DetectionJSON.number))),
                    ])
                }
                var fields: [(String, JSONValue)] = [("image", .string(hit.path))]
                // A video: the time (seconds) of its best frame, which the boxes are on.
                if let time = hit.time { fields.append(("time", .double(time))) }
                fields += [("score", DetectionJSON.number(hit.score)), ("detections", .array(detections))]
                if stored.imageTower != nil && !exact {
                    fields.append(("evidence", .string(hit.evidence.rawValue)))
                    fields.append(("object_score", hit.objectScore.map(DetectionJSON.number) ?? .null))
                    fields.append(("scene_score", hit.sceneScore.map(DetectionJSON.number) ?? .null))
                }
                if hit.fileState == .changed && !exact { fields.append(("changed_since_indexing", .bool(true))) }
                if stored.promptFree != nil {
                    // What the prompt-free detector named in the photo when it was indexed.
                    fields.append(
                        (
                            "labels",
                            .array(
                                hit.labels.map {
                                    .object([
                                        ("label", .string($0.name)), ("score", DetectionJSON.number($0.score)),
                                        ("box", .array($0.box.map(DetectionJSON.number))),
                                    ])
                                })
                        ))
                }
                print(JSONValue.object(fields).serialized)
            } else {
                let scene = hit.evidence == .scenes && stored.imageTower != nil && !exact ? ", scene" : ""
                print(
                    "\(Report.format3(hit.score))  \(Report.visible(hit.path))\(hit.time.map { " at \(VideoDetection.seconds($0)) s" } ?? "")  (\(hit.detections.count) box\(hit.detections.count == 1 ? "" : "es")\(scene))"
                )
                for item in hit.detections {
                    print(
                        "         \(Report.format3(item.score))  [\(item.box.map { Report.format1($0) }.joined(separator: " "))]"
                    )
                }
                if !hit.labels.isEmpty {
                    // Each name once, at its best score (labels come best first).
                    var seen = Set<String>()
                    let names = hit.labels.filter { seen.insert($0.name).inserted }.map {
                        "\(Report.visible($0.name)) \(Report.format3($0.score))"
                    }
                    print("         labels: \(names.joined(separator: ", "))")
                }
            }
        }
        if hits.isEmpty && !json { print("nothing found for \"\(Report.visible(query))\" above conf \(conf)") }
        let timing =
            "lookout: embed \(ms(embedSeconds)) ms, search \(ms(searchSeconds)) ms"
            + (index.lastSearchCandidates.map {
                " (\((index.store as? any NearestNeighbourStore)?.nearestNeighbourKind ?? "scan"): \($0) photos read)"
            } ?? "")
            + (exact ? ", exact re-scoring \(ms(exactSeconds)) ms" : "")
        printError(timing)
        if let html {
            try FileContents.writeAtomically(Array(ContactSheet.page(hits: hits, query: query).utf8), to: html)
            printError("lookout: wrote \(html)")
        }
    }

    /// What the stored regions are scored against when the query is given by examples: the examples of every
    /// reference photo make one query (YOLOE: their visual prompt embeddings averaged over the photos; YOLO-World:
    /// their crops' CLIP image embeddings averaged), alone, or joined to the query's words as `--combine-examples`
    /// says (best: alternatives; mean: one embedding), as `detect` joins them.
    private func exampleAlternatives(_ parsed: Query, engine: Engine, imageSize: Int) throws -> [[Float]] {
        let groups = try examples.groups().map { group in
            (image: group.image, boxes: group.boxes.map { VisualPrompt(box: $0.box, label: parsed.label) })
        }
        let queries = try examples.queries(
            groups, engine: engine, imgsz: imageSize, imageModel: imageModel,
            configuration: modelOptions.configuration,
            searched: { throw ValidationError("every example needs its --prompt-image") }, searchedPath: nil)
        var plan = QueryPlan(examples.combination == nil ? [] : [parsed])
        engine.add(queries, to: &plan, combination: try examples.combinationChosen)
        return engine.regionQueries(plan)
    }

    private func ms(_ seconds: Double) -> String { "\((seconds * 10000).rounded() / 10)" }
}
