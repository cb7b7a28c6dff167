import LookoutTensor
import LookoutTestSupport
import Testing

/// OpenBLAS GEMM through `Tensor.matmul` against a naive triple loop, on seeded random shapes.
@Suite struct GEMMTests {
    typealias SplitMix = SplitMix64

    static func random(_ shape: [Int], _ rng: inout SplitMix) -> Tensor {
        Tensor(shape: shape, storage: (0..<shape.reduce(1, *)).map { _ in Float.random(in: -1...1, using: &rng) })
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8])
    func matchesNaiveProduct(seed: UInt64) {
        var rng = SplitMix(seed: seed)
        let m = Int.random(in: 1...40, using: &rng)
        let k = Int.random(in: 1...70, using: &rng)
        let n = Int.random(in: 1...50, using: &rng)
        let transposed = seed % 2 == 0
        let a = Self.random([m, k], &rng)
        let b = Self.random(transposed ? [n, k] : [k, n], &rng)
        let c = a.matmul(b, transposingOther: transposed)
        #expect(c.shape == [m, n])
        for i in 0..<m {
            for j in 0..<n {
                var sum: Double = 0
                for p in 0..<k {
                    let bValue = transposed ? b.storage[j * k + p] : b.storage[p * n + j]
                    sum += Double(a.storage[i * k + p]) * Double(bValue)
                }
                #expect(abs(Double(c.storage[i * n + j]) - sum) <= 1e-4 * max(1, abs(sum)), "[\(i), \(j)]")
            }
        }
    }
}

/// `Kernels.linear` (all three strategies: few rows, column split, row split) against a naive loop.
@Suite struct LinearKernelTests {
    @Test(arguments: [1, 3, 8, 9, 40, 200])
    func matchesNaiveLinear(rows: Int) {
        var rng = SplitMix64(seed: UInt64(rows))
        let inputs = 67, outputs = 45
        let x = (0..<(rows * inputs)).map { _ in Float.random(in: -1...1, using: &rng) }
        let w = (0..<(outputs * inputs)).map { _ in Float.random(in: -1...1, using: &rng) }
        let b = (0..<outputs).map { _ in Float.random(in: -1...1, using: &rng) }
        for withBias in [true, false] {
            var y = [Float](repeating: .nan, count: rows * outputs)
            x.withUnsafeBufferPointer { x in
                w.withUnsafeBufferPointer { w in
                    b.withUnsafeBufferPointer { b in
                        y.withUnsafeMutableBufferPointer { y in
                            Kernels.linear(
                                x.baseAddress!, rows: rows, inputs: inputs, weight: w.baseAddress!,
                                bias: withBias ? b.baseAddress! : nil, outputs: outputs, into: y.baseAddress!,
                                pool: ComputePool(threads: 2))
                        }
                    }
                }
            }
            for r in 0..<rows {
                for c in 0..<outputs {
                    var sum = withBias ? Double(b[c]) : 0
                    for k in 0..<inputs { sum += Double(x[r * inputs + k]) * Double(w[c * inputs + k]) }
                    #expect(abs(Double(y[r * outputs + c]) - sum) <= 1e-4, "[\(r), \(c)] bias \(withBias)")
                }
            }
        }
    }

    @Test func poolRunsEveryIterationOnce() {
        let pool = ComputePool(threads: 3)
        for count in [1, 7, 1000] {
            var hits = [Int](repeating: 0, count: count)
            hits.withUnsafeMutableBufferPointer { buffer in
                let shared = UnsafeSendable(buffer.baseAddress!)
                pool.parallelFor(count, chunk: 3) { range in for index in range { shared.pointer[index] += 1 } }
            }
            #expect(hits.allSatisfy { $0 == 1 })
        }
    }
}
