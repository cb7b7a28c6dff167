#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A photo file as a scan of the folder found it.
public struct FoundPhoto: Sendable, Equatable {
    public var path: String
    public var size: Int64
    /// Modification time in nanoseconds since 1970.
    public var mtime: Int64

    public init(path: String, size: Int64, mtime: Int64) {
        self.path = path
        self.size = size
        self.mtime = mtime
    }
}

/// What a store holds about one photo path.
public struct StoredFile: Sendable, Equatable {
    public var size: Int64
    public var mtime: Int64
    /// The content's SHA-256 (nil for a file that could not be read).
    public var hash: String?
    /// The key of the model it was indexed with.
    public var model: String
    public var failed: Bool

    public init(size: Int64, mtime: Int64, hash: String?, model: String, failed: Bool) {
        self.size = size
        self.mtime = mtime
        self.hash = hash
        self.model = model
        self.failed = failed
    }
}

/// What computing one photo gave.
/// One indexed photo as a search reads it; the buffers are valid only during the call that hands it over.
public struct StoredPhoto {
    public var path: String
    public var width: Int
    public var height: Int
    /// The serialised regions (``Region/encode(_:embeddingSize:)``).
    public var regions: UnsafeRawBufferPointer
    /// The whole photo's CLIP embedding (F16, little-endian), when the index has an image tower.
    public var imageEmbedding: UnsafeRawBufferPointer?
    /// When it was taken (EXIF, wall-clock seconds: ``CalendarTime``), if the file says.
    public var taken: Int64?
    /// The file's modification time (nanoseconds since the epoch) when indexed.
    public var modified: Int64
    /// What a prompt-free detector named in it (``PhotoLabel/encode(_:)``), when the index stores that.
    public var labels: String?

    public init(
        path: String, width: Int, height: Int, regions: UnsafeRawBufferPointer, imageEmbedding: UnsafeRawBufferPointer?,
        taken: Int64?, modified: Int64, labels: String? = nil
    ) {
        self.labels = labels
        self.path = path
        self.width = width
        self.height = height
        self.regions = regions
        self.imageEmbedding = imageEmbedding
        self.taken = taken
        self.modified = modified
    }
}

public enum PhotoOutcome: Sendable {
    /// Regions computed for new content (`regions` serialised as ``Region/encode(_:embeddingSize:)`` does),
    /// and the whole photo's image embedding (F16 bits) when an image tower made one.
    /// `labels`: what a prompt-free detector named in it (``PhotoLabel/encode(_:)``), when the index stores that.
    case indexed(
        hash: String, width: Int, height: Int, regions: [UInt8], imageEmbedding: [UInt16]? = nil, taken: Int64? = nil,
        labels: String? = nil)
    /// Content already indexed under the same model (a renamed, copied or touched file).
    case reused(hash: String)
    /// The file could not be read or decoded.
    case failed(error: String)
}

/// A process taking part in an update: what a claim on a photo records.
public struct IndexWorker: Sendable, Equatable {
    public var host: String
    public var pid: Int32
    /// Unique per update run (two runs of one process are two workers).
    public var run: String

    public init(host: String, pid: Int32, run: String) {
        self.host = host
        self.pid = pid
        self.run = run
    }

    /// This process, for a new run.
    public static func current() -> IndexWorker {
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, name.count - 1)
        let host = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return IndexWorker(host: host, pid: getpid(), run: String(UInt64.random(in: 0...UInt64.max), radix: 36))
    }

    /// Whether this worker's process still runs (only knowable on its own host; elsewhere assumed so).
    public var isAlive: Bool {
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, name.count - 1)
        let here = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard here == host else { return true }
        return kill(pid, 0) == 0 || errno == EPERM
    }
}

/// Counts for reports.
public struct IndexStatistics: Sendable {
    public var files: Int
    public var failedFiles: Int
    public var images: Int
    public var regionBytes: Int
    public var databaseBytes: Int

    public init(files: Int, failedFiles: Int, images: Int, regionBytes: Int, databaseBytes: Int) {
        self.files = files
        self.failedFiles = failedFiles
        self.images = images
        self.regionBytes = regionBytes
        self.databaseBytes = databaseBytes
    }
}

/// Where an index keeps its photos, their regions and the model that made them: the seam between the
/// index's logic (``PhotoIndex``: scanning, computing, searching) and a storage engine. ``SQLiteIndexStore``
/// is the one Lookout ships; a store opens (and migrates) its own schema.
///
/// Each call is atomic on its own: in particular ``record(_:outcome:model:)`` commits one photo, so an
/// interrupted update loses at most the photo in hand.
public protocol IndexStore: AnyObject {
    /// Where the store is, for messages (a file path, a URL).
    var location: String { get }
    /// How the store is reached, for `index --status`: `local` for a file, PostgreSQL's TLS state for a server.
    var connectionDescription: String { get }

    /// The model whose regions the store holds (nil before the first update).
    func storedModel() throws(IndexError) -> IndexModel?
    /// Records `model` as the store's model.
    func setModel(_ model: IndexModel) throws(IndexError)

    /// The stored files whose paths start with `prefix`.
    func files(withPrefix prefix: String) throws(IndexError) -> [String: StoredFile]
    /// What the store holds about `path` now (another process may have recorded it since it was listed).
    func storedFile(at path: String) throws(IndexError) -> StoredFile?
    /// The content hashes that have regions under the model `key`.
    func indexedContents(model key: String) throws(IndexError) -> Set<String>
    /// The image embedding stored with the content `hash` under the model `key` (nil when none was made).
    func imageEmbedding(hash: String, model key: String) throws(IndexError) -> [UInt16]?
    /// What the store holds for the content `hash` under the model `key` — size, regions, when it was taken and its
    /// labels, without the image embedding — as the outcome that recorded it, or nil when it holds none (or the
    /// store cannot say: then a change of image tower computes the regions again).
    func storedContent(hash: String, model key: String) throws(IndexError) -> PhotoOutcome?
    /// Records one photo's outcome (its regions with it, for new content), atomically.
    func record(_ photo: FoundPhoto, outcome: PhotoOutcome, model key: String) throws(IndexError)
    /// Claims `path` for `worker` until `expires` (seconds since 1970): true when nobody holds it, or its
    /// holder's claim has run out, or its holder's process is gone, or `worker` holds it already. Processes
    /// indexing one store share the work this way: each photo is computed by the worker that claimed it.
    func claim(_ path: String, worker: IndexWorker, until expires: Double) throws(IndexError) -> Bool
    /// Gives up `worker`'s claim on `path`.
    func release(_ path: String, worker: IndexWorker) throws(IndexError)
    /// Forgets `paths`, then the regions that no file refers to and those of other models than `key`.
    func remove(paths: [String], keepingModel key: String) throws(IndexError)

    /// Calls `body` with every indexed photo of the model `key`: its path, size and serialised regions.
    func forEachPhoto(model key: String, _ body: (StoredPhoto) -> Void) throws(IndexError)

    func statistics() throws(IndexError) -> IndexStatistics
    func failures() throws(IndexError) -> [(path: String, error: String)]
    /// A storage-level consistency check: "ok" when sound.
    func integrityCheck() throws(IndexError) -> String
}

extension IndexStore {
    public func storedContent(hash: String, model key: String) throws(IndexError) -> PhotoOutcome? { nil }
}

/// The whole indexing job of a shared store, across its workers (`lookout index --status`).
public struct JobStatus: Sendable {
    /// A photo being worked on: its path, the worker holding it and how long its lease has left.
    public struct Claim: Sendable {
        public var path: String
        public var worker: String
        public var leaseLeft: Double

        public init(path: String, worker: String, leaseLeft: Double) {
            self.path = path
            self.worker = worker
            self.leaseLeft = leaseLeft
        }
    }

    /// Photos waiting for a worker (never claimed, or whose lease ran out).
    public var waiting: Int
    public var inProgress: [Claim]
    public var indexedFiles: Int
    public var failedFiles: Int
    /// Photos recorded in the last minute, by all workers.
    public var lastMinute: Int
    /// Workers that recorded a photo in the last minute, or hold a claim.
    public var activeWorkers: [String]

    public init(
        waiting: Int, inProgress: [Claim], indexedFiles: Int, failedFiles: Int, lastMinute: Int, activeWorkers: [String]
    ) {
        self.waiting = waiting
        self.inProgress = inProgress
        self.indexedFiles = indexedFiles
        self.failedFiles = failedFiles
        self.lastMinute = lastMinute
        self.activeWorkers = activeWorkers
    }
}

/// A store that holds the indexing job itself, so that any number of workers, on any number of machines,
/// share it: each adds what its scan found to the job, then claims photos one at a time with a lease that
/// the store keeps renewed while the photo is worked on. A worker that dies stops renewing; once its lease
/// runs out, another worker takes the photo over. (``PostgresIndexStore`` does this with
/// `FOR UPDATE SKIP LOCKED`.)
public protocol SharedJobStore: IndexStore {
    /// Adds `photos` (to be indexed under the model `key`) to the job. A photo already waiting keeps its
    /// place; one that was recorded since the caller scanned is dropped when claimed.
    func enqueue(_ photos: [FoundPhoto], model key: String) throws(IndexError)
    /// Claims the next photo under `prefix` that nobody holds (or whose lease ran out) for `worker`, with a
    /// lease of `lease` seconds that the store renews until ``IndexStore/record(_:outcome:model:)`` or
    /// ``IndexStore/release(_:worker:)`` for it. Nil when the job holds no such photo.
    func claimNext(
        under prefix: String, model key: String, worker: IndexWorker, lease: Double
    ) throws(IndexError)
        -> FoundPhoto?
    /// The job across all workers.
    func jobStatus() throws(IndexError) -> JobStatus
}

/// A store with nearest-neighbour indexes over the region and whole-photo embeddings (pgvector's HNSW):
/// a search reads only the photos holding the nearest vectors instead of every photo.
public protocol NearestNeighbourStore: IndexStore {
    /// How many nearest regions (and whole-photo embeddings) per query a search reads the photos of, unless
    /// ``PhotoIndex/nearestNeighbourCandidates`` says otherwise.
    var defaultCandidates: Int { get }
    /// The content hashes of the photos holding the `limit` regions nearest each of `regionQueries` (by
    /// inner product) and the `limit` whole-photo embeddings nearest each of `imageQueries` (by cosine); nil
    /// when the store has no such index for the model `key` (the search then reads every photo).
    func nearestContents(
        regionQueries: [[Float]], imageQueries: [[Float]], model key: String, limit: Int
    )
        throws(IndexError) -> Set<String>?
    /// ``IndexStore/forEachPhoto(model:_:)`` over the photos whose content is one of `contents`.
    func forEachPhoto(model key: String, contents: Set<String>, _ body: (StoredPhoto) -> Void) throws(IndexError)
    /// Brings the nearest-neighbour index up to date with what was recorded, making it once the index holds
    /// `minimumPhotos` photos of `model`: what was done, in words, or nil when nothing is worth saying.
    func updateLists(model: IndexModel, minimumPhotos: Int, progress: (String) -> Void) throws(IndexError) -> String?
    /// What kind of nearest-neighbour index answers (`region lists`, `pgvector`), as a search reports it.
    var nearestNeighbourKind: String { get }
    /// Why the last search could not use the nearest-neighbour index (it then read every photo), or nil.
    var lastNearestNeighbourNote: String? { get }
}

extension IndexStore {
    /// `local`: a store on this machine.
    public var connectionDescription: String { "local" }
}
