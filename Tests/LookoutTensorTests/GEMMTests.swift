import LookoutTensor
import Testing

/// OpenBLAS GEMM through `Tensor.matmul` against a naive triple loop, on seeded random shapes.
@Suite struct GEMMTests {
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static func random(_ shape: [Int], _ rng: inout SplitMix) -> Tensor {
        Tensor(shape: shape, storage: (0..<shape.reduce(1, *)).map { _ in Float.random(in: -1...1, using: &rng) })
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8])
    func matchesNaiveProduct(seed: UInt64) {
        var rng = SplitMix(state: seed)
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
