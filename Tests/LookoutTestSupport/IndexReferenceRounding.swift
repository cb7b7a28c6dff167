import Foundation
import LookoutJSON
import LookoutSupport
import LookoutWeights

/// Where the index fixtures' reference (`Tests/Fixtures/index`, made by `scripts/demo/make_index_fixtures.py`)
/// rounds a region's embedding to 8 bits at a value that lies on a rounding boundary within float32 noise: ten
/// times the reference's own float32 error of the unquantised embeddings (`reference_error_embeddings`). There
/// a faithful implementation may store the neighbouring step (`IndexReferenceTests.storedRegionsEqualTheReference`
/// allows exactly that, and nothing else), and a search score computed from that region may then differ from
/// the reference's by what the step moves it: `allowance` is that amount.
public struct IndexReferenceRounding: Sendable {
    let expected: JSONNode
    let embeddings: WeightFile

    public init(root: String) throws {
        expected = try JSONDocument(bytes: FileContents.read(root + "/Tests/Fixtures/index/expected.json")).root
        embeddings = try WeightFile.open(root + "/Tests/Fixtures/index/regions.safetensors")
    }

    /// The distance from a rounding boundary within which the reference's rounding is ambiguous.
    public var tolerance: Float { 10 * Float(expected["reference_error_embeddings"]!.number!) }

    /// Whether the reference's unquantised `value`, at `scale` per 8-bit step, lies that close to a boundary.
    public func nearBoundary(_ value: Float, scale: Float) -> Bool {
        let position = value / scale
        return abs((position - position.rounded(.down)) - 0.5) * scale <= tolerance
    }

    /// A region as Lookout stored it: its box (in the photo) and its 8-bit embedding.
    public typealias StoredRegion = (box: [Float], embedding: [Int8])

    /// The regions in an index's serialised blob (the documented format of `Region.encode`: a UInt32 count
    /// with its top bit set, then per region 4 × F32 box, F32 score, UInt8 level and 3 zero bytes, F32 scale,
    /// `size` × Int8), read here independently of the library's reader.
    public static func storedRegions(_ blob: UnsafeRawBufferPointer, size: Int) -> [StoredRegion] {
        func u32(_ offset: Int) -> UInt32 {
            UInt32(littleEndian: blob.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
        }
        let count = Int(u32(0) & 0x7FFF_FFFF)
        precondition(u32(0) & 0x8000_0000 != 0 && blob.count == 4 + count * (28 + size), "not 8-bit regions")
        return (0..<count).map { r in
            let start = 4 + r * (28 + size)
            let box = (0..<4).map { Float(bitPattern: u32(start + 4 * $0)) }
            let embedding = (0..<size).map { Int8(bitPattern: blob[start + 28 + $0]) }
            return (box, embedding)
        }
    }

    /// How far a search score may lie from the reference's `score` for the region of photo `photo` with box
    /// `box` (matched by box, within 0.002, among the reference's regions and among `stored`, the photo's
    /// regions as Lookout stored them) and query embedding `query`. Each dimension where Lookout stored the
    /// neighbouring step of an ambiguous rounding moves the dequantised embedding by the region's scale, so
    /// the logit `⟨e, t̂⟩·exp(logitScale) + bias` moves by at most `exp(logitScale)·scale·Σ|t̂_d|` over them; the
    /// score may lie anywhere the sigmoid maps that interval. 0 where no such step was stored (any other
    /// difference is not allowed for: `storedRegionsEqualTheReference` fails on it).
    public func allowance(
        photo: String, box: [Float], score: Double, query: [Float], stored: [StoredRegion]
    ) throws -> Double {
        guard let regions = expected["regions"]?[photo], let boxes = regions["boxes"] else { return 0 }
        func near(_ a: [Float]) -> Bool { a.count == box.count && zip(a, box).allSatisfy { abs($0 - $1) <= 0.002 } }
        guard let region = (0..<boxes.count).first(where: { r in near((0..<4).map { Float(boxes[r][$0].number!) }) }),
            let own = stored.first(where: { near($0.box) })
        else { return 0 }
        let size = query.count
        let vectors = try embeddings.view(photo + ".embeddings").floats()
        let quantised = try embeddings.view(photo + ".quantised").floats()
        let scale = try embeddings.view(photo + ".scales").floats()[region]
        var sum = 0.0
        for d in 0..<min(size, own.embedding.count)
        where abs(Float(own.embedding[d]) - quantised[region * size + d]) == 1
            && nearBoundary(vectors[region * size + d], scale: scale)
        {
            sum += abs(Double(query[d]))
        }
        guard sum > 0 else { return 0 }
        let norm = Double(query.reduce(0) { $0 + $1 * $1 }).squareRoot()
        let level = Int(regions["levels"]![region].int!)
        let shift = exp(expected["score_parameters"]![level][0].number!) * Double(scale) * sum / norm
        let logit = log(score / (1 - score))
        let sigmoid = { (z: Double) in 1 / (1 + exp(-z)) }
        return max(sigmoid(logit + shift) - score, score - sigmoid(logit - shift))
    }
}
