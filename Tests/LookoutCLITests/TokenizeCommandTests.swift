import Foundation
import LookoutJSON
import Testing

/// `lookout tokenize` run as a process, as a user (or the reference-comparison script) runs it.
@Suite struct TokenizeCommandTests {
    static let repositoryRoot: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path
    }()

    /// The `lookout` executable built beside this test bundle.
    static let executable: URL = {
        let bundle = URL(
            fileURLWithPath: CommandLine.arguments.first { $0.contains(".xctest") } ?? CommandLine.arguments[0])
        var directory = bundle.deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("lookout").path),
            directory.path != "/"
        {
            directory = directory.deletingLastPathComponent()
        }
        return directory.appendingPathComponent("lookout")
    }()

    struct Result {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    static func run(_ arguments: [String], input: String? = nil, environment: [String: String] = [:]) throws -> Result {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let stdout = Pipe()
        let stderr = Pipe()
        let stdin = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = stdin
        try process.run()
        if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
        try stdin.fileHandleForWriting.close()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus, stdout: String(decoding: out, as: UTF8.self),
            stderr: String(decoding: err, as: UTF8.self))
    }

    @Test func printsIdsOfEachText() throws {
        let result = try Self.run(["tokenize", "a photo of a cat", "person"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "49406 320 1125 539 320 2368 49407\n49406 2533 49407\n")
    }

    @Test func showsTokenStrings() throws {
        let result = try Self.run(["tokenize", "--tokens", "red car"])
        #expect(result.stdout.contains("<|startoftext|> red</w> car</w> <|endoftext|>"))
    }

    @Test func jsonLinesMatchTheReferenceCorpus() throws {
        let path = Self.repositoryRoot + "/Tests/LookoutTokenizerTests/Fixtures/clip_tokenizer_golden.jsonl"
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init)
        var input = ""
        var expected: [String] = []
        for line in lines {
            let record = try JSONDocument(text: line).root
            JSONValue.string(record["text"]!.string!).write(to: &input)
            input += "\n"
            expected.append("[" + (0..<77).map { String(record["ids"]![$0].int!) }.joined(separator: ",") + "]")
        }
        let result = try Self.run(["tokenize", "--jsonl"], input: input)
        #expect(result.status == 0, "\(result.stderr)")
        let actual = result.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
        #expect(actual.count == expected.count)
        let differing = zip(actual, expected).filter { $0 != $1 }.count
        #expect(differing == 0)
    }

    @Test func aLineThatIsNotAJSONStringIsAnErrorNamingTheLine() throws {
        let result = try Self.run(["tokenize", "--jsonl"], input: "\"dog\"\n\"cat\"\n{\"text\": 1}\n\"bird\"\n")
        #expect(result.status != 0)
        #expect(result.stderr.contains("line 3"), "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").count == 2)
    }

    @Test func anotherVocabularyFile() throws {
        let missing = try Self.run(["tokenize", "--vocab", "/nonexistent/vocab.json", "dog"])
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("/nonexistent/vocab.json"))
        let explicit = try Self.run(["tokenize", "--vocab", Self.repositoryRoot + "/Vocab/clip_vocab.json", "dog"])
        #expect(explicit.stdout == "49406 1929 49407\n")
    }

    @Test func usageErrors() throws {
        #expect(try Self.run(["tokenize"]).status != 0)
        #expect(try Self.run(["tokenize", "--jsonl", "extra"]).status != 0)
    }
}
