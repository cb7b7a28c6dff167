import Foundation
import LookoutSupport
import LookoutTensor
import LookoutTestSupport
import Testing

/// The bf16 arithmetic against its definition. The GEMM: both factors rounded to bfloat16 (nearest even), the
/// exact products summed — each path this CPU has (AMX tiles, AVX-512 BF16, portable C), within fp32 summation error; and against
/// the unrounded fp64 product, within the rounding's own bound (bf16 keeps 8 significant bits, so each factor
/// moves by at most 2⁻⁸ of itself, each product by at most 2⁻⁷ + 2⁻¹⁶ of |a·b|, and the sum by that much of
/// Σ|a·b|). The convolutions in bf16
/// against `DirectConvolution` (fp64) on every layer shape the detector has: 1×1, 3×3 stride 1 and 2, through
/// the lowered kernel (the same bound) and through Winograd (a derived looser one, below).
@Suite struct BF16Tests {
    static func random(_ count: Int, seed: UInt64) -> [Float] {
        var generator = SplitMix64(seed: seed)
        return (0..<count).map { _ in Float.random(in: -1...1, using: &generator) }
    }

    @Test(arguments: [
        (1, 1, 1), (8, 5, 16), (13, 7, 17), (9, 33, 48), (24, 64, 49), (17, 3, 100), (40, 70, 129), (33, 64, 31),
    ])
    func gemmMatchesItsDefinition(m: Int, k: Int, n: Int) {
        let a = Self.random(m * k, seed: UInt64(m * 1000 + k))
        let b = Self.random(k * n, seed: UInt64(n * 7 + 3))
        let bias = Self.random(m, seed: 99)
        let packed = a.withUnsafeBufferPointer { ConvolutionGEMM.packBF16($0.baseAddress!, m: m, k: k) }
        #expect(packed.count == ConvolutionGEMM.packedCountBF16(m: m, k: k))
        let round = ConvolutionGEMM.roundedToBF16
        for path in BF16Path.allCases where path.isAvailable {
            var c = [Float](repeating: .nan, count: m * n)
            packed.withUnsafeBufferPointer { p in
                b.withUnsafeBufferPointer { b in
                    bias.withUnsafeBufferPointer { bias in
                        c.withUnsafeMutableBufferPointer { c in
                            ConvolutionGEMM.multiply(
                                bf16: p.baseAddress!, m: m, k: k, b: b.baseAddress!, ldb: n, n: n,
                                c: c.baseAddress!, ldc: n, bias: bias.baseAddress!, path: path)
                        }
                    }
                }
            }
            var worstRounded = 0.0
            var worstExact = 0.0
            for i in 0..<m {
                for j in 0..<n {
                    var rounded = Double(bias[i])
                    var exact = Double(bias[i])
                    var magnitude = abs(Double(bias[i]))
                    for p in 0..<k {
                        rounded += Double(round(a[i * k + p])) * Double(round(b[p * n + j]))
                        exact += Double(a[i * k + p]) * Double(b[p * n + j])
                        magnitude += abs(Double(a[i * k + p]) * Double(b[p * n + j]))
                    }
                    let value = Double(c[i * n + j])
                    // fp32 sums of k + 1 terms: at most (k + 1)·2⁻²⁴ of the magnitude (and the bias's rounding).
                    let summing = Double(k + 2) * 0x1p-24 * magnitude * 1.01 + 1e-30
                    worstRounded = max(worstRounded, abs(value - rounded) / summing)
                    worstExact = max(worstExact, abs(value - exact) / ((0x1p-7 + 0x1p-16) * magnitude + summing))
                }
            }
            #expect(worstRounded <= 1, "\(path) m\(m) k\(k) n\(n): \(worstRounded)")
            #expect(worstExact <= 1, "\(path) m\(m) k\(k) n\(n): \(worstExact)")
        }
    }

    /// A linear layer in bf16 (the CLIP towers'): y = x·Wᵀ + b through the bf16 GEMM on the transposed rows,
    /// within the rounding bound of the fp64 product, for row counts around the GEMM's blocks and outputs that
    /// are not a multiple of its panels.
    @Test(
        .enabled(if: Precision.bf16.isNative, "this CPU has no AVX-512 BF16"),
        arguments: [(1, 64, 40), (5, 48, 17), (50, 96, 130), (77, 33, 8)])
    func linearLayerWithinTheBound(rows: Int, inputs: Int, outputs: Int) throws {
        let w = Self.random(outputs * inputs, seed: 31), x = Self.random(rows * inputs, seed: 32)
        let bias = Self.random(outputs, seed: 33)
        let layer = PackedLinear(bf16Weight: w, bias: bias, inputs: inputs, outputs: outputs)
        #expect(layer.isBF16)
        var y = [Float](repeating: .nan, count: rows * outputs)
        x.withUnsafeBufferPointer { layer.apply($0.baseAddress!, rows: rows, into: &y, pool: ComputePool(threads: 2)) }
        var worst = 0.0
        for r in 0..<rows {
            for o in 0..<outputs {
                var exact = Double(bias[o]), magnitude = abs(Double(bias[o]))
                for i in 0..<inputs {
                    exact += Double(x[r * inputs + i]) * Double(w[o * inputs + i])
                    magnitude += abs(Double(x[r * inputs + i]) * Double(w[o * inputs + i]))
                }
                let bound = ((0x1p-7 + 0x1p-16) + Double(inputs + 2) * 0x1p-24) * magnitude * 1.01
                worst = max(worst, abs(Double(y[r * outputs + o]) - exact) / bound)
            }
        }
        #expect(worst <= 1, "rows \(rows), \(inputs)->\(outputs): \(worst) of the bound")
    }

    /// Rounding to nearest even, ties and NaN included.
    @Test func roundingToBF16() {
        let round = ConvolutionGEMM.roundedToBF16
        #expect(round(1.0) == 1.0)
        #expect(round(1 + 0x1p-8) == 1.0, "a tie goes to the even neighbour")
        #expect(round(1 + 3 * 0x1p-8) == 1 + 0x1p-6, "a tie goes to the even neighbour")
        #expect(round(1 + 0x1p-8 + 0x1p-12) == 1 + 0x1p-7)
        #expect(round(-2.0) == -2.0)
        #expect(round(.infinity) == .infinity)
        #expect(round(.nan).isNaN)
    }

    static func convolution(
        inputs: Int, outputs: Int, kernel: Int, stride: Int, height: Int, width: Int, seed: UInt64
    ) -> (FeatureMap, ConvolutionWeights) {
        var x = FeatureMap(channels: inputs, height: height, width: width)
        x.data = random(inputs * height * width, seed: seed)
        let weights = ConvolutionWeights(
            weight: random(outputs * inputs * kernel * kernel, seed: seed + 1).map { $0 * 0.2 },
            bias: random(outputs, seed: seed + 2), inputs: inputs, outputs: outputs, kernel: kernel,
            stride: stride, activation: false)
        return (x, weights)
    }

    /// Σ|w|·|x| per output: the scale the rounding errors are bounded by.
    static func magnitudes(_ x: FeatureMap, _ w: ConvolutionWeights) -> [Float] {
        var absolute = x
        absolute.data = x.data.map(abs)
        let weights = ConvolutionWeights(
            weight: w.weight.map(abs), bias: w.bias.map(abs), inputs: w.inputs, outputs: w.outputs, kernel: w.kernel,
            stride: w.stride, activation: false)
        return DirectConvolution().convolve(absolute, weights, pool: ComputePool(threads: 1)).data
    }

    @Test(
        .enabled(if: Precision.bf16.isNative, "this CPU has no AVX-512 BF16"),
        arguments: [
            (64, 48, 1, 1, 20, 24), (32, 64, 3, 1, 17, 23), (48, 64, 3, 2, 21, 26), (256, 64, 1, 1, 10, 12),
        ])
    func loweredConvolutionWithinTheBound(
        inputs: Int, outputs: Int, kernel: Int, stride: Int, height: Int, width: Int
    )
        throws
    {
        let (x, w) = Self.convolution(
            inputs: inputs, outputs: outputs, kernel: kernel, stride: stride, height: height, width: width, seed: 5)
        let pool = ComputePool(threads: 2)
        let expected = DirectConvolution().convolve(x, w, pool: pool).data
        let scale = Self.magnitudes(x, w)
        let depth = inputs * kernel * kernel
        for path in [BF16Path.tiles, .vector] where path.isAvailable {
            let kernelBF16 = LoweredConvolution(precision: .bf16, bf16Path: path)
            let prepared = kernelBF16.prepare(w)
            #expect(!prepared.packedBF16.isEmpty && prepared.packed.isEmpty && prepared.bf16Path == path)
            let got = kernelBF16.convolve(x, prepared, pool: pool).data
            var worst = 0.0
            for i in got.indices {
                let bound = ((0x1p-7 + 0x1p-16) + Double(depth + 2) * 0x1p-24) * Double(scale[i]) * 1.01
                worst = max(worst, Double(abs(got[i] - expected[i])) / bound)
            }
            #expect(worst <= 1, "\(path) \(inputs)->\(outputs) k\(kernel) s\(stride): \(worst) of the bound")
        }
    }

    /// Each path's products do not depend on how the work is split: rows in panels of eight from any panel, and
    /// columns in any pieces, give the same bits as the whole product (what lets a convolution's result be the
    /// same on any thread count).
    @Test(arguments: [(40, 70, 129), (56, 300, 77), (24, 33, 48)])
    func productsDoNotDependOnTheSplit(m: Int, k: Int, n: Int) {
        let a = Self.random(m * k, seed: 71), b = Self.random(k * n, seed: 72), bias = Self.random(m, seed: 73)
        let packed = a.withUnsafeBufferPointer { ConvolutionGEMM.packBF16($0.baseAddress!, m: m, k: k) }
        for path in BF16Path.allCases where path.isAvailable {
            func product(rows: Range<Int>, columns: Range<Int>, into c: inout [Float]) {
                packed.withUnsafeBufferPointer { p in
                    b.withUnsafeBufferPointer { b in
                        bias.withUnsafeBufferPointer { bias in
                            c.withUnsafeMutableBufferPointer { c in
                                ConvolutionGEMM.multiply(
                                    bf16: p.baseAddress!, m: m, k: k, rows: rows,
                                    b: b.baseAddress! + columns.lowerBound,
                                    ldb: n, n: columns.count, c: c.baseAddress! + columns.lowerBound, ldc: n,
                                    bias: bias.baseAddress!, activation: true, path: path)
                            }
                        }
                    }
                }
            }
            var whole = [Float](repeating: .nan, count: m * n)
            product(rows: 0..<m, columns: 0..<n, into: &whole)
            var pieces = [Float](repeating: .nan, count: m * n)
            // Rows 8 at a time from the second panel of eight on (a tile's second half), columns in odd pieces.
            let rowCuts = [0, 8, 24, m], columnCuts = [0, 5, 37, n]
            for r in 0..<3 where rowCuts[r] < rowCuts[r + 1] {
                for j in 0..<3 where columnCuts[j] < columnCuts[j + 1] {
                    product(
                        rows: rowCuts[r]..<rowCuts[r + 1], columns: columnCuts[j]..<columnCuts[j + 1], into: &pieces)
                }
            }
            #expect(whole.map(\.bitPattern) == pieces.map(\.bitPattern), "\(path) m\(m) k\(k) n\(n)")
        }
    }

    /// Winograd F(4×4, 3×3) rounds the transformed tiles and weights, not x and w: each output is Aᵀ(Σ U⊙V)A
    /// over 36 transformed products whose roundings are bounded by 2⁻⁷·|U|·|V|, and |Aᵀ|·|U|·|V|·|A| with
    /// F(4×4, 3×3)'s matrices (entries up to 8 in A, 5 in B, 1 in G) reaches about 2⁸ times Σ|w|·|x| in the
    /// corners of a tile. In practice the errors are far smaller (measured: at most 0.06, on average 0.002 of
    /// Σ|w|·|x|); the bound asserted is 1/4 of Σ|w|·|x| at any point and 2⁻⁶ on average, which a wrong transform,
    /// pairing or packing breaks by orders of magnitude.
    @Test(
        .enabled(if: Precision.bf16.isNative && WinogradConvolution.available, "no AVX-512 BF16 or no AVX2"),
        arguments: [(64, 48, 20, 24), (128, 64, 9, 13), (16, 32, 16, 16), (64, 48, 80, 80), (16, 16, 152, 160)])
    func winogradConvolutionCloseToTheDefinition(inputs: Int, outputs: Int, height: Int, width: Int) throws {
        let (x, w) = Self.convolution(
            inputs: inputs, outputs: outputs, kernel: 3, stride: 1, height: height, width: width, seed: 11)
        let pool = ComputePool(threads: 2)
        let expected = DirectConvolution().convolve(x, w, pool: pool).data
        let scale = Self.magnitudes(x, w)
        for path in [BF16Path.tiles, .vector] where path.isAvailable {
            let kernelBF16 = WinogradConvolution(precision: .bf16, bf16Path: path)
            let prepared = kernelBF16.prepare(w)
            #expect(prepared.packedBF16.count == 36 * ConvolutionGEMM.packedCountBF16(m: outputs, k: inputs))
            #expect(prepared.bf16Path == path)
            let got = kernelBF16.convolve(x, prepared, pool: pool).data
            var worst = 0.0
            var mean = 0.0
            for i in got.indices {
                let relative = Double(abs(got[i] - expected[i])) / Double(scale[i])
                worst = max(worst, relative)
                mean += relative / Double(got.count)
            }
            print("winograd bf16 \(path) \(inputs)->\(outputs) \(height)x\(width): worst \(worst), mean \(mean)")
            #expect(worst <= 0x1p-2)
            #expect(mean <= 0x1p-6)
        }
    }
}
