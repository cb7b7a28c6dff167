import LookoutDetector
import LookoutEngine
import LookoutWeights
import Testing

/// The detector-family registry (issue 50): each fixture file is recognised as its family, described in words
/// from its tensors alone, and opened as that family's network; text encoders, image towers and other files are
/// none of them, and opening one as a detector says so.
@Suite struct DetectorFamilyTests {
    static let weights = NetworkParityTests.root + "/Tests/Fixtures/weights/"
    static let yoloe = NetworkParityTests.root + "/Tests/Fixtures/yoloe/"

    @Test(arguments: [
        ("yolov8n-worldv2-random.pt", "YOLO-World v2 detector, scale n, text embedding 512, 80 built-in classes"),
        ("yoloe-v8n-seg-random.pt", "YOLOE-v8 segmentation model, scale n, prompts: text, visual"),
        ("yoloe-11n-seg-random.pt", "YOLOE-11 segmentation model, scale n, prompts: text, visual"),
        ("yoloe-26n-seg-random.pt", "YOLOE-26 segmentation model, scale n, prompts: text, visual"),
        ("yoloe-11n-seg-pf-random.pt", "YOLOE-11 segmentation model, scale n, prompts: prompt-free"),
    ])
    func eachFileIsItsFamily(file: String, described: String) throws {
        let path = (file.hasPrefix("yolov8") ? Self.weights : Self.yoloe) + file
        let weights = try WeightFile.open(path)
        let (family, description) = try #require(DetectorFamilies.recognise(weights))
        #expect(description.description == described)
        #expect(ModelKind(weights) == .detector(description))
        let network = try family.open(weights, options: DetectorOptions())
        #expect(type(of: network) == family, "\(file) opened as \(type(of: network))")
        #expect(described.hasPrefix(network.familyName), "\(network.familyName) for \(described)")
        let opened = try openDetector(weights)
        #expect(type(of: opened) == family)
    }

    @Test func otherFilesAreNoDetector() throws {
        for (file, kind) in [
            ("clip-tiny-openai.pt", "CLIP text encoder (openai names): width 64, 2 layers, 1 heads"),
            ("clip-tiny-hf.safetensors", "CLIP text encoder (huggingface names): width 64, 2 layers"),
            ("mobileclip-tiny-random.ts", "MobileCLIP text encoder (YOLOE-v8/11's text tower): width 128"),
            ("mobileclip2-tiny-random.ts", "MobileCLIP2 text encoder (YOLOE-26's text tower, openclip names)"),
            ("dtypes.safetensors", "not a detector, text encoder or image tower"),
        ] {
            let weights = try WeightFile.open(Self.weights + file)
            #expect(DetectorFamilies.recognise(weights) == nil, "\(file)")
            #expect(ModelKind(weights).description.hasPrefix(kind), "\(file): \(ModelKind(weights))")
            #expect {
                try openDetector(weights)
            } throws: {
                ($0 as? WeightsError)?.kind == .wrongModel
                    && ($0 as? WeightsError)?.problem.contains("not a detector Lookout runs") == true
            }
        }
        let tower = try WeightFile.open(NetworkParityTests.root + "/Models/demo/image-encoder.safetensors")
        #expect(
            ModelKind(tower).description
                == "CLIP image tower (ViT): width 256, 4 layers, 32×32 patches of a 224×224 input, embedding 512",
            "\(ModelKind(tower))")
    }
}
