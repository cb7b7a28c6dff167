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
        #expect(try CLI.run(["tokenize"]).status != 0)
        #expect(try CLI.run(["tokenize", "--jsonl", "extra"]).status != 0)
    }
}
