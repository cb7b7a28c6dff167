import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutTensor

#if canImport(Glibc)
    import Glibc
#endif

/// Finds each photo's candidate objects and their region embeddings, once, under a fixed vocabulary: the
/// neck is conditioned on that vocabulary (the detector's built-in text features, or `--classes`), every
/// anchor is scored against it, and the best anchors after a suppression of near-duplicates only are kept.
///
/// The choice is deliberately generous, so that things the vocabulary does not name are stored too: no
/// score floor, suppression only above IoU 0.95 (an unnamed object that overlaps a named one keeps its own
/// region), and 64 regions in 8 bits (34 KB per photo at 512-d). Measured on 160 held-out demo scenes with
/// the index's classes leaving out three of the eight shapes: photo-level AP 0.71 for the unnamed shapes
/// with the former choice (floor 0.005, IoU 0.6, 32 regions), 0.92 with this one (0.97 for named shapes).
///
/// A later query t scores a region as the head would, `sigmoid(⟨e, t/‖t‖⟩·exp(logitScale) + bias)` of its
/// level: exact where the query's own conditioning of the neck matches the vocabulary's, an approximation
/// otherwise (`search --exact` re-runs the real query-conditioned network on the best photos).
public struct RegionExtractor: Sendable {
    public let engine: Engine
    public let vocabulary: [Float]
    public let vocabularySize: Int
    public var imageSize = 640
    public var maximumRegions = 64
    /// Anchors scoring below this under the vocabulary are not kept (0: none is left out for its score).
    public var minimumScore: Float = 0
    public var suppressionIoU: Float = 0.95

    public init(engine: Engine, vocabulary: [Float]) {
        precondition(!vocabulary.isEmpty && vocabulary.count % engine.network.embeddingSize == 0)
        self.engine = engine
        self.vocabulary = vocabulary
        self.vocabularySize = vocabulary.count / engine.network.embeddingSize
    }

    /// Sliced regions (`index --slice`): each tile of the photo (and the whole photo, unless
    /// ``SliceOptions/wholePhoto`` is off) gives its candidates as a photo alone would, moved to the photo's
    /// pixels as sliced detection moves a tile's boxes (``Slicing/place(_:from:photoWidth:photoHeight:)``); the
    /// candidates of all parts, best vocabulary score first, then pass the same near-duplicate suppression and
    /// budget (``maximumRegions``) as one photo's. So a thing of a few pixels, which scores nothing in the whole
    /// photo, keeps the region its tile found. nil: the whole photo alone.
    public var slicing: SliceOptions?

    /// The photo's regions: the whole photo's, or (``slicing``) those of its tiles and the whole photo pooled. A
    /// photo that would make more tiles than ``SliceOptions/maximumTiles`` fails as too large.
    public func regions(of image: Image, name: String) throws(ImageError) -> [Region] {
        guard let slicing else { return candidates(engine.prepare(image: image, name: name, size: imageSize)) }
        let tiles: [Tile]
        do {
            tiles = try Slicing.tiles(width: image.width, height: image.height, options: slicing)
        } catch {
            throw ImageError(path: name, kind: .tooLarge, problem: error.description)
        }
        guard tiles.count > 1 else { return candidates(engine.prepare(image: image, name: name, size: imageSize)) }
        var pool: [Region] = []
        for tile in tiles {
            let crop = image.cropped(x: tile.x1, y: tile.y1, width: tile.width, height: tile.height)
            for var region in candidates(engine.prepare(image: crop, name: name, size: imageSize)) {
                guard
                    let box = Slicing.place(
                        region.box, from: tile, photoWidth: image.width, photoHeight: image.height)
                else { continue }
                region.box = box
                pool.append(region)
            }
        }
        if slicing.wholePhoto { pool += candidates(engine.prepare(image: image, name: name, size: imageSize)) }
        // Best first; ties keep the parts' order (tiles row by row, then the whole photo), so the choice is the
        // same on every run.
        let order = pool.indices.sorted {
            pool[$0].vocabularyScore != pool[$1].vocabularyScore
                ? pool[$0].vocabularyScore > pool[$1].vocabularyScore : $0 < $1
        }
        var kept: [Region] = []
        for index in order {
            let region = pool[index]
            if kept.contains(where: { DetectionEvaluation.iou($0.box, region.box) > suppressionIoU }) { continue }
            kept.append(region)
            if kept.count == maximumRegions { break }
        }
        return kept
    }

    /// ``regions(of:name:)`` of several whole photos (no ``slicing``): those of one letterboxed size go through the
    /// network together where the engine batches (``Engine/batchLimit``, up to `batch`), each photo's regions as it
    /// would have alone, within the rounding of a larger product.
    public func regions(of images: [(image: Image, name: String)], batch: Int = 32) -> [[Region]] {
        precondition(slicing == nil, "tiles are computed one photo at a time")
        let photos = images.map { letterboxed($0.image, name: $0.name) }
        return zip(photos, heads(of: photos, batch: batch)).map { candidates($0, $1) }
    }

    /// A photo's letterboxed input (``Engine/letterboxed(_:name:size:)``), made on the caller's thread, ready to
    /// join a batch (``heads(of:)``).
    public func letterboxed(_ image: Image, name: String) -> LetterboxedPhoto {
        engine.letterboxed(image, name: name, size: imageSize)
    }

    /// The network's head for letterboxed photos, those of one size computed together in batches of up to `batch`
    /// (and ``Engine/batchLimit``): each photo's share of its batch, for ``candidates(_:_:)`` (which each photo's
    /// thread may then compute).
    public func heads(of photos: [LetterboxedPhoto], batch: Int = 32) -> [HeadShare] {
        let limit = min(max(batch, 1), engine.batchLimit)
        var shares = [HeadShare?](repeating: nil, count: photos.count)
        for chunk in Engine.batches(of: photos.map { [$0.letterbox.width, $0.letterbox.height] }, limit: limit) {
            for (index, share) in zip(chunk, batchHeads(chunk.map { photos[$0] })) { shares[index] = share }
        }
        return shares.map { $0! }
    }

    /// One batch's heads: photos of one size, at most ``Engine/batchLimit``.
    private func batchHeads(_ photos: [LetterboxedPhoto]) -> [HeadShare] {
        let (network, backend, count) = (engine.network, engine.backend, photos.count)
        let (vocabulary, classes) = (self.vocabulary, vocabularySize)
        func run() -> (output: [Float], embeddings: [[Float]]) {
            network.headWithRegionMaps(
                engine.imageFeatures(of: photos), text: vocabulary, classes: classes, backend: backend)
        }
        let whole = backend.batched(count, run)
        let planes = engine.anchorPlanes(photos[0].letterbox)
        return (0..<count).map {
            HeadShare(
                output: whole.output, embeddings: whole.embeddings, classes: classes, images: count, position: $0,
                planes: planes)
        }
    }

    /// One prepared photo's candidates, in its pixels, best vocabulary score first.
    func candidates(_ prepared: PreparedImage) -> [Region] {
        let whole = engine.network.headWithRegionMaps(
            prepared.features, text: vocabulary, classes: vocabularySize, backend: engine.backend)
        return candidates(
            photoWidth: prepared.width, photoHeight: prepared.height, letterbox: prepared.letterbox,
            HeadShare(
                output: whole.output, embeddings: whole.embeddings, classes: vocabularySize, images: 1, position: 0,
                planes: engine.anchorPlanes(prepared.letterbox)))
    }

    /// A photo's candidates from its share of a batch's head (``heads(of:)``), in its pixels, best vocabulary score
    /// first.
    public func candidates(_ photo: LetterboxedPhoto, _ share: HeadShare) -> [Region] {
        candidates(photoWidth: photo.width, photoHeight: photo.height, letterbox: photo.letterbox, share)
    }

    private func candidates(photoWidth: Int, photoHeight: Int, letterbox: Letterbox, _ share: HeadShare) -> [Region] {
        let columns = share.anchors
        let anchors = columns.count
        let output = share.output
        let width = output.count / (4 + share.classes)
        var best = [Float](repeating: 0, count: anchors)
        for k in 0..<share.classes {
            let row = (4 + k) * width
            for a in 0..<anchors { best[a] = max(best[a], output[row + columns[a]]) }
        }
        let order = (0..<anchors).filter { best[$0] >= minimumScore }.sorted {
            best[$0] != best[$1] ? best[$0] > best[$1] : $0 < $1
        }
        var kept: [(anchor: Int, box: [Float])] = []
        for anchor in order {
            let column = columns[anchor]
            let cx = output[column], cy = output[width + column]
            let w = output[2 * width + column], h = output[3 * width + column]
            let box = [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]
            if kept.contains(where: { DetectionEvaluation.iou($0.box, box) > suppressionIoU }) { continue }
            kept.append((anchor, box))
            if kept.count == maximumRegions { break }
        }
        let scaled = NonMaxSuppression.scaleBoxes(
            kept.enumerated().map {
                Detection(box: $0.element.box, score: best[$0.element.anchor], classIndex: $0.offset)
            },
            inputWidth: letterbox.width, inputHeight: letterbox.height, imageWidth: photoWidth,
            imageHeight: photoHeight)
        return scaled.map { detection in
            let (level, embedding) = share.embedding(ofAnchor: kept[detection.classIndex].anchor)
            return Region(
                box: detection.box, level: UInt8(level), vocabularyScore: detection.score, embedding: embedding)
        }
    }
}

/// A photo's share of a batch's head (``RegionExtractor/heads(of:)``): the batch's raw output (`(4 + classes)` rows
/// of every photo's anchors) and region embeddings as the head keeps them (per level `size × anchors`,
/// channel-major), each level's anchors the photos' in turn, and where this photo's lie. Shared, not copied: a
/// photo's thread reads only its anchors, and only the kept ones' embeddings.
public struct HeadShare: Sendable {
    let output: [Float]
    let embeddings: [[Float]]
    let classes: Int
    let images: Int
    let position: Int
    let planes: [Int]

    /// The photo's anchors among the output's columns, in its own anchor order.
    var anchors: [Int] { Engine.anchors(ofImage: position, images: images, planes: planes) }

    /// The level and region embedding of the photo's anchor `anchor` (in its own order).
    func embedding(ofAnchor anchor: Int) -> (level: Int, embedding: [Float]) {
        var (level, local) = (0, anchor)
        while local >= planes[level] {
            local -= planes[level]
            level += 1
        }
        let width = images * planes[level]
        let column = position * planes[level] + local
        let data = embeddings[level]
        let size = data.count / width
        return (level, (0..<size).map { data[$0 * width + column] })
    }
}
