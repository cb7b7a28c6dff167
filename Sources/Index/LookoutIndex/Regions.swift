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
        let prepared = engine.prepare(images: images, size: imageSize, batch: batch)
        let limit = min(max(batch, 1), engine.batchLimit)
        let shapes = prepared.map { $0.features.flatMap { [$0.channels, $0.height, $0.width] } }
        var found = [[Region]](repeating: [], count: images.count)
        for chunk in Engine.batches(of: shapes, limit: limit) {
            if chunk.count == 1 {
                found[chunk[0]] = candidates(prepared[chunk[0]])
                continue
            }
            let heads = self.heads(chunk.map { prepared[$0] })
            for (position, index) in chunk.enumerated() {
                found[index] = candidates(prepared[index], head: heads[position])
            }
        }
        return found
    }

    typealias Head = (output: [Float], embeddings: [Float], levels: [UInt8])

    /// The head's output, region embeddings and levels of photos of one size, computed as one batch, then each
    /// photo's own.
    private func heads(_ prepared: [PreparedImage]) -> [Head] {
        let (network, backend, count) = (engine.network, engine.backend, prepared.count)
        let maps = prepared[0].features.indices.map { level in backend.stack(prepared.map { $0.features[level] }) }
        let (vocabulary, classes) = (self.vocabulary, vocabularySize)
        func run() -> Head { network.headWithRegions(maps, text: vocabulary, classes: classes, backend: backend) }
        let whole = backend.batched(count, run)
        let planes = engine.anchorPlanes(prepared[0].letterbox)
        let size = network.embeddingSize
        return (0..<count).map { image in
            let anchors = Engine.anchors(ofImage: image, images: count, planes: planes)
            var embeddings = [Float](repeating: 0, count: anchors.count * size)
            for (row, anchor) in anchors.enumerated() {
                embeddings[(row * size)..<((row + 1) * size)] =
                    whole.embeddings[(anchor * size)..<((anchor + 1) * size)]
            }
            return (
                Engine.rows(whole.output, count: 4 + classes, anchors: anchors), embeddings,
                anchors.map { whole.levels[$0] }
            )
        }
    }

    /// One prepared photo's candidates, in its pixels, best vocabulary score first.
    func candidates(_ prepared: PreparedImage) -> [Region] {
        candidates(
            prepared,
            head: engine.network.headWithRegions(
                prepared.features, text: vocabulary, classes: vocabularySize, backend: engine.backend))
    }

    /// The candidates of a prepared photo's head output.
    private func candidates(_ prepared: PreparedImage, head: Head) -> [Region] {
        let network = engine.network
        let (output, embeddings, levels) = head
        let anchors = levels.count
        var best = [Float](repeating: 0, count: anchors)
        for k in 0..<vocabularySize {
            for a in 0..<anchors { best[a] = max(best[a], output[(4 + k) * anchors + a]) }
        }
        let order = (0..<anchors).filter { best[$0] >= minimumScore }.sorted {
            best[$0] != best[$1] ? best[$0] > best[$1] : $0 < $1
        }
        var kept: [(anchor: Int, box: [Float])] = []
        for anchor in order {
            let cx = output[anchor], cy = output[anchors + anchor]
            let w = output[2 * anchors + anchor], h = output[3 * anchors + anchor]
            let box = [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]
            if kept.contains(where: { DetectionEvaluation.iou($0.box, box) > suppressionIoU }) { continue }
            kept.append((anchor, box))
            if kept.count == maximumRegions { break }
        }
        let scaled = NonMaxSuppression.scaleBoxes(
            kept.enumerated().map {
                Detection(box: $0.element.box, score: best[$0.element.anchor], classIndex: $0.offset)
            },
            inputWidth: prepared.letterbox.width, inputHeight: prepared.letterbox.height,
            imageWidth: prepared.width, imageHeight: prepared.height)
        let size = network.embeddingSize
        return scaled.map { detection in
            let anchor = kept[detection.classIndex].anchor
            let embedding = Array(embeddings[(anchor * size)..<((anchor + 1) * size)])
            return Region(
                box: detection.box, level: levels[anchor], vocabularyScore: detection.score, embedding: embedding)
        }
    }
}
