import COpenBLAS

/// The single place where Lookout calls OpenBLAS.
public enum BLAS {
    /// OpenBLAS single-threaded, set once before the first GEMM: Lookout parallelises in its own pool (skinny
    /// GEMMs ran slower with two OpenBLAS threads on these machines, and two pools would oversubscribe).
    private static let singleThreaded: Void = openblas_set_num_threads(1)

    /// `C = alpha · op(A) · op(B) + beta · C` on row-major matrices, `op` transposing when asked.
    /// `a` is m×k (k×m when transposed), `b` is k×n (n×k when transposed), `c` is m×n; `lda`, `ldb`,
    /// `ldc` are row strides (defaults: the matrices are dense).
    public static func gemm(
        m: Int, n: Int, k: Int,
        a: UnsafePointer<Float>, transposeA: Bool = false,
        b: UnsafePointer<Float>, transposeB: Bool = false,
        c: UnsafeMutablePointer<Float>, lda: Int? = nil, ldb: Int? = nil, ldc: Int? = nil, alpha: Float = 1,
        beta: Float = 0
    ) {
        precondition(m >= 0 && n >= 0 && k >= 0)
        guard m > 0 && n > 0 else { return }
        _ = singleThreaded
        cblas_sgemm(
            CblasRowMajor,
            transposeA ? CblasTrans : CblasNoTrans,
            transposeB ? CblasTrans : CblasNoTrans,
            Int32(m), Int32(n), Int32(k),
            alpha, a, Int32(lda ?? (transposeA ? m : k)),
            b, Int32(ldb ?? (transposeB ? k : n)),
            beta, c, Int32(ldc ?? n))
    }
}

extension Tensor {
    /// Matrix product of two rank-2 tensors, `[m, k] × [k, n] → [m, n]` (`other` given as `[n, k]`
    /// when `transposingOther`, the layout of a Linear layer's weight).
    public func matmul(_ other: Tensor, transposingOther: Bool = false) -> Tensor {
        precondition(rank == 2 && other.rank == 2, "matmul needs matrices, got \(shape) and \(other.shape)")
        let (m, k) = (shape[0], shape[1])
        let n = transposingOther ? other.shape[0] : other.shape[1]
        precondition(k == (transposingOther ? other.shape[1] : other.shape[0]), "matmul of \(shape) and \(other.shape)")
        var result = Tensor(zeros: [m, n])
        storage.withUnsafeBufferPointer { a in
            other.storage.withUnsafeBufferPointer { b in
                result.storage.withUnsafeMutableBufferPointer { c in
                    BLAS.gemm(
                        m: m, n: n, k: k, a: a.baseAddress!, b: b.baseAddress!, transposeB: transposingOther,
                        c: c.baseAddress!)
                }
            }
        }
        return result
    }
}
