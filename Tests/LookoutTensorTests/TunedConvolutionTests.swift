import Foundation
import LookoutTensor
import Testing

/// bf16's per-layer choice (issue 54): a tuned convolution computes exactly what the kernel it chose computes,
/// records the choice per CPU, layer shape, input size and threads, and a later one (a later run) reads it back
/// from the file instead of measuring; a damaged line is measured again.
@Suite struct TunedConvolutionTests {
    static func weights() -> ConvolutionWeights {
        ConvolutionWeights(
            weight: LayerKernelTests.random(64 * 48 * 9, seed: 51, scale: 0.1),
            bias: LayerKernelTests.random(64, seed: 52),
            inputs: 48, outputs: 64, kernel: 3, stride: 1, activation: true)
    }

    /// The engine's candidates: AMX's tiles where this CPU has them, AVX-512 BF16, fp32.
    static let candidates: [(name: String, kernel: any ConvolutionKernel)] =
        (BF16Path.tiles.isAvailable ? [("bf16-amx", WinogradConvolution(precision: .bf16, bf16Path: .tiles))] : [])
        + [
            ("bf16", WinogradConvolution(precision: .bf16, bf16Path: .vector)),
            ("fp32", WinogradConvolution(precision: .fp32)),
        ]
    static let names = candidates.map(\.name).joined(separator: ",")

    /// The candidates are distinct computations only where bf16 runs (elsewhere each is fp32's).
    @Test(.enabled(if: Precision.bf16.isNative, "this CPU has no AVX-512 BF16: every candidate computes fp32"))
    func computesWhatItChoseAndKeepsTheChoice() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tuned-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = folder + "/layer-choices.txt"
        let pool = ComputePool(threads: 2)
        let x = FeatureMap(channels: 48, height: 40, width: 36, data: LayerKernelTests.random(48 * 40 * 36, seed: 53))
        let expected = Self.candidates.map { candidate in
            candidate.kernel.convolve(x, candidate.kernel.prepare(Self.weights()), pool: pool).data
        }
        // Measured: the result is one of the two kernels' exactly, and the choice is written.
        let store = LayerChoices()
        store.configure(file: file, cpu: "test cpu")
        let tuned = TunedConvolution(Self.candidates, store: store)
        let first = tuned.convolve(x, tuned.prepare(Self.weights()), pool: pool).data
        let key = "test cpu | 48->64 k3 s1 40x36 threads 2 WinogradConvolution of \(Self.names)"
        let chosen = try #require(store.recorded[key], "\(store.recorded)")
        let index = try #require(Self.candidates.firstIndex { $0.name == chosen })
        #expect(first == expected[index])
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(text == "\(key)\t\(chosen)\n")
        // Each recorded choice, read back by a new store from the file (a later run), is what is computed.
        for (index, candidate) in Self.candidates.enumerated() {
            try "\(key)\t\(candidate.name)\nbroken line\n".write(toFile: file, atomically: true, encoding: .utf8)
            let later = LayerChoices()
            later.configure(file: file, cpu: "test cpu")
            #expect(later.recorded == [key: candidate.name], "the broken line is ignored")
            let again = TunedConvolution(Self.candidates, store: later)
            #expect(again.convolve(x, again.prepare(Self.weights()), pool: pool).data == expected[index])
            // Another CPU's choices are not this one's: it measures.
            let other = LayerChoices()
            other.configure(file: file, cpu: "another cpu")
            let measured = TunedConvolution(Self.candidates, store: other)
            _ = measured.convolve(x, measured.prepare(Self.weights()), pool: pool)
            #expect(
                other.recorded["another cpu | 48->64 k3 s1 40x36 threads 2 WinogradConvolution of \(Self.names)"] != nil
            )
        }
        // The kernels differ on this layer (bf16 rounds its factors, AMX and AVX-512 sum in other orders), so
        // equality above says which ran.
        #expect(Set(expected.map { $0.map(\.bitPattern) }).count == expected.count)
    }
}
