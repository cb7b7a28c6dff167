import Foundation
import LookoutImage
import LookoutJSON
import LookoutSupport
import LookoutTensor
import LookoutVideo
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

/// What the stored regions depend on. A different key means stale regions, recomputed on the next update.
public struct IndexModel: Sendable, Equatable {
    public var detectorFingerprint: String
    public var textEncoderFingerprint: String
    /// Where the index vocabulary came from ("built-in" or a digest of a query file's embeddings).
    public var vocabulary: String
    public var imageSize: Int
    public var maximumRegions: Int
    public var embeddingSize: Int
    public var scoreParameters: [(logitScale: Float, bias: Float)]
    /// How regions are chosen and stored (``currentRegionRule`` for what this version computes;
    /// "f16-v1" for indexes made before 8-bit regions).
    public var regionRule = IndexModel.currentRegionRule
    /// The CLIP image tower whose whole-photo embeddings the index stores (its fingerprint), if any.
    public var imageTower: String?
    /// Where that tower's weights were when the index was made (`lookout similar` loads it from there).
    public var imageTowerPath: String?
    /// How that tower's cosines become scene scores (from the tower's file, else ``SceneScore/standard``).
    public var sceneScore = SceneScore.standard
    /// The `lookout duplicates` threshold measured for that tower, when its file records one.
    public var duplicateThreshold: Float?

    /// No score floor, near-duplicate suppression at IoU 0.95, 8-bit embeddings.
    public static let currentRegionRule = "q8-v2"

    public init(
        detectorFingerprint: String, textEncoderFingerprint: String, vocabulary: String, imageSize: Int,
        maximumRegions: Int, embeddingSize: Int, scoreParameters: [(logitScale: Float, bias: Float)]
    ) {
        self.detectorFingerprint = detectorFingerprint
        self.textEncoderFingerprint = textEncoderFingerprint
        self.vocabulary = vocabulary
        self.imageSize = imageSize
        self.maximumRegions = maximumRegions
        self.embeddingSize = embeddingSize
        self.scoreParameters = scoreParameters
    }

    public var key: String {
        var hash = SHA256()
        let settings =
            "\(detectorFingerprint)|\(textEncoderFingerprint)|\(vocabulary)|\(imageSize)|\(maximumRegions)|\(regionRule)"
        hash.update(Array((settings + (imageTower.map { "|image:\($0)" } ?? "")).utf8))
        return String(hash.finalize().prefix(32))
    }

    var encodedParameters: String {
        scoreParameters.map { "\($0.logitScale.bitPattern),\($0.bias.bitPattern)" }.joined(separator: ";")
    }

    static func decodeParameters(_ text: String) -> [(logitScale: Float, bias: Float)] {
        text.split(separator: ";").compactMap { pair in
            let parts = pair.split(separator: ",").compactMap { UInt32($0) }
            return parts.count == 2 ? (Float(bitPattern: parts[0]), Float(bitPattern: parts[1])) : nil
        }
    }

    public static func == (a: IndexModel, b: IndexModel) -> Bool { a.key == b.key }

    /// What differs from `other`, in words ("regions 32 → 16, imgsz 640 → 480").
    public func differences(from other: IndexModel) -> String {
        var parts: [String] = []
        if detectorFingerprint != other.detectorFingerprint { parts.append("another detector") }
        if textEncoderFingerprint != other.textEncoderFingerprint { parts.append("another text encoder") }
        if vocabulary != other.vocabulary { parts.append("vocabulary \(vocabulary) → \(other.vocabulary)") }
        if imageSize != other.imageSize { parts.append("imgsz \(imageSize) → \(other.imageSize)") }
        if maximumRegions != other.maximumRegions {
            parts.append("regions \(maximumRegions) → \(other.maximumRegions)")
        }
        if regionRule != other.regionRule { parts.append("region format \(regionRule) → \(other.regionRule)") }
        if imageTower != other.imageTower {
            parts.append(
                imageTower == nil
                    ? "an image tower added" : other.imageTower == nil ? "no image tower" : "another image tower")
        }
        return parts.isEmpty ? "other settings" : parts.joined(separator: ", ")
    }
}

/// A photo collection's index: which photos it holds and their candidate regions, kept up to date with a
/// folder and searched by text. The storage is an ``IndexStore`` (``SQLiteIndexStore`` by default).
///
/// An update runs in three stages: **scan** the folder (paths, sizes, modification times), **compute** what
/// changed (read, hash, decode, extract regions: the expensive part, with no storage access), and **write**
/// each photo's outcome in its own transaction, so that an interrupted run — Ctrl-C, `kill -9`, power loss —
/// leaves a consistent index and the next run goes on from there. Each photo is claimed before it is
/// computed, so several processes updating one index share the work instead of repeating it.
public final class PhotoIndex {
    public static let schemaVersion = SQLiteIndexStore.schemaVersion
    public let store: any IndexStore
    public var path: String { store.location }

    /// Opens (creating it and its folder if needed) the SQLite index at `path`.
    public convenience init(path: String, readOnly: Bool = false) throws(IndexError) {
        self.init(store: try SQLiteIndexStore(path: path, readOnly: readOnly))
    }

    public init(store: any IndexStore) { self.store = store }

    /// How long a claim on a photo lasts (seconds): after that, or once its process is gone, another
    /// process may take the photo over.
    public var claimLease: Double = 600

    /// Whether searches on a store with nearest-neighbour indexes (pgvector's HNSW) read only the photos
    /// holding the nearest vectors (false: every photo, exactly as a store without them).
    public var useNearestNeighbours = true
    /// How many nearest regions (and whole-photo embeddings) per query such a search reads the photos of;
    /// each is then scored exactly as a full scan scores it.
    public var nearestNeighbourCandidates = 400

    /// Seconds of video time between the frames of a video that are indexed (`lookout index --video-every`).
    /// It applies to videos indexed from then on; those indexed before keep their frames until they change.
    public var videoEvery: Double = 2

    /// How the last search read the store: nil after a full scan, else how many photos the
    /// nearest-neighbour indexes pointed it to.
    public private(set) var lastSearchCandidates: Int?

    /// The model whose regions the index holds (nil before the first update).
    public func storedModel() throws(IndexError) -> IndexModel? { try store.storedModel() }

    // MARK: - Updating

    public struct Progress: Sendable {
        public var done: Int
        public var total: Int
        public var current: String
    }

    public struct Summary: Sendable, Equatable {
        public var computed = 0
        public var reused = 0
        public var unchanged = 0
        public var failed = 0
        /// Failures from earlier runs on files that have not changed since.
        public var stillFailing = 0
        public var removed = 0
        /// Frames of videos indexed in this run (each video is also counted once as computed or failed).
        public var videoFrames = 0
        /// Photos another process was indexing (it holds their claims; they are its work).
        public var claimedElsewhere = 0
        /// Files that are not JPEG, PNG or a video, and folders that could not be read.
        public var skippedFiles = 0
        /// Symbolic links whose target does not exist.
        public var brokenLinks = 0
        public var unreadableFolders: [String] = []
    }

    /// Stage 1: the photos under `root` (recursively; hidden entries skipped), by path, with the summary's
    /// counts of skipped files and unreadable folders.
    public func scan(root: String, summary: inout Summary) throws(IndexError) -> (root: String, photos: [FoundPhoto]) {
        let root = try canonicalFolder(root)
        var found: [(path: String, size: Int64, mtime: Int64)] = []
        walk(root, into: &found, summary: &summary)
        found.sort { $0.path < $1.path }
        return (root, found.map { FoundPhoto(path: $0.path, size: $0.size, mtime: $0.mtime) })
    }

    /// Stage 2: one photo's outcome: its content hash, and its regions unless content of that hash is
    /// indexed already. Reads the file; no storage access.
    public static func compute(
        _ photo: FoundPhoto, indexed: Set<String>, embeddingSize: Int, regions: (Image, String) -> [Region],
        imageEmbedding: ImageEmbedder? = nil
    ) -> PhotoOutcome {
        switch read(photo) {
        case .unreadable(let outcome): return outcome
        case .read(let bytes, let hash):
            if indexed.contains(hash) { return .reused(hash: hash) }
            return compute(
                photo, bytes: bytes, hash: hash, embeddingSize: embeddingSize, regions: regions,
                imageEmbedding: imageEmbedding)
        }
    }

    /// A photo's bytes and content hash, or the failure to record.
    static func read(_ photo: FoundPhoto) -> ReadPhoto {
        do {
            let bytes = try FileContents.read(photo.path, maximumSize: 1 << 30)
            var hasher = SHA256()
            hasher.update(bytes)
            return .read(bytes, hash: hasher.finalize())
        } catch {
            return .unreadable(.failed(error: error.reason))
        }
    }

    enum ReadPhoto {
        case read([UInt8], hash: String)
        case unreadable(PhotoOutcome)
    }

    /// Stage 2 for bytes already read: decode, regions, the photo's embedding.
    static func compute(
        _ photo: FoundPhoto, bytes: [UInt8], hash: String, embeddingSize: Int, regions: (Image, String) -> [Region],
        imageEmbedding: ImageEmbedder?
    ) -> PhotoOutcome {
        do {
            let image = try ImageFile.decode(bytes, name: photo.path)
            let blob = Region.encode(regions(image, photo.path), embeddingSize: embeddingSize)
            let whole = try imageEmbedding?(bytes, photo.path).map { Float16($0).bitPattern }
            return .indexed(
                hash: hash, width: image.width, height: image.height, regions: blob, imageEmbedding: whole,
                taken: ImageFile.dateTaken(bytes))
        } catch let error as ImageError {
            return .failed(error: error.problem)  // the path is the record's own
        } catch let error as FileContents.FileError {
            return .failed(error: error.reason)
        } catch {
            return .failed(error: "\(error)")
        }
    }

    /// Brings the index up to date with the photos under `root`: scan, compute what changed, write each.
    ///
    /// The index holds one model and one set of settings. When `model` differs from the stored one and the
    /// index also holds photos outside `root`, those would silently drop out of searches: that is an error
    /// (kind `.settingsChanged`) unless `replacingOtherFolders`, which removes them (their folders can be
    /// indexed again with the new settings).
    public func update(
        root: String, model: IndexModel, regions: (Image, String) -> [Region], imageEmbedding: ImageEmbedder? = nil,
        replacingOtherFolders: Bool = false, lanes: [ComputeLane] = [],
        progress: (Progress) -> Void = { _ in }
    ) throws(IndexError) -> Summary {
        var summary = Summary()
        let (root, found) = try scan(root: root, summary: &summary)
        let prefix = root == "/" ? "/" : root + "/"
        // Every stored file, once: those under `root` are this run's; the others are only pruned.
        let storedFiles = try store.files(withPrefix: "/")
        let known = storedFiles.filter { $0.key.hasPrefix(prefix) }
        let outside = storedFiles.keys.filter { !$0.hasPrefix(prefix) }.sorted()
        var others: [String] = []
        let storedModel = try store.storedModel()
        if let stored = storedModel, stored.key != model.key {
            others = outside
            if !others.isEmpty && !replacingOtherFolders {
                throw IndexError(
                    path: store.location, kind: .settingsChanged,
                    problem:
                        "this index holds \(others.count) photos outside \(root) made with other settings "
                        + "(\(stored.differences(from: model))); indexing with these would drop them from searches. "
                        + "Use the index's settings, or rebuild it with these (the other folders' photos are then "
                        + "removed: index those folders again)")
            }
        }
        if storedModel?.key != model.key { try store.setModel(model) }
        let key = model.key
        var indexed = try store.indexedContents(model: key)

        var work: [FoundPhoto] = []
        for photo in found {
            if let old = known[photo.path], old.size == photo.size, old.mtime == photo.mtime, old.model == key {
                // A video's own row is written once all its frames are: its hash names no regions.
                let video = VideoFrames.isVideo(photo.path)
                if !old.failed, let hash = old.hash, video || indexed.contains(hash) {
                    summary.unchanged += 1
                    continue
                }
                if old.failed {
                    summary.stillFailing += 1
                    continue
                }
            }
            work.append(photo)
        }

        let worker = IndexWorker.current()
        if let shared = store as? any SharedJobStore {
            try runSharedJob(
                shared, work: work, prefix: prefix, model: model, worker: worker, indexed: &indexed,
                summary: &summary, regions: regions, imageEmbedding: imageEmbedding, progress: progress)
        } else {
            if lanes.count > 1 {
                try runClaimsSideBySide(
                    work, known: known, key: key, model: model, worker: worker, indexed: &indexed,
                    summary: &summary, lanes: lanes, regions: regions, imageEmbedding: imageEmbedding,
                    progress: progress)
            } else {
                try runClaims(
                    work, known: known, key: key, model: model, worker: worker, indexed: &indexed, summary: &summary,
                    regions: regions, imageEmbedding: imageEmbedding, progress: progress)
            }
        }

        let seen = Set(found.map(\.path))
        // Photos elsewhere in the index whose files are gone (moved or deleted since) leave it too. A video's
        // frames stay while the video does (those of a changed video were replaced when it was indexed).
        let vanished = others.isEmpty ? outside.filter { !Self.exists(VideoFrames.file(of: $0)) } : []
        let gone = known.keys.filter { !seen.contains(VideoFrames.file(of: $0)) } + others + vanished
        try store.remove(paths: gone, keepingModel: key)
        summary.removed = gone.filter { VideoFrames.split($0) == nil }.count  // a video counts once
        return summary
    }

    /// The work of one process on a store without a shared job: each photo of its own plan, claimed before it
    /// is computed (a photo another process holds is left to it).
    private func runClaims(
        _ work: [FoundPhoto], known: [String: StoredFile], key: String, model: IndexModel, worker: IndexWorker,
        indexed: inout Set<String>, summary: inout Summary, regions: (Image, String) -> [Region],
        imageEmbedding: ImageEmbedder?, progress: (Progress) -> Void
    ) throws(IndexError) {
        for (done, photo) in work.enumerated() {
            progress(Progress(done: done, total: work.count, current: photo.path))
            guard try store.claim(photo.path, worker: worker, until: SQLiteIndexStore.now() + claimLease) else {
                summary.claimedElsewhere += 1
                continue
            }
            // Done by another process since the plan was made: leave it.
            if let now = try store.storedFile(at: photo.path), now.size == photo.size, now.mtime == photo.mtime,
                now.model == key, known[photo.path] != now
            {
                try store.release(photo.path, worker: worker)
                summary.claimedElsewhere += 1
                continue
            }
            try indexPhoto(
                photo, model: model, indexed: &indexed, summary: &summary, regions: regions,
                imageEmbedding: imageEmbedding)
            try store.release(photo.path, worker: worker)
        }
        progress(Progress(done: work.count, total: work.count, current: ""))
    }

    /// `runClaims` with several photos computed at once, one per lane on a thread of its own (each lane's
    /// closures run on one thread at a time). This thread claims, reads and hashes each photo, records the
    /// outcomes and releases the claims, so the store sees one thread. A photo whose content is being computed
    /// in another lane waits for it and is then reused, as one after another would.
    private func runClaimsSideBySide(
        _ work: [FoundPhoto], known: [String: StoredFile], key: String, model: IndexModel, worker: IndexWorker,
        indexed: inout Set<String>, summary: inout Summary, lanes: [ComputeLane], regions: (Image, String) -> [Region],
        imageEmbedding: ImageEmbedder?, progress: (Progress) -> Void
    ) throws(IndexError) {
        let finished = LaneResults()
        var free = Array(lanes.indices.reversed())
        var inFlight: [String: String] = [:]  // path → content hash
        var done = 0
        func finish(_ photo: FoundPhoto, _ outcome: PhotoOutcome) throws(IndexError) {
            try store.record(photo, outcome: outcome, model: key)
            Self.count(outcome, indexed: &indexed, summary: &summary)
            try store.release(photo.path, worker: worker)
            done += 1
        }
        func collect() throws(IndexError) {
            let (photo, lane, outcome) = finished.take()
            free.append(lane)
            inFlight[photo.path] = nil
            try finish(photo, outcome)
        }
        for photo in work {
            progress(Progress(done: done, total: work.count, current: photo.path))
            guard try store.claim(photo.path, worker: worker, until: SQLiteIndexStore.now() + claimLease) else {
                summary.claimedElsewhere += 1
                done += 1
                continue
            }
            if let now = try store.storedFile(at: photo.path), now.size == photo.size, now.mtime == photo.mtime,
                now.model == key, known[photo.path] != now
            {
                try store.release(photo.path, worker: worker)
                summary.claimedElsewhere += 1
                done += 1
                continue
            }
            // A video is computed here, frame after frame, while the lanes finish their photos.
            if VideoFrames.isVideo(photo.path) {
                try indexVideo(
                    photo, model: model, summary: &summary, regions: regions, imageEmbedding: imageEmbedding)
                try store.release(photo.path, worker: worker)
                done += 1
                continue
            }
            let read = Self.read(photo)
            if case .read(_, let hash) = read, inFlight.values.contains(hash) {
                while !inFlight.isEmpty { try collect() }
            }
            switch read {
            case .unreadable(let outcome):
                try finish(photo, outcome)
            case .read(_, let hash) where indexed.contains(hash):
                try finish(photo, .reused(hash: hash))
            case .read(let bytes, let hash):
                if free.isEmpty { try collect() }
                let lane = free.removeLast()
                inFlight[photo.path] = hash
                let (closures, size) = (lanes[lane], model.embeddingSize)
                let thread = Thread {
                    let outcome = Self.compute(
                        photo, bytes: bytes, hash: hash, embeddingSize: size, regions: closures.regions,
                        imageEmbedding: closures.imageEmbedding)
                    finished.put((photo, lane, outcome))
                }
                thread.stackSize = 8 << 20
                thread.start()
            }
        }
        while !inFlight.isEmpty { try collect() }
        progress(Progress(done: work.count, total: work.count, current: ""))
    }

    /// Computes one claimed photo, records its outcome, and counts it in `summary` (new content joins
    /// `indexed`, so later copies of it are reused).
    private func indexPhoto(
        _ photo: FoundPhoto, model: IndexModel, indexed: inout Set<String>, summary: inout Summary,
        regions: (Image, String) -> [Region], imageEmbedding: ImageEmbedder?
    ) throws(IndexError) {
        if VideoFrames.isVideo(photo.path) {
            return try indexVideo(
                photo, model: model, summary: &summary, regions: regions, imageEmbedding: imageEmbedding)
        }
        let outcome = Self.compute(
            photo, indexed: indexed, embeddingSize: model.embeddingSize, regions: regions,
            imageEmbedding: imageEmbedding)
        try store.record(photo, outcome: outcome, model: model.key)
        Self.count(outcome, indexed: &indexed, summary: &summary)
    }

    /// Indexes a claimed video: its old frames removed, then a frame every ``videoEvery`` seconds recorded as
    /// an entry of its own (decoded on another thread while this one computes), then the video's own row. A
    /// video that cannot be read records the failure; one that breaks off (truncated) keeps the frames before
    /// the break and records the failure.
    private func indexVideo(
        _ video: FoundPhoto, model: IndexModel, summary: inout Summary, regions: (Image, String) -> [Region],
        imageEmbedding: ImageEmbedder?
    ) throws(IndexError) {
        let old = try store.files(withPrefix: video.path + VideoFrames.separator).keys.filter {
            VideoFrames.split($0)?.video == video.path
        }
        if !old.isEmpty { try store.remove(paths: Array(old), keepingModel: model.key) }
        func fail(_ problem: String) throws(IndexError) {
            try store.record(video, outcome: .failed(error: problem), model: model.key)
            summary.failed += 1
        }
        let hash: String
        let reader: VideoReader
        do {
            hash = try VideoFrames.contentHash(video.path)
            reader = try VideoReader(path: video.path, threads: 1)
        } catch let error as FileContents.FileError {
            return try fail(error.reason)
        } catch let error as VideoError {
            return try fail(error.problem)
        } catch {
            return try fail("\(error)")
        }
        let frames = VideoReadAhead(
            reader, selection: FrameSelection(.perSecond(1 / max(videoEvery, 0.001))), onlySelected: true)
        defer { frames.stop() }
        do {
            while let (frame, _) = try frames.next() {
                let entry = VideoFrames.entry(video: video.path, time: frame.time)
                var frameHash = SHA256()
                frameHash.update(Array((hash + entry.dropFirst(video.path.count)).utf8))
                let blob = Region.encode(regions(frame.image, entry), embeddingSize: model.embeddingSize)
                var whole: [UInt16]?
                if let imageEmbedding {
                    let png = try ImageFile.encode(frame.image, format: .png, name: entry)
                    whole = try imageEmbedding(png, entry).map { Float16($0).bitPattern }
                }
                try store.record(
                    FoundPhoto(path: entry, size: video.size, mtime: video.mtime),
                    outcome: .indexed(
                        hash: frameHash.finalize(), width: frame.image.width, height: frame.image.height,
                        regions: blob, imageEmbedding: whole),
                    model: model.key)
                summary.videoFrames += 1
            }
        } catch let error as VideoError {
            return try fail(error.problem)
        } catch let error as IndexError {
            throw error
        } catch {
            return try fail("\(error)")
        }
        try store.record(video, outcome: .reused(hash: hash), model: model.key)
        summary.computed += 1
    }

    /// Counts a recorded outcome in `summary`; new content joins `indexed`.
    private static func count(_ outcome: PhotoOutcome, indexed: inout Set<String>, summary: inout Summary) {
        switch outcome {
        case .indexed(let hash, _, _, _, _, _):
            indexed.insert(hash)
            summary.computed += 1
        case .reused: summary.reused += 1
        case .failed: summary.failed += 1
        }
    }

    /// The work of one worker on a shared job: add this scan's plan to the job, then claim and compute photos
    /// until the job under `prefix` is empty — its own plan's photos and those other workers added or left
    /// behind (a dead worker's, once their leases run out). Progress counts the whole job: photos this run
    /// finished, against those plus what still waits or is in hand anywhere.
    private func runSharedJob(
        _ shared: any SharedJobStore, work: [FoundPhoto], prefix: String, model: IndexModel, worker: IndexWorker,
        indexed: inout Set<String>, summary: inout Summary, regions: (Image, String) -> [Region],
        imageEmbedding: ImageEmbedder?, progress: (Progress) -> Void
    ) throws(IndexError) {
        let key = model.key
        try shared.enqueue(work, model: key)
        var done = 0
        var remaining = work.count
        var lastStatus = Stopwatch.now()
        while true {
            guard let photo = try shared.claimNext(under: prefix, model: key, worker: worker, lease: claimLease) else {
                // Nothing free: done once no other worker holds a photo of this folder either. A held photo
                // comes back when its worker records it, or when its lease runs out (the worker died).
                let status = try shared.jobStatus()
                let held = status.inProgress.filter { $0.path.hasPrefix(prefix) }
                if held.isEmpty { break }
                remaining = held.count
                progress(Progress(done: done, total: done + remaining, current: held[0].path))
                usleep(UInt32(min(max(held.map(\.leaseLeft).min() ?? 1, 0.05), 0.5) * 1_000_000))
                continue
            }
            if Stopwatch.now() - lastStatus > 2 || done == 0 {
                let status = try shared.jobStatus()
                remaining = status.waiting + status.inProgress.count
                lastStatus = Stopwatch.now()
            }
            progress(Progress(done: done, total: done + max(remaining, 1), current: photo.path))
            try indexPhoto(
                photo, model: model, indexed: &indexed, summary: &summary, regions: regions,
                imageEmbedding: imageEmbedding)
            done += 1
            remaining = max(remaining - 1, 0)
        }
        // What this worker planned but did not do, another did.
        summary.claimedElsewhere = max(work.count - done, 0)
        progress(Progress(done: done, total: done, current: ""))
    }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return FileSystem.stat(path, &info) == 0
    }

    // MARK: - Searching

    /// A found photo's file now, against what was indexed.
    public enum FileState: Sendable, Equatable {
        case unchanged
        /// Its size or modification time differs: the boxes may not fit it any more.
        case changed
        /// The file is gone.
        case missing
    }

    /// Which evidence a search weighs: the regions (objects), the whole-photo embedding (scenes), or the
    /// better of the two.
    public enum Evidence: String, Sendable {
        case both, objects, scenes
    }

    public struct Hit: Sendable {
        public var path: String
        public var width: Int
        public var height: Int
        /// The photo's score: the better of ``objectScore`` and ``sceneScore`` (those the search weighed).
        public var score: Float
        public var detections: [(score: Float, box: [Float])]
        public var fileState: FileState = .unchanged
        /// The best region's score (nil when no region passed, or objects were not searched).
        public var objectScore: Float?
        /// ``SceneScore`` of the whole-photo embedding (nil without one, or when scenes were not searched).
        public var sceneScore: Float?
        /// For a video: the time (seconds) of its best frame, whose entry ``frame`` is; ``path`` is the video.
        public var time: Double?
        /// The indexed entry the evidence comes from: `VIDEO#t=SECONDS` for a video's frame, else ``path``.
        public var entry: String { time.map { VideoFrames.entry(video: path, time: $0) } ?? path }
        /// What decided ``score``.
        public var evidence: Evidence { (sceneScore ?? -1) > (objectScore ?? -1) ? .scenes : .objects }

        public init(path: String, width: Int, height: Int, score: Float, detections: [(score: Float, box: [Float])]) {
            self.path = path
            self.width = width
            self.height = height
            self.score = score
            self.detections = detections
            self.objectScore = detections.first?.score
        }
    }

    /// Every indexed photo with evidence above `confidence` for the query embedding, best first, at most
    /// `top`. Object evidence is the photo's best region (the detector head's score); scene evidence is the
    /// whole-photo CLIP embedding's cosine with the query, mapped by ``SceneScore``; a photo scores the
    /// better of the two that `evidence` asks for (indexes without image embeddings have objects only).
    public func search(
        text: [Float], confidence: Float, top: Int, evidence: Evidence = .both, filter: PhotoFilter = PhotoFilter()
    ) throws(IndexError) -> [Hit] {
        try search(alternatives: [text], confidence: confidence, top: top, evidence: evidence, filter: filter)
    }

    /// ``search(text:confidence:top:evidence:filter:)`` for a query with alternatives (`sofa|couch`): each
    /// region and each photo's scene takes the best score of the alternatives' embeddings.
    public func search(
        alternatives: [[Float]], confidence: Float, top: Int, evidence: Evidence = .both,
        filter: PhotoFilter = PhotoFilter()
    ) throws(IndexError) -> [Hit] {
        guard let model = try store.storedModel() else { return [] }
        let scorers = alternatives.map { RegionScorer(text: $0, parameters: model.scoreParameters) }
        let queries = alternatives.map { text in
            let norm = max(text.reduce(0) { $0 + $1 * $1 }.squareRoot(), 1e-12)
            return text.map { $0 / norm }
        }
        var hits: [Hit] = []
        var scratch: [Float] = []
        func visit(_ photo: StoredPhoto) {
            guard filter.admits(photo) else { return }
            let regions = photo.regions, image = photo.imageEmbedding
            var hit = Hit(path: photo.path, width: photo.width, height: photo.height, score: 0, detections: [])
            if evidence != .scenes {
                var found = scorers[0].score(
                    blob: regions, embeddingSize: model.embeddingSize, above: confidence, scratch: &scratch)
                for scorer in scorers.dropFirst() {
                    // The same region (the same box) keeps the best of its scores.
                    for other in scorer.score(
                        blob: regions, embeddingSize: model.embeddingSize, above: confidence, scratch: &scratch)
                    {
                        if let same = found.firstIndex(where: { $0.box == other.box }) {
                            found[same].score = max(found[same].score, other.score)
                        } else {
                            found.append(other)
                        }
                    }
                }
                hit.detections = found.sorted { $0.score > $1.score }
                hit.objectScore = hit.detections.first?.score
            }
            if evidence != .objects, let image {
                for query in queries where image.count == 2 * query.count {
                    let (dot, squares) = Self.halfDot(image, query)
                    // The stored vector is F16: its norm is 1 within about 1e-4; divide as `similar` does.
                    let score = model.sceneScore.score(cosine: dot / max(squares.squareRoot(), 1e-12))
                    if score > confidence && score > (hit.sceneScore ?? -1) { hit.sceneScore = score }
                }
            }
            let best = max(hit.objectScore ?? -1, hit.sceneScore ?? -1)
            guard best > confidence else { return }
            hit.score = best
            hits.append(hit)
        }
        if useNearestNeighbours, let nearest = store as? any NearestNeighbourStore,
            let contents = try nearest.nearestContents(
                regionQueries: evidence != .scenes ? queries : [], imageQueries: evidence != .objects ? queries : [],
                model: model.key, limit: max(nearestNeighbourCandidates, 2 * top))
        {
            lastSearchCandidates = contents.count
            try nearest.forEachPhoto(model: model.key, contents: contents, visit)
        } else {
            lastSearchCandidates = nil
            try store.forEachPhoto(model: model.key, visit)
        }
        hits.sort { $0.score != $1.score ? $0.score > $1.score : $0.path < $1.path }
        // A video once, at its best frame (the earliest of equal ones).
        var videos: Set<String> = []
        hits = hits.compactMap { hit in
            guard let (video, time) = VideoFrames.split(hit.path) else { return hit }
            guard videos.insert(video).inserted else { return nil }
            var moved = hit
            moved.path = video
            moved.time = time
            return moved
        }
        var kept = Array(hits.prefix(top))
        for k in kept.indices { kept[k].fileState = try fileState(kept[k].path) }
        return kept
    }

    /// A stored whole-photo embedding (F16, little-endian) against `query`: their dot product, and the
    /// stored vector's squared norm.
    static func halfDot(_ image: UnsafeRawBufferPointer, _ query: [Float]) -> (dot: Float, squares: Float) {
        var dot: Float = 0
        var squares: Float = 0
        for d in 0..<query.count {
            let bits = UInt16(littleEndian: image.loadUnaligned(fromByteOffset: 2 * d, as: UInt16.self))
            let value = Float(Float16(bitPattern: bits))
            dot += value * query[d]
            squares += value * value
        }
        return (dot, squares)
    }

    /// The indexed photos nearest to a whole-photo embedding (cosine, best first), at most `top`: the
    /// photos of an index made with an image tower.
    public func similar(
        to embedding: [Float], top: Int, filter: PhotoFilter = PhotoFilter()
    ) throws(IndexError) -> [(path: String, cosine: Float)] {
        guard let model = try store.storedModel() else { return [] }
        let norm = max(embedding.reduce(0) { $0 + $1 * $1 }.squareRoot(), 1e-12)
        let query = embedding.map { $0 / norm }
        var found: [(path: String, cosine: Float)] = []
        try store.forEachPhoto(model: model.key) { photo in
            guard filter.admits(photo), let image = photo.imageEmbedding, image.count == 2 * query.count else { return }
            let (dot, squares) = Self.halfDot(image, query)
            found.append((photo.path, dot / max(squares.squareRoot(), 1e-12)))
        }
        found.sort { $0.cosine != $1.cosine ? $0.cosine > $1.cosine : $0.path < $1.path }
        return Array(found.prefix(top))
    }

    /// Groups of near-identical indexed photos: two photos are linked when the cosine of their whole-photo
    /// embeddings is at least `threshold`, and a group is a connected set of links (so a burst whose first
    /// and last frames differ more than the threshold still forms one group through the frames between).
    /// Each group lists its photos with their best cosine to another member, best first; groups come largest
    /// first. Photos indexed without an image tower take no part.
    public func duplicateGroups(
        threshold: Float, filter: PhotoFilter = PhotoFilter()
    ) throws(IndexError) -> [[(path: String, cosine: Float)]] {
        guard let model = try store.storedModel() else { return [] }
        var paths: [String] = []
        var vectors: [Float] = []
        var width = 0
        try store.forEachPhoto(model: model.key) { photo in
            guard filter.admits(photo), let image = photo.imageEmbedding, image.count >= 2, image.count % 2 == 0,
                width == 0 || image.count == 2 * width
            else { return }
            width = image.count / 2
            var vector = (0..<width).map { d in
                Float(
                    Float16(
                        bitPattern: UInt16(littleEndian: image.loadUnaligned(fromByteOffset: 2 * d, as: UInt16.self))))
            }
            let norm = max(vector.reduce(0) { $0 + $1 * $1 }.squareRoot(), 1e-12)
            for d in vector.indices { vector[d] /= norm }
            paths.append(photo.path)
            vectors += vector
        }
        let count = paths.count
        guard count > 1 else { return [] }
        // Cosines a block of rows at a time (one GEMM each), links kept in a union-find.
        var parent = Array(0..<count)
        func root(_ i: Int) -> Int {
            var i = i
            while parent[i] != i {
                parent[i] = parent[parent[i]]
                i = parent[i]
            }
            return i
        }
        var best = [Float](repeating: -1, count: count)
        let block = 256
        var cosines = [Float](repeating: 0, count: block * count)
        vectors.withUnsafeBufferPointer { all in
            for start in stride(from: 0, to: count, by: block) {
                let rows = min(block, count - start)
                cosines.withUnsafeMutableBufferPointer { out in
                    BLAS.gemm(
                        m: rows, n: count, k: width, a: all.baseAddress! + start * width, b: all.baseAddress!,
                        transposeB: true, c: out.baseAddress!)
                }
                for r in 0..<rows {
                    let i = start + r
                    for j in (i + 1)..<count where cosines[r * count + j] >= threshold {
                        let cosine = cosines[r * count + j]
                        best[i] = max(best[i], cosine)
                        best[j] = max(best[j], cosine)
                        let (a, b) = (root(i), root(j))
                        if a != b { parent[max(a, b)] = min(a, b) }
                    }
                }
            }
        }
        var groups: [Int: [(path: String, cosine: Float)]] = [:]
        for i in 0..<count where best[i] >= threshold {
            groups[root(i), default: []].append((paths[i], min(best[i], 1)))
        }
        return groups.values.map { group in
            group.sorted { $0.cosine != $1.cosine ? $0.cosine > $1.cosine : $0.path < $1.path }
        }.sorted { $0.count != $1.count ? $0.count > $1.count : $0[0].path < $1[0].path }
    }

    /// Whether the file at `path` is still what was indexed.
    public func fileState(_ path: String) throws(IndexError) -> FileState {
        var info = stat()
        guard FileSystem.stat(path, &info) == 0 else { return .missing }
        guard let stored = try store.storedFile(at: path) else { return .changed }
        let mtime = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
        return stored.size == Int64(info.st_size) && stored.mtime == mtime ? .unchanged : .changed
    }

    // MARK: - Reports

    public func statistics() throws(IndexError) -> IndexStatistics { try store.statistics() }
    public func failures() throws(IndexError) -> [(path: String, error: String)] { try store.failures() }
    /// The store's consistency check: "ok" when sound.
    public func integrityCheck() throws(IndexError) -> String { try store.integrityCheck() }

    // MARK: - Files

    private func canonicalFolder(_ path: String) throws(IndexError) -> String {
        guard let result = FileSystem.realpath(path) else {
            throw IndexError(
                path: path, kind: .folder, problem: "cannot open the folder: \(String(cString: strerror(errno)))")
        }
        var info = stat()
        guard FileSystem.stat(result, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw IndexError(path: path, kind: .folder, problem: "not a folder")
        }
        guard let directory = FileSystem.opendir(result) else {
            throw IndexError(
                path: path, kind: .folder, problem: "cannot read the folder: \(String(cString: strerror(errno)))")
        }
        closedir(directory)
        return result
    }

    private func walk(
        _ folder: String, into found: inout [(path: String, size: Int64, mtime: Int64)], summary: inout Summary
    ) {
        var pending = [folder]
        // Folders already walked, by device and inode: a linked folder is walked once, and a link loop ends.
        var walked = Set<[UInt64]>()
        var rootInfo = stat()
        if FileSystem.stat(folder, &rootInfo) == 0 {
            walked.insert([UInt64(rootInfo.st_dev), UInt64(rootInfo.st_ino)])
        }
        while let current = pending.popLast() {
            guard let directory = FileSystem.opendir(current) else {
                summary.unreadableFolders.append(current)
                continue
            }
            defer { closedir(directory) }
            while let entry = readdir(directory) {
                let name = FileSystem.name(of: entry)
                if name.hasPrefix(".") { continue }
                let path = current == "/" ? "/" + name : current + "/" + name
                var info = stat()
                guard FileSystem.lstat(path, &info) == 0 else { continue }
                let type = info.st_mode & S_IFMT
                if type == S_IFLNK {  // follow links, to files and to folders (each folder walked once)
                    guard FileSystem.stat(path, &info) == 0 else {
                        summary.brokenLinks += 1
                        continue
                    }
                }
                let target = info.st_mode & S_IFMT
                if target == S_IFDIR {
                    if walked.insert([UInt64(info.st_dev), UInt64(info.st_ino)]).inserted { pending.append(path) }
                    continue
                }
                guard target == S_IFREG else { continue }
                let lower = name.lowercased()
                guard
                    lower.hasSuffix(".jpg") || lower.hasSuffix(".jpeg") || lower.hasSuffix(".png")
                        || VideoFrames.isVideo(lower)
                else {
                    summary.skippedFiles += 1
                    continue
                }
                let mtime = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
                found.append((path, Int64(info.st_size), mtime))
            }
        }
    }
}

/// How a whole-photo CLIP cosine becomes a score comparable with the detector's region scores (a
/// probability that the query is true of the photo): `sigmoid((cosine − center) · slope)`.
///
/// A tower trained here records its own, fitted by logistic regression on held-out scenes (the demo tower:
/// `scripts/demo/evaluate_image.py --calibrate`). For towers without (OpenAI's ViT-B/32), ``standard``: CLIP's
/// cosines between a photo and a matching caption sit around 0.25–0.35 and non-matching ones below 0.2; these
/// constants put a clear match near 0.9. They are not measured here (the official weights cannot be
/// downloaded on the machines this was built on).
public struct SceneScore: Sendable, Equatable {
    public var center: Float
    public var slope: Float

    public static let standard = SceneScore(center: 0.25, slope: 40)

    public init(center: Float, slope: Float) {
        self.center = center
        self.slope = slope
    }

    public func score(cosine: Float) -> Float { 1 / (1 + expf(-(cosine - center) * slope)) }
}

/// Which indexed photos a search considers: those under a folder, taken (EXIF date, else the file's
/// modification time on this machine's clock) from `after` (inclusive) to `before` (exclusive).
public struct PhotoFilter: Sendable {
    /// A canonical folder path; photos under it pass.
    public var folder: String?
    /// Wall-clock seconds (``CalendarTime``).
    public var after: Int64?
    public var before: Int64?

    public init(folder: String? = nil, after: Int64? = nil, before: Int64? = nil) {
        self.folder = folder
        self.after = after
        self.before = before
    }

    public func admits(_ photo: StoredPhoto) -> Bool {
        if let folder, !photo.path.hasPrefix(folder.hasSuffix("/") ? folder : folder + "/") { return false }
        guard after != nil || before != nil else { return true }
        let date = photo.taken ?? CalendarTime.local(nanoseconds: photo.modified)
        if let after, date < after { return false }
        if let before, date >= before { return false }
        return true
    }
}

/// What computes photos in one lane of `PhotoIndex.update`: its own region extractor (an engine with its own
/// threads) and photo embedder. A lane's closures are called from one thread at a time.
public struct ComputeLane: @unchecked Sendable {
    public let regions: (Image, String) -> [Region]
    public let imageEmbedding: ImageEmbedder?

    public init(regions: @escaping (Image, String) -> [Region], imageEmbedding: ImageEmbedder?) {
        self.regions = regions
        self.imageEmbedding = imageEmbedding
    }
}

/// Finished photos from the lanes, taken in the order they finish.
final class LaneResults: @unchecked Sendable {
    private let condition = NSCondition()
    private var results: [(FoundPhoto, Int, PhotoOutcome)] = []

    func put(_ result: (FoundPhoto, Int, PhotoOutcome)) {
        condition.lock()
        results.append(result)
        condition.signal()
        condition.unlock()
    }

    func take() -> (FoundPhoto, Int, PhotoOutcome) {
        condition.lock()
        defer { condition.unlock() }
        while results.isEmpty { condition.wait() }
        return results.removeFirst()
    }
}
