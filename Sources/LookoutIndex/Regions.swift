import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutTensor

#if canImport(Glibc)
    import Glibc
#endif

/// One candidate object of an indexed photo: its box in the photo's pixels, the output level it came from,
/// its best score under the index vocabulary, and its region embedding (F16 bits), the vector the
/// contrastive head dots with text.
public struct Region: Sendable, Equatable {
    public var box: [Float]
    public var level: UInt8
    public var vocabularyScore: Float
    public var embedding: [UInt16]

    public init(box: [Float], level: UInt8, vocabularyScore: Float, embedding: [UInt16]) {
        self.box = box
        self.level = level
        self.vocabularyScore = vocabularyScore
        self.embedding = embedding
    }

    /// Serialised regions: count (UInt32), then per region 4 × F32 box, F32 score, UInt8 level, 3 zero bytes,
    /// `embeddingSize` × F16. Little-endian.
    static func encode(_ regions: [Region], embeddingSize: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(4 + regions.count * (24 + 2 * embeddingSize))
        func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
        append(UInt32(regions.count))
        for region in regions {
            precondition(region.embedding.count == embeddingSize && region.box.count == 4)
            for value in region.box { append(value.bitPattern) }
            append(region.vocabularyScore.bitPattern)
            bytes += [region.level, 0, 0, 0]
            for value in region.embedding { append(value) }
        }
        return bytes
    }

    static func recordSize(embeddingSize: Int) -> Int { 24 + 2 * embeddingSize }
}

/// Finds each photo's candidate objects and their region embeddings, once, under a fixed vocabulary: the
/// neck is conditioned on that vocabulary (the detector's built-in text features by default), every anchor
/// is scored against it, and the best anchors after class-agnostic suppression are kept.
///
/// A later query t scores a region as the head would, `sigmoid(⟨e, t/‖t‖⟩·exp(logitScale) + bias)` of its
/// level: exact where the query's own conditioning of the neck matches the vocabulary's, an approximation
/// otherwise (`search --exact` re-runs the real query-conditioned network on the best photos).
public struct RegionExtractor: Sendable {
    public let engine: Engine
    public let vocabulary: [Float]
    public let vocabularySize: Int
    public var imageSize = 640
    public var maximumRegions = 32
    public var minimumScore: Float = 0.005
    public var suppressionIoU: Float = 0.6

    public init(engine: Engine, vocabulary: [Float]) {
        precondition(!vocabulary.isEmpty && vocabulary.count % engine.network.embeddingSize == 0)
        self.engine = engine
        self.vocabulary = vocabulary
        self.vocabularySize = vocabulary.count / engine.network.embeddingSize
    }

    public func regions(of image: Image, name: String) -> [Region] {
        let prepared = engine.prepare(image: image, name: name, size: imageSize)
        let network = engine.network
        let (output, embeddings, levels) = network.headWithRegions(
            prepared.features, text: vocabulary, classes: vocabularySize, pool: engine.pool)
        let anchors = levels.count
        var best = [Float](repeating: 0, count: anchors)
        for k in 0..<vocabularySize {
            for a in 0..<anchors { best[a] = max(best[a], output[(4 + k) * anchors + a]) }
        }
        let order = (0..<anchors).filter { best[$0] > minimumScore }.sorted { best[$0] > best[$1] }
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
            let embedding = (0..<size).map { Float16(embeddings[anchor * size + $0]).bitPattern }
            return Region(
                box: detection.box, level: levels[anchor], vocabularyScore: detection.score, embedding: embedding)
        }
    }
}

/// Scores stored regions against a query as the contrastive head does.
public struct RegionScorer: Sendable {
    public let query: [Float]
    public let parameters: [(logitScale: Float, bias: Float)]

    /// `text` is L2-normalised here.
    public init(text: [Float], parameters: [(logitScale: Float, bias: Float)]) {
        let norm = max(text.reduce(0) { $0 + $1 * $1 }.squareRoot(), 1e-12)
        query = text.map { $0 / norm }
        self.parameters = parameters
    }

    /// The score of one region.
    public func score(_ region: Region) -> Float {
        var embedding = [Float](repeating: 0, count: region.embedding.count)
        region.embedding.withUnsafeBufferPointer { source in
            embedding.withUnsafeMutableBufferPointer {
                Kernels.halfToFloat(source.baseAddress!, $0.baseAddress!, count: source.count)
            }
        }
        var dot: Float = 0
        for d in 0..<min(embedding.count, query.count) { dot += embedding[d] * query[d] }
        return probability(similarity: dot, level: Int(region.level))
    }

    /// The head's score for a region of output `level` whose embedding dots with the query to `similarity`.
    func probability(similarity: Float, level: Int) -> Float {
        let (logitScale, bias) = level < parameters.count ? parameters[level] : (0, 0)
        return 1 / (1 + expf(-(similarity * expf(logitScale) + bias)))
    }

    /// Scores of every region in a serialised blob, with their boxes.
    func score(
        blob: UnsafeRawBufferPointer, embeddingSize: Int, scratch: inout [Float]
    ) -> [(score: Float, box: [Float])] {
        guard blob.count >= 4 else { return [] }
        let count = Int(UInt32(littleEndian: blob.loadUnaligned(as: UInt32.self)))
        let record = Region.recordSize(embeddingSize: embeddingSize)
        guard blob.count >= 4 + count * record, query.count == embeddingSize else { return [] }
        if scratch.count < embeddingSize { scratch = [Float](repeating: 0, count: embeddingSize) }
        var results: [(Float, [Float])] = []
        results.reserveCapacity(count)
        for r in 0..<count {
            let base = 4 + r * record
            let box = (0..<4).map {
                Float(
                    bitPattern: UInt32(littleEndian: blob.loadUnaligned(fromByteOffset: base + 4 * $0, as: UInt32.self))
                )
            }
            let level = Int(blob[base + 20])
            scratch.withUnsafeMutableBufferPointer { target in
                let source = blob.baseAddress!.advanced(by: base + 24).assumingMemoryBound(to: UInt16.self)
                Kernels.halfToFloat(source, target.baseAddress!, count: embeddingSize)
            }
            var dot: Float = 0
            for d in 0..<embeddingSize { dot += scratch[d] * query[d] }
            results.append((probability(similarity: dot, level: level), box))
        }
        return results
    }
}
