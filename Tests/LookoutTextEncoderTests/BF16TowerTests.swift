import Foundation
import LookoutImage
import LookoutSupport
import LookoutTensor
import LookoutTextEncoder
import Testing

/// The CLIP towers with `precision: .bf16` (issue 32): their linear layers through the bf16 GEMM (weights rounded
/// at load, inputs as they are read, fp32 sums), everything else fp32. The demo model's text and image towers
/// against their own fp32 embeddings: the same directions (cosine ≥ 0.999; measured ≥ 0.99998 text, ≥ 0.9999
/// image), and the text embeddings cached apart from fp32's (another cache key).
@Suite struct BF16TowerTests {
    static let root = TextEncoderParityTests.root

    static func cosine(_ a: [Float], _ b: [Float]) -> Float { zip(a, b).reduce(0) { $0 + $1.0 * $1.1 } }

    @Test(.enabled(if: Precision.bf16.isNative, "this CPU has no AVX-512 BF16")) func textTowerKeepsItsDirections()
        throws
    {
        let path = Self.root + "/Models/demo/text-encoder.safetensors"
        let fp32 = try CLIPTextEncoder(contentsOf: path)
        let bf16 = try CLIPTextEncoder(contentsOf: path, precision: .bf16)
        #expect(bf16.precision == .bf16 && bf16.fingerprint == fp32.fingerprint && bf16.cacheKey != fp32.cacheKey)
        let texts = TextEncoderParityTests.prompts + ["red star", "a blue ring on a checkerboard", "dog"]
        let rows = texts.map { TextEncoderParityTests.tokenizer.tokenize($0) }
        let (a, b) = (fp32.encode(rows), bf16.encode(rows))
        let worst = zip(a, b).map { Self.cosine($0, $1) }.min()!
        let moved = zip(a, b).map { zip($0, $1).map { abs($0 - $1) }.max()! }.max()!
        print("text tower bf16 against fp32: cosine ≥ \(worst), largest change \(moved)")
        #expect(worst >= 0.999)
        #expect(moved > 0, "the bf16 path ran")
    }

    @Test(.enabled(if: Precision.bf16.isNative, "this CPU has no AVX-512 BF16")) func imageTowerKeepsItsDirections()
        throws
    {
        let path = Self.root + "/Models/demo/image-encoder.safetensors"
        let fp32 = try CLIPImageEncoder(contentsOf: path)
        let bf16 = try CLIPImageEncoder(contentsOf: path, precision: .bf16)
        let inputs = try (0..<8).map { index in
            let name = "scene-\(String(format: "%04d", index)).jpg"
            return try CLIPPreprocessing.input(
                FileContents.read(Self.root + "/examples/scenes/" + name), name: name, size: 224)
        }
        let (a, b) = (fp32.encode(inputs), bf16.encode(inputs))
        let worst = zip(a, b).map { Self.cosine($0, $1) }.min()!
        print("image tower bf16 against fp32: cosine ≥ \(worst)")
        #expect(worst >= 0.999)
        #expect(a != b, "the bf16 path ran")
    }
}
