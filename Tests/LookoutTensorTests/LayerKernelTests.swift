import Foundation
import LookoutSupport
import LookoutTensor
import LookoutTestSupport
import Testing

/// Every layer kernel against a naive reference written from its definition (loops in Double): the
/// convolution (each path of the lowered kernel: 1×1 GEMM, stride 1, stride 2 with the wide copies,
/// 5×5, maps smaller than the kernel), max pooling, upsampling, concatenation, SiLU, LayerNorm and causal
/// attention. Compared with one all-close rule.
@Suite struct LayerKernelTests {
    /// `|a − b| ≤ atol + rtol·|b|` everywhere; the worst offender in the message.
    static func expectAllClose(
        _ actual: [Float], _ expected: [Float], rtol: Float = 1e-5, atol: Float = 1e-5, _ name: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(
            actual.count == expected.count, "\(name): \(actual.count) vs \(expected.count) values",
            sourceLocation: sourceLocation)
        var worst: (index: Int, excess: Float) = (-1, 0)
        for (index, (a, b)) in zip(actual, expected).enumerated() {
            let excess = abs(a - b) - (atol + rtol * abs(b))
            if !(excess <= 0) && (worst.index < 0 || excess > worst.excess || excess.isNaN) { worst = (index, excess) }
        }
        #expect(
            worst.index < 0,
            "\(name): value \(worst.index) is \(worst.index >= 0 ? actual[worst.index] : 0), expected \(worst.index >= 0 ? expected[worst.index] : 0)",
            sourceLocation: sourceLocation)
    }

    static func random(_ count: Int, seed: UInt64, scale: Float = 1) -> [Float] {
        var generator = SplitMix64(seed: seed)
        return (0..<count).map { _ in Float.random(in: -scale...scale, using: &generator) }
    }

    @Test(arguments: [
        (3, 5, 3, 2, 17, 23, true), (8, 4, 1, 1, 9, 7, false), (6, 6, 5, 1, 11, 13, true), (4, 7, 3, 1, 1, 1, true),
        (16, 8, 3, 2, 40, 37, true), (32, 16, 1, 1, 20, 30, true), (5, 3, 3, 1, 64, 3, false),
        (12, 9, 3, 2, 6, 66, false), (16, 64, 1, 1, 9, 11, true), (24, 70, 1, 1, 5, 5, false),
    ])
    func convolutionMatchesItsDefinition(
        inputs: Int, outputs: Int, kernel: Int, stride: Int, height: Int, width: Int, activation: Bool
    ) {
        let seed = UInt64(inputs * 1000 + outputs * 100 + kernel * 10 + stride)
        let weights = ConvolutionWeights(
            weight: Self.random(outputs * inputs * kernel * kernel, seed: seed, scale: 0.5),
            bias: Self.random(outputs, seed: seed + 1), inputs: inputs, outputs: outputs, kernel: kernel,
            stride: stride, activation: activation)
        let x = FeatureMap(
            channels: inputs, height: height, width: width, data: Self.random(inputs * height * width, seed: seed + 2))
        let pool = ComputePool(threads: 2)
        let expected = DirectConvolution().convolve(x, weights, pool: pool)
        // As loaded (the packed GEMM where the CPU has AVX-512), and unprepared (OpenBLAS).
        let prepared = LoweredConvolution().prepare(weights)
        #expect(prepared.packed.isEmpty != ConvolutionGEMM.available)
        #expect(prepared.denseWeight == weights.weight, "the packed weights read back")
        for (form, w) in [("prepared", prepared), ("unprepared", weights)] {
            let actual = LoweredConvolution().convolve(x, w, pool: pool)
            #expect(actual.channels == outputs && actual.height == expected.height && actual.width == expected.width)
            Self.expectAllClose(
                actual.data, expected.data,
                "conv \(inputs)→\(outputs) k\(kernel) s\(stride) \(height)×\(width) \(form)")
        }
    }

    /// The convolutions' own GEMM against the definition (rows that are not a multiple of the 8-row panels,
    /// column counts around the 16-wide registers and 48-wide blocks, row strides wider than the matrices, a
    /// range of panels, bias and SiLU), and the same bits whatever the split.
    @Test(
        .enabled(if: ConvolutionGEMM.available, "this CPU has no AVX-512: the packed GEMM is not used"),
        arguments: [(1, 1, 1), (8, 5, 16), (13, 7, 17), (9, 33, 48), (24, 64, 49), (17, 3, 100), (40, 70, 129)])
    func packedGEMMMatchesItsDefinition(m: Int, k: Int, n: Int) throws {
        let seed = UInt64(m * 10000 + k * 100 + n)
        let (ldb, ldc) = (n + 3, n + 5)
        let a = Self.random(m * k, seed: seed), b = Self.random(k * ldb, seed: seed + 1)
        let bias = Self.random(m, seed: seed + 2)
        let packed = a.withUnsafeBufferPointer { ConvolutionGEMM.pack($0.baseAddress!, m: m, k: k) }
        #expect(packed.count == ConvolutionGEMM.packedCount(m: m, k: k))
        for activation in [false, true] {
            var c = [Float](repeating: .nan, count: m * ldc)
            packed.withUnsafeBufferPointer { p in
                b.withUnsafeBufferPointer { b in
                    bias.withUnsafeBufferPointer { bias in
                        c.withUnsafeMutableBufferPointer { c in
                            ConvolutionGEMM.multiply(
                                packed: p.baseAddress!, m: m, k: k, b: b.baseAddress!, ldb: ldb, n: n,
                                c: c.baseAddress!, ldc: ldc, bias: bias.baseAddress!, activation: activation)
                        }
                    }
                }
            }
            var expected = [Float](repeating: .nan, count: m * ldc)
            for i in 0..<m {
                for j in 0..<n {
                    var sum = Double(bias[i])
                    for p in 0..<k { sum += Double(a[i * k + p]) * Double(b[p * ldb + j]) }
                    expected[i * ldc + j] = activation ? Float(sum / (1 + exp(-sum))) : Float(sum)
                }
            }
            for i in 0..<m {
                Self.expectAllClose(
                    Array(c[(i * ldc)..<(i * ldc + n)]), Array(expected[(i * ldc)..<(i * ldc + n)]),
                    "gemm \(m)×\(k)×\(n) row \(i) activation \(activation)")
                let untouched = c[(i * ldc + n)..<((i + 1) * ldc)].allSatisfy { $0.isNaN }
                #expect(untouched, "wrote past row \(i)'s \(n) columns")
            }
            // Panel by panel, and column by column, the same bits.
            var pieces = [Float](repeating: .nan, count: m * ldc)
            packed.withUnsafeBufferPointer { p in
                b.withUnsafeBufferPointer { b in
                    bias.withUnsafeBufferPointer { bias in
                        pieces.withUnsafeMutableBufferPointer { c in
                            for first in stride(from: 0, to: m, by: 8) {
                                for column in 0..<n {
                                    ConvolutionGEMM.multiply(
                                        packed: p.baseAddress!, m: m, k: k, rows: first..<min(m, first + 8),
                                        b: b.baseAddress! + column, ldb: ldb, n: 1, c: c.baseAddress! + column,
                                        ldc: ldc, bias: bias.baseAddress!, activation: activation)
                                }
                            }
                        }
                    }
                }
            }
            #expect(
                zip(pieces, c).allSatisfy { $0.bitPattern == $1.bitPattern || ($0.isNaN && $1.isNaN) },
                "gemm \(m)×\(k)×\(n): a split changed the result")
        }
    }

    /// Convolutions through the packed GEMM give the same bits on one, two and three threads (the index's
    /// lanes run one-thread engines and must store what a two-thread engine computes).
    @Test(.enabled(if: ConvolutionGEMM.available, "this CPU has no AVX-512: the packed GEMM is not used"))
    func packedConvolutionsDoNotDependOnTheThreads() throws {
        for (inputs, outputs, kernel, stride, height, width) in [
            (64, 96, 1, 1, 14, 20), (32, 48, 3, 2, 37, 41), (64, 40, 3, 1, 22, 26), (96, 64, 1, 1, 40, 40),
            (64, 72, 3, 1, 80, 80),  // Winograd in blocks of tile rows (10 blocks of 40 tiles)
        ] {
            let seed = UInt64(inputs * 100 + outputs + kernel)
            let weights = WinogradConvolution().prepare(
                ConvolutionWeights(
                    weight: Self.random(outputs * inputs * kernel * kernel, seed: seed, scale: 0.3),
                    bias: Self.random(outputs, seed: seed + 1), inputs: inputs, outputs: outputs, kernel: kernel,
                    stride: stride, activation: true))
            #expect(!weights.packed.isEmpty)
            let x = FeatureMap(
                channels: inputs, height: height, width: width,
                data: Self.random(inputs * height * width, seed: seed + 2))
            let results = [1, 2, 3].map { WinogradConvolution().convolve(x, weights, pool: ComputePool(threads: $0)) }
            for result in results.dropFirst() {
                #expect(
                    result.data.map(\.bitPattern) == results[0].data.map(\.bitPattern),
                    "\(inputs)→\(outputs) k\(kernel) s\(stride) \(height)×\(width): threads changed the result")
            }
        }
    }

    /// Winograd F(4×4, 3×3) against the definition: widths and heights that are and are not multiples of
    /// the 4-pixel tiles and the 8-tile groups, maps smaller than a tile, activation on and off. Its
    /// rounding differs from the direct sum's, so the bound is looser than the lowered kernel's (which adds
    /// the same products in another order): 1e-4 relative to the largest output.
    @Test(arguments: [
        (8, 4, 1, 1, true), (16, 8, 5, 7, false), (8, 16, 12, 33, true), (32, 24, 40, 37, true),
        (64, 64, 20, 20, true), (24, 8, 3, 129, false), (128, 32, 14, 20, true), (72, 13, 9, 10, false),
        // Maps of 8 blocks of tile rows or more go through the blocked path: full 8-tile groups, a partial one
        // (23 tiles a row), a last block shorter than the others (18 tile rows in blocks of 2), OpenBLAS's
        // products (32 inputs) and the packed GEMM's (64).
        (32, 24, 80, 80, true), (64, 40, 72, 90, false), (64, 64, 70, 44, true),
    ])
    func winogradMatchesTheDefinition(inputs: Int, outputs: Int, height: Int, width: Int, activation: Bool) throws {
        try #require(WinogradConvolution.available, "this CPU has no AVX2/FMA: Winograd is not used")
        let seed = UInt64(inputs * 1000 + outputs * 100 + height + width)
        let weights = WinogradConvolution().prepare(
            ConvolutionWeights(
                weight: Self.random(outputs * inputs * 9, seed: seed, scale: 0.5),
                bias: Self.random(outputs, seed: seed + 1), inputs: inputs, outputs: outputs, kernel: 3, stride: 1,
                activation: activation))
        // The transformed weights, packed for the GEMM where it is used.
        #expect(
            weights.transformed.count == 36 * outputs * inputs
                || weights.packed.count == 36 * ConvolutionGEMM.packedCount(m: outputs, k: inputs))
        let x = FeatureMap(
            channels: inputs, height: height, width: width, data: Self.random(inputs * height * width, seed: seed + 2))
        let pool = ComputePool(threads: 2)
        let actual = WinogradConvolution().convolve(x, weights, pool: pool)
        let expected = DirectConvolution().convolve(x, weights, pool: pool)
        #expect(actual.channels == outputs && actual.height == height && actual.width == width)
        let scale = expected.data.map(abs).max() ?? 1
        let worst = zip(actual.data, expected.data).map { abs($0 - $1) }.max() ?? 0
        #expect(
            worst <= 1e-4 * scale,
            "winograd \(inputs)→\(outputs) \(height)×\(width): error \(worst), outputs up to \(scale)")
        print("winograd \(inputs)→\(outputs) \(height)×\(width): largest error \(worst) (outputs up to \(scale))")
    }

    @Test func poolingUpsamplingAndConcatenation() {
        // Maps narrower than the window, one pixel, and rows wide enough for the vectorised interior.
        for (height, width) in [(7, 9), (1, 1), (2, 3), (4, 4), (20, 20), (3, 41)] {
            let x = FeatureMap(
                channels: 3, height: height, width: width, data: Self.random(3 * height * width, seed: 5))
            for size in [3, 5] {
                var expected = [Float]()
                for c in 0..<3 {
                    for y in 0..<height {
                        for xx in 0..<width {
                            var best = -Float.infinity
                            for dy in -(size / 2)...(size / 2) {
                                for dx in -(size / 2)...(size / 2) {
                                    let (yy, xxx) = (y + dy, xx + dx)
                                    if yy >= 0 && yy < height && xxx >= 0 && xxx < width {
                                        best = max(best, x.data[(c * height + yy) * width + xxx])
                                    }
                                }
                            }
                            expected.append(best)
                        }
                    }
                }
                #expect(x.maxPooled(size: size).data == expected, "max pool \(size) of \(height)×\(width)")
                #expect(
                    x.maxPooled(size: size, pool: .shared).data == expected,
                    "max pool \(size) of \(height)×\(width), two threads")
            }
        }
        let x = FeatureMap(channels: 3, height: 7, width: 9, data: Self.random(3 * 7 * 9, seed: 5))
        let up = x.upsampled()
        #expect(up.height == 14 && up.width == 18)
        var upExpected = [Float]()
        for c in 0..<3 {
            for y in 0..<14 { for xx in 0..<18 { upExpected.append(x.data[(c * 7 + y / 2) * 9 + xx / 2]) } }
        }
        #expect(up.data == upExpected)
        let joined = FeatureMap.concatenate([x, x.channels(1..<3)])
        #expect(joined.channels == 5 && joined.data == x.data + Array(x.data[63..<189]))
        #expect(x.adding(x).data == x.data.map { $0 + $0 })
    }

    @Test func siluMatchesItsDefinition() {
        var values =
            Self.random(4099, seed: 9, scale: 12) + [0, -0.0, 1e-8, -1e-8, 30, -30, 88, -88, 100, -100, 1e30, -1e30]
        let expected = values.map { Float(Double($0) / (1 + exp(-Double($0)))) }
        values.withUnsafeMutableBufferPointer { Kernels.silu($0.baseAddress!, count: $0.count) }
        Self.expectAllClose(values, expected, rtol: 2e-6, atol: 1e-7, "SiLU")
    }

    /// The head's DFL decode: each side's expectation of the softmax over its 16 bins, for runs of anchors that are
    /// and are not a multiple of the vector width, from a column inside the rows, with logits from −40 to 40.
    @Test func distributionExpectationsMatchTheirDefinition() {
        let (bins, plane) = (16, 61)
        let box = Self.random(4 * bins * plane, seed: 21, scale: 40)
        for (first, count) in [(0, 61), (3, 8), (5, 13), (60, 1), (9, 48)] {
            var distances = [Float](repeating: .nan, count: 4 * count)
            box.withUnsafeBufferPointer { b in
                Kernels.distributionExpectations(
                    b.baseAddress!, plane: plane, first: first, count: count, bins: bins, into: &distances)
            }
            var expected = [Float]()
            for side in 0..<4 {
                for i in 0..<count {
                    let logits = (0..<bins).map { Double(box[(side * bins + $0) * plane + first + i]) }
                    let top = logits.max()!
                    let weights = logits.map { exp($0 - top) }
                    let total = weights.reduce(0, +)
                    expected.append(Float(zip(0..., weights).map { Double($0) * $1 }.reduce(0, +) / total))
                }
            }
            Self.expectAllClose(distances, expected, rtol: 1e-5, atol: 2e-6, "DFL from \(first), \(count) anchors")
        }
    }

    @Test func layerNormMatchesItsDefinition() {
        let (rows, width) = (5, 67)
        let x = Self.random(rows * width, seed: 11, scale: 3).enumerated().map { $0.element + Float($0.offset % 7) }
        let gamma = Self.random(width, seed: 12), beta = Self.random(width, seed: 13)
        var y = [Float](repeating: 0, count: rows * width)
        Kernels.layerNorm(x, rows: rows, width: width, gamma: gamma, beta: beta, epsilon: 1e-5, into: &y)
        var expected = [Float]()
        for r in 0..<rows {
            let row = x[(r * width)..<((r + 1) * width)].map(Double.init)
            let mean = row.reduce(0, +) / Double(width)
            let variance = row.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(width)
            for (i, v) in row.enumerated() {
                expected.append(Float((v - mean) / (variance + 1e-5).squareRoot() * Double(gamma[i]) + Double(beta[i])))
            }
        }
        Self.expectAllClose(y, expected, rtol: 1e-5, atol: 2e-6, "LayerNorm")
    }

    @Test func causalAttentionMatchesItsDefinition() {
        let (length, width, heads) = (9, 16, 2)
        let headSize = width / heads
        let qkv = Self.random(length * 3 * width, seed: 21)
        var output = [Float](repeating: 0, count: length * width)
        var scratch = [Float](repeating: 0, count: length)
        let scale = 1 / Float(headSize).squareRoot()
        for head in 0..<heads {
            Kernels.causalAttentionHead(
                qkv: qkv, length: length, width: width, head: head, headSize: headSize, scale: scale, into: &output,
                scratch: &scratch)
        }
        var expected = [Float](repeating: 0, count: length * width)
        for head in 0..<heads {
            for i in 0..<length {
                let scores = (0...i).map { j -> Double in
                    (0..<headSize).reduce(0.0) { sum, d in
                        sum + Double(qkv[i * 3 * width + head * headSize + d])
                            * Double(qkv[j * 3 * width + width + head * headSize + d])
                    } * Double(scale)
                }
                let top = scores.max()!
                let weights = scores.map { exp($0 - top) }
                let total = weights.reduce(0, +)
                for d in 0..<headSize {
                    let value = (0...i).reduce(0.0) {
                        $0 + weights[$1] / total * Double(qkv[$1 * 3 * width + 2 * width + head * headSize + d])
                    }
                    expected[i * width + head * headSize + d] = Float(value)
                }
            }
        }
        Self.expectAllClose(output, expected, "causal attention")
    }
}
