import Foundation
import LookoutEngine
import LookoutFrames
import LookoutImage
import LookoutJSON
import LookoutSupport
import LookoutTensor
import LookoutVideo
import LookoutWeights

/// A whole photo's CLIP image embedding, from the file's bytes (the image tower decodes as PIL does) and, where
/// the detector decoded them already, that image (a JPEG's pixels serve both: ``ImageTower/embedding(_:decoded:name:backend:)``).
public typealias ImageEmbedder = (_ bytes: [UInt8], _ decoded: Image?, _ path: String) throws -> [Float]

/// What a prompt-free detector names in a photo, encoded for the store (``PhotoLabel/encode(_:)``).
public typealias PhotoLabeler = (_ image: Image, _ path: String) -> String

#if canImport(Glibc)
    import Glibc
#endif

/// Updating an index: scan the folder, compute what changed (side by side in lanes, or as one worker of a
/// shared job), record each photo, prune what is gone, bring the region lists up to date.
extension PhotoIndex {
    public struct Progress: Sendable {
        public var done: Int
        public var total: Int
        public var current: String
    }

    public struct Summary: Sendable, Equatable {
        public var computed = 0
        /// Photos whose whole-photo embedding alone was computed again (the tower changed; regions kept).
        public var reembedded = 0
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
        /// Symbolic links to files or folders outside the indexed folder, left out (``PhotoIndex/followLinks``
        /// follows them).
        public var linksOutside = 0
        public var unreadableFolders: [String] = []
        /// What was done to the region lists (built, rebuilt), in words; nil when nothing worth saying.
        public var lists: String?
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
        _ photo: FoundPhoto, indexed: Set<String>, embeddingSize: Int,
        regions: (Image, String) throws -> [Region],
        imageEmbedding: ImageEmbedder? = nil, labels: PhotoLabeler? = nil
    ) -> PhotoOutcome {
        switch read(photo) {
        case .unreadable(let outcome): return outcome
        case .read(let bytes, let hash):
            if indexed.contains(hash) { return .reused(hash: hash) }
            return compute(
                photo, bytes: bytes, hash: hash, embeddingSize: embeddingSize, regions: regions,
                imageEmbedding: imageEmbedding, labels: labels)
        }
    }

    /// A photo's bytes and content hash, or the failure to record.
    static func read(_ photo: FoundPhoto, times: IndexStageTimes? = nil) -> ReadPhoto {
        do {
            let bytes = try times.time("read the file") { () throws(FileContents.FileError) in
                try FileContents.read(photo.path, maximumSize: 1 << 30)
            }
            return .read(
                bytes,
                hash: times.time("hash its content") {
                    var hasher = SHA256()
                    hasher.update(bytes)
                    return hasher.finalize()
                })
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
        _ photo: FoundPhoto, bytes: [UInt8], hash: String, embeddingSize: Int,
        regions: (Image, String) throws -> [Region],
        imageEmbedding: ImageEmbedder?, labels: PhotoLabeler?, times: IndexStageTimes? = nil,
        reduced: (longSide: Int, shortSide: Int)? = nil
    ) -> PhotoOutcome {
        do {
            let (image, width, height) = try times.time("decode") {
                () throws(ImageError) -> (Image, Int, Int) in
                if let reduced, labels == nil {
                    return try ImageFile.decodeReduced(
                        bytes, name: photo.path, longSide: reduced.longSide, shortSide: reduced.shortSide)
                }
                let image = try ImageFile.decode(bytes, name: photo.path)
                return (image, image.width, image.height)
            }
            var found = try times.time("detect (regions)") { try regions(image, photo.path) }
            if width != image.width || height != image.height {
                // Decoded at a reduced scale: the boxes in the photo's own pixels.
                let (x, y) = (Float(width) / Float(image.width), Float(height) / Float(image.height))
                for i in found.indices {
                    let box = found[i].box
                    found[i].box = [box[0] * x, box[1] * y, box[2] * x, box[3] * y]
                }
            }
            let blob = Region.encode(found, embeddingSize: embeddingSize)
            // Stages that do not run are not timed (`--timings` lists only what ran).
            let whole = try imageEmbedding.map { embed in
                try times.time("whole-photo embedding") {
                    try embed(bytes, image, photo.path).map { Float16($0).bitPattern }
                }
            }
            let named = labels.map { label in times.time("labels") { label(image, photo.path) } }
            return .indexed(
                hash: hash, width: width, height: height, regions: blob, imageEmbedding: whole,
                taken: ImageFile.dateTaken(bytes), labels: named)
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
        root: String, model: IndexModel, regions: (Image, String) throws -> [Region],
        imageEmbedding: ImageEmbedder? = nil,
        labels: PhotoLabeler? = nil, replacingOtherFolders: Bool = false, lanes: [ComputeLane] = [],
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
        // Another whole-photo tower alone: the stored regions are kept and only the embeddings computed.
        let reembedFrom =
            storedModel.flatMap { stored in
                stored.key != key && stored.regionsKey == model.regionsKey && imageEmbedding != nil ? stored.key : nil
            }
        if let old = reembedFrom, let imageEmbedding, !(store is any SharedJobStore) {
            work = try reembed(
                work, known: known, from: old, to: key, worker: worker, indexed: &indexed, summary: &summary,
                imageEmbedding: imageEmbedding, progress: progress)
        }
        if let shared = store as? any SharedJobStore {
            // Each worker re-embeds the photos it claims (those whose stored content it can still read).
            try runSharedJob(
                shared, work: work, prefix: prefix, model: model, worker: worker, indexed: &indexed,
                summary: &summary, regions: regions, imageEmbedding: imageEmbedding, labels: labels,
                reembedFrom: reembedFrom, progress: progress)
        } else {
            if lanes.count > 1 {
                try runClaimsSideBySide(
                    work, known: known, key: key, model: model, worker: worker, indexed: &indexed,
                    summary: &summary, lanes: lanes, regions: regions, imageEmbedding: imageEmbedding, labels: labels,
                    progress: progress)
            } else {
                try runClaims(
                    work, known: known, key: key, model: model, worker: worker, indexed: &indexed, summary: &summary,
                    regions: regions, imageEmbedding: imageEmbedding, labels: labels, progress: progress)
            }
        }

        let seen = Set(found.map(\.path))
        // Photos elsewhere in the index whose files are gone (moved or deleted since) leave it too. A video's
        // frames stay while the video does (those of a changed video were replaced when it was indexed).
        let vanished = others.isEmpty ? outside.filter { !Self.exists(VideoFrames.file(of: $0)) } : []
        let gone = known.keys.filter { !seen.contains(VideoFrames.file(of: $0)) } + others + vanished
        try store.remove(paths: gone, keepingModel: key)
        summary.removed = gone.filter { VideoFrames.split($0) == nil }.count  // a video counts once
        summary.lists = try updateLists(model: model, progress: progress)
        return summary
    }

    /// Another whole-photo tower, the same regions: each unchanged photo keeps its stored regions, size, date and
    /// labels under the new model `key`, and only its embedding is computed (the detector does not run). Returns
    /// the photos that need the whole work: changed since, videos, failures, content the store cannot give back.
    private func reembed(
        _ work: [FoundPhoto], known: [String: StoredFile], from old: String, to key: String, worker: IndexWorker,
        indexed: inout Set<String>, summary: inout Summary, imageEmbedding: ImageEmbedder,
        progress: (Progress) -> Void
    ) throws(IndexError) -> [FoundPhoto] {
        var rest: [FoundPhoto] = []
        for (done, photo) in work.enumerated() {
            guard let file = known[photo.path], file.size == photo.size, file.mtime == photo.mtime, file.model == old,
                !file.failed, let hash = file.hash, !VideoFrames.isVideo(photo.path)
            else {
                rest.append(photo)
                continue
            }
            progress(Progress(done: done, total: work.count, current: photo.path))
            guard try store.claim(photo.path, worker: worker, until: SQLiteIndexStore.now() + claimLease) else {
                summary.claimedElsewhere += 1
                continue
            }
            defer { try? store.release(photo.path, worker: worker) }
            if indexed.contains(hash) {  // a copy of content re-embedded a moment ago
                try store.record(photo, outcome: .reused(hash: hash), model: key)
                summary.reused += 1
                continue
            }
            guard case .read(let bytes, let now) = Self.read(photo), now == hash,
                try recordReembedded(
                    photo, bytes: bytes, hash: hash, from: old, to: key, indexed: &indexed,
                    imageEmbedding: imageEmbedding)
            else {
                rest.append(photo)
                continue
            }
            summary.reembedded += 1
        }
        return rest
    }

    /// `photo` (its `bytes`, of content `hash`) recorded under `key` with the regions, size, date and labels its
    /// content has under the model `old` and a new embedding: whether it was (false when the store no longer holds
    /// that content, or the photo cannot be embedded).
    private func recordReembedded(
        _ photo: FoundPhoto, bytes: [UInt8], hash: String, from old: String, to key: String,
        indexed: inout Set<String>, imageEmbedding: ImageEmbedder
    ) throws(IndexError) -> Bool {
        guard
            case .indexed(_, let width, let height, let regions, _, let taken, let labels)? =
                try store.storedContent(hash: hash, model: old),
            let embedding = try? imageEmbedding(bytes, nil, photo.path)
        else { return false }
        try store.record(
            photo,
            outcome: .indexed(
                hash: hash, width: width, height: height, regions: regions,
                imageEmbedding: embedding.map { Float16($0).bitPattern }, taken: taken, labels: labels),
            model: key)
        indexed.insert(hash)
        return true
    }

    /// The work of one process on a store without a shared job: each photo of its own plan, claimed before it
    /// is computed (a photo another process holds is left to it).
    private func runClaims(
        _ work: [FoundPhoto], known: [String: StoredFile], key: String, model: IndexModel, worker: IndexWorker,
        indexed: inout Set<String>, summary: inout Summary, regions: (Image, String) throws -> [Region],
        imageEmbedding: ImageEmbedder?, labels: PhotoLabeler?, progress: (Progress) -> Void
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
                imageEmbedding: imageEmbedding, labels: labels)
            try store.release(photo.path, worker: worker)
        }
        progress(Progress(done: work.count, total: work.count, current: ""))
    }

    /// `runClaims` with several photos computed at once, one per lane on a thread of its own (each lane's
    /// closures run on one thread at a time). This thread claims each photo, records the outcomes and releases the
    /// claims, so the store sees one thread; a lane reads and hashes its photo (a 12-megapixel file's hash alone
    /// took longer than a GPU's detection, so one thread hashing for all held every lane back). A photo whose
    /// content is being computed in another lane waits for it and is then reused, as one after another would
    /// (``ContentsInFlight``).
    private func runClaimsSideBySide(
        _ work: [FoundPhoto], known: [String: StoredFile], key: String, model: IndexModel, worker: IndexWorker,
        indexed: inout Set<String>, summary: inout Summary, lanes: [ComputeLane],
        regions: (Image, String) throws -> [Region],
        imageEmbedding: ImageEmbedder?, labels: PhotoLabeler?, progress: (Progress) -> Void
    ) throws(IndexError) {
        let finished = LaneResults()
        let threads = LaneThreads(count: lanes.count)
        defer { threads.close() }
        let contents = ContentsInFlight(indexed: indexed)
        let (times, reduced) = (stageTimes, reducedDecode)
        var free = Array(lanes.indices.reversed())
        var inFlight = 0
        var done = 0
        func finish(_ photo: FoundPhoto, _ outcome: PhotoOutcome) throws(IndexError) {
            try times.time("record and release (one thread)") { () throws(IndexError) in
                try store.record(photo, outcome: outcome, model: key)
                Self.count(outcome, indexed: &indexed, summary: &summary)
                try store.release(photo.path, worker: worker)
            }
            done += 1
        }
        func collect() throws(IndexError) {
            let (photo, lane, outcome) = times.time("wait for a lane (one thread)") { finished.take() }
            free.append(lane)
            inFlight -= 1
            try finish(photo, outcome)
        }
        for photo in work {
            progress(Progress(done: done, total: work.count, current: photo.path))
            let claimed = try times.time("claim (one thread)") { () throws(IndexError) -> Bool in
                guard try store.claim(photo.path, worker: worker, until: SQLiteIndexStore.now() + claimLease) else {
                    return false
                }
                if let now = try store.storedFile(at: photo.path), now.size == photo.size, now.mtime == photo.mtime,
                    now.model == key, known[photo.path] != now
                {
                    try store.release(photo.path, worker: worker)
                    return false
                }
                return true
            }
            guard claimed else {
                summary.claimedElsewhere += 1
                done += 1
                continue
            }
            // A video is computed here, frame after frame, while the lanes finish their photos.
            if VideoFrames.isVideo(photo.path) {
                try indexVideo(
                    photo, model: model, summary: &summary, regions: regions, imageEmbedding: imageEmbedding,
                    labels: labels)
                try store.release(photo.path, worker: worker)
                done += 1
                continue
            }
            if free.isEmpty { try collect() }
            let lane = free.removeLast()
            inFlight += 1
            let (closures, size) = (lanes[lane], model.embeddingSize)
            threads.run(lane) {
                switch Self.read(photo, times: times) {
                case .unreadable(let failed): finished.put((photo, lane, failed))
                case .read(let bytes, let hash):
                    guard contents.begin(hash) else {
                        finished.put((photo, lane, .reused(hash: hash)))
                        return
                    }
                    let outcome = Self.compute(
                        photo, bytes: bytes, hash: hash, embeddingSize: size, regions: closures.regions,
                        imageEmbedding: closures.imageEmbedding, labels: closures.labels, times: times,
                        reduced: reduced)
                    // Handed over before a lane waiting for this content is let go, so that it is recorded first.
                    finished.put((photo, lane, outcome))
                    if case .indexed = outcome {
                        contents.end(hash, indexed: true)
                    } else {
                        contents.end(hash, indexed: false)
                    }
                }
            }
        }
        while inFlight > 0 { try collect() }
        progress(Progress(done: work.count, total: work.count, current: ""))
    }

    /// Computes one claimed photo, records its outcome, and counts it in `summary` (new content joins
    /// `indexed`, so later copies of it are reused).
    private func indexPhoto(
        _ photo: FoundPhoto, model: IndexModel, indexed: inout Set<String>, summary: inout Summary,
        regions: (Image, String) throws -> [Region], imageEmbedding: ImageEmbedder?, labels: PhotoLabeler?,
        reembeddingFrom old: String? = nil
    ) throws(IndexError) {
        if VideoFrames.isVideo(photo.path) {
            return try indexVideo(
                photo, model: model, summary: &summary, regions: regions, imageEmbedding: imageEmbedding, labels: labels
            )
        }
        let outcome: PhotoOutcome
        switch Self.read(photo, times: stageTimes) {
        case .unreadable(let failure): outcome = failure
        case .read(let bytes, let hash):
            if indexed.contains(hash) {
                outcome = .reused(hash: hash)
            } else if let old, let imageEmbedding,
                try recordReembedded(
                    photo, bytes: bytes, hash: hash, from: old, to: model.key, indexed: &indexed,
                    imageEmbedding: imageEmbedding)
            {
                // Its content stored under the model `old` (another tower alone): only the embedding was computed.
                summary.reembedded += 1
                return
            } else {
                outcome = Self.compute(
                    photo, bytes: bytes, hash: hash, embeddingSize: model.embeddingSize, regions: regions,
                    imageEmbedding: imageEmbedding, labels: labels, times: stageTimes, reduced: reducedDecode)
            }
        }
        try store.record(photo, outcome: outcome, model: model.key)
        Self.count(outcome, indexed: &indexed, summary: &summary)
    }

    /// Indexes a claimed video: its old frames removed, then a frame every ``videoEvery`` seconds recorded as
    /// an entry of its own (decoded on another thread while this one computes), then the video's own row. A
    /// video that cannot be read records the failure; one that breaks off (truncated) keeps the frames before
    /// the break and records the failure.
    private func indexVideo(
        _ video: FoundPhoto, model: IndexModel, summary: inout Summary,
        regions: (Image, String) throws -> [Region],
        imageEmbedding: ImageEmbedder?, labels: PhotoLabeler?
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
        do {
            // The index's work on a frame is its own (regions, the whole-photo embedding, labels), done here.
            try FramePipeline(name: video.path).run(frames) { item in
                let frame = item.frame
                let entry = VideoFrames.entry(video: video.path, time: frame.time)
                var frameHash = SHA256()
                frameHash.update(Array((hash + entry.dropFirst(video.path.count)).utf8))
                let blob = Region.encode(try regions(frame.image, entry), embeddingSize: model.embeddingSize)
                var whole: [UInt16]?
                if let imageEmbedding {
                    let png = try ImageFile.encode(frame.image, format: .png, name: entry)
                    whole = try imageEmbedding(png, nil, entry).map { Float16($0).bitPattern }
                }
                try store.record(
                    FoundPhoto(path: entry, size: video.size, mtime: video.mtime),
                    outcome: .indexed(
                        hash: frameHash.finalize(), width: frame.image.width, height: frame.image.height,
                        regions: blob, imageEmbedding: whole, labels: labels?(frame.image, entry)),
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
        case .indexed(let hash, _, _, _, _, _, _):
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
        indexed: inout Set<String>, summary: inout Summary, regions: (Image, String) throws -> [Region],
        imageEmbedding: ImageEmbedder?, labels: PhotoLabeler?, reembedFrom: String?, progress: (Progress) -> Void
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
                imageEmbedding: imageEmbedding, labels: labels, reembeddingFrom: reembedFrom)
            done += 1
            remaining = max(remaining - 1, 0)
        }
        // What this worker planned but did not do, another did.
        summary.claimedElsewhere = max(work.count - done, 0)
        progress(Progress(done: done, total: done, current: ""))
    }

    /// Brings the store's nearest-neighbour index up to date with what was recorded: an SQLite index's region
    /// lists (built once the index holds ``minimumPhotosForLists`` photos; rebuilt when missing, damaged or too
    /// far behind), PostgreSQL's IVFFlat index over region vectors (made from as many photos, remade as they
    /// double): what was done, in words, or nil when nothing is worth saying.
    @discardableResult
    public func updateLists(model: IndexModel, progress: (Progress) -> Void = { _ in }) throws(IndexError) -> String? {
        guard let nearest = store as? any NearestNeighbourStore else { return nil }
        return try nearest.updateLists(model: model, minimumPhotos: minimumPhotosForLists) { step in
            progress(Progress(done: 0, total: 0, current: step))
        }
    }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return FileSystem.stat(path, &info) == 0
    }
}

/// What computes photos in one lane of `PhotoIndex.update`: its own region extractor (an engine with its own
/// threads) and photo embedder. A lane's closures are called from one thread at a time.
public struct ComputeLane: @unchecked Sendable {
    public let regions: (Image, String) throws -> [Region]
    public let imageEmbedding: ImageEmbedder?
    public let labels: PhotoLabeler?

    public init(
        regions: @escaping (Image, String) throws -> [Region], imageEmbedding: ImageEmbedder?,
        labels: PhotoLabeler? = nil
    ) {
        self.regions = regions
        self.imageEmbedding = imageEmbedding
        self.labels = labels
    }
}

/// Seconds spent in each stage of an index update, summed over the threads that ran it (`lookout index
/// --timings`): where a lane's time goes, and what the one thread that claims and records spends. Stages are
/// listed in the order first timed.
public final class IndexStageTimes: @unchecked Sendable {
    private let lock = NSLock()
    private var seconds: [String: Double] = [:]
    private var counts: [String: Int] = [:]
    private var order: [String] = []

    public init() {}

    /// Each stage's total seconds and how many times it ran.
    public var stages: [(stage: String, seconds: Double, count: Int)] {
        lock.withLock { order.map { ($0, seconds[$0]!, counts[$0]!) } }
    }

    func add(_ stage: String, _ value: Double) {
        lock.withLock {
            if seconds[stage] == nil { order.append(stage) }
            seconds[stage, default: 0] += value
            counts[stage, default: 0] += 1
        }
    }
}

extension Optional where Wrapped == IndexStageTimes {
    /// `body`, its time added to `stage` where times are kept.
    func time<T, E: Error>(_ stage: String, _ body: () throws(E) -> T) throws(E) -> T {
        guard let times = self else { return try body() }
        let start = DispatchTime.now().uptimeNanoseconds
        defer { times.add(stage, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9) }
        return try body()
    }
}

/// The contents the lanes of ``PhotoIndex/runClaimsSideBySide`` are computing, and those indexed: a lane that finds
/// its photo's content in another lane's hands waits until that lane is done, then reuses it (or, where that lane
/// failed, computes it itself).
final class ContentsInFlight: @unchecked Sendable {
    private let condition = NSCondition()
    private var indexed: Set<String>
    private var computing: Set<String> = []

    init(indexed: Set<String>) { self.indexed = indexed }

    /// Whether the caller computes content `hash` (then it must call ``end(_:indexed:)``); false when it is indexed
    /// already, or once another lane has indexed it.
    func begin(_ hash: String) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while computing.contains(hash) { condition.wait() }
        if indexed.contains(hash) { return false }
        computing.insert(hash)
        return true
    }

    func end(_ hash: String, indexed done: Bool) {
        condition.lock()
        computing.remove(hash)
        if done { indexed.insert(hash) }
        condition.broadcast()
        condition.unlock()
    }
}

/// One thread a lane, kept for the whole update: a lane's photos run one after another on it, so that what a GPU
/// keeps per thread (its stream, its cuBLAS handle and workspace, its recorded graphs, its freed buffers) serves
/// all of them. A thread made for each photo left them behind for each photo: a cuBLAS handle and 32 MiB of the
/// GPU's memory a photo, and no graph ever replayed.
final class LaneThreads: @unchecked Sendable {
    private let queues: [BoundedQueue<@Sendable () -> Void>]

    init(count: Int) {
        queues = (0..<count).map { _ in BoundedQueue(capacity: 1) }
        for queue in queues {
            let thread = Thread {
                while let work = queue.pop() { work() }
            }
            thread.stackSize = 8 << 20
            thread.start()
        }
    }

    /// Runs `work` on lane `lane`'s thread (after the work given it before, which its caller has collected).
    func run(_ lane: Int, _ work: @escaping @Sendable () -> Void) {
        queues[lane].push(work)
    }

    /// Lets the threads end once their work is done.
    func close() {
        for queue in queues { queue.close() }
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
