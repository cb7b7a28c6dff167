import LookoutTensor
import LookoutWeights

/// The CLIP text transformer (OpenAI `CLIP.encode_text`), followed by ultralytics' `x / ‖x‖`; also
/// MobileCLIP's (YOLOE's text tower, `mobileclip.clip.CLIP.encode_text(normalize=True)` as ultralytics traces it),
/// which is the same computation with exact GELU in the MLP.
///
/// Forward pass (OpenAI `clip/model.py` `encode_text`), for each query: token embeddings plus positional embeddings; `layers`
/// pre-LayerNorm residual blocks of causal multi-head attention and a QuickGELU MLP; the final LayerNorm
/// on the row of the first end token (`argmax` of the ids); the projection `x·P`; division by the norm.
///
/// Only positions 0…EOT of each query are computed: the mask is causal, so later positions cannot
/// change the pooled row. All queries' rows are packed into one matrix for the linear layers;
/// attention runs per query and head.
public final class CLIPTextEncoder: Sendable {
    public let configuration: CLIPTextConfiguration
    /// The weight file the encoder was loaded from.
    public let path: String
    /// Identity of the weights, for caches (``WeightFile/fingerprint()``).
    public let fingerprint: String
    let weights: CLIPTextWeights
    /// The linear layers' arithmetic: fp32, or bf16 (where the CPU has AVX-512 BF16).
    public let precision: Precision
    /// What caches key its embeddings by: the weights' fingerprint, and the precision unless fp32.
    public var cacheKey: String { precision == .fp32 ? fingerprint : fingerprint + "|" + precision.rawValue }

    /// `exactGELU`, `heads`: a model configuration's word where the file has none (nil: from the file).
    public init(
        weights file: WeightFile, precision: Precision = .fp32, exactGELU: Bool? = nil, heads: Int? = nil
    ) throws(WeightsError) {
        let weights = try CLIPTextWeights(file, precision: precision, exactGELU: exactGELU, heads: heads)
        self.precision = precision
        self.path = file.path
        self.weights = weights
        self.configuration = weights.configuration
        self.fingerprint = file.fingerprint()
    }

    public convenience init(contentsOf path: String, precision: Precision = .fp32) throws(WeightsError) {
        try self.init(weights: WeightFile.open(path), precision: precision)
    }

    /// L2-normalised embeddings of tokenised queries (each row `contextLength` ids, as
    /// `CLIPTokenizer.tokenize` gives), one `embeddingSize` vector per row.
    public func encode(_ rows: [[Int32]], backend: any ComputeBackend = CPUBackend.shared) -> [[Float]] {
        guard !rows.isEmpty else { return [] }
        // Rows 0…EOT of each query, where EOT is the first position of the largest id (torch.argmax).
        let lengths = rows.map { ids -> Int in
            var best = 0
            for index in ids.indices where ids[index] > ids[best] { best = index }
            return min(best + 1, configuration.contextLength)
        }
        var starts: [Int] = []
        var total = 0
        for length in lengths {
            starts.append(total)
            total += length
        }
        var x = RowMatrix(
            rows: total, columns: configuration.width, data: embed(rows, lengths: lengths, starts: starts, total: total)
        )
        let transformer = CLIPTransformer(
            width: configuration.width, heads: configuration.heads, epsilon: configuration.layerNormEpsilon,
            causal: true, activation: configuration.activation)
        transformer.apply(weights.layers, to: &x, lengths: lengths, starts: starts, backend: backend)
        return project(x, lengths: lengths, starts: starts, backend: backend)
    }

    /// Token plus positional embeddings of every query's rows, packed one query after another.
    func embed(_ rows: [[Int32]], lengths: [Int], starts: [Int], total: Int) -> [Float] {
        let width = configuration.width
        var x = [Float](repeating: 0, count: total * width)
        x.withUnsafeMutableBufferPointer { x in
            weights.positionalEmbedding.withUnsafeBufferPointer { positions in
                for (query, ids) in rows.enumerated() {
                    for position in 0..<lengths[query] {
                        let id = Int(ids[position])
                        let target = x.baseAddress! + (starts[query] + position) * width
                        weights.tokenEmbedding.row(
                            id >= 0 && id < configuration.vocabularySize ? id : 0, width: width, into: target)
                        let place = positions.baseAddress! + position * width
                        for d in 0..<width { target[d] += place[d] }
                    }
                }
            }
        }
        return x
    }

    /// Final LayerNorm on each query's EOT row, the text projection (each query's alone: a text's embedding must
    /// not depend on the texts beside it), L2 normalisation.
    func project(_ x: RowMatrix, lengths: [Int], starts: [Int], backend: any ComputeBackend) -> [[Float]] {
        let embedding = configuration.embeddingSize
        let ends = zip(starts, lengths).map { $0 + $1 - 1 }
        let pooled = backend.layerNorm(
            backend.rows(x, at: ends), gamma: weights.finalNorm.gamma, beta: weights.finalNorm.beta,
            epsilon: configuration.layerNormEpsilon)
        let features = backend.rowProducts(pooled, weights.projection, columns: embedding)
        return (0..<lengths.count).map { query in
            normalized(Array(features[(query * embedding)..<((query + 1) * embedding)]))
        }
    }
}
