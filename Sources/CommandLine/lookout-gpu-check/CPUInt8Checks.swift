import LookoutSupport
import LookoutTensor

/// `--cpu-int8`: every int8 path this machine's CPU has (4 AMX, 3 AVX-512 VNNI, 2 AVX-512BW, 1 AVX2, 0 portable
/// C), each forced in turn on a range of layer shapes, must give the same floats exactly (the same integers, the
/// same epilogue): without SiLU the portable C's, with SiLU the other vector paths' (the portable C's exp is expf);
/// 8-bit weights on the paths that take them, 7-bit on all. The quantisers likewise. Then each
/// path's time on two layers. Run on the GPU machine, whose Xeon has every path, to prove there what the test suite
/// proves on the CPU it runs on (issue 54: every path runs on every machine that can run it).
struct CPUInt8Checks {
    /// inputs, outputs, kernel, stride, height, width.
    static let shapes: [(Int, Int, Int, Int, Int, Int)] = [
        (64, 64, 1, 1, 40, 40), (72, 40, 1, 1, 9, 37), (32, 64, 3, 2, 41, 39), (64, 64, 3, 1, 40, 40),
        (72, 24, 3, 1, 20, 20), (16, 8, 3, 1, 5, 80), (20, 9, 3, 1, 6, 1), (16, 8, 3, 2, 9, 161),
        (128, 128, 3, 1, 20, 23),
    ]

    static func random(_ count: Int, _ generator: inout SplitMix64, scale: Float = 1) -> [Float] {
        (0..<count).map { _ in Float.random(in: -scale...scale, using: &generator) }
    }

    /// A random input (uniform in ±1.5, the range int8 quantises to) and a random layer of `shape`.
    static func layer(
        _ shape: (Int, Int, Int, Int, Int, Int), weightScale: Float, activation: Bool,
        _ generator: inout SplitMix64
    ) -> (FeatureMap, ConvolutionWeights) {
        let (inputs, outputs, kernel, stride, height, width) = shape
        var x = FeatureMap(channels: inputs, height: height, width: width)
        x.data = random(inputs * height * width, &generator, scale: 1.5)
        var w = ConvolutionWeights(
            weight: random(outputs * inputs * kernel * kernel, &generator, scale: weightScale),
            bias: random(outputs, &generator), inputs: inputs, outputs: outputs, kernel: kernel, stride: stride,
            activation: activation)
        w.inputRange = -1.5...1.5
        return (x, w)
    }

    func run() -> (lines: [String], passed: Bool) {
        var lines: [String] = []
        var passed = true
        let best = Int8Convolution.bestLevel
        let levels = Array((0...best).reversed())
        lines.append(
            "int8 paths on this CPU: \(levels.map { "\($0) \(Int8Convolution.pathName($0))" }.joined(separator: ", "))")
        var generator = SplitMix64(seed: 54)
        let pool = ComputePool(threads: 4)
        // The quantisers: every length to two blocks past the vector width, and values out of range, NaN, ±∞.
        let input = ActivationQuantization(range: -0.5...3)
        var values = Self.random(1000, &generator, scale: 4)
        values += [0, .nan, .infinity, -.infinity, 1e9, -1e9]
        for level in levels {
            var same = true
            for count in [values.count, 1, 7, 31, 33, 63, 65] {
                var reference = [UInt8](repeating: 1, count: count)
                var bytes = [UInt8](repeating: 2, count: count)
                values.withUnsafeBufferPointer {
                    input.quantize($0.baseAddress!, count: count, into: &reference, level: 0)
                    input.quantize($0.baseAddress!, count: count, into: &bytes, level: level)
                }
                same = same && bytes == reference
            }
            lines.append("  \(same ? "passed" : "FAILED") quantiser, level \(level): the portable bytes")
            passed = passed && same
        }
        // Without SiLU every path against the portable C; with it the vector paths against AVX2's (their exp is
        // one sequence of operations; the portable C's is expf).
        for activation in [false, true] {
            let reference = activation ? 1 : 0
            for (inputs, outputs, kernel, stride, height, width) in Self.shapes where best >= reference {
                let (x, w) = Self.layer(
                    (inputs, outputs, kernel, stride, height, width), weightScale: 0.2, activation: activation,
                    &generator)
                for limit in [63, 127] {
                    let int8 = Int8Convolution(fallback: LoweredConvolution(), weightLimit: limit)
                    let prepared = int8.prepare(w)
                    // 8-bit weights on VNNI and AMX only; their reference is then the portable C or VNNI.
                    let base = limit == 127 && activation ? 3 : reference
                    guard best > base else { continue }
                    let expected = int8.convolve(x, prepared, pool: pool, level: base).data
                    for level in levels where level > base && (limit == 63 || level >= 3) {
                        let got = int8.convolve(x, prepared, pool: pool, level: level).data
                        let same = got.map(\.bitPattern) == expected.map(\.bitPattern)
                        passed = passed && same
                        lines.append(
                            "  \(same ? "passed" : "FAILED") \(inputs)→\(outputs) k\(kernel) s\(stride) "
                                + "\(height)×\(width)\(activation ? " SiLU" : ""), \(limit == 63 ? 7 : 8)-bit weights, "
                                + "level \(level) against level \(base)"
                                + (same ? "" : " (\(zip(got, expected).filter { $0 != $1 }.count) differ)"))
                    }
                }
            }
        }
        // Each path's time on two layers of s (one thread and four), the best of five.
        for (inputs, outputs, kernel, stride, height, width) in [(128, 128, 3, 1, 80, 80), (512, 256, 1, 1, 40, 40)] {
            let (x, w) = Self.layer(
                (inputs, outputs, kernel, stride, height, width), weightScale: 0.05, activation: true, &generator)
            let operations = 2.0 * Double(inputs * outputs * kernel * kernel * height * width / (stride * stride))
            for threads in [1, 4] {
                let pool = ComputePool(threads: threads)
                var cells: [String] = []
                for level in levels.dropLast() {
                    let int8 = Int8Convolution(fallback: LoweredConvolution(), weightLimit: level >= 3 ? 127 : 63)
                    let prepared = int8.prepare(w)
                    var best = Double.infinity
                    for _ in 0..<6 {
                        var clock = Stopwatch()
                        _ = int8.convolve(x, prepared, pool: pool, level: level)
                        best = min(best, clock.lap())
                    }
                    cells.append(
                        "\(Int8Convolution.pathName(level)) \(String(format: "%.2f", best * 1000)) ms "
                            + "(\(Int(operations / best / 1e9)) GOP/s)")
                }
                lines.append(
                    "  time \(inputs)→\(outputs) k\(kernel) s\(stride) \(height)×\(width), \(threads) threads: "
                        + cells.joined(separator: ", "))
            }
        }
        return (lines, passed)
    }
}
