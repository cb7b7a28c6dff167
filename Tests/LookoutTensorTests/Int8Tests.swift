import Foundation
import LookoutSupport
import LookoutTensor
import LookoutTestSupport
import Testing

/// The int8 arithmetic against its definition. Quantisation: weights per row to ±L with scale max|w|/L, inputs
/// to u8 with a scale and zero point; each value within half a step of what it stands for. The GEMM: the exact
/// integer sum Σ q·x minus the zero point's share, times the scales, plus the bias — the VNNI, AVX-512BW and
/// portable paths give it bit for bit (the integer sums are exact; the epilogue is one conversion, one multiply
/// and one add). The convolutions in int8 against `DirectConvolution` (fp64) of the dequantised weights and
/// input (the same numbers up to fp32 summation), and against the unquantised convolution within the bound
/// quantisation implies: Σ (|Δw|·|x| + |w|·|Δx| + |Δw|·|Δx|) with |Δw| ≤ s_w/2, |Δx| ≤ s_x/2.
@Suite struct Int8Tests {
    static func random(_ count: Int, seed: UInt64, in range: ClosedRange<Float> = -1...1) -> [Float] {
        var generator = SplitMix64(seed: seed)
        return (0..<count).map { _ in Float.random(in: range, using: &generator) }
    }

    /// The levels this CPU runs (4 AMX, 3 VNNI, 2 AVX-512BW, 1 AVX2, 0 portable C), each forced in turn.
    static var levels: [Int] { Array((0...Int8Convolution.bestLevel).reversed()) }

    /// Levels 1 and 2 multiply through VPMADDUBSW: 7-bit weights only.
    static func sevenBitOnly(_ level: Int) -> Bool { level == 1 || level == 2 }

    @Test(arguments: [(1, 1, 1), (8, 5, 16), (13, 7, 17), (9, 33, 48), (24, 64, 49), (17, 3, 100), (40, 70, 129)])
    func gemmMatchesItsDefinition(m: Int, k: Int, n: Int) {
        let a = Self.random(m * k, seed: UInt64(m * 1000 + k))
        let x = Self.random(k * n, seed: UInt64(n * 7 + 3), in: -0.3...2.5)
        let bias = Self.random(m, seed: 99)
        let input = ActivationQuantization(range: -0.3...2.5)
        var b = [UInt8](repeating: 0, count: k * n)
        x.withUnsafeBufferPointer { input.quantize($0.baseAddress!, count: k * n, into: &b) }
        for limit in [127, 63] {
            let weights = a.withUnsafeBufferPointer {
                ConvolutionGEMM.packInt8($0.baseAddress!, m: m, k: k, input: input, limit: limit)
            }
            // The definition, from the quantised values the packing reports.
            let q = weights.dequantised(m: m, k: k).enumerated().map { index, value in
                Int32((value / weights.weightScales[index / k]).rounded())
            }
            #expect(q.allSatisfy { abs($0) <= limit })
            for i in 0..<m {
                #expect(weights.corrections[i] == input.zero * q[(i * k)..<((i + 1) * k)].reduce(0, +))
            }
            var expected = [Float](repeating: 0, count: m * n)
            for i in 0..<m {
                for j in 0..<n {
                    var sum: Int32 = 0
                    for p in 0..<k { sum += q[i * k + p] * Int32(b[p * n + j]) }
                    expected[i * n + j] = Float(sum - weights.corrections[i]) * weights.scales[i] + bias[i]
                }
            }
            for level in Self.levels where !(limit == 127 && Self.sevenBitOnly(level)) {
                var c = [Float](repeating: .nan, count: m * n)
                b.withUnsafeBufferPointer { b in
                    bias.withUnsafeBufferPointer { bias in
                        ConvolutionGEMM.multiply(
                            int8: weights, m: m, k: k, b: b.baseAddress!, ldb: n, n: n, c: &c, ldc: n,
                            bias: bias.baseAddress!, level: level)
                    }
                }
                #expect(c == expected, "level \(level), limit \(limit), m\(m) k\(k) n\(n)")
                // With SiLU: the vector exp against expf, within a few ulp.
                var activated = [Float](repeating: .nan, count: m * n)
                b.withUnsafeBufferPointer { b in
                    bias.withUnsafeBufferPointer { bias in
                        ConvolutionGEMM.multiply(
                            int8: weights, m: m, k: k, b: b.baseAddress!, ldb: n, n: n, c: &activated, ldc: n,
                            bias: bias.baseAddress!, activation: true, level: level)
                    }
                }
                let silu = expected.map { $0 / (1 + expf(-$0)) }
                let worst = zip(activated, silu).map { abs($0 - $1) / max(abs($1), 1e-3) }.max() ?? 0
                #expect(worst <= 1e-5, "level \(level) SiLU: \(worst)")
            }
        }
    }

    /// Weights: each within half a step (s = max|w|/L) of its quantised value; the largest exactly ±L.
    @Test func weightRoundTrip() {
        let (m, k) = (19, 75)
        var a = Self.random(m * k, seed: 4)
        for p in 0..<k { a[3 * k + p] = 0 }  // a row of zeros: scale 0, values 0
        let weights = a.withUnsafeBufferPointer {
            ConvolutionGEMM.packInt8($0.baseAddress!, m: m, k: k, input: ActivationQuantization(range: 0...1))
        }
        let back = weights.dequantised(m: m, k: k)
        for i in 0..<m {
            let row = a[(i * k)..<((i + 1) * k)]
            let largest = row.map(abs).max()!
            let limit = Float(weights.weightScales[i] == 0 ? 1 : largest / weights.weightScales[i]).rounded()
            #expect(i == 3 ? weights.weightScales[i] == 0 : limit == 127 || limit == 63)
            for p in 0..<k {
                #expect(abs(back[i * k + p] - a[i * k + p]) <= weights.weightScales[i] / 2 * 1.0001)
            }
        }
    }

    /// Inputs: within half a step inside the range, clamped outside it, 0 exact, ties to even, NaN to 0; the
    /// vector path equals the portable one.
    @Test func inputRoundTrip() {
        let input = ActivationQuantization(range: -0.25...3.5)
        #expect(input.scale == 3.75 / 255)
        let zero = input.zero
        #expect(zero == Int32((0.25 / input.scale).rounded(.toNearestOrEven)))
        var x = Self.random(1000, seed: 8, in: -0.25...3.5)
        x += [0, -5, 40, .infinity, -.infinity, .nan, Float(3) * input.scale, Float(2.5) * input.scale]
        var portable = [UInt8](repeating: 9, count: x.count)
        x.withUnsafeBufferPointer { input.quantize($0.baseAddress!, count: x.count, into: &portable, level: 0) }
        var fast = portable
        for level in Self.levels {
            // Every length up to two of the vector paths' blocks, so that each tail is taken.
            for count in [x.count, 1, 7, 31, 33, 63, 65] {
                var bytes = [UInt8](repeating: 7, count: x.count)
                x.withUnsafeBufferPointer { input.quantize($0.baseAddress!, count: count, into: &bytes, level: level) }
                #expect(bytes.prefix(count) == portable.prefix(count), "level \(level), \(count) values")
                #expect(bytes.dropFirst(count).allSatisfy { $0 == 7 }, "level \(level) wrote past \(count)")
                if count == x.count { fast = bytes }
            }
        }
        #expect(fast == portable)
        for (value, q) in zip(x.prefix(1000), fast) {
            #expect(abs(Float(Int32(q) - zero) * input.scale - value) <= input.scale / 2 * 1.0001)
        }
        let tail = Array(fast.suffix(8))
        #expect(tail[0] == UInt8(zero), "0 is exact")
        #expect(tail[1] == 0 && tail[2] == 255 && tail[3] == 255 && tail[4] == 0 && tail[5] == 0)
        // 2.5 steps above zero: x·(1/s) is 2.5 up to rounding; ties go to even.
        #expect(abs(Int32(tail[7]) - zero - 2) <= 1)
        #expect(Int32(tail[6]) - zero == 3)
        // A range that does not hold 0 is widened to hold it; an empty one gives scale 1.
        #expect(ActivationQuantization(range: 1...2).zero == 0)
        #expect(ActivationQuantization(range: -2 ... -1).zero == 255)
        #expect(ActivationQuantization(range: 0...0).scale == 1)
    }

    @Test(arguments: [
        (64, 48, 1, 1, 20, 24), (32, 64, 3, 1, 17, 23), (48, 64, 3, 2, 21, 26), (256, 64, 1, 1, 10, 12),
        (16, 24, 3, 2, 33, 31), (18, 24, 3, 1, 9, 53), (64, 16, 3, 1, 5, 7), (16, 16, 3, 2, 12, 14),
        // More than 16 channel quads (two AMX blocks, the second partial) and outputs not a multiple of 16.
        (72, 40, 3, 1, 9, 37), (72, 40, 3, 2, 13, 22), (72, 40, 1, 1, 9, 37), (72, 24, 3, 1, 20, 20),
        // Direct 3×3 in flat order (widths 20, 40, 1) and row by row (80, 14).
        (64, 24, 3, 1, 20, 20), (32, 16, 3, 1, 11, 40), (20, 9, 3, 1, 6, 1), (16, 8, 3, 1, 5, 80),
        (16, 8, 3, 1, 3, 14),
        // Stride 2 on even and odd sizes, one column, and rows of several registers.
        (32, 16, 3, 2, 40, 40), (20, 8, 3, 2, 7, 1), (16, 8, 3, 2, 9, 161), (64, 16, 3, 2, 5, 35),
    ])
    func convolutionMatchesTheDequantisedDefinition(
        inputs: Int, outputs: Int, kernel: Int, stride: Int, height: Int, width: Int
    ) throws {  // on any CPU: without AVX-512 the portable C runs
        var x = FeatureMap(channels: inputs, height: height, width: width)
        x.data = Self.random(inputs * height * width, seed: 21, in: -0.28...3)
        var w = ConvolutionWeights(
            weight: Self.random(outputs * inputs * kernel * kernel, seed: 22).map { $0 * 0.2 },
            bias: Self.random(outputs, seed: 23), inputs: inputs, outputs: outputs, kernel: kernel, stride: stride,
            activation: false)
        w.inputRange = -0.28...3
        let pool = ComputePool(threads: 2)
        let int8 = Int8Convolution(fallback: LoweredConvolution())
        let prepared = int8.prepare(w)
        let weights = try #require(prepared.int8)
        let got = int8.convolve(x, prepared, pool: pool).data
        #expect(weights.direct == (kernel == 3))
        // Every path computes the same integers: the same floats (without SiLU), on 8-bit weights and on 7-bit.
        #expect(int8.convolve(x, prepared, pool: pool, level: 0).data == got, "portable C")
        for level in Self.levels where !Self.sevenBitOnly(level) {
            #expect(int8.convolve(x, prepared, pool: pool, level: level).data == got, "level \(level), 8-bit")
        }
        #expect(weights.tiles.isEmpty == (Int8Convolution.bestLevel < 4), "AMX's layout exactly where AMX runs")
        let seven = Int8Convolution(fallback: LoweredConvolution(), weightLimit: 63)
        let prepared7 = seven.prepare(w)
        let levels = Self.levels
        let results = levels.map { seven.convolve(x, prepared7, pool: pool, level: $0).data }
        for (level, result) in zip(levels, results) { #expect(result == results.last!, "level \(level), 7-bit") }

        // The dequantised operands through the fp64 definition.
        var dequantised = x
        var bytes = [UInt8](repeating: 0, count: x.data.count)
        x.data.withUnsafeBufferPointer { weights.input.quantize($0.baseAddress!, count: x.data.count, into: &bytes) }
        dequantised.data = bytes.map { Float(Int32($0) - weights.input.zero) * weights.input.scale }
        let denseQuantised = ConvolutionWeights(
            weight: prepared.denseWeight, bias: w.bias, inputs: inputs, outputs: outputs, kernel: kernel,
            stride: stride, activation: false)
        let definition = DirectConvolution().convolve(dequantised, denseQuantised, pool: pool).data
        let magnitude = BF16Tests.magnitudes(dequantised, denseQuantised)
        let depth = inputs * kernel * kernel
        for i in got.indices {
            #expect(
                abs(got[i] - definition[i]) <= Float(depth + 3) * 0x1p-24 * magnitude[i] * 1.01 + 1e-6,
                "\(i): \(got[i]) against \(definition[i])")
        }

        // Against the unquantised convolution, within the quantisation bound: per tap |Δw|·(|x| + |Δx|) + |w|·|Δx|.
        let exact = DirectConvolution().convolve(x, w, pool: pool).data
        let halfStepX = weights.input.scale / 2
        func positive(_ map: [Float], _ weight: [Float]) -> [Float] {
            var m = x
            m.data = map
            let v = ConvolutionWeights(
                weight: weight, bias: .init(repeating: 0, count: outputs), inputs: inputs, outputs: outputs,
                kernel: kernel, stride: stride, activation: false)
            return DirectConvolution().convolve(m, v, pool: pool).data
        }
        let fromWeights = positive(
            x.data.map { abs($0) + halfStepX }, (0..<(outputs * depth)).map { weights.weightScales[$0 / depth] / 2 })
        let fromInputs = positive(x.data.map { _ in halfStepX }, w.weight.map(abs))
        let bound = zip(fromWeights, fromInputs).map { $0 + $1 }
        var worst = 0.0
        for i in got.indices {
            let allowed = Double(bound[i]) * 1.001 + 1e-5
            worst = max(worst, Double(abs(got[i] - exact[i])) / allowed)
        }
        print("int8 \(inputs)->\(outputs) k\(kernel) s\(stride): worst \(worst) of the quantisation bound")
        #expect(worst <= 1)
    }

    /// The ranges calibration records.
    @Test func recorderKeepsTheExtremes() {
        let recorder = ActivationRecorder()
        [Float](arrayLiteral: 0.5, -0.25, .nan, 3).withUnsafeBufferPointer { recorder.record("model.2.cv1", $0) }
        [Float](arrayLiteral: 4, 1).withUnsafeBufferPointer { recorder.record("model.2.cv1", $0) }
        [Float](arrayLiteral: .infinity).withUnsafeBufferPointer { recorder.record("model.3", $0) }
        recorder.finishedImage()
        let (ranges, images) = recorder.recorded
        #expect(ranges == ["model.2.cv1": -0.25...4])
        #expect(images == 1)
    }
}
