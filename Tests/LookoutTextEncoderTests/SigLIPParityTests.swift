import Foundation
import LookoutImage
import LookoutSupport
import LookoutTextEncoder
import LookoutTokenizer
import LookoutWeights
import Testing

/// SigLIP models read from their `transformers` folders (issue 52) against transformers 5.24.0
/// (`scripts/reference/make_siglip_fixtures.py`): two small models of SigLIP's architecture with random weights —
/// 96 px, patch 16, bicubic, MLPs 2.5 wide; and 64 px, patch 8, bilinear (SigLIP 2's fixed-resolution
/// checkpoints' resize), a text tower narrower than the vision tower with its head projecting to the vision width —
/// saved by `save_pretrained` and loaded back by transformers from the same folders. The 8-bit image and
/// `pixel_values` equal the image processor's (PIL backend) for every photo; image and text embeddings are within
/// ten times the reference's own float32 error; the token ids equal SiglipTokenizer's; the logits are the
/// model's. A configuration that does not fit the tensors, or asks for what Lookout does not compute, is refused
/// by name.
@Suite struct SigLIPParityTests {
    static let root = TextEncoderParityTests.root
    static let variants = ["bicubic-96", "bilinear-64"]

    static func folder(_ variant: String) -> String { root + "/Tests/Fixtures/siglip/" + variant }

    static func transform(_ c: SigLIPConfiguration) -> CLIPPreprocessing.Transform {
        CLIPPreprocessing.Transform(
            size: c.imageSize, mean: c.mean, std: c.std, resize: .squash, filter: c.bilinear ? .bilinear : .bicubic,
            convertFirst: c.convertFirst)
    }

    static func tolerance(_ expected: WeightFile) throws -> Float {
        let referenceError = Float(try #require(expected.metadata["reference_error"]))!
        return min(1e-4, max(10 * referenceError, 1e-6))
    }

    @Test(arguments: variants)
    func imagesEqualSigLIP(variant: String) throws {
        let model = try SigLIPModel(contentsOf: Self.folder(variant))
        let expected = try WeightFile.open(Self.folder(variant) + "/expected.safetensors")
        let photos = try OpenCLIPParityTests.list(expected, "photos")
        #expect(photos.count >= 14)
        let tolerance = try Self.tolerance(expected)
        let transform = Self.transform(model.configuration)
        #expect(transform.filter == (variant == "bilinear-64" ? .bilinear : .bicubic))
        var inputs: [[Float]] = []
        for name in photos {
            let photo = try CLIPPreprocessing.decode(try FileContents.read(Self.root + "/" + name), name: name)
            let pixels = CLIPPreprocessing.resized(photo, transform: transform)
            let reference = try expected.view("pixels:" + name)
            #expect(reference.shape == [transform.size, transform.size, 3])
            let differing = zip(pixels.pixels, reference.floats().map { UInt8($0) }).filter { $0 != $1 }.count
            #expect(differing == 0, "\(variant) \(name): \(differing) values differ from the image processor's")
            let input = CLIPPreprocessing.tensor(pixels, mean: transform.mean, std: transform.std)
            let referenceInput = try expected.view("input:" + name).floats()
            let inputsDiffering = zip(input, referenceInput).filter { $0 != $1 }.count
            #expect(inputsDiffering == 0, "\(variant) \(name): \(inputsDiffering) pixel_values differ")
            inputs.append(input)
        }
        for (name, embedding) in zip(photos, model.image.encode(inputs)) {
            let reference = try expected.view("image:" + name).floats()
            let error = zip(embedding, reference).map { abs($0 - $1) }.max()!
            #expect(error <= tolerance, "\(variant) \(name): max error \(error), bound \(tolerance)")
        }
    }

    @Test(arguments: variants)
    func textsEqualSigLIP(variant: String) throws {
        let model = try SigLIPModel(contentsOf: Self.folder(variant) + "/config.json")
        let expected = try WeightFile.open(Self.folder(variant) + "/expected.safetensors")
        let texts = try OpenCLIPParityTests.list(expected, "texts")
        let tolerance = try Self.tolerance(expected)
        let tokenizer = try #require(model.tokenizer)
        let rows = texts.map { tokenizer.tokenize($0) }
        let tokens = try expected.view("tokens").floats().map { Int($0) }
        #expect(rows.joined().map { $0 } == tokens, "the token ids are SiglipTokenizer's")
        let embeddings = model.text.encode(rows)
        for (number, embedding) in embeddings.enumerated() {
            let reference = try expected.view("text:\(number)").floats()
            let error = zip(embedding, reference).map { abs($0 - $1) }.max()!
            #expect(error <= tolerance, "\(variant) text \(number): max error \(error), bound \(tolerance)")
        }
        // logits_per_text: exp(scale)·cos + bias. Each embedding is within `tolerance` per value, so a cosine
        // within 2·√D·tolerance, and the logit within exp(scale) times that, plus float32's rounding of the logit.
        let photos = try OpenCLIPParityTests.list(expected, "photos")
        let images = try photos.map { try expected.view("image:" + $0).floats() }
        let logits = try expected.view("logits_per_text").floats()
        let dimension = Float(model.configuration.projectionSize)
        let bound = expf(model.logitScale) * 2 * dimension.squareRoot() * tolerance + 1e-5 * abs(model.logitBias)
        for (t, text) in embeddings.enumerated() {
            for (i, image) in images.enumerated() {
                let cosine = zip(text, image).reduce(Float(0)) { $0 + $1.0 * $1.1 }
                let logit = model.logit(cosine: cosine)
                let reference = logits[t * images.count + i]
                #expect(
                    abs(logit - reference) <= bound, "\(variant) text \(t), photo \(i): \(logit) against \(reference)")
                let probability = model.probability(cosine: cosine)
                #expect(probability > 0 && probability < 1)
            }
        }
    }

    /// A copy of the bicubic-96 folder with `config.json` or `preprocessor_config.json` edited.
    static func edited(_ name: String, _ edit: (String) -> String) throws -> String {
        let copy = try linked(except: name)
        let text = try String(contentsOfFile: folder("bicubic-96") + "/" + name, encoding: .utf8)
        try edit(text).write(toFile: copy + "/" + name, atomically: true, encoding: .utf8)
        return copy
    }

    /// A folder of links to the bicubic-96 folder's files but `name`.
    static func linked(except name: String) throws -> String {
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("siglip-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
        for file in try FileManager.default.contentsOfDirectory(atPath: folder("bicubic-96")) where file != name {
            try FileManager.default.createSymbolicLink(
                atPath: copy + "/" + file, withDestinationPath: folder("bicubic-96") + "/" + file)
        }
        return copy
    }

    @Test(arguments: [
        ("config.json", "\"siglip\"", "\"siglip2\"", "NaFlex"),
        ("config.json", "\"vision_use_head\": true", "\"vision_use_head\": false", "vision_use_head is false"),
        (
            "config.json", "\"num_hidden_layers\": 2,\n    \"patch_size\"",
            "\"num_hidden_layers\": 3,\n    \"patch_size\"",
            "vision_config.num_hidden_layers is 3 there, the tensors say 2"
        ),
        (
            "config.json", "\"intermediate_size\": 160,\n    \"layer_norm_eps\": 1e-06,\n    \"max_position",
            "\"intermediate_size\": 128,\n    \"layer_norm_eps\": 1e-06,\n    \"max_position",
            "text_config.intermediate_size is 128"
        ),
        ("config.json", "\"hidden_act\": \"gelu_pytorch_tanh\"", "\"hidden_act\": \"relu\"", "hidden_act relu"),
        ("config.json", "\"image_size\": 96", "\"image_size\": 112", "the vision tower takes 112×112"),
        ("preprocessor_config.json", "\"resample\": 3", "\"resample\": 0", "resample 0"),
        ("preprocessor_config.json", "\"height\": 96", "\"height\": 97", "resizes to 96×97"),
        ("preprocessor_config.json", "\"do_normalize\": true", "\"do_normalize\": false", "do_normalize is false"),
        ("config.json", "", "", ""),
    ])
    func refusesWhatDoesNotFit(file: String, from: String, to: String, said: String) throws {
        let copy = try Self.edited(file) { text in
            guard !from.isEmpty else { return text }
            #expect(text.contains(from), "\(from) is not in \(file)")
            return text.replacingOccurrences(of: from, with: to)
        }
        defer { try? FileManager.default.removeItem(atPath: copy) }
        if said.isEmpty {
            // The unedited copy loads: the refusals above are the edits'.
            #expect(try SigLIPModel(contentsOf: copy).configuration.imageSize == 96)
            return
        }
        do {
            _ = try SigLIPModel(contentsOf: copy)
            Issue.record("\(said): accepted")
        } catch {
            #expect(error.description.contains(said), "\(error)")
        }
    }

    /// Each family's files given as another's are refused, never computed as the wrong model.
    @Test func familiesAreNotMistaken() throws {
        #expect(!SigLIPModel.isModel(OpenCLIPParityTests.folder("gelu-224")))
        #expect(!OpenCLIPModel.isModel(Self.folder("bicubic-96")))
        #expect(SigLIPModel.isModel(Self.folder("bicubic-96") + "/model.safetensors"))
        // The SigLIP weights read as a CLIP text encoder or image tower: no such tensors.
        #expect(throws: WeightsError.self) {
            try CLIPImageEncoder(contentsOf: Self.folder("bicubic-96") + "/model.safetensors")
        }
        // open_clip weights behind a SigLIP configuration: the tensors are not SigLIP's.
        let copy = try Self.linked(except: "model.safetensors")
        defer { try? FileManager.default.removeItem(atPath: copy) }
        try FileManager.default.createSymbolicLink(
            atPath: copy + "/model.safetensors",
            withDestinationPath: OpenCLIPParityTests.folder("quickgelu-squash") + "/open_clip_model.safetensors")
        do {
            _ = try SigLIPModel(contentsOf: copy)
            Issue.record("open_clip tensors were accepted as SigLIP's")
        } catch {
            #expect(error.description.contains("not SigLIP's tensors"), "\(error)")
        }
    }
}
