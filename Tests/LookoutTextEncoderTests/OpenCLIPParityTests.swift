import Foundation
import LookoutImage
import LookoutJSON
import LookoutSupport
import LookoutTextEncoder
import LookoutTokenizer
import LookoutWeights
import Testing

/// open_clip models read from their own folders (issue 52) against open_clip 3.3.0
/// (`scripts/reference/make_open_clip_fixtures.py`): two small models of its ViT architecture with random
/// weights — exact GELU at 224 with OpenAI's resize and crop, and `quick_gelu` with a head width of 32 and the photo
/// squashed to 96 px with mean and std 0.5 — loaded back by open_clip from the same folders; the first holds its
/// weights as `open_clip_pytorch_model.bin` (a pickled state dict), the second as `open_clip_model.safetensors`. The 8-bit image
/// before `ToTensor` equals open_clip's for every photo; image and text embeddings are within ten times the
/// reference's own float32 error; the token ids equal open_clip's tokenizer's. A configuration that does not fit
/// the tensors, or asks for what Lookout does not compute, is refused by name.
@Suite struct OpenCLIPParityTests {
    static let root = TextEncoderParityTests.root
    static let variants = ["gelu-224", "quickgelu-squash", "l14-quickgelu", "b32-256"]
    /// Each variant's activation: exact GELU (open_clip's default) or OpenAI's `quick_gelu`.
    static let exactGELU = ["gelu-224": true, "quickgelu-squash": false, "l14-quickgelu": false, "b32-256": true]

    static func folder(_ variant: String) -> String { root + "/Tests/Fixtures/open-clip/" + variant }

    static func transform(_ model: OpenCLIPModel) -> CLIPPreprocessing.Transform {
        let c = model.configuration
        return CLIPPreprocessing.Transform(
            size: c.imageSize, mean: c.mean, std: c.std, resize: c.resizeMode == "squash" ? .squash : .shortest)
    }

    static func list(_ file: WeightFile, _ key: String) throws -> [String] {
        let node = try JSONDocument(bytes: Array(try #require(file.metadata[key]).utf8)).root
        return (0..<node.count).map { node[$0].string ?? "" }
    }

    @Test(arguments: variants)
    func imagesEqualOpenCLIP(variant: String) throws {
        let model = try OpenCLIPModel(contentsOf: Self.folder(variant))
        let expected = try WeightFile.open(Self.folder(variant) + "/expected.safetensors")
        let photos = try Self.list(expected, "photos")
        #expect(photos.count >= 14)
        let referenceError = Float(try #require(expected.metadata["reference_error"]))!
        let tolerance = min(1e-4, max(10 * referenceError, 1e-6))
        let transform = Self.transform(model)
        #expect(model.image.configuration.activation == (Self.exactGELU[variant]! ? .gelu : .quickGELU))
        var inputs: [[Float]] = []
        for name in photos {
            let photo = try CLIPPreprocessing.decode(try FileContents.read(Self.root + "/" + name), name: name)
            let pixels = CLIPPreprocessing.resized(photo, transform: transform)
            let reference = try expected.view("pixels:" + name)
            #expect(reference.shape == [transform.size, transform.size, 3])
            let differing = zip(pixels.pixels, reference.floats().map { UInt8($0) }).filter { $0 != $1 }.count
            #expect(differing == 0, "\(variant) \(name): \(differing) values differ from open_clip's")
            inputs.append(CLIPPreprocessing.tensor(pixels, mean: transform.mean, std: transform.std))
        }
        for (name, embedding) in zip(photos, model.image.encode(inputs)) {
            let reference = try expected.view("image:" + name).floats()
            let error = zip(embedding, reference).map { abs($0 - $1) }.max()!
            #expect(error <= tolerance, "\(variant) \(name): max error \(error), bound \(tolerance)")
        }
    }

    @Test(arguments: variants)
    func textsEqualOpenCLIP(variant: String) throws {
        let model = try OpenCLIPModel(contentsOf: Self.folder(variant) + "/open_clip_config.json")
        let expected = try WeightFile.open(Self.folder(variant) + "/expected.safetensors")
        let texts = try Self.list(expected, "texts")
        let referenceError = Float(try #require(expected.metadata["reference_error"]))!
        let tolerance = min(1e-4, max(10 * referenceError, 1e-6))
        let tokens = try expected.view("tokens").floats().map { Int32($0) }
        let rows = texts.map { TextEncoderParityTests.tokenizer.tokenize($0) }
        #expect(rows.joined().map { $0 } == tokens, "the token ids are open_clip's tokenizer's")
        #expect(model.text.configuration.exactGELU == Self.exactGELU[variant]!)
        for (number, embedding) in model.text.encode(rows).enumerated() {
            let reference = try expected.view("text:\(number)").floats()
            let error = zip(embedding, reference).map { abs($0 - $1) }.max()!
            #expect(error <= tolerance, "\(variant) text \(number): max error \(error), bound \(tolerance)")
        }
    }

    /// The gelu-224 fixture's configuration with one setting changed.
    static func configuration(
        layers: Int = 2, vision: String = "", resize: String = "shortest", interpolation: String = "bicubic",
        embedding: Int = 32
    ) -> String {
        """
        {"model_cfg": {"embed_dim": \(embedding),
          "vision_cfg": {"image_size": 224, "layers": \(layers), "width": 64, "patch_size": 32\(vision)},
          "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 1, "layers": 2}},
         "preprocess_cfg": {"interpolation": "\(interpolation)", "resize_mode": "\(resize)"}}
        """
    }

    /// A folder whose configuration is edited: refused with the setting named.
    @Test(arguments: [
        (configuration(layers: 3), "vision_cfg.layers is 3 there"),
        (configuration(vision: ", \"timm_model_name\": \"vit_base\""), "vision_cfg.timm_model_name"),
        (configuration(resize: "longest"), "resize_mode longest"),
        (configuration(interpolation: "bilinear"), "interpolation bilinear"),
        (configuration(embedding: 33), "embed_dim (image) is 33"),
        (configuration(), ""),
    ])
    func refusesAConfigurationThatDoesNotFit(configuration: String, said: String) throws {
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("open-clip-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        try configuration.write(toFile: copy + "/open_clip_config.json", atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(
            atPath: copy + "/open_clip_pytorch_model.bin",
            withDestinationPath: Self.folder("gelu-224") + "/open_clip_pytorch_model.bin")
        #expect(OpenCLIPModel.isModel(copy))
        if said.isEmpty {
            // The unchanged settings load: the refusals above are the edits'.
            #expect(try OpenCLIPModel(contentsOf: copy).configuration.imageSize == 224)
            return
        }
        do {
            _ = try OpenCLIPModel(contentsOf: copy)
            Issue.record("\(said): accepted")
        } catch {
            #expect(error.description.contains(said), "\(error)")
        }
    }

    /// A folder without the configuration is not an open_clip model; one without weights says which file is missing.
    @Test func namesWhatIsMissing() throws {
        #expect(!OpenCLIPModel.isModel(Self.root + "/Tests/Fixtures/weights"))
        #expect(!OpenCLIPModel.isModel(Self.root + "/Tests/Fixtures/weights/clip-tiny-openai.pt"))
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("open-clip-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        try FileManager.default.copyItem(
            atPath: Self.folder("gelu-224") + "/open_clip_config.json", toPath: copy + "/open_clip_config.json")
        do {
            _ = try OpenCLIPModel(contentsOf: copy)
            Issue.record("a folder without weights was accepted")
        } catch {
            #expect(error.description.contains("open_clip_model.safetensors"), "\(error)")
        }
    }
}
