import Foundation
import LookoutJSON
import LookoutSupport
import LookoutTextEncoder
import Testing

/// Parity of a full-size random ViT-B/32 text encoder in the official file format, against OpenAI
/// `encode_text`. Opt-in (the file is 350 MB and made by the reference script):
/// `scripts/check-full-clip` creates it and runs this test in release mode.
@Suite struct FullSizeParityTests {
    static let directory = ProcessInfo.processInfo.environment["LOOKOUT_FULL_CLIP_DIR"]

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
}
