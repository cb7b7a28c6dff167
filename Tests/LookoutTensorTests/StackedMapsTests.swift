import Foundation
import LookoutSupport
import LookoutTensor
import LookoutTestSupport
import Testing

/// Maps stacked along channels (``StackedMaps``) are read where they lie by the kernels that can: the 1×1 GEMMs
/// through a table of row pointers (fp32 and bf16, AVX-512 and portable C), int8's quantisers, and the 3×3 kernels
/// from a single part's first channel. The property is exactness: every kernel gives the very floats it gives for
/// the concatenation (`FeatureMap.concatenate`, itself checked against the definition in ``LayerKernelTests``),
/// so the network's parity does not move. Parts of odd widths put a bf16 pair (two rows per word) across two parts.
@Suite struct StackedMapsTests {
    static func random(_ count: Int, seed: UInt64, in range: ClosedRange<Float> = -1...1) -> [Float] {
        var generator = SplitMix64(seed: seed)
        return (0..<count).map { _ in Float.random(in: range, using: &generator) }
    }

    static func map(_ channels: Int, _ height: Int, _ width: Int, seed: UInt64) -> FeatureMap {
        FeatureMap(
            channels: channels, height: height, width: width,
            data: random(channels * height * width, seed: seed, in: -0.28...3))
    }

    /// Three parts: channels 3..<22 of a 25-channel map, a whole 9-channel map, channels 0..<8 of a 16-channel one
    /// (36 channels: 19 + 9 + 8, the first two odd).
    static func parts(height: Int, width: Int) -> (stacked: StackedMaps, joined: FeatureMap) {
        let a = map(25, height, width, seed: 1)
        let (b, c) = (map(9, height, width, seed: 2), map(16, height, width, seed: 3))
        let stacked = StackedMaps(parts: [
            .init(map: a, channels: 3..<22), .init(map: b), .init(map: c, channels: 0..<8),
        ])
        let joined = FeatureMap.concatenate([a.channels(3..<22), b, c.channels(0..<8)])
        return (stacked, joined)
    }

    static func weights(inputs: Int, outputs: Int, kernel: Int, stride: Int, activation: Bool) -> ConvolutionWeights {
        var w = ConvolutionWeights(
            weight: random(outputs * inputs * kernel * kernel, seed: 7).map { $0 * 0.2 },
            bias: random(outputs, seed: 8), inputs: inputs, outputs: outputs, kernel: kernel, stride: stride,
            activation: activation)
        w.inputRange = -0.28...3
        return w
    }

    @Test func joiningGivesTheConcatenation() {
        let (stacked, joined) = Self.parts(height: 5, width: 7)
        #expect(stacked.channels == 36 && stacked.height == 5 && stacked.width == 7)
        #expect(stacked.joined().data == joined.data)
        let whole = Self.map(4, 3, 3, seed: 9)
        #expect(StackedMaps(whole).isWholeMap && StackedMaps(whole).joined().data == whole.data)
        #expect(!StackedMaps(whole, channels: 1..<3).isWholeMap)
        #expect(StackedMaps(whole, channels: 1..<3).joined().data == whole.channels(1..<3).data)
        // Adding stacked parts adds the concatenation.
        var sum = Self.map(36, 5, 7, seed: 10)
        var expected = sum
        sum.add(stacked)
        expected.add(joined)
        #expect(sum.data == expected.data)
    }

    /// The 1×1 GEMM's row table against B read with a row stride: the same bits, in fp32 and bf16 (each path this
    /// CPU has: AMX, AVX-512, portable), on column offsets and widths around the registers.
    @Test(arguments: [(8, 36, 1, 0), (13, 36, 17, 5), (24, 36, 100, 48), (9, 36, 49, 3)])
    func rowTableGivesTheSameProducts(m: Int, k: Int, n: Int, offset: Int) throws {
        let (stacked, joined) = Self.parts(height: 10, width: 16)  // 160 columns
        let a = Self.random(m * k, seed: UInt64(m * 100 + n))
        let bias = Self.random(m, seed: 4)
        let plane = stacked.plane
        let packed = a.withUnsafeBufferPointer { ConvolutionGEMM.pack($0.baseAddress!, m: m, k: k) }
        let packed16 = a.withUnsafeBufferPointer { ConvolutionGEMM.packBF16($0.baseAddress!, m: m, k: k) }
        var runs: [(String, [Float], [Float])] = []
        for (name, kind) in [("fp32", 0), ("bf16 AMX", 3), ("bf16 AVX-512", 1), ("bf16 portable", 2)] {
            let path: BF16Path = kind == 3 ? .tiles : kind == 2 ? .portable : .vector
            if !path.isAvailable { continue }
            if kind == 0 && !ConvolutionGEMM.available { continue }
            var plain = [Float](repeating: .nan, count: m * n), tabled = plain
            joined.data.withUnsafeBufferPointer { b in
                bias.withUnsafeBufferPointer { bias in
                    plain.withUnsafeMutableBufferPointer { c in
                        if kind == 0 {
                            packed.withUnsafeBufferPointer { p in
                                ConvolutionGEMM.multiply(
                                    packed: p.baseAddress!, m: m, k: k, b: b.baseAddress! + offset, ldb: plane, n: n,
                                    c: c.baseAddress!, ldc: n, bias: bias.baseAddress!, activation: true)
                            }
                        } else {
                            packed16.withUnsafeBufferPointer { p in
                                ConvolutionGEMM.multiply(
                                    bf16: p.baseAddress!, m: m, k: k, b: b.baseAddress! + offset, ldb: plane, n: n,
                                    c: c.baseAddress!, ldc: n, bias: bias.baseAddress!, activation: true,
                                    path: path)
                            }
                        }
                    }
                    stacked.withRows { table in
                        tabled.withUnsafeMutableBufferPointer { c in
                            if kind == 0 {
                                packed.withUnsafeBufferPointer { p in
                                    ConvolutionGEMM.multiply(
                                        packed: p.baseAddress!, m: m, k: k, table: table, offset: offset, n: n,
                                        c: c.baseAddress!, ldc: n, bias: bias.baseAddress!, activation: true)
                                }
                            } else {
                                packed16.withUnsafeBufferPointer { p in
                                    ConvolutionGEMM.multiply(
                                        bf16: p.baseAddress!, m: m, k: k, table: table, offset: offset, n: n,
                                        c: c.baseAddress!, ldc: n, bias: bias.baseAddress!, activation: true,
                                        path: path)
                                }
                            }
                        }
                    }
                }
            }
            runs.append((name, plain, tabled))
        }
        try #require(!runs.isEmpty)
        for (name, plain, tabled) in runs {
            #expect(!plain.contains { $0.isNaN }, "\(name): every value written")
            #expect(tabled == plain, "\(name): m \(m) n \(n) offset \(offset)")
        }
    }

    /// Every precision's convolutions of the stacked parts give the floats they give for the concatenation: 1×1
    /// (the row table, int8's quantisers), 3×3 stride 1 and 2 (joined, or one part read in place).
    @Test(arguments: Precision.allCases)
    func convolutionsOfStackedPartsGiveTheSameFloats(precision: Precision) throws {
        let kernel = ConvolutionKernels.kernel(precision: precision)
        let pool = ComputePool.shared
        let (stacked, joined) = Self.parts(height: 13, width: 20)
        let source = Self.map(48, 13, 20, seed: 11)
        let slice = (StackedMaps(source, channels: 8..<44), source.channels(8..<44))
        for (size, stride) in [(1, 1), (3, 1), (3, 2)] {
            let w = kernel.prepare(
                Self.weights(inputs: 36, outputs: 24, kernel: size, stride: stride, activation: true))
            for (name, (x, reference)) in [("three parts", (stacked, joined)), ("one slice", slice)] {
                let expected = kernel.convolve(reference, w, pool: pool)
                let actual = kernel.convolve(x, w, pool: pool)
                #expect(
                    actual.channels == 24 && actual.height == expected.height && actual.width == expected.width)
                #expect(actual.data == expected.data, "\(precision) k\(size) s\(stride), \(name)")
            }
        }
    }

    /// int8 on each path this CPU has (AMX, VNNI, AVX-512BW, AVX2, portable C): the parts quantised in place give
    /// the same floats as the concatenation.
    @Test func int8PathsReadThePartsInPlace() throws {
        let pool = ComputePool.shared
        let (stacked, joined) = Self.parts(height: 9, width: 40)
        let source = Self.map(48, 9, 40, seed: 12)
        let slice = (StackedMaps(source, channels: 4..<40), source.channels(4..<40))
        for level in Int8Tests.levels {
            // VPMADDUBSW (AVX-512BW, AVX2) with 7-bit weights, as the CPUs without VNNI run it.
            let int8 = Int8Convolution(
                fallback: LoweredConvolution(), weightLimit: Int8Tests.sevenBitOnly(level) ? 63 : 127)
            for (size, stride) in [(1, 1), (3, 1), (3, 2)] {
                let w = int8.prepare(
                    Self.weights(inputs: 36, outputs: 16, kernel: size, stride: stride, activation: false))
                try #require(w.int8 != nil)
                for (name, (x, reference)) in [("three parts", (stacked, joined)), ("one slice", slice)] {
                    let expected = int8.convolve(reference, w, pool: pool, level: level).data
                    #expect(
                        int8.convolve(x, w, pool: pool, level: level).data == expected,
                        "k\(size) s\(stride) level \(level) \(name)")
                }
            }
        }
    }
}
