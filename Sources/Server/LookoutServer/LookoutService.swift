import Foundation
import LookoutDetector
import LookoutEngine
import LookoutFrames
import LookoutImage
import LookoutIndex
import LookoutIndexPostgres
import LookoutJSON
import LookoutSupport
import LookoutTextEncoder
import LookoutTracking

/// What `lookout serve` answers, without HTTP: detection on uploaded photos (their features kept for
/// re-query under an image id), re-query, index search, and indexed photos by id. Every answer is a JSON
/// document or image bytes; every failure a ``ServiceError`` with the HTTP status it maps to. The HTTP
/// layer (``LookoutServer``) only moves bytes.
public final class LookoutService: @unchecked Sendable {
    public let engine: Engine
    public let store: FeatureStore
    public let imageSize: Int
    public let indexPath: String?
    /// Pixels a photo may have (width × height); more is refused (422).
    public let pixelLimit: Int
    private let lock = NSLock()
    private var photoPaths: [String: String] = [:]

    /// The most connections to a PostgreSQL index open at once (one pool for every request).
    public let databaseConnections: Int
    /// The detector file's fingerprint (what an index records about the model that made its regions).
    public let detectorFingerprint: String

    public init(
        engine: Engine, detectorFingerprint: String, indexPath: String?, imageSize: Int = 640,
        featureMemory: Int = 512 << 20, pixelLimit: Int = 50_000_000,
        databaseConnections: Int = PostgresIndexStore.defaultConnections
    ) {
        self.databaseConnections = databaseConnections
        self.detectorFingerprint = detectorFingerprint
        self.engine = engine
        self.store = FeatureStore(modelKey: detectorFingerprint, memoryLimit: featureMemory)
        self.imageSize = imageSize
        self.indexPath = indexPath
        self.pixelLimit = pixelLimit
    }

    /// Thresholds of one request: the defaults of `lookout detect` unless given.
    public struct Thresholds: Sendable {
        public var confidence: Float = 0.25
        public var iou: Double = 0.7
        public var maximumDetections = 300

        public init() {}

        /// The suppression options for `engine`'s detector: NMS across queries where its family's predict does
        /// it by default (YOLOE), as `lookout detect` without `--agnostic`/`--no-agnostic`.
        func options(for engine: Engine) -> SuppressionOptions {
            var options = SuppressionOptions()
            options.confidence = confidence
            options.iou = iou
            options.maximumDetections = maximumDetections
            options.agnostic = engine.network.agnosticSuppressionByDefault
            return options
        }

        /// From text values (query parameters or JSON numbers), checked.
        public static func parse(conf: String?, iou: String?, maxDet: String?) throws(ServiceError) -> Thresholds {
            var result = Thresholds()
            if let conf {
                guard let value = Float(conf), value >= 0, value < 1 else {
                    throw ServiceError(400, "conf must be a number in [0, 1), got \(conf)")
                }
                result.confidence = value
            }
            if let iou {
                guard let value = Double(iou), value > 0, value <= 1 else {
                    throw ServiceError(400, "iou must be a number in (0, 1], got \(iou)")
                }
                result.iou = value
            }
            if let maxDet {
                guard let value = Int(maxDet), value > 0, value <= 10_000 else {
                    throw ServiceError(400, "max_det must be a whole number from 1 to 10000, got \(maxDet)")
                }
                result.maximumDetections = value
            }
            return result
        }
    }

    /// The queries of a line, as `lookout detect -q` reads it (``QuerySyntax``): split at the commas that are not
    /// escaped; `sofa|couch` alternatives, `dog@0.4` a query's own threshold, `-person` a negative query.
    public static func queries(line: String) throws(ServiceError) -> [Query] {
        do throws(QuerySyntaxError) {
            return try QuerySyntax.parseLine(line).queries
        } catch {
            throw ServiceError(400, error.message)
        }
    }

    /// Queries given one by one (a JSON array), each in the syntax as a queries file's line is (commas are text).
    public static func queries(list: [String]) throws(ServiceError) -> [Query] {
        var queries: [Query] = []
        do throws(QuerySyntaxError) {
            for text in list {
                if let query = try QuerySyntax.parse(text), !queries.contains(query) { queries.append(query) }
            }
        } catch {
            throw ServiceError(400, error.message)
        }
        return queries
    }

    /// A query set the engine can detect, with the command line's limits (``QuerySyntax/check(_:others:added:)``):
    /// at least one query (or `prompts` boxes), at most 4,096 with them, not negative queries alone.
    static func checked(_ queries: [Query], prompts: Int = 0) throws(ServiceError) -> [Query] {
        guard !queries.isEmpty || prompts > 0 else {
            throw ServiceError(400, "no queries: give at least one, e.g. q=dog,red%20car")
        }
        do throws(QuerySyntaxError) {
            try QuerySyntax.check(queries, others: prompts)
        } catch {
            throw ServiceError(400, error.message)
        }
        return queries
    }

    // MARK: - Detection

    /// Decodes `bytes`, runs the backbone (or finds its features kept under the photo's id) and detects
    /// `queries`. The id is the SHA-256 of the bytes: the same photo sent again reuses its features. With
    /// `keep` false (a camera's frames, never asked again) the features are not kept.
    /// `track`: a client's name for a sequence of frames (a camera), followed by ByteTrack across requests.
    public func detect(
        imageBytes bytes: [UInt8], queries: [Query], thresholds: Thresholds, keep: Bool = true,
        track: String? = nil, slicing: SliceOptions? = nil
    ) throws(ServiceError)
        -> [UInt8]
    {
        let queries = try Self.checked(queries)
        if let track { try TrackedSequences.check(track) }
        guard !bytes.isEmpty else { throw ServiceError(400, "the request body is empty: send the photo's bytes") }
        var hash = SHA256()
        hash.update(bytes)
        let id = String(hash.finalize().prefix(32))
        if let slicing {
            return try detectSliced(
                id: id, bytes: bytes, plan: QueryPlan(queries), thresholds: thresholds, keep: keep, track: track,
                slicing: slicing)
        }
        let prepared: PreparedImage
        var reused = false
        if let kept = store.kept(key: key(id)) {
            prepared = kept
            reused = true
        } else {
            let image: Image
            var clock = Stopwatch()
            image = try decodeUpload(bytes)
            let decoding = clock.lap()
            var fresh = engine.prepare(image: image, name: "upload", size: imageSize)
            fresh.timings.decode = decoding
            prepared = fresh
            if keep { store.keep(prepared, key: key(id)) }
        }
        return answer(
            id: id, prepared: prepared, plan: QueryPlan(queries), thresholds: thresholds, reused: reused, track: track)
    }

    /// New queries on a photo sent before: the neck and head only. 404 once its features were dropped.
    /// `prompts`: YOLOE visual prompts, boxes drawn on this photo (its kept features give their embeddings).
    public func redetect(
        imageID id: String, queries: [Query], prompts: [VisualPrompt] = [], thresholds: Thresholds,
        slicing: SliceOptions? = nil, promptPhotos: [String?] = [], combination: Examples.Combination = .best
    ) throws(ServiceError)
        -> [UInt8]
    {
        let queries = try Self.checked(queries, prompts: prompts.count)
        try Self.checkPromptCount(prompts.count)
        if let slicing {
            guard prompts.isEmpty else {
                throw ServiceError(400, "prompt_boxes are drawn on the whole photo: not with slice")
            }
            guard var sliced = store.kept(sliced: slicedKey(id, slicing)) else {
                throw ServiceError(
                    404,
                    "no tiles kept for image \(id) with these slice settings: send the photo again to /api/v1/detect with them"
                )
            }
            sliced.timings = StageTimings()
            if !queries.isEmpty && engine.embedder == nil { throw ServiceError(400, "typed queries need a text model") }
            let query = engine.prepare(QueryPlan(queries), options: thresholds.options(for: engine))
            let result = engine.detect(sliced, query)
            return Self.reply(id: id, result: result, shown: Self.shown(result.detections, tracking: nil))
        }
        let prepared = try keptFeatures(id)
        if !queries.isEmpty && engine.embedder == nil { throw ServiceError(400, "typed queries need a text model") }
        var plan = QueryPlan(queries)
        if !prompts.isEmpty {
            // Examples on this photo and on others sent before (their kept features), averaged per label as the
            // command line's --prompt-image does; a label also typed is one query with them.
            var order: [String] = []
            var byPhoto: [String: [VisualPrompt]] = [:]
            for (index, prompt) in prompts.enumerated() {
                let photo = index < promptPhotos.count ? promptPhotos[index] ?? id : id
                if byPhoto[photo] == nil { order.append(photo) }
                byPhoto[photo, default: []].append(prompt)
            }
            guard order.count <= 16 else { throw ServiceError(400, "examples on \(order.count) photos: at most 16") }
            var photos: [ExamplePhoto] = []
            for photo in order {
                photos.append(
                    ExamplePhoto(photo: photo == id ? prepared : try keptFeatures(photo), prompts: byPhoto[photo]!))
            }
            let examples: [ExampleQuery]
            do {
                examples = try engine.exampleQueries(photos)
            } catch {
                throw ServiceError(400, error.description)
            }
            engine.add(examples, to: &plan, combination: combination)
        }
        return answer(id: id, prepared: prepared, plan: plan, thresholds: thresholds, reused: true)
    }

    /// The detections of a query plan (typed queries and visual prompts) as JSON, the same for every route:
    /// the plan prepared once (``Engine/prepare(_:options:)``) and detected as the command line detects it.
    /// `reused`: the features were kept, so decoding and the backbone cost nothing. `track`: a camera's
    /// sequence, followed across requests.
    private func answer(
        id: String, prepared: PreparedImage, plan: QueryPlan, thresholds: Thresholds, reused: Bool,
        track: String? = nil
    ) -> [UInt8] {
        let query = engine.prepare(plan, options: thresholds.options(for: engine))
        let result = engine.detect(reused ? Self.reusing(prepared) : prepared, query)
        let shown =
            track.map { sequences.update($0, queries: plan.labels + plan.texts, detections: result.detections) }
            ?? Self.shown(result.detections, tracking: nil)
        return Self.reply(id: id, result: result, shown: shown)
    }

    /// A kept photo's features: decoding, letterboxing and the backbone cost nothing this time.
    static func reusing(_ prepared: PreparedImage) -> PreparedImage {
        var prepared = prepared
        prepared.timings.decode = 0
        prepared.timings.preprocess = 0
        prepared.timings.backbone = 0
        return prepared
    }

    /// A detection answer's JSON: the photo's id and size, the detections as shown, the stage timings.
    /// `timings`: the result's own unless given.
    static func reply(
        id: String, result: ImageDetections, shown: [ShownDetection], timings: StageTimings? = nil
    ) -> [UInt8] {
        let timings = (timings ?? result.timings).milliseconds.map {
            ($0.0 + "_ms", JSONValue.double(($0.1 * 100).rounded() / 100))
        }
        return Array(
            JSONValue.object([
                ("image_id", .string(id)), ("width", .int(Int64(result.width))), ("height", .int(Int64(result.height))),
                ("detections", .array(shown.map(\.json))), ("timings", .object(timings)),
            ]).serialized.utf8)
    }

    private func key(_ id: String) -> String { "upload|\(imageSize)|\(id)" }

    /// An uploaded photo decoded; too large 422, not JPEG or PNG 415, damaged 400.
    private func decodeUpload(_ bytes: [UInt8]) throws(ServiceError) -> Image {
        do {
            return try ImageFile.decode(bytes, name: "upload", pixelLimit: pixelLimit)
        } catch {
            switch error.kind {
            case .tooLarge: throw ServiceError(422, error.problem)
            case .unsupportedFormat: throw ServiceError(415, error.problem)
            default: throw ServiceError(400, error.problem)
            }
        }
    }

    private func slicedKey(_ id: String, _ slicing: SliceOptions) -> String { "upload|\(imageSize)|\(slicing)|\(id)" }

    /// The most tiles one request may cut a photo into (each costs a backbone).
    public static let maximumTiles = 256

    /// A photo cut into tiles (sliced inference), each tile's features kept under the photo's id and the settings.
    private func detectSliced(
        id: String, bytes: [UInt8], plan: QueryPlan, thresholds: Thresholds, keep: Bool, track: String?,
        slicing: SliceOptions
    ) throws(ServiceError) -> [UInt8] {
        var sliced: SlicedImage
        if let kept = store.kept(sliced: slicedKey(id, slicing)) {
            sliced = kept
            sliced.timings = StageTimings()
        } else {
            let image: Image
            image = try decodeUpload(bytes)
            let tiles: Int
            do {
                tiles = try Slicing.tiles(width: image.width, height: image.height, options: slicing).count
            } catch {
                throw ServiceError(422, error.description)
            }
            guard tiles <= Self.maximumTiles else {
                throw ServiceError(
                    422,
                    "slice would cut this \(image.width)×\(image.height) photo into \(tiles) tiles; at most \(Self.maximumTiles) a request: give larger tiles"
                )
            }
            do {
                sliced = try engine.prepare(image: image, name: "upload", size: imageSize, slicing: slicing)
            } catch {
                throw ServiceError(422, error.problem)
            }
            if keep { store.keep(sliced, key: slicedKey(id, slicing)) }
        }
        let query = engine.prepare(plan, options: thresholds.options(for: engine))
        let result = engine.detect(sliced, query)
        let shown =
            track.map { sequences.update($0, queries: plan.labels + plan.texts, detections: result.detections) }
            ?? Self.shown(result.detections, tracking: nil)
        return Self.reply(id: id, result: result, shown: shown)
    }

    /// A detection as an answer lists it, with its track id when the frame was tracked.
    struct ShownDetection {
        var label: String
        var queryIndex: Int
        var score: Float
        var box: [Float]
        var trackID: Int?
        /// A segmentation model's mask at the photo's size (YOLOE), written as COCO compressed RLE.
        var mask: BinaryMask? = nil

        var json: JSONValue {
            DetectionJSON.object(
                label: label, queryIndex: queryIndex, score: score, box: box, trackID: trackID, mask: mask)
        }
    }

    /// A frame's detections as the answer lists them: as they are; or, followed by `session`, what the frame
    /// shows as ultralytics' track() reports it (the tracks with the tracker's box and the score and class of
    /// the detection matched, nothing while a new track waits, else the detections without ids).
    /// `frame`: the picture, for BoT-SORT's camera motion.
    static func shown(
        _ detections: [ImageDetections.Item], tracking session: TrackingSession?, frame: Image? = nil
    )
        -> [ShownDetection]
    {
        shown(detections, tracked: session.map { FramePipeline.track(detections, frame: frame, in: $0) })
    }

    /// Detections as shown: with the tracker's ids and boxes where `tracked` is given.
    static func shown(_ detections: [ImageDetections.Item], tracked: TrackingSession.Frame?) -> [ShownDetection] {
        guard let tracked else {
            return detections.map {
                ShownDetection(
                    label: $0.label, queryIndex: $0.queryIndex, score: $0.score, box: $0.box, trackID: nil,
                    mask: $0.mask)
            }
        }
        return tracked.shown.map {
            ShownDetection(
                label: detections[$0.detection].label, queryIndex: $0.label, score: $0.score, box: $0.box,
                trackID: $0.id, mask: detections[$0.detection].mask)
        }
    }

    private let sequences = TrackedSequences()

    // MARK: - Index

    /// The index's best photos for `query`: ids (never paths), scores, boxes.
    public func search(query: String, top: Int, thresholds: Thresholds) throws(ServiceError) -> [UInt8] {
        let (embeddings, threshold) = try searchEmbeddings(query: query, top: top)
        var thresholds = thresholds
        if let threshold { thresholds.confidence = threshold }
        return try search(query: query, embeddings: embeddings, top: top, thresholds: thresholds)
    }

    /// A search's first half, on the inference thread: the query read as `lookout search` reads it (alternatives `sofa|couch`, a threshold
    /// `car@0.4`; several comma-separated queries or a negative one refused), each alternative's embedding as the
    /// stored regions are scored against it, and the query's own threshold.
    public func searchEmbeddings(
        query: String, top: Int
    ) throws(ServiceError) -> (embeddings: [[Float]], threshold: Float?) {
        guard !query.trimmingCharacters(in: .whitespaces).isEmpty else { throw ServiceError(400, "no query: give q=…") }
        guard (1...1000).contains(top) else { throw ServiceError(400, "top must be from 1 to 1000") }
        guard let embedder = engine.embedder else { throw ServiceError(500, "no text encoder") }
        let parsed: Query
        do {
            parsed = try QuerySyntax.single(query)
        } catch {
            throw ServiceError(400, error.message)
        }
        guard !parsed.negative else {
            throw ServiceError(
                400, "a negative query (-\(parsed.label)) finds nothing by itself: search for what you want")
        }
        return (embedder.embed(parsed.alternatives).embeddings.map(engine.regionQuery), parsed.threshold)
    }

    /// Search by example (YOLOE), its first half: boxes drawn on photos sent before (by their ids), all examples
    /// of one thing, give what the stored regions are scored against: their visual prompt embeddings (from the
    /// photos' kept features) averaged over the photos, as `lookout search --prompt-image … --prompt-box …` does.
    /// With `combination`, the query's words join them as they join `detect`'s examples (best: alternatives;
    /// mean: one embedding); without, the examples alone.
    public func exampleEmbeddings(
        _ boxes: [(imageID: String, box: [Float])], query text: String, combination: Examples.Combination?, top: Int
    ) throws(ServiceError) -> (embeddings: [[Float]], threshold: Float?) {
        guard (1...1000).contains(top) else { throw ServiceError(400, "top must be from 1 to 1000") }
        try Self.checkPromptCount(boxes.count)
        var plan = QueryPlan()
        var threshold: Float? = nil
        if combination != nil {
            let parsed: Query
            do throws(QuerySyntaxError) {
                parsed = try QuerySyntax.single(text)
            } catch {
                throw ServiceError(400, error.message)
            }
            guard !parsed.negative else {
                throw ServiceError(400, "a negative query (-\(parsed.label)) cannot join examples")
            }
            plan.append(parsed)
            threshold = parsed.threshold
        }
        let label = plan.labels.first ?? "example"
        var order: [String] = []
        var byPhoto: [String: [VisualPrompt]] = [:]
        for (id, box) in boxes {
            if byPhoto[id] == nil { order.append(id) }
            byPhoto[id, default: []].append(VisualPrompt(box: box, label: label))
        }
        var photos: [ExamplePhoto] = []
        for id in order { photos.append(ExamplePhoto(photo: try keptFeatures(id), prompts: byPhoto[id]!)) }
        do {
            engine.add(try engine.exampleQueries(photos), to: &plan, combination: combination ?? .best)
        } catch {
            throw ServiceError(400, error.description)
        }
        return (engine.regionQueries(plan), threshold)
    }

    /// At most 64 prompt boxes a request.
    static func checkPromptCount(_ count: Int) throws(ServiceError) {
        guard count <= 64 else { throw ServiceError(400, "\(count) prompt boxes: at most 64") }
    }

    /// A photo's kept features, by the id /api/v1/detect gave it; 404 once they were dropped.
    private func keptFeatures(_ id: String) throws(ServiceError) -> PreparedImage {
        guard let prepared = store.kept(key: key(id)) else {
            throw ServiceError(404, "no features kept for image \(id): send the photo again to /api/v1/detect")
        }
        return prepared
    }

    /// The engine's visual prompt embeddings, its refusals (no SAVPE, a box off the photo, no box) as 400.
    private func promptEmbeddings(
        _ prompts: [VisualPrompt], on prepared: PreparedImage
    ) throws(ServiceError) -> [(label: String, embedding: [Float])] {
        do {
            return try engine.visualPromptEmbeddings(prompts, on: prepared)
        } catch {
            throw ServiceError(400, error.description)
        }
    }

    /// A search's second half: the index searched with the query's embedding. Safe to run on several threads
    /// at once (each opens the index; a PostgreSQL index's connections come from one pool).
    /// `labels`: only photos where the index's prompt-free detector named each of these (`index --prompt-free`);
    /// an index without such labels answers 400. `evidence`: what is weighed (an example's embedding is scored
    /// against the stored regions alone: it means nothing to a whole-photo tower).
    public func search(
        query: String, embeddings: [[Float]], top: Int, thresholds: Thresholds, labels: [String] = [],
        evidence: PhotoIndex.Evidence = .both, scan: Bool = false
    )
        throws(ServiceError) -> [UInt8]
    {
        let query = query.trimmingCharacters(in: .whitespaces)
        let hits = try searchHits(
            text: query, embeddings: embeddings, top: top, thresholds: thresholds, labels: labels,
            evidence: evidence, scan: scan)
        var results: [JSONValue] = []
        lock.lock()
        for hit in hits {
            // A video's id names the entry of its best frame, so that its photo and thumbnail are that frame.
            let id = Self.photoID(hit.entry)
            photoPaths[id] = hit.entry
            let boxes = hit.detections.map { d -> JSONValue in
                .object([("score", DetectionJSON.number(d.score)), ("box", .array(d.box.map(DetectionJSON.number)))])
            }
            results.append(
                .object(
                    [
                        ("image", .string(id)), ("name", .string(String(hit.path.split(separator: "/").last ?? ""))),
                        ("width", .int(Int64(hit.width))), ("height", .int(Int64(hit.height))),
                        ("score", DetectionJSON.number(hit.score)), ("evidence", .string(hit.evidence.rawValue)),
                        ("detections", .array(boxes)),
                    ] + (hit.time.map { [("time", DetectionJSON.number(Float($0)))] } ?? [])
                        + (hit.labels.isEmpty
                            ? []
                            : [("labels", .array(hit.labels.map { .string($0.name) }))])))
        }
        lock.unlock()
        return Array(JSONValue.object([("query", .string(query)), ("results", .array(results))]).serialized.utf8)
    }

    /// A search's results as a training set in a ZIP archive (`GET /api/v1/search/dataset`): the photos found
    /// with boxes (a photo found by its scene alone has none to teach, and is left out), their boxes labelled
    /// `label` (class 0), in YOLO's layout (`images/`, `labels/`, `data.yaml`) or COCO's (`images/`,
    /// `annotations/instances_*.json`), about `validation` of them in `val`. Photos that cannot be read any more
    /// are left out; an archive that would pass 1 GiB is a 413.
    public func dataset(
        label: String, embeddings: [[Float]], top: Int, thresholds: Thresholds, labels: [String] = [],
        evidence: PhotoIndex.Evidence = .both, scan: Bool = false, format: TrainingSet.Format, validation: Double
    ) throws(ServiceError) -> [UInt8] {
        let hits = try searchHits(
            text: label, embeddings: embeddings, top: top, thresholds: thresholds, labels: labels,
            evidence: evidence, scan: scan)
        var set = TrainingSet(format: format, names: [label])
        var archive = ZipArchive()
        var used = Set<String>()
        for hit in hits where !hit.detections.isEmpty {
            let id = Self.photoID(hit.entry)
            lock.lock()
            photoPaths[id] = hit.entry
            lock.unlock()
            guard let (bytes, png) = try? photo(id: id) else { continue }
            // A flat name of its own: the file's name (a video frame: the video's, with its time), -2, -3 … for
            // a name already taken.
            var base = String(hit.path.split(separator: "/").last ?? "photo")
            if let time = hit.time {
                let stem = base.lastIndex(of: ".").map { String(base[..<$0]) } ?? base
                base = stem + "-\(Int((time * 1000).rounded()))ms." + (png ? "png" : "jpg")
            }
            let name = TrainingSet.uniqueName(base, taken: &used)
            let photo = TrainingSet.Photo(
                name: name, split: TrainingSet.split(name, fraction: validation), width: hit.width,
                height: hit.height,
                boxes: hit.detections.map { TrainingSet.Box(classIndex: 0, score: $0.score, box: $0.box) })
            guard archive.add(TrainingSet.imagePath(photo), bytes), archive.bytes.count < 1 << 30 else {
                throw ServiceError(413, "the data set would pass 1 GiB: ask for fewer photos (top)")
            }
            if format == .yolo {
                let (path, text) = TrainingSet.yoloLabels(photo)
                _ = archive.add(path, Array(text.utf8))
            }
            set.photos.append(photo)
        }
        guard !set.photos.isEmpty else {
            throw ServiceError(404, "no photo with boxes found for \(label): nothing to label")
        }
        for (path, contents) in set.summaryFiles(comment: "Written by Lookout's search export: \(label)") {
            guard archive.add(path, contents) else {
                throw ServiceError(413, "the data set would pass 1 GiB: ask for fewer photos (top)")
            }
        }
        return archive.finished()
    }

    /// The photos an index search finds, for ``search(query:embeddings:top:thresholds:labels:evidence:scan:)`` and
    /// ``dataset(label:embeddings:top:thresholds:labels:evidence:scan:format:validation:)``.
    private func searchHits(
        text: String, embeddings: [[Float]], top: Int, thresholds: Thresholds, labels: [String],
        evidence: PhotoIndex.Evidence, scan: Bool
    ) throws(ServiceError) -> [PhotoIndex.Hit] {
        let index = try openIndex()
        index.useNearestNeighbours = !scan
        let hits: [PhotoIndex.Hit]
        let storesLabels: Bool
        var mismatch = false
        var storedModel: IndexModel?
        do throws(IndexError) {
            let stored = try index.storedModel()
            storedModel = stored
            // Regions of another model are scored by queries they were not made for: refused, as `lookout search` does.
            mismatch = stored.map(indexedWithAnotherModel) ?? false
            storesLabels = stored?.promptFree != nil
        } catch {
            throw Self.logged(ServiceError(500, "the index could not be read"), "\(error.problem)")
        }
        guard !mismatch else {
            throw ServiceError(
                409,
                "the index was made with another model than this server's: start the server with the model it was indexed with, or index the folder again with this one"
            )
        }
        if !labels.isEmpty && !storesLabels {
            throw ServiceError(
                400, "this index stores no prompt-free labels: index it with `lookout index --prompt-free FILE`")
        }
        // An index whose image tower has its own text tower (open_clip, SigLIP) scores scenes with the query embedded by it.
        var scenes: [[Float]]?
        if evidence != .objects, let stored = storedModel, let towerPath = stored.imageTowerPath,
            ImageTower.hasOwnText(towerPath)
        {
            scenes = try sceneEmbeddings(text, towerPath: towerPath, fingerprint: stored.imageTower)
        }
        do {
            hits = try index.search(
                alternatives: embeddings, scenes: scenes, confidence: thresholds.confidence, top: top,
                evidence: evidence, filter: PhotoFilter(labels: labels))
        } catch {
            throw Self.logged(ServiceError(500, "the index could not be searched"), "\(error.problem)")
        }
        return hits
    }

    /// Open_clip and SigLIP towers' own text towers, by path, loaded at their first search.
    private var sceneEmbedders: [String: SceneText] = [:]

    /// The query's alternatives embedded by the index's image tower's own text tower.
    private func sceneEmbeddings(
        _ text: String, towerPath: String, fingerprint: String?
    ) throws(ServiceError)
        -> [[Float]]
    {
        let alternatives = (try? QuerySyntax.single(text))?.alternatives ?? [text]
        lock.lock()
        let known = sceneEmbedders[towerPath]
        lock.unlock()
        if let known { return known.embed(alternatives) }
        guard let tokenizer = engine.embedder?.tokenizer else {
            throw ServiceError(409, "this server has no CLIP tokenizer for the index's image tower")
        }
        let embedder: SceneText
        do {
            guard let own = try ImageTower.sceneText(towerPath, tokenizer: tokenizer), own.fingerprint == fingerprint
            else {
                throw ServiceError(
                    409, "the index's image tower has changed since it was indexed: index the folder again")
            }
            embedder = own
        } catch let error as ServiceError {
            throw error
        } catch {
            throw Self.logged(ServiceError(500, "the index's image tower could not be loaded"), "\(error)")
        }
        lock.lock()
        sceneEmbedders[towerPath] = embedder
        lock.unlock()
        return embedder.embed(alternatives)
    }

    /// An indexed photo's id: derived from its path, which is never shown.
    public static func photoID(_ path: String) -> String {
        var hash = SHA256()
        hash.update(Array(path.utf8))
        return String(hash.finalize().prefix(24))
    }

    /// The bytes of the indexed photo `id` (only photos the index holds can be named), and whether it is a PNG.
    public func photo(id: String) throws(ServiceError) -> (bytes: [UInt8], png: Bool) {
        let path = try indexedPath(id)
        do {
            if VideoFrames.split(path) != nil {  // a video's frame, as a PNG
                return (try ImageFile.encode(try VideoFrames.image(at: path), format: .png, name: path), true)
            }
            let bytes = try FileContents.read(path, maximumSize: 256 << 20)
            return (bytes, bytes.starts(with: [0x89, 0x50, 0x4E, 0x47]))
        } catch {
            throw ServiceError(410, "indexed photo \(id) can no longer be read")
        }
    }

    /// A JPEG of the indexed photo `id`, its longer side at most `side` pixels.
    public func thumbnail(id: String, side: Int = 320) throws(ServiceError) -> [UInt8] {
        let path = try indexedPath(id)
        do {
            let image = try VideoFrames.image(at: path, pixelLimit: pixelLimit)
            let scale = min(1, Double(side) / Double(max(image.width, image.height)))
            let small = image.resizedBilinear(
                width: max(1, Int((Double(image.width) * scale).rounded())),
                height: max(1, Int((Double(image.height) * scale).rounded())))
            return try ImageFile.encode(small, format: .jpeg(quality: 85), name: "thumbnail")
        } catch {
            throw ServiceError(410, "indexed photo \(id) can no longer be read")
        }
    }

    private func indexedPath(_ id: String) throws(ServiceError) -> String {
        guard id.count == 24, id.allSatisfy(\.isHexDigit) else { throw ServiceError(404, "no indexed photo \(id)") }
        if let path = lock.withLock({ photoPaths[id] }) { return try servable(path, id: id) }
        let index = try openIndex()
        var found: String?
        do {
            guard let model = try index.storedModel() else { throw ServiceError(404, "no indexed photo \(id)") }
            try index.store.forEachPhoto(model: model.key) { photo in
                if found == nil && Self.photoID(photo.path) == id { found = photo.path }
            }
        } catch let error as ServiceError {
            throw error
        } catch {
            throw ServiceError(500, "the index could not be read")
        }
        guard let path = found else { throw ServiceError(404, "no indexed photo \(id)") }
        lock.withLock { photoPaths[id] = path }
        return try servable(path, id: id)
    }

    /// `path` when its file is still a regular file where it was indexed, reached through no symbolic link (its
    /// resolved path is itself): a photo replaced by a link, or a folder on its way replaced by one, is not read.
    private func servable(_ path: String, id: String) throws(ServiceError) -> String {
        let file = VideoFrames.split(path)?.video ?? path
        var info = stat()
        guard FileSystem.lstat(file, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG,
            FileSystem.realpath(file) == file
        else {
            throw ServiceError(
                410, "indexed photo \(id) is no longer a plain file in its folder; `lookout index` prunes it")
        }
        return path
    }

    /// What whoever starts the server should know about the served index, in a sentence: it was indexed with
    /// another detector or text encoder (its regions are that model's, which this one's queries do not fit), or in another
    /// arithmetic than the server computes in (its regions stay that arithmetic's). Nil when it fits, or when
    /// there is no index yet.
    public func indexNote() -> String? {
        guard indexPath != nil, let index = try? openIndex(), let stored = try? index.storedModel() else { return nil }
        let shown = IndexLocation.shown(indexPath!)
        if indexedWithAnotherModel(stored) {
            return
                "\(shown) was indexed with another model: its regions are that model's, so searches score them with queries they were not made for; serve the model it was indexed with\(stored.modelArguments.map { " (`\($0)`)" } ?? ""), or index the folder again with this one"
        }
        guard stored.precision != engine.arithmetic else { return nil }
        return
            "\(shown) was indexed in \(stored.precision), and this server computes in \(engine.arithmetic): the stored regions keep their \(stored.precision) values, and \(engine.arithmetic) applies only to what is computed now (queries, detections). Index the folder again with --precision \(IndexModel.precisionOption(engine.arithmetic)) for \(engine.arithmetic) regions."
    }

    /// The served index's whole-photo tower, for the web page: its family (CLIP, open_clip, SigLIP), the name of
    /// its file or folder (not the path), and how its scene scores read (`sigmoid`: SigLIP's own probability;
    /// `calibrated`: the tower's recorded calibration, a CLIP tower's or a SigLIP folder's like the demo's; `standard`: the fixed mapping of the cosine). Nil without an
    /// index or a tower.
    public func imageTower() -> (family: String, name: String, scores: String)? {
        guard indexPath != nil, let index = try? openIndex(), let stored = try? index.storedModel(),
            stored.imageTower != nil, let path = stored.imageTowerPath
        else { return nil }
        let family = ImageTower.family(of: path)
        let name = path.split(separator: "/").last.map(String.init) ?? path
        let scores =
            family == .sigLIP && !SigLIPModel.recordsSceneCalibration(path)
            ? "sigmoid" : stored.sceneScore != .standard ? "calibrated" : "standard"
        return (family.rawValue, name, scores)
    }

    /// Whether `stored` holds the regions of another detector or text encoder than this server's (its queries do
    /// not fit them).
    func indexedWithAnotherModel(_ stored: IndexModel) -> Bool {
        let textEncoder = engine.embedder?.encoder.fingerprint
        return stored.detectorFingerprint != detectorFingerprint
            || (textEncoder != nil && textEncoder != stored.textEncoderFingerprint)
    }

    /// `error` as the client gets it, its details (paths, database names) written to standard error only.
    static func logged(_ error: ServiceError, _ details: String) -> ServiceError {
        FileHandle.standardError.write(Data("lookout serve: \(error.message): \(URLText.redacted(details))\n".utf8))
        return error
    }

    private func openIndex() throws(ServiceError) -> PhotoIndex {
        guard let indexPath else {
            throw ServiceError(
                404, "no index: `lookout index FOLDER` makes the default one, or start the server with --db PATH")
        }
        do {
            return PhotoIndex(
                store: try IndexLocation.open(
                    indexPath, readOnly: true, connections: databaseConnections, sharedConnections: true))
        } catch {
            // The client hears that the index is unavailable; the path, host or user, and why, go to the log.
            throw Self.logged(
                ServiceError(503, "the index cannot be opened now; try again later"),
                "\(IndexLocation.shown(indexPath)): \(error.problem)")
        }
    }
}

/// A request the service refuses, with its HTTP status and a sentence for the client.
public struct ServiceError: Error, CustomStringConvertible, Sendable {
    public let status: Int
    public let message: String

    public init(_ status: Int, _ message: String) {
        self.status = status
        self.message = message
    }

    public var description: String { "\(status): \(message)" }

    /// `{"error": message}`.
    public var body: [UInt8] { Array(JSONValue.object([("error", .string(message))]).serialized.utf8) }
}

/// The camera sequences `detect?track=NAME` follows: a ByteTrack session per name, started again when the
/// queries change, forgotten after 2 minutes unused; at most 32 (the least recently used goes first).
final class TrackedSequences: @unchecked Sendable {
    private let lock = NSLock()
    private var sequences: [String: (queries: [String], session: TrackingSession, used: Double)] = [:]
    static let limit = 32
    static let idleSeconds = 120.0

    static func check(_ name: String) throws(ServiceError) {
        guard (1...64).contains(name.utf8.count),
            name.utf8.allSatisfy({ $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") })
        else { throw ServiceError(400, "track must be 1 to 64 letters, digits, _ or -") }
    }

    func update(
        _ name: String, queries: [String], detections: [ImageDetections.Item]
    )
        -> [LookoutService.ShownDetection]
    {
        lock.withLock {
            let now = Stopwatch.now()
            sequences = sequences.filter { now - $0.value.used < Self.idleSeconds }
            var entry = sequences[name]
            if entry == nil || entry!.queries != queries {
                if sequences[name] == nil && sequences.count >= Self.limit,
                    let oldest = sequences.min(by: { $0.value.used < $1.value.used })?.key
                {
                    sequences[oldest] = nil
                }
                entry = (queries, TrackingSession(), now)
            }
            entry!.used = now
            sequences[name] = entry
            return LookoutService.shown(detections, tracking: entry!.session)
        }
    }
}

extension UInt8 {
    fileprivate var isASCIIAlphanumeric: Bool {
        (48...57).contains(self) || (65...90).contains(self) || (97...122).contains(self)
    }
}
