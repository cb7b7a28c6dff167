import LookoutTensor

/// The residual attention blocks both CLIP towers share (OpenAI `clip/model.py` `ResidualAttentionBlock`):
/// pre-LayerNorm multi-head attention — causal in the text tower, full in the image tower — and a
/// QuickGELU MLP (exact GELU in MobileCLIP's `TransformerEncoder`, otherwise the same block). Several sequences are packed one after another into one matrix for the linear layers;
/// attention runs per sequence and head on the compute pool.
struct CLIPTransformer: Sendable {
    let width: Int
    let heads: Int
    let epsilon: Float
    let causal: Bool
    var activation: Activation = .quickGELU

    enum Activation: Sendable {
        case quickGELU
        case gelu
    }

    /// Scratch space of one forward pass, reused by every layer.
    struct Buffers {
        var normed: [Float]
        var qkv: [Float]
        var attention: [Float]
        var hidden: [Float]
        var projected: [Float]

        init(rows: Int, width: Int) {
            normed = [Float](repeating: 0, count: rows * width)
            qkv = [Float](repeating: 0, count: rows * 3 * width)
            attention = [Float](repeating: 0, count: rows * width)
            hidden = [Float](repeating: 0, count: rows * 4 * width)
            projected = [Float](repeating: 0, count: rows * width)
        }
    }

    /// One residual attention block: x += attn(ln_1(x)); x += mlp(ln_2(x)), attention within each sequence
    /// (`lengths[s]` rows from `starts[s]`).
    func apply(
        _ layer: CLIPLayer, to x: inout [Float], buffers: inout Buffers, lengths: [Int], starts: [Int],
        pool: ComputePool
    ) {
        let headSize = width / heads
        let total = x.count / width
        let scale = 1 / Float(headSize).squareRoot()
        let longest = lengths.max() ?? 0
        let queries = lengths.count
        let causal = self.causal
        let activation = self.activation
        x.withUnsafeMutableBufferPointer { x in
            buffers.normed.withUnsafeMutableBufferPointer { normed in
                buffers.qkv.withUnsafeMutableBufferPointer { qkv in
                    buffers.attention.withUnsafeMutableBufferPointer { attention in
                        buffers.hidden.withUnsafeMutableBufferPointer { hidden in
                            buffers.projected.withUnsafeMutableBufferPointer { projected in
                                let x = x.baseAddress!, normed = normed.baseAddress!, qkv = qkv.baseAddress!
                                let attention = attention.baseAddress!, hidden = hidden.baseAddress!
                                let projected = projected.baseAddress!
                                layer.ln1.apply(x, rows: total, epsilon: epsilon, into: normed)
                                layer.inProjection.linear(normed, rows: total, into: qkv, pool: pool)
                                let qkvShared = UnsafeSendable(UnsafePointer(qkv))
                                let attentionShared = UnsafeSendable(attention)
                                pool.parallelFor(queries * heads, chunk: 1) { range in
                                    let scratch = UnsafeMutablePointer<Float>.allocate(
                                        capacity: 128 + (causal ? longest : longest * longest))
                                    defer { scratch.deallocate() }
                                    for item in range {
                                        let query = item / heads
                                        let head = item % heads
                                        let start = starts[query]
                                        Kernels.attentionHead(
                                            qkv: qkvShared.pointer + start * 3 * width, length: lengths[query],
                                            width: width, head: head, headSize: headSize, scale: scale,
                                            causal: causal, into: attentionShared.pointer + start * width,
                                            scratch: scratch)
                                    }
                                }
                                layer.outProjection.linear(attention, rows: total, into: projected, pool: pool)
                                Kernels.add(projected, into: x, count: total * width)
                                layer.ln2.apply(x, rows: total, epsilon: epsilon, into: normed)
                                layer.fc.linear(normed, rows: total, into: hidden, pool: pool)
                                switch activation {
                                case .quickGELU: Kernels.quickGELU(hidden, count: total * 4 * width)
                                case .gelu: Kernels.gelu(hidden, count: total * 4 * width)
                                }
                                layer.projection.linear(hidden, rows: total, into: projected, pool: pool)
                                Kernels.add(projected, into: x, count: total * width)
                            }
                        }
                    }
                }
            }
        }
    }

}
