import Foundation
import LookoutTensor
import Testing

/// bf16's and int8's per-layer choice (issue 54): a tuned convolution computes exactly what the kernel it chose
/// computes, records the choice per CPU, layer shape, input size and threads, and a later one (a later run) reads it
/// back from the file instead of measuring; a damaged line is reported, ignored and measured again.
@Suite struct TunedConvolutionTests {
    static func weights() -> ConvolutionWeights {
        var weights = ConvolutionWeights(
            weight: LayerKernelTests.random(64 * 48 * 9, seed: 51, scale: 0.1),
            bias: LayerKernelTests.random(64, seed: 52),
            inputs: 48, outputs: 64, kernel: 3, stride: 1, activation: true)
        weights.inputRange = -1...1  // int8's calibration (the inputs are uniform in ±1)
        return weights
    }

    /// The engine's candidates of each precision that chooses per layer: bf16 (AMX's tiles where this CPU has them,
    /// AVX-512 BF16) and int8 (this CPU's best path), each against fp32.
    static let candidateSets: [(precision: Precision, candidates: [(name: String, kernel: any ConvolutionKernel)])] =
        [
            (
                .bf16,
                (BF16Path.tiles.isAvailable
                    ? [("bf16-amx", WinogradConvolution(precision: .bf16, bf16Path: .tiles))] : [])
                    + [
                        ("bf16", WinogradConvolution(precision: .bf16, bf16Path: .vector)),
                        ("fp32", WinogradConvolution(precision: .fp32)),
                    ]
            ),
            (
                .int8,
                [
                    ("int8", Int8Convolution(fallback: WinogradConvolution())),
                    ("fp32", WinogradConvolution(precision: .fp32)),
                ]
            ),
        ]

    /// The candidates are distinct computations only where the precision runs (elsewhere each is fp32's).
    @Test(.enabled(if: Precision.bf16.isNative || Precision.int8.isNative, "this CPU runs neither bf16 nor int8"))
    func computesWhatItChoseAndKeepsTheChoice() throws {
        for (precision, candidates) in Self.candidateSets where precision.isNative {
            try check(candidates)
        }
    }

    func check(_ candidates: [(name: String, kernel: any ConvolutionKernel)]) throws {
        let names = candidates.map(\.name).joined(separator: ",")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tuned-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = folder + "/layer-choices.txt"
        let pool = ComputePool(threads: 2)
        let x = FeatureMap(channels: 48, height: 40, width: 36, data: LayerKernelTests.random(48 * 40 * 36, seed: 53))
        let expected = candidates.map { candidate in
            candidate.kernel.convolve(x, candidate.kernel.prepare(Self.weights()), pool: pool).data
        }
        // Measured: the result is one of the kernels' exactly, and the choice is written.
        let store = LayerChoices()
        store.configure(file: file, cpu: "test cpu")
        let tuned = TunedConvolution(candidates, store: store)
        let first = tuned.convolve(x, tuned.prepare(Self.weights()), pool: pool).data
        let kind = type(of: candidates[0].kernel)
        let key = "test cpu | 48->64 k3 s1 40x36 threads 2 \(kind) of \(names)"
        let chosen = try #require(store.recorded[key], "\(store.recorded)")
        let index = try #require(candidates.firstIndex { $0.name == chosen })
        #expect(first == expected[index])
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(text == "\(key)\t\(chosen)\n")
        // Each recorded choice, read back by a new store from the file (a later run), is what is computed; the
        // damaged lines are reported.
        for (index, candidate) in candidates.enumerated() {
            try "\(key)\t\(candidate.name)\nbroken line\n\tno key\n".write(
                toFile: file, atomically: true, encoding: .utf8)
            let later = LayerChoices()
            var notices: [String] = []
            later.configure(file: file, cpu: "test cpu") { notices.append($0) }
            #expect(later.recorded == [key: candidate.name], "the broken lines are ignored")
            #expect(notices == ["\(file): 2 damaged lines ignored; those layers are measured again"], "\(notices)")
            let again = TunedConvolution(candidates, store: later)
            #expect(again.convolve(x, again.prepare(Self.weights()), pool: pool).data == expected[index])
            // Another CPU's choices are not this one's: it measures.
            let other = LayerChoices()
            other.configure(file: file, cpu: "another cpu")
            let measured = TunedConvolution(candidates, store: other)
            _ = measured.convolve(x, measured.prepare(Self.weights()), pool: pool)
            #expect(other.recorded["another cpu | 48->64 k3 s1 40x36 threads 2 \(kind) of \(names)"] != nil)
        }
        // The kernels differ on this layer (bf16 and int8 round their factors, AMX and AVX-512 sum in other
        // orders), so equality above says which ran.
        #expect(Set(expected.map { $0.map(\.bitPattern) }).count == expected.count)
        // A stale choice (a kernel no longer among the candidates) is measured again and replaced.
        try "\(key)\tgone\n".write(toFile: file, atomically: true, encoding: .utf8)
        let stale = LayerChoices()
        stale.configure(file: file, cpu: "test cpu")
        let remeasured = TunedConvolution(candidates, store: stale)
        _ = remeasured.convolve(x, remeasured.prepare(Self.weights()), pool: pool)
        #expect(candidates.contains { $0.name == stale.recorded[key] }, "\(stale.recorded)")
    }
}
