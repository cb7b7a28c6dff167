import LookoutSupport
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

/// `Kernels.linear` (its strategies: few rows split by columns, more in fixed tiles) against a naive loop.
@Suite struct LinearKernelTests {
    /// `Kernels.linear` of `rows` rows of `x` (`weight.count / outputs` inputs each; `weight` is outputs × inputs,
    /// `bias` as many as its outputs, or nil for none) on a pool of `threads`.
    static func linear(_ x: [Float], rows: Int, weight: [Float], bias: [Float]?, threads: Int) -> [Float] {
        let inputs = x.count / rows, outputs = weight.count / inputs
        var y = [Float](repeating: .nan, count: rows * outputs)
        x.withUnsafeBufferPointer { x in
            weight.withUnsafeBufferPointer { w in
                (bias ?? []).withUnsafeBufferPointer { b in
                    y.withUnsafeMutableBufferPointer { y in
                        Kernels.linear(
                            x.baseAddress!, rows: rows, inputs: inputs, weight: w.baseAddress!,
                            bias: bias == nil ? nil : b.baseAddress!, outputs: outputs, into: y.baseAddress!,
                            pool: ComputePool(threads: threads))
                    }
                }
            }
        }
        return y
    }

    @Test(arguments: [1, 3, 8, 9, 40, 200])
    func matchesNaiveLinear(rows: Int) {
        var rng = SplitMix64(seed: UInt64(rows))
        let inputs = 67, outputs = 45
        let x = (0..<(rows * inputs)).map { _ in Float.random(in: -1...1, using: &rng) }
        let w = (0..<(outputs * inputs)).map { _ in Float.random(in: -1...1, using: &rng) }
        let b = (0..<outputs).map { _ in Float.random(in: -1...1, using: &rng) }
        for withBias in [true, false] {
            let y = Self.linear(x, rows: rows, weight: w, bias: withBias ? b : nil, threads: 2)
            for r in 0..<rows {
                for c in 0..<outputs {
                    var sum = withBias ? Double(b[c]) : 0
                    for k in 0..<inputs { sum += Double(x[r * inputs + k]) * Double(w[c * inputs + k]) }
                    #expect(abs(Double(y[r * outputs + c]) - sum) <= 1e-4, "[\(r), \(c)] bias \(withBias)")
                }
            }
        }
    }

    /// The bits of `Kernels.linear` do not depend on the pool's thread count (`LOOKOUT_THREADS`): OpenBLAS's sums
    /// can depend on the shape of each call, so the way rows and columns are split must follow the product's shape
    /// alone. Row counts on both sides of every strategy's switch for 1 to 4 threads.
    @Test(arguments: [9, 33, 64, 65, 127, 200, 700])
    func sameBitsOnAnyThreadCount(rows: Int) {
        var rng = SplitMix64(seed: UInt64(rows) &+ 17)
        let inputs = 512, outputs = 512
        let x = (0..<(rows * inputs)).map { _ in Float.random(in: -1...1, using: &rng) }
        let w = (0..<(outputs * inputs)).map { _ in Float.random(in: -1...1, using: &rng) }
        let b = (0..<outputs).map { _ in Float.random(in: -1...1, using: &rng) }
        var results: [[Float]] = []
        for threads in 1...4 {
            results.append(Self.linear(x, rows: rows, weight: w, bias: b, threads: threads))
        }
        for threads in 2...4 {
            let differing = zip(results[0], results[threads - 1]).filter { $0.bitPattern != $1.bitPattern }.count
            #expect(differing == 0, "\(threads) threads: \(differing) of \(rows * outputs) values differ from 1 thread")
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

/// ``PackedLinear`` (Lookout's GEMM on weights packed at load) against a naive loop in Float64: every code
/// path the CPU has (portable C, AVX2, AVX-512), float and half weights, row counts around the register
/// tiles (1…13, one photo's 50, several blocks), input counts around the KC chunk and output counts around
/// the 16- and 32-column panels.
@Suite(.serialized) struct PackedLinearTests {
    @Test(arguments: [1, 2, 3])
    func matchesNaiveLinear(level: Int) {
        let inUse = PackedLinear.setLevel(level)
        defer { PackedLinear.setLevel(0) }
        guard inUse == level else { return }  // this CPU lacks that code
        var rng = SplitMix64(seed: UInt64(level))
        let pool = ComputePool(threads: 2)
        for (rows, inputs, outputs) in [
            (1, 3, 1), (2, 17, 15), (5, 64, 16), (7, 33, 17), (11, 100, 31), (12, 385, 32), (13, 384, 33),
            (50, 769, 100), (97, 40, 48), (200, 130, 64),
        ] {
            let x = (0..<(rows * inputs)).map { _ in Float.random(in: -1...1, using: &rng) }
            let halves = (0..<(outputs * inputs)).map { _ in Float16(Float.random(in: -1...1, using: &rng)) }
            let w = halves.map { Float($0) }
            let b = (0..<outputs).map { _ in Float.random(in: -1...1, using: &rng) }
            for (half, withBias) in [(false, true), (true, true), (false, false), (true, false)] {
                let layer =
                    half
                    ? PackedLinear(
                        halfWeight: halves.map(\.bitPattern), bias: withBias ? b : nil, inputs: inputs, outputs: outputs
                    )
                    : PackedLinear(weight: w, bias: withBias ? b : nil, inputs: inputs, outputs: outputs)
                var y = [Float](repeating: .nan, count: rows * outputs)
                x.withUnsafeBufferPointer { x in
                    y.withUnsafeMutableBufferPointer { y in
                        layer.apply(x.baseAddress!, rows: rows, into: y.baseAddress!, pool: pool)
                    }
                }
                var worst = 0.0
                for r in 0..<rows {
                    for c in 0..<outputs {
                        var sum = withBias ? Double(b[c]) : 0
                        for k in 0..<inputs { sum += Double(x[r * inputs + k]) * Double(w[c * inputs + k]) }
                        worst = max(worst, abs(Double(y[r * outputs + c]) - sum))
                    }
                }
                #expect(
                    worst <= 1e-5 * Double(inputs).squareRoot() + 1e-6,
                    "level \(level), \(rows)×\(inputs)→\(outputs), half \(half), bias \(withBias): error \(worst)")
            }
        }
    }
}
