import Foundation
import LookoutTokenizer
import Testing

/// The binary vocabulary cache gives the same tokenizer as the JSON, and a damaged cache is ignored.
@Suite struct VocabularyCacheTests {
    static func temporaryDirectory() -> String {
        let path = NSTemporaryDirectory() + "lookout-cache-test-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static let sample = [
        "a photo of a red car", "naïve café", "日本語", "emoji 😀!", "<|endoftext|> inside", "ΟΔΟΣ", "toothbrush",
        String(repeating: "word ", count: 100),
    ]

    @Test func cachedVocabularyTokenizesIdentically() throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try CLIPVocabulary.load(contentsOf: Fixtures.vocabularyPath, cacheDirectory: directory)
        let files = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(files.count == 1 && files[0].hasPrefix("clip-vocab-") && files[0].hasSuffix(".bin"))
        let second = try CLIPVocabulary.load(contentsOf: Fixtures.vocabularyPath, cacheDirectory: directory)
        #expect(second.count == first.count && second.mergeCount == first.mergeCount)
        for id in Int32(0)..<Int32(first.count) where first.token(id) != second.token(id) {
            Issue.record("token \(id) differs")
        }
        let a = CLIPTokenizer(vocabulary: first)
        let b = CLIPTokenizer(vocabulary: second)
        for text in Self.sample {
            #expect(a.tokenize(text) == b.tokenize(text))
            #expect(b.tokenize(text) == Fixtures.tokenizer.tokenize(text))
        }
    }

    @Test(arguments: ["truncate", "flip", "empty"])
    func damagedCacheIsIgnoredAndRewritten(damage: String) throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        _ = try CLIPVocabulary.load(contentsOf: Fixtures.vocabularyPath, cacheDirectory: directory)
        let file = directory + "/" + (try FileManager.default.contentsOfDirectory(atPath: directory))[0]
        var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        let original = bytes
        switch damage {
        case "truncate": bytes = bytes.prefix(bytes.count / 2)
        case "flip": bytes[bytes.count / 3] ^= 0x40
        default: bytes = Data()
        }
        try bytes.write(to: URL(fileURLWithPath: file))
        let vocabulary = try CLIPVocabulary.load(contentsOf: Fixtures.vocabularyPath, cacheDirectory: directory)
        for text in Self.sample {
            #expect(CLIPTokenizer(vocabulary: vocabulary).tokenize(text) == Fixtures.tokenizer.tokenize(text))
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == original)
    }
}
