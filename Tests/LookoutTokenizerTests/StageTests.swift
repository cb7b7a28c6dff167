import LookoutJSON
import LookoutTokenizer
import Testing

/// Each stage of the tokenizer against the reference's output for that stage
/// (`clip_tokenizer_stages.jsonl`), then hand-picked edge cases of the reference's cleaning rules.
@Suite struct StageTests {
    static let stages: [JSONNode] = (try? Fixtures.records("clip_tokenizer_stages.jsonl")) ?? []

    @Test func byteMapMatchesBytesToUnicode() throws {
        let table = try #require(Self.stages.first?["byte_encoder"])
        #expect(table.count == 256)
        for byte in 0..<256 {
            let expected = table[String(byte)]!.string!
            #expect(String(Character(ByteEncoder.scalarForByte[byte])) == expected, "byte \(byte)")
        }
        #expect(ByteEncoder.scalarForByte[0] == "\u{100}")
        #expect(ByteEncoder.scalarForByte[32] == "\u{120}")
        #expect(ByteEncoder.scalarForByte[173] == "\u{143}")
        #expect(ByteEncoder.encode("a é") == "a\u{120}\u{C3}\u{A9}")
    }

    @Test func vocabularyOrderFollowsTheByteMap() {
        let vocabulary = Fixtures.tokenizer.vocabulary
        let tokens = (0..<Int32(vocabulary.count)).map { vocabulary.token($0) }
        #expect(tokens.count == 49408)
        #expect(Fixtures.tokenizer.vocabulary.mergeCount == 48894)
        #expect(tokens[0] == "!" && tokens[93] == "~" && tokens[94] == "¡" && tokens[187] == "ÿ")
        #expect(tokens[188] == "Ā" && tokens[255] == "Ń" && tokens[256] == "!</w>")
        #expect(tokens[49405] == "jekyll</w>")
        #expect(tokens[49406] == "<|startoftext|>" && tokens[49407] == "<|endoftext|>")
    }

    @Test func ftfyFixTextWithoutMojibakeRepair() throws {
        try compareStage("fixed") { TextFixer.fixText($0) }
    }

    @Test func htmlUnescapeTwice() throws {
        try compareStage("unescaped") { TextCleaner.htmlUnescapeTwice(TextFixer.fixText($0)) }
    }

    @Test func fullCleaning() throws {
        try compareStage("cleaned") { TextCleaner.clean($0) }
    }

    @Test func preTokenization() throws {
        var failures: [String] = []
        for record in Self.stages.dropFirst() {
            let cleaned = record["cleaned"]!.string!
            if PreTokenizer.split(cleaned) != Fixtures.strings(record["pretokens"]) {
                failures.append(JSONValue.string(cleaned).serialized)
            }
        }
        #expect(Self.stages.count > 1000)
        #expect(failures.isEmpty, "\(failures.count) differ:\n\(failures.prefix(20).joined(separator: "\n"))")
    }

    @Test func mergesGiveTheReferenceSymbols() throws {
        let vocabulary = Fixtures.tokenizer.vocabulary
        var failures: [String] = []
        var checked = 0
        for record in Self.stages.dropFirst() {
            let pretokens = Fixtures.strings(record["pretokens"])
            let bpe = record["bpe"]!
            for (index, pretoken) in pretokens.enumerated() {
                let expected = Fixtures.strings(bpe[index])
                if pretoken == "<|startoftext|>" || pretoken == "<|endoftext|>" { continue }
                let symbols = vocabulary.bpe(Array(pretoken.utf8)).map { vocabulary.token($0) }
                checked += 1
                if symbols != expected { failures.append("\(pretoken): \(symbols) vs \(expected)") }
            }
        }
        #expect(checked > 2000)
        #expect(failures.isEmpty, "\(failures.count) differ:\n\(failures.prefix(20).joined(separator: "\n"))")
    }

    @Test(
        arguments: [
            ("a photo of a cat", [320, 1125, 539, 320, 2368]),
            ("Hello, World!", [3306, 267, 1002, 256]),
            ("don't STOP", [847, 713, 1691]),
            ("Tom &amp; Jerry", [2435, 261, 9164]),
            ("  multiple \t\n spaces  ", [6470, 9006]),
            ("naïve café", [1097, 35689, 563, 15304]),
            ("emoji 😀!", [16327, 12832, 256]),
            ("2024 model-x", [273, 271, 273, 275, 2863, 268, 343]),
            ("<|endoftext|> inside", [49407, 2912]),
            ("“smart” quotes", [257, 4115, 257, 5808]),
            ("Ｔｅｓｔ", [1628]),
            ("&amp;amp;", [261]),
            ("ΟΔΟΣ", [138, 123, 138, 112, 138, 123, 139, 480]),
            ("İstanbul", [328, 16384, 11231]),
        ] as [(String, [Int32])])
    func publishedTestVectors(text: String, ids: [Int32]) {
        #expect(Fixtures.tokenizer.encode(text) == ids)
    }

    @Test func truncationKeepsTheEndTokenLast() {
        let text = Array(repeating: "word", count: 100).joined(separator: " ")
        let ids = Fixtures.tokenizer.tokenize(text)
        #expect(ids.count == 77)
        #expect(ids == [49406] + Array(repeating: 2653, count: 75) + [49407])
        #expect(Fixtures.tokenizer.tokenize("") == [49406, 49407] + Array(repeating: 0, count: 75))
    }

    @Test func finalSigmaAndDottedCapitalI() {
        #expect(TextCleaner.lowercased("ΟΔΟΣ") == "οδος")
        #expect(TextCleaner.lowercased("ΣΑΣ ΣΑΣ.") == "σας σας.")
        #expect(TextCleaner.lowercased("Σ") == "σ")
        #expect(TextCleaner.lowercased("İ") == "i\u{307}")
    }

    private func compareStage(_ key: String, _ stage: (String) -> String) throws {
        var failures: [String] = []
        for record in Self.stages.dropFirst() {
            let text = record["text"]!.string!
            let expected = record[key]!.string!
            let actual = stage(text)
            if actual.unicodeScalars.elementsEqual(expected.unicodeScalars) == false {
                failures.append(
                    "\(JSONValue.string(text).serialized) → \(JSONValue.string(actual).serialized), expected \(JSONValue.string(expected).serialized)"
                )
            }
        }
        #expect(Self.stages.count > 1000)
        #expect(failures.isEmpty, "\(failures.count) differ:\n\(failures.prefix(20).joined(separator: "\n"))")
    }
}
