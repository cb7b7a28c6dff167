import CLookoutCUDA
import LookoutTensor

#if canImport(Glibc)
    import Glibc
#endif

/// The towers' pre-norm sublayers in 16-bit arithmetic, fused: every intermediate that only a product reads next
/// (the LayerNorm's output, the attention's queries, keys, values and output, the MLP's hidden layer) is made in
/// 16 bits and nowhere in fp32, as PyTorch keeps them in fp16, so each crosses the GPU's memory at half the bytes.
/// The residual stream stays fp32 (``addBiased(_:_:_:into:rows:outputs:)``). Unlike PyTorch's bias epilogue, the
/// qkv and hidden products are rounded to 16 bits before their bias (and activation) is added in fp32 and the
/// sum rounded again: two roundings where PyTorch has one (within the op-by-op suite's 8u bound).
///
/// - attention: LayerNorm (16-bit only), the qkv product written in 16 bits by cuBLAS (its bias not yet added),
///   `lk_attention_mma_64` or `_128` (the bias added as the keys, values and queries are read, on the tensor
///   cores; heads of 64, sequences of at most 128 rows), the output product in fp32, then `x + (product + bias)`
///   with the next sublayer's LayerNorm where one is named (``residualProduct(_:_:layer:rows:inputs:outputs:into:next:)``).
/// - MLP: LayerNorm, the first product in 16 bits, bias and activation in place (`lk_bias_rows_16`), the second
///   product with its bias and residual as the attention's.
///
/// Elsewhere (fp32, no cuBLAS, a GPU before compute capability 8.0, bf16 layers packed for the CPU, other head
/// sizes or longer sequences, `LOOKOUT_CUDA_SUBLAYERS=0`) the sublayers are their operations one after another.
extension CUDABackend {
    /// Whether the sublayers fuse in this backend's arithmetic (before looking at the layers).
    var fusesSublayers: Bool {
        arithmetic != .fp32 && cublasPath != nil && gpu.major >= 8 && Self.sublayersAllowed
    }

    /// `LOOKOUT_CUDA_SUBLAYERS=0`: the sublayers as separate operations (for comparisons).
    static let sublayersAllowed = getenv("LOOKOUT_CUDA_SUBLAYERS").map { String(cString: $0) != "0" } ?? true

    /// The longest sequence the fused attention takes (`lk_attention_mma_128`).
    static let fusedAttentionRows = 128

    public func residualAttention(
        _ x: inout RowMatrix, norm: SequenceNorm, qkv: PackedLinear, output: PackedLinear, lengths: [Int],
        starts: [Int], heads: Int, causal: Bool, next: SequenceNorm?
    ) {
        let (rows, width) = (x.rows, x.columns)
        let longest = lengths.max() ?? 0
        guard fusesSublayers, rows > 0, heads > 0, width == heads * 64, norm.gamma.count == width,
            !qkv.isBF16, !output.isBF16, qkv.inputs == width, qkv.outputs == 3 * width, output.inputs == width,
            output.outputs == width, output.denseBias != nil, longest <= Self.fusedAttentionRows,
            lengths.allSatisfy({ $0 > 0 }), Self.tile(rows, lengths: lengths, starts: starts)
        else {
            composedResidualAttention(
                &x, norm: norm, qkv: qkv, output: output, lengths: lengths, starts: starts, heads: heads,
                causal: causal)
            return
        }
        guard let input = onDevice(x.map), let normed = layerNorm16(input, rows: rows, norm),
            let inLayer = onDevice16(qkv), let projected = buffer16(rows * 3 * width),
            let first = upload(starts.map { Int32($0) }), let counts = upload(lengths.map { Int32($0) }),
            let attended = buffer16(rows * width), let outLayer = onDevice16(output), let out = buffer(rows * width)
        else {
            x = matrix(nil, rows: rows, columns: width)
            return
        }
        gemm(
            m: rows, n: 3 * width, k: width, a: normed, aRow: width, aColumn: 1, b: inLayer.weight, bRow: 1,
            bColumn: width, c: projected, ldc: 3 * width, operands: arithmetic, c16: true)
        let keys = longest <= 64 ? 64 : 128
        let items = lengths.count * heads
        launch(
            keys == 64 ? "lk_attention_mma_64" : "lk_attention_mma_128", grid: (UInt32(min(items, 65_535)), 1),
            block: (UInt32(32 * keys / 16), 1), shared: UInt32(2 * 2 * keys * 72)
        ) {
            $0.pointer16(projected)
            $0.pointer(qkv.denseBias == nil ? nil : inLayer.bias)
            $0.pointer(first)
            $0.pointer(counts)
            $0.int(lengths.count)
            $0.int(width)
            $0.int(heads)
            $0.int(causal ? 1 : 0)
            $0.float(1 / Float(64).squareRoot())
            $0.pointer16(attended)
            $0.int(Int(arithmetic.code))
        }
        residualProduct(
            input, attended, layer: outLayer, rows: rows, inputs: width, outputs: width, into: out, next: next)
        x = matrix(out, rows: rows, columns: width)
    }

    public func residualMLP(
        _ x: inout RowMatrix, norm: SequenceNorm, up: PackedLinear, activation: SequenceActivation?, down: PackedLinear,
        next: SequenceNorm?
    ) {
        let (rows, width) = (x.rows, x.columns)
        let hiddenWidth = up.outputs
        guard fusesSublayers, rows > 0, norm.gamma.count == width, !up.isBF16, !down.isBF16, up.inputs == width,
            hiddenWidth % 4 == 0, down.inputs == hiddenWidth, down.outputs == width, down.denseBias != nil
        else {
            composedResidualMLP(&x, norm: norm, up: up, activation: activation, down: down)
            return
        }
        guard let input = onDevice(x.map), let normed = layerNorm16(input, rows: rows, norm),
            let upLayer = onDevice16(up), let hidden = buffer16(rows * hiddenWidth), let downLayer = onDevice16(down),
            let out = buffer(rows * width)
        else {
            x = matrix(nil, rows: rows, columns: width)
            return
        }
        gemm(
            m: rows, n: hiddenWidth, k: width, a: normed, aRow: width, aColumn: 1, b: upLayer.weight, bRow: 1,
            bColumn: width, c: hidden, ldc: hiddenWidth, operands: arithmetic, c16: true)
        if up.denseBias != nil || activation != nil {
            launch("lk_bias_rows_16", rows: rows, plane: hiddenWidth / 4) {
                $0.pointer16(hidden)
                $0.pointer(up.denseBias == nil ? nil : upLayer.bias)
                $0.int(rows)
                $0.int(hiddenWidth / 4)
                $0.int(Self.code(activation))
                $0.int(Int(arithmetic.code))
            }
        }
        residualProduct(
            input, hidden, layer: downLayer, rows: rows, inputs: hiddenWidth, outputs: width, into: out, next: next)
        x = matrix(out, rows: rows, columns: width)
    }

    /// `out = residual + (a·Wᵀ + bias)`, `a` 16-bit (`rows × inputs`), W the layer's 16-bit weight: cuBLAS's
    /// product in fp32, then `lk_bias_residual`, or with `next`, `lk_bias_residual_norm`, which also writes the next
    /// sublayer's LayerNorm of `out` in 16 bits (``DeviceBuffer/normed``), so that sublayer reads `out` once less.
    /// (cuBLASLt's bias epilogue with the residual as C was measured no faster: BENCHMARKS.md.)
    private func residualProduct(
        _ residual: DeviceBuffer, _ a: DeviceBuffer, layer: (weight: DeviceBuffer, bias: DeviceBuffer), rows: Int,
        inputs: Int, outputs: Int, into out: DeviceBuffer, next: SequenceNorm?
    ) {
        guard let product = buffer(rows * outputs) else { return }
        gemm(
            m: rows, n: outputs, k: inputs, a: a, aRow: inputs, aColumn: 1, b: layer.weight, bRow: 1, bColumn: inputs,
            c: product, ldc: outputs, operands: arithmetic)
        guard let next, next.gamma.count == outputs,
            let parameters = cached([next.gamma, next.beta], make: { [next.gamma, next.beta] }),
            let half = buffer16(rows * outputs)
        else {
            addBiased(residual, product, layer.bias, into: out, rows: rows, outputs: outputs)
            return
        }
        launch("lk_bias_residual_norm", warpRows: rows) {
            $0.pointer(residual)
            $0.pointer(product)
            $0.pointer(layer.bias)
            $0.pointer(out)
            $0.pointer(parameters[0])
            $0.pointer(parameters[1])
            $0.int(rows)
            $0.int(outputs)
            $0.float(next.epsilon)
            $0.pointer16(half)
            $0.int(Int(arithmetic.code))
        }
        out.normed = (normKey(next), [next.gamma, next.beta], half)
    }

    /// What names a LayerNorm's parameters in ``DeviceBuffer/normed``: its arrays' addresses (kept alive with it),
    /// ε and the 16-bit type.
    func normKey(_ norm: SequenceNorm) -> [UInt] {
        CUDABackend.addresses([norm.gamma, norm.beta]) + [UInt(norm.epsilon.bitPattern), UInt(arithmetic.code)]
    }

    /// LayerNorm of `rows` rows of `input` into 16-bit values only (`lk_layer_norm` without its fp32 output).
    /// Where the kernel that made `input` wrote that already (``DeviceBuffer/normed``), those values.
    private func layerNorm16(_ input: DeviceBuffer, rows: Int, _ norm: SequenceNorm) -> DeviceBuffer? {
        if let made = input.normed, made.key == normKey(norm) { return made.buffer }
        guard let half = buffer16(rows * norm.gamma.count), layerNorm(input, rows: rows, norm, into: nil, half: half)
        else { return nil }
        return half
    }
}
