import Foundation
import LookoutEngine
import LookoutImage
import LookoutJSON
import LookoutSupport
import LookoutTensor
import LookoutVideo
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

/// Searching an index: every stored region and whole-photo embedding scored as the detector head and the
/// image tower score them (through the region lists or pgvector's HNSW when the store has them: only the
/// photos they point to are read, and scored exactly as the scan scores them), similar photos, duplicates.
extension PhotoIndex {
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
        /// What the index's prompt-free detector named in the photo (`index --prompt-free`), best first.
        public var labels: [PhotoLabel] = []
        public var fileState: FileState = .unchanged
        /// The best region's score (nil when no region passed, or objects were not searched).
        public var objectScore: Float?
        /// ``SceneScore`` of the whole-photo embedding (nil without one, or when scenes were not searched).
        public var sceneScore: Float?
        /// For a video: the time (seconds) of its best frame, whose entry ``frame`` is; ``path`` is the video.
        public var time: Double?
        /// The indexed entry the evidence comes from: `VIDEO#t=SECONDS` for a video's frame, else ``path``.
        public var entry: String { time.map { VideoFrames.entry(video: path, time: $0) } ?? path }
        /// The logit of ``score``: what hits are ranked by (float32 rounds scores of logits above about 17 to
        /// 1.0; their logits still tell them apart).
        public var logit: Float = -.infinity
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
    /// `scenes`: the alternatives embedded by the image tower's own text tower (an open_clip model's), for the
    /// whole-photo evidence; nil: `alternatives` (the detector's CLIP text space, OpenAI's towers).
    public func search(
        alternatives: [[Float]], scenes: [[Float]]? = nil, confidence: Float, top: Int, evidence: Evidence = .both,
        filter: PhotoFilter = PhotoFilter()
    ) throws(IndexError) -> [Hit] {
        guard let model = try store.storedModel() else { return [] }
        let scorers = alternatives.map { RegionScorer(text: $0, parameters: model.scoreParameters) }
        func normalised(_ text: [Float]) -> [Float] {
            let norm = max(text.reduce(0) { $0 + $1 * $1 }.squareRoot(), 1e-12)
            return text.map { $0 / norm }
        }
        let queries = alternatives.map(normalised)
        let sceneQueries = (scenes ?? alternatives).map(normalised)
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
                            found[same].logit = max(found[same].logit, other.logit)
                        } else {
                            found.append(other)
                        }
                    }
                }
                found.sort { $0.logit > $1.logit }
                hit.detections = found.map { ($0.score, $0.box) }
                hit.objectScore = found.first?.score
                hit.logit = found.first?.logit ?? -.infinity
            }
            if evidence != .objects, let image {
                for query in sceneQueries where image.count == 2 * query.count {
                    let (dot, squares) = Self.halfDot(image, query)
                    // The stored vector is F16: its norm is 1 within about 1e-4; divide as `similar` does.
                    let cosine = dot / max(squares.squareRoot(), 1e-12)
                    let score = model.sceneScore.score(cosine: cosine)
                    if score > confidence && score > (hit.sceneScore ?? -1) {
                        hit.sceneScore = score
                        hit.logit = max(hit.logit, model.sceneScore.logit(cosine: cosine))
                    }
                }
            }
            let best = max(hit.objectScore ?? -1, hit.sceneScore ?? -1)
            guard best > confidence else { return }
            hit.score = best
            hit.labels = photo.labels.flatMap(PhotoLabel.decode) ?? []
            hits.append(hit)
        }
        // A label condition keeps photos the nearest lists would not rank first: those scan every photo.
        if useNearestNeighbours, filter.labels.isEmpty, let nearest = store as? any NearestNeighbourStore,
            let contents = try nearest.nearestContents(
                regionQueries: evidence != .scenes ? queries : [],
                imageQueries: evidence != .objects ? sceneQueries : [],
                model: model.key,
                limit: max(nearestNeighbourCandidates ?? nearest.defaultCandidates, 2 * min(top, 1 << 30)))
        {
            lastSearchCandidates = contents.count
            try nearest.forEachPhoto(model: model.key, contents: contents, visit)
        } else {
            lastSearchCandidates = nil
            try store.forEachPhoto(model: model.key, visit)
        }
        // By the score's logit (the score's own order, finer where float32 rounds scores to 1.0), then path.
        hits.sort { $0.logit != $1.logit ? $0.logit > $1.logit : $0.path < $1.path }
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
        // Near-duplicate boxes shown once (the photo's score, its best box, is kept).
        for k in kept.indices { kept[k].detections = Self.suppressed(kept[k].detections, overlap: displayedOverlap) }
        for k in kept.indices { kept[k].fileState = try fileState(kept[k].path) }
        return kept
    }

    /// `detections` (best first) without those overlapping a better one by more than `overlap` (IoU): greedy
    /// class-agnostic suppression, as a detector's NMS shows boxes.
    static func suppressed(
        _ detections: [(score: Float, box: [Float])], overlap: Float?
    ) -> [(score: Float, box: [Float])] {
        guard let overlap, detections.count > 1 else { return detections }
        var kept: [(score: Float, box: [Float])] = []
        for detection in detections
        where !kept.contains(where: { DetectionEvaluation.iou($0.box, detection.box) > overlap }) {
            kept.append(detection)
        }
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
        var sets = DisjointSets(count: count)
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
                        sets.union(i, j)
                    }
                }
            }
        }
        var groups: [Int: [(path: String, cosine: Float)]] = [:]
        for i in 0..<count where best[i] >= threshold {
            groups[sets.root(i), default: []].append((paths[i], min(best[i], 1)))
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
}

/// Which indexed photos a search considers: those under a folder, taken (EXIF date, else the file's
/// modification time on this machine's clock) from `after` (inclusive) to `before` (exclusive).
public struct PhotoFilter: Sendable {
    /// A canonical folder path; photos under it pass.
    public var folder: String?
    /// Wall-clock seconds (``CalendarTime``).
    public var after: Int64?
    public var before: Int64?
    /// Names a prompt-free detector must have given in the photo (each of them, case-insensitively), in an
    /// index that stores them (`index --prompt-free`); empty: no such condition.
    public var labels: [String] = []

    public init(folder: String? = nil, after: Int64? = nil, before: Int64? = nil, labels: [String] = []) {
        self.folder = folder
        self.after = after
        self.before = before
        self.labels = labels
    }

    public func admits(_ photo: StoredPhoto) -> Bool {
        if let folder, !photo.path.hasPrefix(folder.hasSuffix("/") ? folder : folder + "/") { return false }
        if !labels.isEmpty {
            let named = Set((photo.labels.flatMap(PhotoLabel.decode) ?? []).map { $0.name.lowercased() })
            guard labels.allSatisfy({ named.contains($0.lowercased()) }) else { return false }
        }
        guard after != nil || before != nil else { return true }
        let date = photo.taken ?? CalendarTime.local(nanoseconds: photo.modified)
        if let after, date < after { return false }
        if let before, date >= before { return false }
        return true
    }
}
