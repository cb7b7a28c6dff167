import LookoutTensor

/// The residual attention blocks both CLIP towers share (OpenAI `clip/model.py` `ResidualAttentionBlock`):
/// pre-LayerNorm multi-head attention — causal in the text tower, full in the image tower — and a
/// QuickGELU MLP (exact GELU in MobileCLIP's `TransformerEncoder`, otherwise the same block). Several
/// sequences are packed one after another into one matrix for the linear layers; attention runs per sequence
/// and head. Computed by a ``ComputeBackend``.
struct CLIPTransformer: Sendable {
    let width: Int
    let heads: Int
    let epsilon: Float
    let causal: Bool
    var activation: SequenceActivation = .quickGELU

    /// One residual attention block: x += attn(ln_1(x)); x += mlp(ln_2(x)), attention within each sequence
    /// (`lengths[s]` rows from `starts[s]`). `x` stays where the backend keeps it. `next`: the block after it,
    /// whose first LayerNorm the backend may compute as it writes `x`.
    func apply(
        _ layer: CLIPLayer, to x: inout RowMatrix, lengths: [Int], starts: [Int], backend: any ComputeBackend,
        next: CLIPLayer? = nil
    ) {
        let mlpNorm = SequenceNorm(gamma: layer.ln2.gamma, beta: layer.ln2.beta, epsilon: epsilon)
        backend.residualAttention(
            &x, norm: SequenceNorm(gamma: layer.ln1.gamma, beta: layer.ln1.beta, epsilon: epsilon),
            qkv: layer.inProjection.packed, output: layer.outProjection.packed, lengths: lengths, starts: starts,
            heads: heads, causal: causal, next: mlpNorm)
        backend.residualMLP(
            &x, norm: mlpNorm, up: layer.fc.packed, activation: activation, down: layer.projection.packed,
            next: next.map { SequenceNorm(gamma: $0.ln1.gamma, beta: $0.ln1.beta, epsilon: epsilon) })
    }

    /// Every block in order, each told the one after it.
    func apply(
        _ layers: [CLIPLayer], to x: inout RowMatrix, lengths: [Int], starts: [Int], backend: any ComputeBackend
    ) {
        for (index, layer) in layers.enumerated() {
            apply(
                layer, to: &x, lengths: lengths, starts: starts, backend: backend,
                next: index + 1 < layers.count ? layers[index + 1] : nil)
        }
    }

    /// The same on a host matrix (`x.count / width` rows).
    func apply(
        _ layer: CLIPLayer, to x: inout [Float], lengths: [Int], starts: [Int], backend: any ComputeBackend
    ) {
        var matrix = RowMatrix(rows: x.count / width, columns: width, data: x)
        x = []
        apply(layer, to: &matrix, lengths: lengths, starts: starts, backend: backend)
        x = backend.floats(matrix.map)
    }
}
