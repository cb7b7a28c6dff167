import Foundation
import LookoutJSON
import LookoutSupport
import LookoutTextEncoder
import LookoutTokenizer
import LookoutWeights
import Testing

/// Embeddings against OpenAI CLIP `encode_text` + `x / ‖x‖` on the CPU (reference values from
/// `scripts/reference/make_text_encoder_fixtures.py`), for both key layouts and both file formats.
@Suite struct TextEncoderParityTests {
    static let root: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path
    }()
    static let tokenizer = try! CLIPTokenizer(vocabularyFile: root + "/Vocab/clip_vocab.json")
    static let prompts: [String] = {
        let list = try! JSONDocument(
            bytes: try! FileContents.read(root + "/Tests/Fixtures/text/clip-tiny-prompts.json")
        ).root
        return (0..<list.count).map { list[$0].string! }
    }()
    static let expected = try! WeightFile.open(root + "/Tests/Fixtures/text/clip-tiny-expected.safetensors")
    /// Ten times the reference's own float32 error (its embeddings against the same model in float64).
    static let tolerance = 10 * Float(expected.metadata["reference_error"]!)!

    /// Reference embeddings as rows.
    static func rows(_ view: TensorView) -> [[Float]] {
        let values = view.floats()
        let size = view.shape[1]
        return (0..<view.shape[0]).map { Array(values[($0 * size)..<(($0 + 1) * size)]) }
    }

    /// Compares all prompts; returns (max absolute error, min cosine).
    /// `oneByOne` encodes each prompt alone (short ones then take the few-row fp16 path).
    static func compare(
        encoder: CLIPTextEncoder, prompts texts: [String], expected: [[Float]], oneByOne: Bool = false
    ) -> (Float, Float) {
        let embeddings =
            oneByOne
            ? texts.map { encoder.encode([tokenizer.tokenize($0)])[0] }
            : encoder.encode(texts.map { tokenizer.tokenize($0) })
        var maxError: Float = 0
        var minCosine: Float = 1
        for (index, embedding) in embeddings.enumerated() {
            let reference = expected[index]
            precondition(reference.count == embedding.count, "embedding sizes differ")
            var dot: Float = 0
            var normA: Float = 0
            var normB: Float = 0
            for d in 0..<embedding.count {
                let r = reference[d]
                maxError = max(maxError, abs(embedding[d] - r))
                dot += embedding[d] * r
                normA += embedding[d] * embedding[d]
                normB += r * r
            }
            minCosine = min(minCosine, dot / (normA.squareRoot() * normB.squareRoot()))
        }
        return (maxError, minCosine)
    }

    @Test(arguments: ["clip-tiny-openai.pt", "clip-tiny-hf.safetensors"])
    func matchesReference(file: String) throws {
        let encoder = try CLIPTextEncoder(contentsOf: Self.root + "/Tests/Fixtures/weights/" + file)
        #expect(encoder.configuration.layout == (file.hasSuffix(".pt") ? .openAI : .huggingFace))
        #expect(Self.prompts.count >= 200)
        let expected = Self.rows(try Self.expected.view(file))
        let (maxError, minCosine) = Self.compare(encoder: encoder, prompts: Self.prompts, expected: expected)
        print(
            "\(file): max |error| \(maxError) (≤ \(Self.tolerance)), min cosine \(minCosine) over \(Self.prompts.count) prompts"
        )
        #expect(maxError <= Self.tolerance)
        #expect(minCosine >= 0.99999)
        let (singleError, singleCosine) = Self.compare(
            encoder: encoder, prompts: Self.prompts, expected: expected, oneByOne: true)
        print("\(file), one prompt at a time: max |error| \(singleError), min cosine \(singleCosine)")
        #expect(singleError <= Self.tolerance)
        #expect(singleCosine >= 0.99999)
    }

    /// YOLOE's text tower: a random MobileCLIP-B-shaped text encoder traced as ultralytics traced
    /// `mobileclip_blt.ts`, against ultralytics' `MobileCLIPTS.encode_text` on the same file
    /// (scripts/reference/make_mobileclip_fixtures.py): exact GELU, MobileCLIP's names, its image tower left alone.
    @Test func mobileCLIPMatchesUltralytics() throws {
        let encoder = try CLIPTextEncoder(contentsOf: Self.root + "/Tests/Fixtures/weights/mobileclip-tiny-random.ts")
        let configuration = encoder.configuration
        #expect(configuration.layout == .mobileCLIP && configuration.family == .mobileCLIP)
        #expect(configuration.width == 128 && configuration.heads == 2 && configuration.layers == 2)
        #expect(configuration.embeddingSize == 512 && configuration.contextLength == 77)
        let file = try WeightFile.open(Self.root + "/Tests/Fixtures/text/mobileclip-tiny-expected.safetensors")
        let tolerance = 10 * Float(file.metadata["reference_error"]!)!
        let expected = Self.rows(try file.view("mobileclip-tiny-random.ts"))
        for oneByOne in [false, true] {
            let (maxError, minCosine) = Self.compare(
                encoder: encoder, prompts: Self.prompts, expected: expected, oneByOne: oneByOne)
            print(
                "MobileCLIP (one by one: \(oneByOne)): max |error| \(maxError) (≤ \(tolerance)), min cosine \(minCosine)"
            )
            #expect(maxError <= tolerance)
            #expect(minCosine >= 0.99999)
        }
    }

    /// YOLOE-26's text tower: open_clip's MobileCLIP2-B text transformer (random, 2 layers of width 128) traced
    /// into the form ultralytics loads as `mobileclip2_b.ts`, against `MobileCLIPTS.encode_text` on the same file
    /// (scripts/reference/make_mobileclip2_fixtures.py): CLIP's names under `text.`, exact GELU (told by the
    /// traced code), the causal mask buffer checked. Converted to canonical safetensors it stays MobileCLIP2.
    @Test func mobileCLIP2MatchesUltralytics() throws {
        let path = Self.root + "/Tests/Fixtures/weights/mobileclip2-tiny-random.ts"
        let canonical = NSTemporaryDirectory() + "lookout-mobileclip2-\(UUID().uuidString).safetensors"
        defer { try? FileManager.default.removeItem(atPath: canonical) }
        try WeightFile.open(path).writeCanonical(to: canonical)
        let file = try WeightFile.open(Self.root + "/Tests/Fixtures/text/mobileclip2-tiny-expected.safetensors")
        let tolerance = 10 * Float(file.metadata["reference_error"]!)!
        let expected = Self.rows(try file.view("mobileclip2-tiny-random.ts"))
        for source in [path, canonical] {
            let encoder = try CLIPTextEncoder(contentsOf: source)
            let configuration = encoder.configuration
            #expect(configuration.layout == .openCLIP && configuration.family == .mobileCLIP2)
            #expect(configuration.width == 128 && configuration.heads == 2 && configuration.layers == 2)
            for oneByOne in [false, true] {
                let (maxError, minCosine) = Self.compare(
                    encoder: encoder, prompts: Self.prompts, expected: expected, oneByOne: oneByOne)
                print(
                    "MobileCLIP2 (\(source.hasSuffix(".ts") ? "TorchScript" : "canonical"), one by one: \(oneByOne)): max |error| \(maxError) (≤ \(tolerance)), min cosine \(minCosine)"
                )
                #expect(maxError <= tolerance)
                #expect(minCosine >= 0.99999)
            }
        }
    }

    /// OpenAI names in safetensors: the TorchScript file converted to Lookout's canonical form (F32).
    @Test func canonicalSafetensorsWithOpenAINames() throws {
        let output = NSTemporaryDirectory() + "lookout-clip-\(UUID().uuidString).safetensors"
        defer { try? FileManager.default.removeItem(atPath: output) }
        try WeightFile.open(Self.root + "/Tests/Fixtures/weights/clip-tiny-openai.pt").writeCanonical(to: output)
        let encoder = try CLIPTextEncoder(contentsOf: output)
        #expect(encoder.configuration.layout == .openAI)
        let (maxError, minCosine) = Self.compare(
            encoder: encoder, prompts: Self.prompts, expected: Self.rows(try Self.expected.view("clip-tiny-openai.pt")),
            oneByOne: true)
        #expect(maxError <= Self.tolerance)
        #expect(minCosine >= 0.99999)
    }

    /// Packing several queries changes only GEMM blocking, so values agree to float rounding.
    @Test func batchingDoesNotChangeResults() throws {
        let encoder = try CLIPTextEncoder(contentsOf: Self.root + "/Tests/Fixtures/weights/clip-tiny-openai.pt")
        let texts = ["red car", "a photo of a dog", String(repeating: "long words ", count: 40), "x"]
        let together = encoder.encode(texts.map { Self.tokenizer.tokenize($0) })
        for (index, text) in texts.enumerated() {
            let alone = encoder.encode([Self.tokenizer.tokenize(text)])[0]
            #expect(zip(alone, together[index]).allSatisfy { abs($0 - $1) <= 1e-6 })
        }
    }
}

/// A text-encoder file that does not fit is an error naming the key.
@Suite struct TextEncoderLoadingTests {
    static let source = try! WeightFile.open(
        TextEncoderParityTests.root + "/Tests/Fixtures/weights/clip-tiny-hf.safetensors")

    func rewrite(
        dropping dropped: String? = nil, reshaping reshaped: String? = nil, adding added: [String] = []
    ) throws -> String {
        var entries: [(name: String, shape: [Int], values: TensorValues)] = []
        for name in Self.source.names where name != dropped {
            let view = Self.source.tensors[name]!
            var values = view.floats()
            var shape = view.shape
            if name == reshaped {
                values.removeLast(shape.last!)
                shape[shape.count - 1] -= 1
                if shape.count == 2 { values = Array(values.prefix(shape[0] * shape[1])) }
            }
            entries.append((name, shape, .float32(values)))
        }
        for name in added { entries.append((name, [1], .float32([0]))) }
        let path = NSTemporaryDirectory() + "lookout-text-\(UUID().uuidString).safetensors"
        try SafeTensors.write(entries, metadata: [:], to: path)
        return path
    }

    @Test func missingKeyIsNamed() throws {
        let path = try rewrite(dropping: "text_model.encoder.layers.1.mlp.fc2.bias")
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect {
            try CLIPTextEncoder(contentsOf: path)
        } throws: { error in
            "\(error)".contains("missing tensor text_model.encoder.layers.1.mlp.fc2.bias") && "\(error)".contains(path)
        }
    }

    @Test func wrongShapeIsNamed() throws {
        let path = try rewrite(reshaping: "text_model.encoder.layers.0.self_attn.k_proj.weight")
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect {
            try CLIPTextEncoder(contentsOf: path)
        } throws: { error in
            "\(error)".contains(
                "text_model.encoder.layers.0.self_attn.k_proj.weight has shape [64, 63], expected [64, 64]")
        }
    }

    /// The other tower of a full CLIP file is not the text encoder's and is left alone; any other tensor is
    /// one the encoder does not understand.
    @Test func unknownTensorsAreNamedAndTheImageTowerIsLeftAlone() throws {
        let full = try rewrite(adding: [
            "vision_model.embeddings.patch_embedding.weight", "logit_scale", "visual_projection.weight",
        ])
        defer { try? FileManager.default.removeItem(atPath: full) }
        _ = try CLIPTextEncoder(contentsOf: full)
        let odd = try rewrite(adding: ["text_model.encoder.layers.0.extra.weight"])
        defer { try? FileManager.default.removeItem(atPath: odd) }
        #expect {
            try CLIPTextEncoder(contentsOf: odd)
        } throws: { error in
            "\(error)"
                == "\(odd): 1 tensor that a CLIP text encoder does not use: text_model.encoder.layers.0.extra.weight"
        }
    }

    @Test func aDetectorIsNotATextEncoder() {
        #expect {
            try CLIPTextEncoder(
                contentsOf: TextEncoderParityTests.root + "/Tests/Fixtures/weights/yolov8n-worldv2-random.pt")
        } throws: { error in
            "\(error)".contains("not a CLIP or MobileCLIP text encoder")
        }
    }
}
