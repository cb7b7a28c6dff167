import Foundation
import LookoutEngine
import LookoutImage
import LookoutJSON
@_exported import LookoutStore
import LookoutSupport
import LookoutTensor
import LookoutVideo
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

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
    /// Whether a scan follows symbolic links that lead out of the indexed folder (`index --follow-links`);
    /// by default only links to files and folders inside it are followed, so that a link placed in a photo
    /// folder cannot bring other files into the index (nor, through `serve`, onto the network).
    public var followLinks = false
    /// How many nearest regions (and whole-photo embeddings) per query such a search reads the photos of;
    /// each is then scored exactly as a full scan scores it. Nil: the store's own default (region lists 100,
    /// pgvector 400).
    public var nearestNeighbourCandidates: Int?

    /// From how many photos an SQLite index keeps region lists (``RegionLists``) for its searches: below,
    /// a scan is as quick (about 22 ms per 1,000 photos).
    public var minimumPhotosForLists = 2000

    /// Boxes a search lists for a photo overlap by at most this much (IoU; greedy, best first): stored regions
    /// keep near-duplicates, which a person wants shown once. Nil: every region above the threshold.
    public var displayedOverlap: Float? = 0.7

    /// Large JPEGs decoded at 1/2, 1/4 or 1/8 of their size, never below `longSide` × `shortSide` pixels (the
    /// detector's input side, the image tower's), boxes mapped back to the photo's own pixels
    /// (``ImageFile/decodeReduced(_:name:longSide:shortSide:pixelLimit:)``; `lookout index --fast-decode`); nil:
    /// every photo decoded whole, as `lookout detect` decodes it. A prompt-free labeller's photos are decoded whole.
    public var reducedDecode: (longSide: Int, shortSide: Int)?

    /// Where an update's time goes, stage by stage (`lookout index --timings`); nil: not measured.
    public var stageTimes: IndexStageTimes?

    /// Seconds of video time between the frames of a video that are indexed (`lookout index --video-every`).
    /// It applies to videos indexed from then on; those indexed before keep their frames until they change.
    public var videoEvery: Double = 2

    /// How the last search read the store: nil after a full scan, else how many photos the
    /// nearest-neighbour indexes pointed it to.
    public internal(set) var lastSearchCandidates: Int?

    /// The model whose regions the index holds (nil before the first update).
    public func storedModel() throws(IndexError) -> IndexModel? { try store.storedModel() }

    // MARK: - Reports

    public func statistics() throws(IndexError) -> IndexStatistics { try store.statistics() }
    public func failures() throws(IndexError) -> [(path: String, error: String)] { try store.failures() }
    /// The store's consistency check: "ok" when sound.
    public func integrityCheck() throws(IndexError) -> String { try store.integrityCheck() }

    // MARK: - Files

    func canonicalFolder(_ path: String) throws(IndexError) -> String {
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

    func walk(
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
                    guard FileSystem.stat(path, &info) == 0, let target = FileSystem.realpath(path) else {
                        summary.brokenLinks += 1
                        continue
                    }
                    guard followLinks || target == folder || target.hasPrefix(folder == "/" ? "/" : folder + "/")
                    else {
                        summary.linksOutside += 1
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
