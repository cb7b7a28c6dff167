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

    /// Strings that ftfy's mojibake repair changes. Lookout leaves that repair out: it must then give
    /// exactly the reference's ids with `fix_encoding` switched off; the share that still equals the
    /// full reference is the measured cost of the omission.
    @Test func mojibakeSampleMatchesTheReferenceWithoutRepair() throws {
        let records = try Fixtures.records("clip_tokenizer_mojibake.jsonl")
        #expect(records.count >= 100)
        var matchingRepaired = 0
        var mismatches: [String] = []
        for record in records {
            let text = record["text"]!.string!
            let actual = Fixtures.tokenizer.tokenize(text)
            if actual == Fixtures.ids(record["ids"]) { matchingRepaired += 1 }
            if actual != Fixtures.ids(record["ids_without_mojibake_repair"]) {
                mismatches.append(JSONValue.string(text).serialized)
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) differ:\n\(mismatches.prefix(20).joined(separator: "\n"))")
        // The cost of the omission, measured: Lookout equals the full reference exactly where the repair
        // leaves the ids alone, and nowhere else.
        let unaffected = records.filter { Fixtures.ids($0["ids"]) == Fixtures.ids($0["ids_without_mojibake_repair"]) }
            .count
        print("mojibake sample: \(matchingRepaired) of \(records.count) match the reference with ftfy's repair")
        #expect(matchingRepaired == unaffected)
        #expect(unaffected < records.count, "the sample holds strings the repair changes")
    }
}
