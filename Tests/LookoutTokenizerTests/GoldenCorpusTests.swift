import LookoutJSON
import LookoutTokenizer
import Testing

/// The ids of OpenAI CLIP `clip.tokenize(text, truncate=True)` for the committed corpus.
@Suite struct GoldenCorpusTests {
    @Test func everyGoldenStringMatchesTheReference() throws {
        let records = try Fixtures.records("clip_tokenizer_golden.jsonl")
        #expect(records.count >= 3000)
        var mismatches: [String] = []
        for record in records {
            let text = record["text"]!.string!
            let expected = Fixtures.ids(record["ids"])
            let actual = Fixtures.tokenizer.tokenize(text)
            if actual != expected {
                mismatches.append("\(record["category"]!.string!): \(JSONValue.string(text).serialized)")
            }
        }
        #expect(
            mismatches.isEmpty,
            "\(mismatches.count) of \(records.count) differ:\n\(mismatches.prefix(20).joined(separator: "\n"))")
    }

    @Test func corpusCoversTheRequiredCategories() throws {
        let categories = Set(try Fixtures.records("clip_tokenizer_golden.jsonl").map { $0["category"]!.string! })
        for required in [
            "coco", "lvis", "objects365", "openimages", "imagenet", "composed", "punctuation", "digits",
            "contractions", "accents", "cjk", "scripts", "emoji", "html", "quotes", "fullwidth", "ligatures",
            "control", "zero-width", "whitespace", "special", "casefold", "long",
        ] {
            #expect(categories.contains(required), "category \(required) missing")
        }
    }

    /// Strings that ftfy's mojibake repair (`fix_encoding`) changes: Lookout must give the reference's ids,
    /// which differ from the ids without the repair (so leaving the repair out fails this test).
    @Test func mojibakeSampleMatchesTheReference() throws {
        let records = try Fixtures.records("clip_tokenizer_mojibake.jsonl")
        #expect(records.count >= 100)
        var mismatches: [String] = []
        for record in records {
            let text = record["text"]!.string!
            if Fixtures.tokenizer.tokenize(text) != Fixtures.ids(record["ids"]) {
                mismatches.append(JSONValue.string(text).serialized)
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) differ:\n\(mismatches.prefix(20).joined(separator: "\n"))")
        let repaired = records.filter { Fixtures.ids($0["ids"]) != Fixtures.ids($0["ids_without_mojibake_repair"]) }
        #expect(repaired.count * 2 > records.count, "most of the sample is changed by the repair")
    }

    /// 3,000 strings aimed at ftfy's mojibake heuristic and repair (`scripts/reference/make_mojibake_corpus.py`):
    /// runs of the heuristic's characters, words mis-decoded in each of ftfy's encodings (once, twice,
    /// damaged), mojibake inside clean text, unassigned code points among Greek and emoji, reported strings.
    @Test func mojibakeStressCorpusMatchesTheReference() throws {
        let records = try Fixtures.records("clip_tokenizer_mojibake_stress.jsonl")
        #expect(records.count == 3000)
        var mismatches: [String] = []
        for record in records {
            let text = record["text"]!.string!
            var expected = Fixtures.ids(record["ids"])
            expected += [Int32](repeating: 0, count: max(0, 77 - expected.count))
            if Fixtures.tokenizer.tokenize(text) != expected {
                mismatches.append("\(record["category"]!.string!): \(JSONValue.string(text).serialized)")
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) differ:\n\(mismatches.prefix(20).joined(separator: "\n"))")
    }

    /// The strings a user reported, by name: mojibake that ftfy repairs before tokenizing.
    @Test(arguments: [("cafÃ©", "café"), ("Ã©mojibake Ã¨", "émojibake è"), ("â€œquotedâ€\u{9D}", "\"quoted\"")])
    func reportedMojibakeIsRepaired(mojibake: String, repaired: String) {
        #expect(TextFixer.fixText(mojibake) == repaired)
        #expect(Fixtures.tokenizer.tokenize(mojibake) == Fixtures.tokenizer.tokenize(repaired))
    }
}
