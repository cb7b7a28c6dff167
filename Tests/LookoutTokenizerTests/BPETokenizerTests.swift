import Foundation
import LookoutJSON
import LookoutSupport
import LookoutTokenizer
import Testing

/// A byte-fallback BPE tokenizer in the format of Gemma's `tokenizer.json` (SigLIP 2's tokenizer), built here as
/// Gemma's was: `sentencepiece` trains a BPE model with Gemma's settings and transformers' GemmaTokenizer converts it
/// (`scripts/reference/make_bpe_fixtures.py`). 289 held-out strings in many scripts — Latin with accents, Cyrillic,
/// Greek, Arabic, Devanagari, CJK, emoji, compatibility forms, characters the model never saw, control characters,
/// special tokens in the text, empty and very long text — with the ids `tokenizers`' `Tokenizer.encode` gives, and
/// GemmaTokenizer's `input_ids` padded to 64 as SigLIP's processor asks for them.
@Suite struct BPETokenizerTests {
    static let folder = Fixtures.repositoryRoot + "/Tests/Fixtures/bpe"

    static func cases() throws -> [JSONNode] {
        let bytes = try FileContents.read(folder + "/cases.jsonl")
        return try bytes.split(separator: UInt8(ascii: "\n")).filter { !$0.isEmpty }.map {
            try JSONDocument(bytes: Array($0)).root
        }
    }

    @Test func idsAreTheReferences() throws {
        let tokenizer = try BPETokenizer(contentsOf: Self.folder + "/gemma-style/tokenizer.json")
        let cases = try Self.cases()
        #expect(cases.count == 289)
        var mismatches: [String] = []
        var padded: [String] = []
        let pad = try #require(tokenizer.vocabulary["<pad>"])
        for record in cases {
            let text = record["text"]!.string!
            let want = Fixtures.ids(record["ids"]).map(Int.init)
            let got = tokenizer.encode(text)
            if got != want { mismatches.append("\(JSONValue.string(text).serialized): \(got) against \(want)") }
            // GemmaTokenizer pads on the left.
            let wantPadded = Fixtures.ids(record["siglip2"]).map(Int.init)
            let gotPadded = tokenizer.padded(text, length: 64, pad: pad, left: true)
            if gotPadded != wantPadded { padded.append("\(JSONValue.string(text).serialized): \(gotPadded)") }
        }
        #expect(
            mismatches.isEmpty,
            "\(mismatches.count) of \(cases.count) differ:\n\(mismatches.prefix(8).joined(separator: "\n"))")
        #expect(padded.isEmpty, "\(padded.count) padded rows differ:\n\(padded.prefix(4).joined(separator: "\n"))")
    }

    @Test func byteFallbackMergesAndSpecialTokensAreExercised() throws {
        let tokenizer = try BPETokenizer(contentsOf: Self.folder + "/gemma-style/tokenizer.json")
        // Characters the model never saw become their UTF-8 bytes' pieces.
        let rare = tokenizer.encode("龘")
        let byteIDs = Set((0..<256).compactMap { tokenizer.vocabulary[String(format: "<0x%02X>", $0)] })
        #expect(rare.count == 3 && rare.allSatisfy(byteIDs.contains), "\(rare)")
        // Special tokens written in the text are cut out whole; a long text merges into fewer ids than letters.
        #expect(tokenizer.encode("a<eos>b").contains(try #require(tokenizer.vocabulary["<eos>"])))
        #expect(tokenizer.encode("blue circle").count < "blue circle".count)
    }

    @Test(arguments: [
        (#""type":"BPE""#, #""type":"WordPiece""#, "model.type WordPiece"),
        (#""normalizer":{"type":"Replace""#, #""normalizer":{"type":"NFKC""#, "normalizer NFKC"),
        (#""pre_tokenizer":{"type":"Split""#, #""pre_tokenizer":{"type":"ByteLevel""#, "pre_tokenizer ByteLevel"),
        (#"["r","e"]"#, #"["r","zz"]"#, "merge 0 (r zz) names a piece the vocabulary lacks"),
    ])
    func refusesWhatItDoesNotCompute(from: String, to: String, said: String) throws {
        var text = try String(contentsOfFile: Self.folder + "/gemma-style/tokenizer.json", encoding: .utf8)
        // The file is written with indentation; matched without it.
        let compact = try JSONValue(parsing: text).serialized
        #expect(compact.contains(from), "\(from) is not in the file")
        text = compact.replacingOccurrences(of: from, with: to)
        do {
            _ = try BPETokenizer(json: Array(text.utf8), path: "tokenizer.json")
            Issue.record("\(said): accepted")
        } catch {
            #expect(error.description.contains(said), "\(error)")
        }
    }
}
