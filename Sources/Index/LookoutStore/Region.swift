import CLookoutKernels
import LookoutTensor

#if canImport(Glibc)
    import Glibc
#endif

/// One candidate object of an indexed photo: its box in the photo's pixels, the output level it came from,
/// its best score under the index vocabulary, and its region embedding — the vector the contrastive head
/// dots with text — quantised to 8 bits: value k stands for `Float(embedding[k]) * scale`.
public struct Region: Sendable, Equatable {
    public var box: [Float]
    public var level: UInt8
    public var vocabularyScore: Float
    public var embedding: [Int8]
    public var scale: Float

    /// A region whose embedding is quantised here (``quantize(_:)``).
    public init(box: [Float], level: UInt8, vocabularyScore: Float, embedding: [Float]) {
        self.box = box
        self.level = level
        self.vocabularyScore = vocabularyScore
        (self.embedding, self.scale) = Self.quantize(embedding)
    }

    /// The embedding the stored values stand for.
    public var dequantized: [Float] { embedding.map { Float($0) * scale } }

    /// 8-bit quantisation with one scale per region: `scale = max|e| / 127`, each value rounded to the
    /// nearest step (ties to even). A unit 512-d embedding loses at most half a step, about 0.4% of its
    /// largest component.
    public static func quantize(_ values: [Float]) -> (values: [Int8], scale: Float) {
        let largest = values.reduce(Float(0)) { max($0, abs($1)) }
        guard largest > 0, largest.isFinite else { return ([Int8](repeating: 0, count: values.count), 0) }
        let scale = largest / 127
        return (values.map { Int8(max(-127, min(127, ($0 / scale).rounded(.toNearestOrEven)))) }, scale)
    }

    /// Serialised regions, little-endian: the count (UInt32) with its top bit set, then per region 4 × F32
    /// box, F32 score, UInt8 level, 3 zero bytes, F32 scale, `embeddingSize` × Int8.
    ///
    /// (Blobs written before 8-bit regions have the count's top bit clear and `embeddingSize` × F16 right
    /// after the 3 zero bytes; ``RegionScorer`` still reads them.)
    public static func encode(_ regions: [Region], embeddingSize: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(4 + regions.count * recordSize(embeddingSize: embeddingSize, quantized: true))
        func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
        append(UInt32(regions.count) | quantizedFlag)
        for region in regions {
            precondition(region.embedding.count == embeddingSize && region.box.count == 4)
            for value in region.box { append(value.bitPattern) }
            append(region.vocabularyScore.bitPattern)
            bytes += [region.level, 0, 0, 0]
            append(region.scale.bitPattern)
            for value in region.embedding { bytes.append(UInt8(bitPattern: value)) }
        }
        return bytes
    }

    public static let quantizedFlag: UInt32 = 0x8000_0000

    public static func recordSize(embeddingSize: Int, quantized: Bool) -> Int {
        quantized ? 28 + embeddingSize : 24 + 2 * embeddingSize
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
        var dot: Float = 0
        for d in 0..<min(region.embedding.count, query.count) { dot += Float(region.embedding[d]) * query[d] }
        return probability(similarity: dot * region.scale, level: Int(region.level))
    }

    /// The head's score for a region of output `level` whose embedding dots with the query to `similarity`.
    public func probability(similarity: Float, level: Int) -> Float {
        1 / (1 + expf(-logit(similarity: similarity, level: level)))
    }

    /// The logit of that score: what searches rank by (float32's sigmoid rounds every logit above about 17
    /// to 1.0, which would leave the order of the best regions to chance).
    public func logit(similarity: Float, level: Int) -> Float {
        let (logitScale, bias) = level < parameters.count ? parameters[level] : (0, 0)
        return similarity * expf(logitScale) + bias
    }

    /// Scores above `confidence` of the regions in a serialised blob (either format of
    /// ``Region/encode(_:embeddingSize:)``), with their boxes.
    public func score(
        blob: UnsafeRawBufferPointer, embeddingSize: Int, above confidence: Float, scratch: inout [Float]
    ) -> [(score: Float, box: [Float], logit: Float)] {
        guard blob.count >= 4, query.count == embeddingSize else { return [] }
        let header = UInt32(littleEndian: blob.loadUnaligned(as: UInt32.self))
        let quantized = header & Region.quantizedFlag != 0
        let count = Int(header & ~Region.quantizedFlag)
        let record = Region.recordSize(embeddingSize: embeddingSize, quantized: quantized)
        guard blob.count >= 4 + count * record else { return [] }
        if scratch.count < embeddingSize { scratch = [Float](repeating: 0, count: embeddingSize) }
        func float(at offset: Int) -> Float {
            Float(bitPattern: UInt32(littleEndian: blob.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
        }
        var results: [(Float, [Float], Float)] = []
        for r in 0..<count {
            let base = 4 + r * record
            var dot: Float = 0
            if quantized {
                let values = blob.baseAddress!.advanced(by: base + 28).assumingMemoryBound(to: Int8.self)
                query.withUnsafeBufferPointer { q in dot = Self.dot(values, q.baseAddress!, count: embeddingSize) }
                dot *= float(at: base + 24)
            } else {
                scratch.withUnsafeMutableBufferPointer { target in
                    let source = blob.baseAddress!.advanced(by: base + 24).assumingMemoryBound(to: UInt16.self)
                    Kernels.halfToFloat(source, target.baseAddress!, count: embeddingSize)
                }
                for d in 0..<embeddingSize { dot += scratch[d] * query[d] }
            }
            let logit = logit(similarity: dot, level: Int(blob[base + 20]))
            let score = 1 / (1 + expf(-logit))
            guard score > confidence else { continue }
            results.append((score, (0..<4).map { float(at: base + 4 * $0) }, logit))
        }
        return results
    }

    /// The region embeddings a serialised blob stands for (8-bit values times their scale, or F16), in
    /// stored order: what a vector index over the regions holds.
    public static func embeddings(blob: UnsafeRawBufferPointer, embeddingSize: Int) throws(IndexError) -> [[Float]] {
        guard blob.count >= 4 else {
            throw IndexError(path: "regions", problem: "a region blob of \(blob.count) bytes")
        }
        let header = UInt32(littleEndian: blob.loadUnaligned(as: UInt32.self))
        let quantized = header & Region.quantizedFlag != 0
        let count = Int(header & ~Region.quantizedFlag)
        let record = Region.recordSize(embeddingSize: embeddingSize, quantized: quantized)
        guard blob.count >= 4 + count * record else {
            throw IndexError(path: "regions", problem: "a region blob shorter than its \(count) regions")
        }
        return (0..<count).map { r in
            let base = 4 + r * record
            if quantized {
                let scale = Float(
                    bitPattern: UInt32(littleEndian: blob.loadUnaligned(fromByteOffset: base + 24, as: UInt32.self)))
                return (0..<embeddingSize).map { Float(Int8(bitPattern: blob[base + 28 + $0])) * scale }
            }
            return (0..<embeddingSize).map { d in
                Float(
                    Float16(
                        bitPattern: UInt16(
                            littleEndian: blob.loadUnaligned(fromByteOffset: base + 24 + 2 * d, as: UInt16.self))))
            }
        }
    }

    /// Σ values[d]·query[d], eight lanes at a time.
    @inline(__always)
    public static func dot(_ values: UnsafePointer<Int8>, _ query: UnsafePointer<Float>, count: Int) -> Float {
        var lanes = SIMD8<Float>()
        var d = 0
        while d + 8 <= count {
            let raw = UnsafeRawPointer(values + d).loadUnaligned(as: SIMD8<Int8>.self)
            let q = UnsafeRawPointer(query + d).loadUnaligned(as: SIMD8<Float>.self)
            lanes += SIMD8<Float>(raw) * q
            d += 8
        }
        var sum = lanes.sum()
        while d < count {
            sum += Float(values[d]) * query[d]
            d += 1
        }
        return sum
    }
}
