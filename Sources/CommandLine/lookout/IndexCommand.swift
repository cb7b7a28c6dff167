import ArgumentParser
import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutIndex
import LookoutJSON
import LookoutSupport
import LookoutTensor
import LookoutTextEncoder

#if canImport(Glibc)
    import Glibc
#endif

/// `--db`: the photo index file, shared by `index` and `search`.
struct IndexDatabaseOption: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Index database: an SQLite file, or postgresql://user[:password]@host[:port]/database for an index many workers and searchers share (default: $LOOKOUT_DB or ~/.local/share/lookout/index.sqlite).",
            valueName: "path|url"))
    var db: String?

    /// Opens the index `--db` names (an SQLite file or a PostgreSQL database).
    func open(readOnly: Bool = false) throws -> PhotoIndex {
        try IndexOpening.open(try path(), readOnly: readOnly)
    }

    /// The index's place for messages (a URL's password hidden).
    func shown() throws -> String { IndexAddress.shown(try path()) }

    /// `--db`, else `$LOOKOUT_DB`, else `$XDG_DATA_HOME/lookout/index.sqlite`, else
    /// `~/.local/share/lookout/index.sqlite`.
    func path() throws -> String {
        if let db { return try Self.checked(db) }
        return try Self.defaultPath()
    }

    /// `$LOOKOUT_DB`, else `$XDG_DATA_HOME/lookout/index.sqlite`, else `~/.local/share/lookout/index.sqlite`.
    static func defaultPath() throws -> String {
        let variable = ResourceLocator.variable
        if let explicit = variable("LOOKOUT_DB") { return try Self.checked(explicit) }
        if let data = variable("XDG_DATA_HOME") { return data + "/lookout/index.sqlite" }
        if let home = variable("HOME") { return home + "/.local/share/lookout/index.sqlite" }
        throw LookoutError("no place for the index: set --db PATH (or $LOOKOUT_DB, or $HOME)")
    }

    /// An index is a file: an empty name, SQLite's in-memory names and URLs are refused (they would index into
    /// nothing, or into a folder named after the scheme).
    static func checked(_ path: String) throws -> String {
        guard !path.isEmpty else { throw ValidationError("--db needs a file path (it is empty).") }
        if path == ":memory:" || path.hasPrefix("file:") {
            throw ValidationError("--db \(path): the index must be a file path (in-memory databases keep nothing).")
        }
        if IndexAddress.isPostgres(path) { return path }
        let parts = path.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        if parts.count == 2, parts[1].hasPrefix("//"), !parts[0].isEmpty, !parts[0].contains("/") {
            throw ValidationError(
                "--db \(path): \(parts[0]):// is not a database Lookout knows; give a file path or a postgresql:// URL."
            )
        }
        return path
    }
}

struct IndexCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "index",
        abstract: "Index the photos of a folder so that `lookout search` can find things in them.",
        discussion: """
            Scans FOLDER recursively for JPEG and PNG photos and videos (MP4, MOV, MKV, WebM, AVI, …: a frame \
            every --video-every seconds; hidden files and folders are skipped; other files are counted; \
            symbolic links are followed to photos and folders inside FOLDER, each folder walked once, and out of \
            it only with --follow-links). For \
            each new or changed photo it runs the detector once, conditioned on a vocabulary (the detector's \
            built-in classes, or --classes), and stores 64 candidate regions (box and 8-bit 512-d region \
            embedding; 34 KB) in the index database (an SQLite file, or PostgreSQL). The regions are chosen \
            generously — no score floor, only near-duplicates suppressed — so that things the vocabulary does \
            not name are found too. \
            A later search is then a dot product per stored region, no image work. With --slice WxH|N|auto \
            (small objects: drones, CCTV, documents), each photo is also cut into overlapping tiles as `detect \
            --slice` cuts it, every tile gives its candidates at --imgsz, and the --regions best of the tiles' \
            and the whole photo's, near-duplicates dropped, are stored (a tile costs what a photo costs). Later \
            runs keep the tiles without --slice; --slice off indexes whole photos again.

            Incremental: a file whose size and modification time are unchanged is skipped; a changed, renamed \
            or duplicated file whose content (SHA-256) is already indexed reuses the stored regions; deleted \
            files leave the index. Each photo is committed on its own, so Ctrl-C or a crash loses nothing \
            already done: run the command again to go on. A photo that cannot be read is recorded (see
            --failures) and the run goes on. Indexing with another model redoes what depends on it.

            Several runs on one database (in other terminals, or started together) share the work: each photo \
            is claimed by the run that computes it, and a claim is free again once its run ends or after 10 \
            minutes.

            On PostgreSQL (--db postgresql://user[:password]@host[:port]/database) any number of workers, on \
            any machines that see the photos under the same paths, share one job: each claims photos with a \
            lease it renews while it works (--lease), a dead worker's photos go to the others when their \
            leases run out, and --status shows the whole job. With the pgvector extension in the database, \
            searches go through its indexes (IVFFlat over region vectors from --lists-from photos, HNSW over \
            photo vectors). Connections are encrypted as libpq's are: ?sslmode=prefer (the default), \
            require, verify-ca or verify-full with &sslrootcert=CA.crt, a client certificate with \
            &sslcert=…&sslkey=…, or $PGSSLMODE and $PGSSLROOTCERT; --status shows the encryption in use.

            Examples:
              lookout index ~/Pictures
              lookout index examples/scenes --db /tmp/scenes.sqlite
              lookout index ~/Drone --slice 640 --regions 128
              lookout index /archive --db postgresql://lookout@db.example/photos
              lookout index --status --db postgresql://lookout@db.example/photos
            """
    )

    @Argument(help: "Folder to index (recursively).")
    var folder: String?

    @OptionGroup var database: IndexDatabaseOption

    @OptionGroup var modelOptions: ModelOptions

    @Option(help: "Network input size for indexing (multiple of 32).")
    var imgsz = 640

    @Option(help: "Candidate regions kept per photo (each 540 bytes at 512-d).")
    var regions = 64

    @OptionGroup(title: "Sliced regions (small objects)") var slicingOptions: SlicingOptions

    @Option(
        help: ArgumentHelp(
            "The class names the index conditions the detector on and keeps regions under: a file (one name per line; blank lines and # comments ignored) or a list that ships with Lookout: \(ClassList.builtIn.joined(separator: ", ")). Default: the detector's built-in classes. Other classes re-index what depends on them, like another model.",
            valueName: "file|list"))
    var classes: String?

    @Option(
        help: ArgumentHelp(
            "The image tower whose whole-photo embeddings are stored, for scene search, `lookout similar` and `lookout duplicates`: a CLIP image tower, or an open_clip or SigLIP model's folder, whose own text tower then embeds scene queries. Default: the model's own: its manifest's scene_tower or image_encoder, or --text-model when it is OpenAI's ViT-B-32.pt, which holds both towers. The demo model's is `multilingual`, a small SigLIP that reads queries in English, German, French, Spanish and Chinese (\"blauer Kreis\", \"蓝色圆形\"); `clip` names the demo's CLIP tower, which reads English in the detector's text space.",
            valueName: "path|multilingual|clip"))
    var imageModel: String?

    @Flag(help: "Store no whole-photo embeddings (objects only: no scene search, `similar` or `duplicates`).")
    var noImageModel = false

    @Flag(
        help:
            "Decode large JPEGs at 1/2, 1/4 or 1/8 of their size (libjpeg's DCT scaling), never smaller than --imgsz on the long side and the image tower's input on the short one: a 12-megapixel photo at 640 decodes at 1/4, several times quicker. The regions and embeddings then differ slightly from a whole photo's (and from `lookout detect`'s on it); boxes are kept in the photo's own pixels. The index does not record it: photos indexed with it stay as they are when later runs leave it out (index into a new database to redo them). Not with --slice (tiles need the whole photo); with --prompt-free photos are decoded whole."
    )
    var fastDecode = false

    @Flag(
        help:
            "Say where the time went: each stage's seconds summed over the lanes (read, hash, decode, detect, whole-photo embedding) and the one thread's that claims and records, to see what holds a large index back."
    )
    var timings = false

    @Option(
        help: ArgumentHelp(
            "A prompt-free YOLOE file (-pf, e.g. yoloe-11s-seg-pf.pt): what it names in each photo from its own vocabulary (boxes scoring above --prompt-free-conf) is stored beside the regions, so that `lookout search QUERY --label NAME` keeps only the photos where it named NAME. It runs as a second detector on every photo.",
            valueName: "file"))
    var promptFree: String?

    @Option(help: "The score a prompt-free label needs to be stored (ultralytics' predict threshold by default).")
    var promptFreeConf: Float = 0.25

    @Flag(help: "List the files that could not be indexed, with the reason, and stop.")
    var failures = false

    @Flag(
        help:
            "Follow symbolic links that lead out of the folder too (by default only links to files and folders inside it are followed)."
    )
    var followLinks = false

    @Flag(
        help: """
            Index with other settings (model, --imgsz, --regions) than the index was made with, removing the \
            photos of other folders (index them again after). Without it, such a run stops and says what differs.
            """)
    var rebuild = false

    @Flag(
        help:
            "Show the indexing job across all workers of a PostgreSQL index (waiting, in progress, done, the rate of the last minute), and stop."
    )
    var status = false

    @Option(
        help: ArgumentHelp(
            "How long a worker's claim on a photo lasts unless renewed (seconds; renewed every third of it while the photo is worked on). A worker that dies mid-photo leaves it to the others after this.",
            valueName: "seconds"))
    var lease: Double?

    @Option(
        help: ArgumentHelp(
            "Photos computed at once, each on one thread (default: one per CPU). Side by side, two photos on two cores computed 1.5 times as many photos per second as one photo on both; 1 computes one photo at a time with every core. A PostgreSQL worker computes one at a time.",
            valueName: "n"))
    var lanes: Int?

    @Option(
        help: ArgumentHelp(
            "With --device cuda and several lanes: the most photos the GPU computes together (those the lanes have decoded by then, of one letterboxed size; the tower's batches hold twice as many). 1 (the default) computes each lane's photo alone, which measured faster: the host's cores (decoding) bound the lanes, and a photo in a batch waits for the others (BENCHMARKS.md).",
            valueName: "n"))
    var batch = 1

    @Option(
        help: ArgumentHelp(
            "Seconds of video time between the indexed frames of a video (MP4, MOV, MKV, WebM, AVI; each frame an entry that search reports as the video at that time).",
            valueName: "seconds"))
    var videoEvery: Double = 2

    @Option(
        help: ArgumentHelp(
            "Keep region lists beside an SQLite index (or pgvector's IVFFlat index over region vectors on PostgreSQL) once the index holds this many distinct photos (copies of one photo count once); below, a search reads every photo, which is as quick. Lists once built are kept up to date whatever the count.",
            valueName: "photos"))
    var listsFrom = 2000

    @Flag(help: "Plain progress lines even on a terminal.")
    var plain = false

    func validate() throws {
        guard !modelOptions.endToEnd else {
            throw ValidationError(
                "--end-to-end is for detect, query, track, serve and eval: an index stores the one-to-many head's regions and a search ranks them as that head's NMS would."
            )
        }
        if !(videoEvery >= 0.04 && videoEvery <= 3600) {
            throw ValidationError("--video-every must be between 0.04 and 3600 seconds.")
        }
        if let lanes, !(1...64).contains(lanes) { throw ValidationError("--lanes must be between 1 and 64.") }
        if !(1...1024).contains(batch) { throw ValidationError("--batch must be between 1 and 1024 photos.") }
        if let lease, !(lease >= 1 && lease <= 86_400) {
            throw ValidationError("--lease must be between 1 and 86400 seconds.")
        }
        if !failures && !status && folder == nil { throw ValidationError("Give the folder to index.") }
        guard imgsz >= 32 && imgsz % 32 == 0 && imgsz <= 4096 else {
            throw ValidationError("--imgsz must be a multiple of 32 between 32 and 4096.")
        }
        guard (1...1000).contains(regions) else { throw ValidationError("--regions must be between 1 and 1000.") }
        guard listsFrom >= 1 else { throw ValidationError("--lists-from must be at least 1 photo.") }
        guard promptFreeConf > 0 && promptFreeConf < 1 else {
            throw ValidationError("--prompt-free-conf \(promptFreeConf): choose a score between 0 and 1.")
        }
        if imageModel != nil && noImageModel {
            throw ValidationError("--image-model and --no-image-model exclude each other.")
        }
        if slicingOptions.merge != nil || slicingOptions.metric != nil || slicingOptions.match != nil
            || slicingOptions.agnostic
        {
            throw ValidationError(
                "--slice-merge, --slice-metric, --slice-match and --slice-agnostic decide how detections merge: an index keeps every tile's regions (best first, near-duplicates dropped), and a search merges nothing. Give --slice with --overlap or --tiles-only."
            )
        }
        if slicingOptions.tileLanes != nil {
            throw ValidationError("--tile-lanes: an index computes photos side by side instead (--lanes).")
        }
        _ = try slicing()
    }

    /// `--slice`'s tiles; `--slice off`: none, explicitly (an index made with tiles is otherwise indexed with them
    /// again when `--slice` is left out).
    func slicing() throws -> (options: SliceOptions?, off: Bool) {
        guard slicingOptions.slice?.lowercased() != "off" else {
            if slicingOptions.overlap != nil || slicingOptions.tilesOnly {
                throw ValidationError("--slice off indexes whole photos: leave out --overlap and --tiles-only.")
            }
            return (nil, true)
        }
        return (try slicingOptions.options(), false)
    }

    /// "12 photos", or "10 photos and 2 videos (45 frames)" when the index holds videos (whose frames and own
    /// rows are files of the store too).
    static func indexedWhat(_ files: Int, entries: some Collection<String>) -> String {
        let frames = entries.filter { VideoFrames.split($0) != nil }.count
        guard frames > 0 else { return "\(files) photo\(files == 1 ? "" : "s")" }
        let videos = entries.filter { VideoFrames.split($0) == nil && VideoFrames.isVideo($0) }.count
        let photos = max(files - frames - videos, 0)
        return
            "\(photos) photo\(photos == 1 ? "" : "s") and \(videos) video\(videos == 1 ? "" : "s") (\(frames) frame\(frames == 1 ? "" : "s"))"
    }

    /// With `--prompt-free FILE`: the prompt-free detector, recorded in `model`, as a labeller for a pool (each
    /// lane's engine shares its weights).
    func promptFreeLabeler(_ model: inout IndexModel) throws -> ((ComputePool) -> PhotoLabeler)? {
        guard let promptFree else { return nil }
        var configuration = EngineConfiguration(model: .files(detector: promptFree, textEncoder: nil), caches: false)
        configuration.precision = modelOptions.chosenPrecision
        configuration.device = modelOptions.chosenDevice
        configuration.gpuArithmetic = modelOptions.gpuArithmetic
        let (engine, loaded) = try Engine.load(configuration, notice: { printError("lookout: \($0)") })
        guard let names = engine.network.promptFreeNames else {
            throw LookoutError(
                "\(promptFree): \(engine.network.familyName) is asked with queries; --prompt-free takes a prompt-free file (YOLOE -pf), which names what it sees itself"
            )
        }
        model.promptFree = loaded.detectorFingerprint
        model.promptFreeConfidence = promptFreeConf
        var options = SuppressionOptions()
        options.confidence = promptFreeConf
        options.agnostic = engine.network.agnosticSuppressionByDefault
        let size = imgsz
        // Its own vocabulary, prepared once (no text to embed).
        let query = engine.prepare(.promptFree(names), options: options)
        return { pool in
            let own = pool === ComputePool.shared ? engine : engine.sharingWeights(pool: pool)
            return { image, path in
                let found = own.detect(own.prepare(image: image, name: path, size: size), query)
                return PhotoLabel.encode(
                    found.detections.map { PhotoLabel(name: $0.label, score: $0.score, box: $0.box) })
            }
        }
    }

    func run() throws {
        let path = try database.shown()
        if status {
            try showStatus()
            return
        }
        if failures {
            let index = try database.open(readOnly: true)
            let list = try index.failures()
            for (file, error) in list { print(Report.visible("\(file): \(error)")) }
            if list.isEmpty { print("no failures recorded in \(path)") }
            return
        }
        // Without --precision, an index keeps the arithmetic it was made in (an int8 index is not recomputed in
        // fp32 because a later run left the option out).
        var modelOptions = self.modelOptions
        if modelOptions.precision == nil, let stored = try? database.open(readOnly: true).storedModel() {
            let kept = IndexModel.precisionOption(stored.precision)
            if kept == "bf16" || kept == "int8" {
                modelOptions.precision = kept
                printError(
                    "lookout: \(path) was indexed in \(kept): indexing in \(kept) again (--precision fp32 recomputes every photo in fp32)"
                )
            }
        }
        let (engine, detectorFingerprint) = try modelOptions.load()
        let vocabulary = try IndexVocabulary(engine: engine, classes: classes.map { try ClassList.load($0).names })
        var extractor = RegionExtractor(engine: engine, vocabulary: vocabulary.embeddings)
        extractor.imageSize = imgsz
        extractor.maximumRegions = regions
        var (slicing, sliceOff) = try slicing()
        // Without --slice, an index keeps the tiles it was made with (`--slice off` drops them).
        if slicing == nil, !sliceOff, let stored = try? database.open(readOnly: true).storedModel(),
            let tiling = stored.slicing, let kept = SliceOptions(tiling: tiling)
        {
            slicing = kept
            printError(
                "lookout: \(path) was indexed with tiles (\(tiling)): indexing with them again (--slice off: whole photos)"
            )
        }
        extractor.slicing = slicing
        var model = IndexModel(
            detectorFingerprint: detectorFingerprint, textEncoderFingerprint: engine.embedder!.encoder.fingerprint,
            vocabulary: vocabulary.name, imageSize: imgsz, maximumRegions: regions,
            embeddingSize: engine.network.embeddingSize, scoreParameters: engine.network.scoreParameters)
        model.precision = engine.arithmetic
        model.modelArguments = modelOptions.arguments
        model.slicing = extractor.slicing?.tiling
        var imageTower: ImageTower?
        if !noImageModel,
            let imageModel = try imageModel.map(EngineConfiguration.towerPath)
                ?? modelOptions.configuration.sceneTowerPath()
        {
            let tower = try ImageTower(contentsOf: imageModel, precision: modelOptions.configuration.towerPrecision)
            imageTower = tower
            let textFamily = engine.embedder!.encoder.configuration.family
            // A tower with its own text tower (open_clip, SigLIP) scores queries in its own space, whatever the
            // detector's.
            guard textFamily == .clip || tower.ownTextSize != nil else {
                throw LookoutError(
                    "\(imageModel): whole-photo (scene) embeddings are scored against CLIP text embeddings, but \(engine.network.familyName) reads queries through \(textFamily.rawValue): index with --no-image-model (objects only)"
                )
            }
            let textSize = tower.ownTextSize ?? engine.embedder!.encoder.configuration.embeddingSize
            guard tower.embeddingSize == textSize else {
                throw LookoutError(
                    "\(imageModel): the image tower embeds in \(tower.embeddingSize) dimensions, the text encoder in \(textSize): they are not one CLIP model"
                )
            }
            if tower.ownTextSize != nil {
                // Its queries need its own tokenizer: refused now rather than after the folder is indexed.
                _ = try ImageTower.sceneText(imageModel, tokenizer: engine.embedder!.tokenizer)
            }
            model.imageTower = tower.fingerprint
            model.imageTowerPath = absolutePath(imageModel)
            if tower.embeddingSize != model.embeddingSize { model.imageEmbeddingSize = tower.embeddingSize }
            if let (center, slope) = tower.sceneScore {
                model.sceneScore = SceneScore(center: center, slope: slope)
            }
            model.duplicateThreshold = tower.duplicateThreshold
        }
        /// The photo embedding: on the engine's GPU with `--device cuda` where the tower keeps its activations there
        /// (``ImageTower/keepsActivationsOnGPU``: from the patches to the pooled row), else computed on `pool`.
        let onGPU = !(engine.backend is CPUBackend) && imageTower?.keepsActivationsOnGPU == true
        // Lanes on a GPU: each lane's photo, once decoded, joins those the other lanes have ready, and the GPU
        // computes them together (the tower's preprocessing stays on the lane's thread).
        let gathersPhotos = onGPU && imageTower?.embedsPixels == true && batch > 1
        let gatheredEmbeddings = imageTower.map { tower in
            let backend = engine.backend
            return GatheredBatches<[UInt8], [Float]>(limit: 2 * batch) {
                tower.embeddings(ofPixels: $0, backend: backend)
            }
        }
        func embedder(_ pool: ComputePool, lanes: Bool = false) -> ImageEmbedder? {
            let backend: any ComputeBackend = onGPU ? engine.backend : CPUBackend(pool: pool)
            return imageTower.map { tower in
                if lanes && gathersPhotos, let gathered = gatheredEmbeddings {
                    return { bytes, image, path in try gathered(tower.pixels(bytes, decoded: image, name: path)) }
                }
                return { bytes, image, path in try tower.embedding(bytes, decoded: image, name: path, backend: backend)
                }
            }
        }
        let labeler = try promptFreeLabeler(&model)
        let index = try database.open()
        index.videoEvery = videoEvery
        index.followLinks = followLinks
        if timings { index.stageTimes = IndexStageTimes() }
        if fastDecode {
            guard extractor.slicing == nil else {
                throw ValidationError(
                    "--fast-decode decodes photos smaller, and tiles (--slice, or the tiles this index was made with) need the whole photo: leave out one (--slice off indexes whole photos)."
                )
            }
            index.reducedDecode = (longSide: imgsz, shortSide: imageTower?.transform.size ?? 0)
        }
        index.minimumPhotosForLists = listsFrom
        if let lease { index.claimLease = lease } else if index.store is any SharedJobStore { index.claimLease = 60 }
        // Side by side: each lane an engine of its own with one thread (the weights are shared).
        let laneCount = index.store is any SharedJobStore ? 1 : (lanes ?? ComputePool.availableCPUs())
        var computeLanes: [ComputeLane] = []
        let batches = engine.batchLimit > 1 && batch > 1 && extractor.slicing == nil
        // Each lane letterboxes its photo on the GPU and picks its regions from its share of the batch's head;
        // the batch computes the network.
        let gatheredRegions = GatheredBatches<LetterboxedPhoto, HeadShare>(limit: batch) {
            [extractor, batch] in extractor.heads(of: $0, batch: batch)
        }
        if laneCount > 1 {
            for _ in 0..<laneCount {
                let pool = ComputePool(threads: 1)
                var own = RegionExtractor(engine: engine.sharingWeights(pool: pool), vocabulary: vocabulary.embeddings)
                (own.imageSize, own.maximumRegions, own.slicing) = (
                    extractor.imageSize, extractor.maximumRegions, extractor.slicing
                )
                let lane = own
                computeLanes.append(
                    ComputeLane(
                        regions: { (image, name) throws(ImageError) in
                            guard batches else { return try lane.regions(of: image, name: name) }
                            let photo = lane.letterboxed(image, name: name)
                            return lane.candidates(photo, gatheredRegions(photo))
                        },
                        imageEmbedding: embedder(pool, lanes: true),
                        labels: labeler?(pool)))
            }
        }
        let reporter = ProgressReporter(terminal: !plain && isatty(2) == 1, unit: "photos and videos")
        var clock = Stopwatch()
        let summary = try index.update(
            root: folder!, model: model,
            regions: { (image, name) throws(ImageError) in try extractor.regions(of: image, name: name) },
            imageEmbedding: embedder(.shared), labels: labeler?(.shared), replacingOtherFolders: rebuild,
            lanes: computeLanes,
            progress: { reporter.report($0) })
        reporter.finish()
        let seconds = clock.lap()
        let statistics = try index.statistics()
        var lines = [
            "\(path): \(Self.indexedWhat(statistics.files, entries: try index.store.files(withPrefix: "/").keys)) indexed (\(summary.computed) computed, \(summary.reembedded > 0 ? "\(summary.reembedded) re-embedded with the new image tower (regions kept), " : "")\(summary.reused) reused, \(summary.unchanged) unchanged, \(summary.removed) removed) in \(String(format1(seconds))) s"
        ]
        if summary.computed > 0 {
            lines.append("  \(format1(Double(summary.computed) / max(seconds, 1e-9))) photos/s computed")
        }
        let (batchedPhotos, gpuBatches) = gatheredRegions.computed
        if gpuBatches > 0 {
            lines.append(
                "  the GPU detected \(batchedPhotos) photos in \(gpuBatches) batches (\(format1(Double(batchedPhotos) / Double(gpuBatches))) a batch; --batch \(batch))"
            )
        }
        if let stages = index.stageTimes?.stages, !stages.isEmpty {
            lines.append("  time by stage, summed over the \(laneCount) lane\(laneCount == 1 ? "" : "s"):")
            for (stage, total, count) in stages {
                lines.append(
                    "    \(stage): \(format1(total)) s (\(count) × \(format1(total / Double(count) * 1000)) ms)")
            }
        }
        if summary.videoFrames > 0 {
            lines.append(
                "  \(summary.videoFrames) video frame\(summary.videoFrames == 1 ? "" : "s") indexed (one every \(videoEvery) s of video)"
            )
        }
        if statistics.images > 0 {
            lines.append(
                "  \(statistics.regionBytes / statistics.images) bytes of regions per photo, database \(statistics.databaseBytes / 1024) KiB"
            )
        }
        if summary.failed + summary.stillFailing > 0 {
            lines.append(
                "  \(summary.failed + summary.stillFailing) file\(summary.failed + summary.stillFailing == 1 ? "" : "s") could not be indexed (`lookout index --failures` lists them)"
            )
        }
        if summary.claimedElsewhere > 0 {
            lines.append("  \(summary.claimedElsewhere) photos left to another process indexing this database")
        }
        if summary.skippedFiles > 0 {
            lines.append(
                "  \(summary.skippedFiles) file\(summary.skippedFiles == 1 ? "" : "s") skipped: not JPEG, PNG or a video"
            )
        }
        if summary.brokenLinks > 0 {
            lines.append(
                "  \(summary.brokenLinks) symbolic link\(summary.brokenLinks == 1 ? "" : "s") skipped: the target does not exist"
            )
        }
        if summary.linksOutside > 0 {
            lines.append(
                "  \(summary.linksOutside) symbolic link\(summary.linksOutside == 1 ? "" : "s") out of the folder skipped (--follow-links follows them)"
            )
        }
        for folder in summary.unreadableFolders { lines.append("  folder not readable, skipped: \(folder)") }
        if let lists = summary.lists { lines.append("  \(lists)") }
        printError(lines.joined(separator: "\n"))
        if summary.failed + summary.stillFailing > 0 {
            throw statistics.files == 0 ? ExitCode.failure : ExitCode.partialFailure
        }
    }

    private func format1(_ value: Double) -> String { "\((value * 10).rounded() / 10)" }

    /// `--status`: the shared job of a PostgreSQL index, as every worker sees it.
    private func showStatus() throws {
        let index = try database.open(readOnly: true)
        guard let shared = index.store as? any SharedJobStore else {
            throw LookoutError(
                "\(try database.shown()): --status shows the shared job of a PostgreSQL index (postgresql://…); an SQLite index has no workers to show"
            )
        }
        let job = try shared.jobStatus()
        let left = job.waiting + job.inProgress.count
        var lines = [
            "\(try database.shown())",
            "  connection: \(IndexOpening.connection(index))",
            "  indexed \(job.indexedFiles) photos, \(job.failedFiles) failed; \(job.inProgress.count) in progress, \(job.waiting) waiting",
            "  last minute: \(job.lastMinute) photos by \(job.activeWorkers.count) worker\(job.activeWorkers.count == 1 ? "" : "s")"
                + (job.lastMinute > 0 && left > 0
                    ? " (ETA \(ProgressReporter.duration(Double(left) / (Double(job.lastMinute) / 60))))" : ""),
        ]
        for worker in job.activeWorkers {
            let held = job.inProgress.filter { $0.worker == worker }
            lines.append(
                "  worker \(worker): "
                    + (held.isEmpty
                        ? "idle"
                        : held.map { "\(Report.visible($0.path)) (lease \(Int($0.leaseLeft.rounded())) s)" }.joined(
                            separator: ", ")))
        }
        if left == 0 { lines.append("  the job is done: nothing waits or is in progress") }
        print(lines.joined(separator: "\n"))
    }
}

/// Progress on standard error: a redrawn bar with rate and ETA on a terminal, otherwise a plain line every
/// 5 seconds (and at the end).
final class ProgressReporter {
    let terminal: Bool
    /// The words of the plain lines: "indexing 12 photos", "indexed 3/12 (…)".
    let doing: String, did: String, unit: String
    let start = Stopwatch.now()
    var lastLine = -1.0
    var started = false
    var shownTotal = 0

    init(terminal: Bool, doing: String = "indexing", did: String = "indexed", unit: String = "photos") {
        self.terminal = terminal
        self.doing = doing
        self.did = did
        self.unit = unit
    }

    func report(_ progress: PhotoIndex.Progress) {
        // A step without a count (the region lists being built): its words, on a line of their own.
        if progress.total == 0 && !progress.current.isEmpty {
            finish()
            printError("lookout: \(progress.current)")
            return
        }
        report(done: progress.done, total: progress.total)
    }

    func report(done: Int, total: Int) {
        let progress = (done: done, total: total)
        let elapsed = Stopwatch.now() - start
        guard progress.total > 0 else { return }
        shownTotal = progress.total
        let rate = progress.done > 0 ? Double(progress.done) / max(elapsed, 1e-9) : 0
        let remaining = rate > 0 ? Double(progress.total - progress.done) / rate : 0
        let eta = rate > 0 ? Self.duration(remaining) : "?"
        let rateText = "\((rate * 10).rounded() / 10) \(unit)/s"
        if terminal {
            let width = 30
            let filled = progress.total == 0 ? width : progress.done * width / progress.total
            let bar = String(repeating: "█", count: filled) + String(repeating: "·", count: width - filled)
            var line = "\r\(bar) \(progress.done)/\(progress.total)  \(rateText)  ETA \(eta)"
            line += String(repeating: " ", count: 8)
            line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
            started = true
        } else if progress.done == 0 && lastLine < 0 {
            printError("\(doing) \(progress.total) \(unit)")
            lastLine = elapsed
        } else if elapsed - lastLine >= 5 || progress.done == progress.total {
            printError("\(did) \(progress.done)/\(progress.total) (\(rateText), ETA \(eta))")
            lastLine = elapsed
        }
    }

    func finish() {
        if terminal && started { printError("") }
        started = false
    }

    /// Erases the bar (before a result line is printed; the next report draws it again).
    func clearLine() {
        guard terminal && started else { return }
        let blank = "\r" + String(repeating: " ", count: 78) + "\r"
        blank.utf8CString.withUnsafeBufferPointer { _ = write(2, $0.baseAddress, $0.count - 1) }
    }

    static func duration(_ seconds: Double) -> String {
        let total = Int(seconds.rounded())
        return total >= 60 ? "\(total / 60)m\(total % 60)s" : "\(total)s"
    }
}

/// `path` made absolute against the working directory (FileName-safe).
func absolutePath(_ path: String) -> String {
    if path.hasPrefix("/") { return path }
    guard let directory = getcwd(nil, 0) else { return path }
    defer { free(directory) }
    return FileName.decode(cString: directory) + "/" + path
}
