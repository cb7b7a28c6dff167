import Foundation
import LookoutJSON
import Testing

/// `lookout tokenize` run as a process, as a user (or the reference-comparison script) runs it.
@Suite struct TokenizeCommandTests {
    @Test func printsIdsOfEachText() throws {
        let result = try CLI.run(["tokenize", "a photo of a cat", "person"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "49406 320 1125 539 320 2368 49407\n49406 2533 49407\n")
    }

    @Test func showsTokenStrings() throws {
        let result = try CLI.run(["tokenize", "--tokens", "red car"])
        #expect(result.stdout.contains("<|startoftext|> red</w> car</w> <|endoftext|>"))
    }

    @Test func jsonLinesMatchTheReferenceCorpus() throws {
        let path = CLI.root + "/Tests/LookoutTokenizerTests/Fixtures/clip_tokenizer_golden.jsonl"
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init)
        var input = ""
        var expected: [String] = []
        for line in lines {
            let record = try JSONDocument(text: line).root
            JSONValue.string(record["text"]!.string!).write(to: &input)
            input += "\n"
            expected.append("[" + (0..<77).map { String(record["ids"]![$0].int!) }.joined(separator: ",") + "]")
        }
        let result = try CLI.run(["tokenize", "--jsonl"], input: input)
        #expect(result.status == 0, "\(result.stderr)")
        let actual = result.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
        #expect(actual.count == expected.count)
        let differing = zip(actual, expected).filter { $0 != $1 }.count
        #expect(differing == 0)
    }

    @Test func aLineThatIsNotAJSONStringIsAnErrorNamingTheLine() throws {
        let result = try CLI.run(["tokenize", "--jsonl"], input: "\"dog\"\n\"cat\"\n{\"text\": 1}\n\"bird\"\n")
        #expect(result.status != 0)
        #expect(result.stderr.contains("line 3"), "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").count == 2)
    }

    @Test func anotherVocabularyFile() throws {
        let missing = try CLI.run(["tokenize", "--vocab", "/nonexistent/vocab.json", "dog"])
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("/nonexistent/vocab.json"))
        let explicit = try CLI.run(["tokenize", "--vocab", CLI.root + "/Vocab/clip_vocab.json", "dog"])
        #expect(explicit.stdout == "49406 1929 49407\n")
    }

    @Test func usageErrors() throws {
        let none = try CLI.run(["tokenize"])
        #expect(none.status != 0 && none.stdout.isEmpty && none.stderr.contains("Give at least one TEXT, or --jsonl"))
        let both = try CLI.run(["tokenize", "--jsonl", "extra"])
        #expect(both.status != 0 && both.stdout.isEmpty && both.stderr.contains("give no TEXT arguments with it"))
    }

    /// --full prints all 77 positions, padding included, as the reference's `clip.tokenize` rows.
    @Test func fullRowsEqualTheReference() throws {
        let path = CLI.root + "/Tests/LookoutTokenizerTests/Fixtures/clip_tokenizer_golden.jsonl"
        let records = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").prefix(40)
            .map { try JSONDocument(text: String($0)).root }
        let texts = records.map { $0["text"]!.string! }.filter { !$0.isEmpty && !$0.hasPrefix("-") }
        #expect(texts.count >= 30)
        let result = try CLI.run(["tokenize", "--full", "--"] + texts)
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
        #expect(lines.count == texts.count)
        for (line, text) in zip(lines, texts) {
            let record = records.first { $0["text"]!.string! == text }!
            let ids = (0..<77).map { String(record["ids"]![$0].int!) }.joined(separator: " ")
            #expect(line == ids, "\(text)")
        }
    }

    /// $LOOKOUT_VOCAB names the vocabulary; the binary vocabulary cache goes to $LOOKOUT_CACHE_DIR, else
    /// $XDG_CACHE_HOME/lookout, else ~/.cache/lookout, and --no-cache writes none.
    @Test func environmentVariables() throws {
        let folder = try CLI.scratch("tokenize-environment")
        defer { CLI.remove(folder) }
        try FileManager.default.copyItem(atPath: CLI.root + "/Vocab/clip_vocab.json", toPath: folder + "/vocab.json")
        let named = try CLI.run(["tokenize", "dog"], environment: ["LOOKOUT_VOCAB": folder + "/vocab.json"])
        #expect(named.status == 0 && named.stdout == "49406 1929 49407\n", "\(named.stderr)")
        let wrong = try CLI.run(["tokenize", "dog"], environment: ["LOOKOUT_VOCAB": folder + "/nothing.json"])
        #expect(wrong.status != 0 && wrong.stderr.contains(folder + "/nothing.json"))

        func cached(_ directory: String) -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter {
                $0.hasPrefix("clip-vocab-")
            }
        }
        let explicit = folder + "/explicit-cache"
        _ = try CLI.run(["tokenize", "dog"], environment: ["LOOKOUT_CACHE_DIR": explicit])
        #expect(cached(explicit).count == 1)
        let xdg = folder + "/xdg"
        _ = try CLI.run(["tokenize", "dog"], environment: ["XDG_CACHE_HOME": xdg])
        #expect(cached(xdg + "/lookout").count == 1)
        let home = folder + "/home"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        _ = try CLI.run(["tokenize", "--no-cache", "dog"], home: home)
        #expect(cached(home + "/.cache/lookout").isEmpty)
        let fromCache = try CLI.run(["tokenize", "dog"], home: home)
        #expect(cached(home + "/.cache/lookout").count == 1)
        #expect(fromCache.stdout == "49406 1929 49407\n")
        // A damaged cache entry is ignored (and replaced), never trusted.
        let entry = home + "/.cache/lookout/" + cached(home + "/.cache/lookout")[0]
        try Data(repeating: 0x41, count: 64).write(to: URL(fileURLWithPath: entry))
        let repaired = try CLI.run(["tokenize", "dog"], home: home)
        #expect(repaired.status == 0 && repaired.stdout == "49406 1929 49407\n")
    }
}
