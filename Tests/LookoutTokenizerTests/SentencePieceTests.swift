import LookoutJSON
import LookoutSupport
import LookoutTokenizer
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// SentencePiece unigram models trained here by Google's `sentencepiece` (nmt_nfkc normalisation, with and without
/// byte fallback) and 284 held-out strings in many scripts — Latin with accents, Cyrillic, Greek, Arabic,
/// Devanagari, CJK, emoji, compatibility forms NFKC rewrites, characters the models never saw, control
/// characters, empty and very long text — with the ids `SentencePieceProcessor.encode` gives
/// (`scripts/reference/make_sentencepiece_fixtures.py`).
@Suite struct SentencePieceTests {
    static let folder = Fixtures.repositoryRoot + "/Tests/Fixtures/sentencepiece"

    static func cases() throws -> [JSONNode] {
        let bytes = try FileContents.read(folder + "/cases.jsonl")
        return try bytes.split(separator: UInt8(ascii: "\n")).filter { !$0.isEmpty }.map {
            try JSONDocument(bytes: Array($0)).root
        }
    }

    @Test(arguments: [("unigram.model", "unigram"), ("unigram-unk.model", "unigram_unk")])
    func idsAreTheReferences(file: String, field: String) throws {
        let model = try SentencePieceModel(contentsOf: Self.folder + "/" + file)
        let cases = try Self.cases()
        #expect(cases.count == 284)
        var mismatches: [String] = []
        for record in cases {
            let text = record["text"]!.string!
            let want = Fixtures.ids(record[field]).map(Int.init)
            let got = model.encode(text)
            if got != want {
                mismatches.append("\(JSONValue.string(text).serialized): \(got) against \(want)")
            }
        }
        #expect(
            mismatches.isEmpty,
            "\(mismatches.count) of \(cases.count) differ:\n\(mismatches.prefix(8).joined(separator: "\n"))")
    }

    @Test func byteFallbackAndUnknownsAreExercised() throws {
        // The held-out set reaches both paths: bytes for characters the model never saw, one <unk> per run.
        let withBytes = try SentencePieceModel(contentsOf: Self.folder + "/unigram.model")
        let withUnknown = try SentencePieceModel(contentsOf: Self.folder + "/unigram-unk.model")
        let rare = "龘 齉 靐"
        #expect(withBytes.encode(rare).contains { withBytes.types[$0] == .byte })
        #expect(withUnknown.encode(rare).contains(withUnknown.unknownID))
        #expect(withBytes.encode("").isEmpty && withBytes.encode("   \t ").isEmpty)
    }

    @Test func otherFilesAreRefused() throws {
        let scratch = "/tmp/lookout-spm-\(getpid())"
        defer { _ = unlink(scratch) }
        for (bytes, problem) in [
            (Array("{\"not\": \"a model\"}".utf8), "not a SentencePiece model"),
            ([UInt8](repeating: 0xFF, count: 40), "not a SentencePiece model"),
            ([], "not a SentencePiece model"),
        ] {
            try FileContents.writeAtomically(bytes, to: scratch)
            #expect(throws: VocabularyError.self) { try SentencePieceModel(contentsOf: scratch) }
            do {
                _ = try SentencePieceModel(contentsOf: scratch)
            } catch {
                #expect(error.description.contains(problem), "\(error)")
            }
        }
        // A truncated model: every prefix is refused or read, never a crash.
        let whole = try FileContents.read(Self.folder + "/unigram-unk.model")
        for length in stride(from: 0, to: whole.count, by: 997) {
            _ = try? SentencePieceModel(bytes: Array(whole.prefix(length)), path: "truncated")
        }
    }
}

/// SigLIP's text pipeline on the byte-fallback model against `transformers`' SiglipTokenizer (lowercasing with
/// final sigma, punctuation, whitespace, the special tokens `</s>` and `<unk>` in the text, truncation to 64).
@Suite struct SigLIPTokenizerTests {
    @Test func idsAreTheReferences() throws {
        let tokenizer = try SigLIPTokenizer(contentsOf: SentencePieceTests.folder + "/unigram.model")
        var mismatches: [String] = []
        let cases = try SentencePieceTests.cases()
        for record in cases {
            let text = record["text"]!.string!
            let want = Fixtures.ids(record["siglip"]).map(Int.init)
            let got = tokenizer.tokenize(text)
            if got != want { mismatches.append("\(JSONValue.string(text).serialized): \(got) against \(want)") }
        }
        #expect(
            mismatches.isEmpty,
            "\(mismatches.count) of \(cases.count) differ:\n\(mismatches.prefix(6).joined(separator: "\n"))")
    }

    @Test func pythonLowercasing() {
        #expect(SigLIPTokenizer.lowercased("ΣΑΣ ΟΔΟΣ. Σ") == "σας οδος. σ")
        #expect(SigLIPTokenizer.lowercased("İSTANBUL") == "i̇stanbul")
        #expect(SigLIPTokenizer.canonical("  Blue,\u{1C}CIRCLE!!  ") == "blue circle")
    }
}
