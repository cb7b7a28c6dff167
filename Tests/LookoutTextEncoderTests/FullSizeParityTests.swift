import Foundation
import LookoutImage
import LookoutJSON
import LookoutSupport
import LookoutTextEncoder
import Testing

/// Parity of a full-size random ViT-B/32 (both towers) in the official file format, against OpenAI
/// `encode_text` and `encode_image`. Opt-in (the file is 350 MB and made by the reference script):
/// `scripts/check-full-clip` creates it and runs this test in release mode.
@Suite struct FullSizeParityTests {
    static let directory = ProcessInfo.processInfo.environment["LOOKOUT_FULL_CLIP_DIR"]
    static let mobileCLIPDirectory = ProcessInfo.processInfo.environment["LOOKOUT_FULL_MOBILECLIP_DIR"]
    static let mobileCLIP2Directory = ProcessInfo.processInfo.environment["LOOKOUT_FULL_MOBILECLIP2_DIR"]

    @Test(.enabled(if: directory != nil, "set LOOKOUT_FULL_CLIP_DIR (scripts/check-full-clip)"))
    func fullSizeViTB32MatchesReference() throws {
        let directory = try #require(Self.directory)
        let expected = try JSONDocument(
            bytes: try FileContents.read(directory + "/expected.json", maximumSize: 1 << 30)
        ).root
        let encoder = try CLIPTextEncoder(contentsOf: directory + "/ViT-B-32-random.pt")
        #expect(encoder.configuration.width == 512 && encoder.configuration.layers == 12)
        #expect(encoder.configuration.heads == 8 && encoder.configuration.embeddingSize == 512)
        let promptsNode = expected["prompts"]!
        let prompts = (0..<promptsNode.count).map { promptsNode[$0].string! }
        let rowsNode = expected["ViT-B-32-random.pt"]!
        let reference = (0..<rowsNode.count).map { row in
            (0..<rowsNode[row].count).map { Float(rowsNode[row][$0].number!) }
        }
        // Ten times the reference's own float32 error (against float64), recorded by the fixture script.
        let tolerance = 10 * Float(try #require(expected["reference_error"]?.number))
        let (maxError, minCosine) = TextEncoderParityTests.compare(
            encoder: encoder, prompts: prompts, expected: reference)
        print(
            "full-size ViT-B/32: max |error| \(maxError), min cosine \(minCosine) over \(expected["prompts"]!.count) prompts, tolerance \(tolerance)"
        )
        #expect(maxError <= tolerance)
        #expect(minCosine >= 0.99999)
        let (singleError, singleCosine) = TextEncoderParityTests.compare(
            encoder: encoder, prompts: prompts, expected: reference, oneByOne: true)
        print("full-size ViT-B/32, one prompt at a time: max |error| \(singleError), min cosine \(singleCosine)")
        #expect(singleError <= tolerance)
        #expect(singleCosine >= 0.99999)
    }

    /// YOLOE's text tower at full size: a random MobileCLIP-B (ViT-B/16 image tower beside a 12-layer, 512-wide,
    /// 8-head text tower: the official `mobileclip_blt.ts`'s structure and size) traced as ultralytics traced
    /// it, against `MobileCLIPTS.encode_text`. Opt-in: the reference needs the `mobileclip` package, which is
    /// not on PyPI (scripts/reference/requirements-mobileclip.txt says how to install it), so CI cannot make it;
    /// `make_mobileclip_fixtures.py --full DIR`, then `LOOKOUT_FULL_MOBILECLIP_DIR=DIR swift test -c release
    /// --filter FullSizeParityTests`.
    @Test(.enabled(if: mobileCLIPDirectory != nil, "set LOOKOUT_FULL_MOBILECLIP_DIR"))
    func fullSizeMobileCLIPMatchesReference() throws {
        try Self.compareFullSize(
            directory: try #require(Self.mobileCLIPDirectory), file: "mobileclip_blt-random.ts",
            expected: "expected-mobileclip.json", layout: .mobileCLIP, label: "MobileCLIP-B")
    }

    /// YOLOE-26's text tower at full size: open_clip's MobileCLIP2-B text tower (random) traced as
    /// scripts/reference/make_mobileclip2_fixtures.py says, the size of the official `mobileclip2_b.ts` within
    /// 0.1%, against `MobileCLIPTS.encode_text`. Opt-in for its 254 MB: `make_mobileclip2_fixtures.py --full DIR`,
    /// then `LOOKOUT_FULL_MOBILECLIP2_DIR=DIR swift test -c release --filter FullSizeParityTests`.
    @Test(.enabled(if: mobileCLIP2Directory != nil, "set LOOKOUT_FULL_MOBILECLIP2_DIR"))
    func fullSizeMobileCLIP2MatchesReference() throws {
        try Self.compareFullSize(
            directory: try #require(Self.mobileCLIP2Directory), file: "mobileclip2_b-random.ts",
            expected: "expected-mobileclip2.json", layout: .openCLIP, label: "MobileCLIP2-B")
    }

    static func compareFullSize(
        directory: String, file: String, expected expectedName: String, layout: CLIPTextConfiguration.Layout,
        label: String
    ) throws {
        let expected = try JSONDocument(
            bytes: try FileContents.read(directory + "/" + expectedName, maximumSize: 1 << 30)
        ).root
        let encoder = try CLIPTextEncoder(contentsOf: directory + "/" + file)
        let c = encoder.configuration
        #expect(c.layout == layout && c.exactGELU && c.width == 512 && c.layers == 12 && c.heads == 8)
        #expect(c.embeddingSize == 512 && c.contextLength == 77 && c.vocabularySize == 49408)
        let promptsNode = expected["prompts"]!
        let prompts = (0..<promptsNode.count).map { promptsNode[$0].string! }
        let rowsNode = expected[file]!
        let reference = (0..<rowsNode.count).map { row in
            (0..<rowsNode[row].count).map { Float(rowsNode[row][$0].number!) }
        }
        let tolerance = 10 * Float(try #require(expected["reference_error"]?.number))
        for oneByOne in [false, true] {
            let (maxError, minCosine) = TextEncoderParityTests.compare(
                encoder: encoder, prompts: prompts, expected: reference, oneByOne: oneByOne)
            print(
                "full-size \(label) (one by one: \(oneByOne)): max |error| \(maxError), min cosine \(minCosine) over \(prompts.count) prompts, tolerance \(tolerance)"
            )
            #expect(maxError <= tolerance)
            #expect(minCosine >= 0.99999)
        }
    }

    /// The image tower: `encode_image(preprocess(photo))`, normalised, for the 14 fixture photos (every PIL
    /// mode, odd sizes): max abs error ≤ 1e-4 and within ten times the reference's own float32 error,
    /// cosine ≥ 0.9999.
    @Test(.enabled(if: directory != nil, "set LOOKOUT_FULL_CLIP_DIR (scripts/check-full-clip)"))
    func fullSizeImageTowerMatchesReference() throws {
        let directory = try #require(Self.directory)
        let expected = try JSONDocument(
            bytes: try FileContents.read(directory + "/expected-images.json", maximumSize: 1 << 30)
        ).root
        let encoder = try CLIPImageEncoder(contentsOf: directory + "/ViT-B-32-random.pt")
        let c = encoder.configuration
        #expect(c.width == 768 && c.layers == 12 && c.patchSize == 32 && c.inputResolution == 224)
        #expect(c.embeddingSize == 512)
        let tolerance = max(10 * Float(try #require(expected["reference_error"]?.number)), 1e-6)
        var worstError: Float = 0
        var worstCosine: Float = 1
        for k in 0..<expected["photos"]!.count {
            let name = expected["photos"]![k].string!
            let path = ImageEncoderParityTests.path(name)
            let input = try CLIPPreprocessing.input(try FileContents.read(path), name: path, size: 224)
            let embedding = encoder.encode([input])[0]
            let reference = (0..<expected["embeddings"]![k].count).map { Float(expected["embeddings"]![k][$0].number!) }
            let error = zip(embedding, reference).map { abs($0 - $1) }.max()!
            let cosine = zip(embedding, reference).reduce(0) { $0 + $1.0 * $1.1 }
            worstError = max(worstError, error)
            worstCosine = min(worstCosine, cosine)
            #expect(error <= min(tolerance, 1e-4) && cosine >= 0.9999, "\(name): max error \(error), cosine \(cosine)")
        }
        print(
            "full-size ViT-B/32 image tower: max |error| \(worstError), min cosine \(worstCosine), tolerance \(tolerance)"
        )
    }
}
