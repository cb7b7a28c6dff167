import Foundation
import LookoutTextEncoder
import LookoutTokenizer
import Testing

@Suite struct TextEmbeddingCacheTests {
    static func temporaryDirectory() -> String {
        NSTemporaryDirectory() + "lookout-embeddings-\(UUID().uuidString)"
    }

    static func files(_ directory: String) -> [String] {
        (FileManager.default.enumerator(atPath: directory)?.allObjects as? [String] ?? []).filter {
            $0.hasSuffix(".emb")
        }
    }

    @Test func embedderUsesAndFillsTheCache() throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let encoder = try CLIPTextEncoder(
            contentsOf: TextEncoderParityTests.root + "/Tests/Fixtures/weights/clip-tiny-openai.pt")
        let texts = ["red car", "dog", "red car", "Red  Car"]  // the last tokenizes like the first
        let first = try TextEmbedder(
            tokenizer: TextEncoderParityTests.tokenizer, encoder: encoder,
            cache: TextEmbeddingCache(directory: directory))
        let (cold, coldReport) = first.embed(texts)
        #expect(coldReport.cached == 0 && coldReport.computed == 2)
        #expect(cold[0] == cold[2] && cold[0] == cold[3])
        #expect(Self.files(directory).count == 2)
        // A new process (new memory cache) reads the disk entries.
        let second = try TextEmbedder(
            tokenizer: TextEncoderParityTests.tokenizer, encoder: encoder,
            cache: TextEmbeddingCache(directory: directory))
        let (warm, warmReport) = second.embed(texts)
        #expect(warmReport.cached == 4 && warmReport.computed == 0)
        #expect(warm == cold)
    }

    @Test func corruptEntriesAreIgnoredAndRecomputed() throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let encoder = try CLIPTextEncoder(
            contentsOf: TextEncoderParityTests.root + "/Tests/Fixtures/weights/clip-tiny-openai.pt")
        let make = {
            try TextEmbedder(
                tokenizer: TextEncoderParityTests.tokenizer, encoder: encoder,
                cache: TextEmbeddingCache(directory: directory))
        }
        let (original, _) = try make().embed(["bicycle"])
        let file = directory + "/" + Self.files(directory)[0]
        var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        bytes[40] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: file))
        let (again, report) = try make().embed(["bicycle"])
        #expect(report.computed == 1)
        #expect(again == original)
        try Data(bytes.prefix(10)).write(to: URL(fileURLWithPath: file))
        #expect(try make().embed(["bicycle"]).report.computed == 1)
    }

    @Test func keysSeparateModelsAndVocabularies() {
        let ids: [Int32] = [49406, 736, 1615, 49407]
        let a = TextEmbeddingCache.key(model: "m1", vocabulary: "v", ids: ids)
        #expect(a != TextEmbeddingCache.key(model: "m2", vocabulary: "v", ids: ids))
        #expect(a != TextEmbeddingCache.key(model: "m1", vocabulary: "w", ids: ids))
        #expect(a != TextEmbeddingCache.key(model: "m1", vocabulary: "v", ids: [49406, 736, 49407]))
    }

    @Test func diskIsBounded() {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = TextEmbeddingCache(directory: directory, memoryLimit: 4, diskLimit: 20)
        for index in 0..<50 {
            let ids: [Int32] = [49406, Int32(index), 49407]
            cache.store(
                TextEmbeddingCache.key(model: "m", vocabulary: "v", ids: ids), ids: ids, values: [Float(index), 1])
        }
        cache.evict()
        #expect(Self.files(directory).count <= 20)
        // What remains still reads back intact.
        let ids: [Int32] = [49406, 49, 49407]
        #expect(
            cache.lookup(TextEmbeddingCache.key(model: "m", vocabulary: "v", ids: ids), ids: ids, size: 2) == [49, 1])
    }

    @Test func mismatchedTokenizerIsAnError() throws {
        let encoder = try CLIPTextEncoder(
            contentsOf: TextEncoderParityTests.root + "/Tests/Fixtures/weights/clip-tiny-openai.pt")
        // A valid vocabulary of 514 tokens (byte symbols and the two special tokens, no merges).
        var json = "{\"merges\": [], \"encoder\": {"
        let symbols = ByteEncoder.bytesInVocabularyOrder.map { String(Character(ByteEncoder.scalarForByte[Int($0)])) }
        for (id, token) in (symbols + symbols.map { $0 + "</w>" } + ["<|startoftext|>", "<|endoftext|>"]).enumerated() {
            json +=
                (id > 0 ? "," : "")
                + "\"\(token.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\""))\": \(id)"
        }
        json += "}}"
        let small = try CLIPVocabulary(json: Array(json.utf8), path: "small.json")
        #expect(small.count == 514)
        #expect {
            _ = try TextEmbedder(tokenizer: CLIPTokenizer(vocabulary: small), encoder: encoder, cache: nil)
        } throws: { error in
            "\(error)".contains("its token embedding has 49408 rows but the vocabulary has 514 tokens")
        }
    }
}
