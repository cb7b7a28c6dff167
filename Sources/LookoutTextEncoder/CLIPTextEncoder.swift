import LookoutTensor
import LookoutWeights

/// The CLIP text transformer (OpenAI `CLIP.encode_text`), followed by ultralytics' `x / ‖x‖`.
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

    public init(weights file: WeightFile) throws(WeightsError) {
        let weights = try CLIPTextWeights(file)
        self.path = file.path
        self.weights = weights
        self.configuration = weights.configuration
        self.fingerprint = file.fingerprint()
    }

    public convenience init(contentsOf path: String) throws(WeightsError) {
        try self.init(weights: WeightFile.open(path))
    }

    /// L2-normalised embeddings of tokenised queries (each row `contextLength` ids, as
    /// `CLIPTokenizer.tokenize` gives), one `embeddingSize` vector per row.
    public func encode(_ rows: [[Int32]], pool: ComputePool = .shared) -> [[Float]] {
        guard !rows.isEmpty else { return [] }
        let width = configuration.width
        let heads = configuration.heads
        let headSize = width / heads
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

        var x = [Float](repeating: 0, count: total * width)
        x.withUnsafeMutableBufferPointer { x in
            for (query, ids) in rows.enumerated() {
                for position in 0..<lengths[query] {
                    let id = Int(ids[position])
                    let target = x.baseAddress! + (starts[query] + position) * width
                    weights.tokenEmbedding.withUnsafeBufferPointer { table in
                        weights.positionalEmbedding.withUnsafeBufferPointer { positions in
                            let token =
                                table.baseAddress! + (id >= 0 && id < configuration.vocabularySize ? id : 0) * width
                            let place = positions.baseAddress! + position * width
                            for d in 0..<width { target[d] = token[d] + place[d] }
                        }
                    }
                }
            }
        }

        var normed = [Float](repeating: 0, count: total * width)
        var qkv = [Float](repeating: 0, count: total * 3 * width)
        var attention = [Float](repeating: 0, count: total * width)
        var hidden = [Float](repeating: 0, count: total * 4 * width)
        var projected = [Float](repeating: 0, count: total * width)
        let scale = 1 / Float(headSize).squareRoot()
        let epsilon = configuration.layerNormEpsilon
        let contextLength = configuration.contextLength

        for layer in weights.layers {
            x.withUnsafeMutableBufferPointer { x in
                normed.withUnsafeMutableBufferPointer { normed in
                    qkv.withUnsafeMutableBufferPointer { qkv in
                        attention.withUnsafeMutableBufferPointer { attention in
                            hidden.withUnsafeMutableBufferPointer { hidden in
                                projected.withUnsafeMutableBufferPointer { projected in
                                    let x = x.baseAddress!, normed = normed.baseAddress!, qkv = qkv.baseAddress!
                                    let attention = attention.baseAddress!, hidden = hidden.baseAddress!
                                    let projected = projected.baseAddress!
                                    layer.ln1.apply(x, rows: total, epsilon: epsilon, into: normed)
                                    layer.inProjection.linear(normed, rows: total, into: qkv, pool: pool)
                                    let qkvShared = UnsafeSendable(UnsafePointer(qkv))
                                    let attentionShared = UnsafeSendable(attention)
                                    let startsCopy = starts, lengthsCopy = lengths
                                    pool.parallelFor(rows.count * heads, chunk: 1) { range in
                                        let scratch = UnsafeMutablePointer<Float>.allocate(
                                            capacity: 128 + contextLength)
                                        defer { scratch.deallocate() }
                                        for item in range {
                                            let query = item / heads
                                            let head = item % heads
                                            let start = startsCopy[query]
                                            Kernels.causalAttentionHead(
                                                qkv: qkvShared.pointer + start * 3 * width, length: lengthsCopy[query],
                                                width: width, head: head, headSize: headSize, scale: scale,
                                                into: attentionShared.pointer + start * width, scratch: scratch)
                                        }
                                    }
                                    layer.outProjection.linear(attention, rows: total, into: projected, pool: pool)
                                    Kernels.add(projected, into: x, count: total * width)
                                    layer.ln2.apply(x, rows: total, epsilon: epsilon, into: normed)
                                    layer.fc.linear(normed, rows: total, into: hidden, pool: pool)
                                    Kernels.quickGELU(hidden, count: total * 4 * width)
                                    layer.projection.linear(hidden, rows: total, into: projected, pool: pool)
                                    Kernels.add(projected, into: x, count: total * width)
                                }
                            }
                        }
                    }
                }
            }
        }

        // Final LayerNorm on each query's EOT row, projection, L2 normalisation.
        let embedding = configuration.embeddingSize
        var pooled = [Float](repeating: 0, count: rows.count * width)
        x.withUnsafeBufferPointer { x in
            pooled.withUnsafeMutableBufferPointer { pooled in
                for query in rows.indices {
                    weights.finalNorm.apply(
                        x.baseAddress! + (starts[query] + lengths[query] - 1) * width, rows: 1, epsilon: epsilon,
                        into: pooled.baseAddress! + query * width)
                }
            }
        }
        var features = [Float](repeating: 0, count: rows.count * embedding)
        pooled.withUnsafeBufferPointer { pooled in
            weights.projection.withUnsafeBufferPointer { projection in
                features.withUnsafeMutableBufferPointer { features in
                    BLAS.gemm(
                        m: rows.count, n: embedding, k: width, a: pooled.baseAddress!, b: projection.baseAddress!,
                        c: features.baseAddress!)
                }
            }
        }
        return (0..<rows.count).map { query in
            let vector = Array(features[(query * embedding)..<((query + 1) * embedding)])
            var squares: Float = 0
            for value in vector { squares += value * value }
            let norm = squares.squareRoot()
            return vector.map { $0 / norm }
        }
    }
}
