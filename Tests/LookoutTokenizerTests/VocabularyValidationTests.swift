import Foundation
import LookoutJSON
import LookoutTokenizer
import Testing

/// A vocabulary file that is missing, truncated or inconsistent is a clear error naming the file and
/// the problem.
@Suite struct VocabularyValidationTests {
    /// A small but well-formed vocabulary: the 512 byte symbols, `merges`, and the two special tokens.
    static func document(
        merges: [String] = ["a b", "ab c</w>"], extraTokens: [(String, Int64)] = [],
        editing: (inout [(String, JSONValue)]) -> Void = { _ in }
    ) -> String {
        var encoder: [(String, JSONValue)] = []
        let symbols = ByteEncoder.bytesInVocabularyOrder.map { String(Character(ByteEncoder.scalarForByte[Int($0)])) }
        for symbol in symbols { encoder.append((symbol, .int(Int64(encoder.count)))) }
        for symbol in symbols { encoder.append((symbol + "</w>", .int(Int64(encoder.count)))) }
        for merge in merges {
            encoder.append((merge.replacingOccurrences(of: " ", with: ""), .int(Int64(encoder.count))))
        }
        encoder.append(("<|startoftext|>", .int(Int64(encoder.count))))
        encoder.append(("<|endoftext|>", .int(Int64(encoder.count))))
        for (token, id) in extraTokens { encoder.append((token, .int(id))) }
        var root: [(String, JSONValue)] = [
            ("encoder", .object(encoder)), ("merges", .array(merges.map { .string($0) })),
            ("bos_token", .string("<|startoftext|>")), ("eos_token", .string("<|endoftext|>")),
            ("context_length", .int(77)),
        ]
        editing(&root)
        return JSONValue.object(root).serialized
    }

    func load(_ text: String) throws(VocabularyError) -> CLIPVocabulary {
        try CLIPVocabulary(json: Array(text.utf8), path: "test.json")
    }

    func expectProblem(_ text: String, containing fragment: String) {
        do {
            _ = try load(text)
            Issue.record("expected an error containing \(fragment)")
        } catch {
            #expect(error.description.contains("test.json") && error.kind == .invalid)
            #expect(error.problem.contains(fragment), "\(error.problem)")
        }
    }

    @Test func wellFormedSmallVocabularyLoadsAndMerges() throws {
        let vocabulary = try load(Self.document())
        #expect(vocabulary.count == 516)
        let ids = vocabulary.bpe(Array("abc".utf8))
        #expect(ids.map { vocabulary.token($0) } == ["abc</w>"])
        #expect(vocabulary.bpe(Array("ab".utf8)).map { vocabulary.token($0) } == ["a", "b</w>"])
    }

    @Test func missingFileNamesThePath() {
        do {
            _ = try CLIPVocabulary(contentsOf: "/nonexistent/clip_vocab.json")
            Issue.record("expected an error")
        } catch {
            #expect(error.description.contains("/nonexistent/clip_vocab.json"))
            #expect(error.problem.contains("No such file") && error.kind == .unreadable)
        }
    }

    @Test func truncatedFile() throws {
        let full = try String(contentsOfFile: Fixtures.vocabularyPath, encoding: .utf8)
        let cut = String(full.utf8.prefix(full.utf8.count / 2))!
        expectProblem(cut, containing: "not valid JSON")
    }

    @Test func notAnObject() {
        expectProblem("[1, 2]", containing: "not a JSON object")
        expectProblem("{\"merges\": []}", containing: "missing \"encoder\"")
        expectProblem(Self.document { $0.removeAll { $0.0 == "merges" } }, containing: "missing \"merges\"")
    }

    @Test func duplicateIds() {
        expectProblem(Self.document(extraTokens: [("zz", 5)]), containing: "duplicate id 5")
    }

    @Test func idOutOfRange() {
        expectProblem(Self.document(extraTokens: [("zz", 9999)]), containing: "outside")
    }

    @Test func wrongCounts() {
        // One extra token with the next free id: consistent ids, but the count no longer adds up.
        expectProblem(Self.document(extraTokens: [("zz", 516)]), containing: "516")
        expectProblem(Self.document(extraTokens: [("zz", 516)]), containing: "make 516")
    }

    @Test func mergeThatProducesNoEntry() {
        let text = Self.document(merges: ["a b", "ab c</w>"]).replacingOccurrences(of: "\"abc</w>\"", with: "\"xyz\"")
        expectProblem(text, containing: "does not produce a vocabulary entry")
    }

    @Test func mergeWithUnknownSymbol() {
        let text = Self.document(merges: ["a b", "ab c</w>"]).replacingOccurrences(
            of: "\"ab c</w>\"", with: "\"q@ c</w>\"")
        expectProblem(text, containing: "not in the vocabulary")
    }

    @Test func malformedMerge() {
        let text = Self.document(merges: ["a b", "ab c</w>"]).replacingOccurrences(
            of: "\"ab c</w>\"", with: "\"abc</w>\"")
        expectProblem(text, containing: "not two symbols")
    }

    @Test func missingByteSymbol() {
        let text = Self.document().replacingOccurrences(of: "\"Ā\":188", with: "\"ĀĀ\":188")
        expectProblem(text, containing: "byte symbol")
    }

    @Test func nonIntegerId() {
        let text = Self.document().replacingOccurrences(of: "\"!\":0", with: "\"!\":\"0\"")
        expectProblem(text, containing: "not an integer")
    }

    @Test func badContextLength() {
        expectProblem(
            Self.document { $0[4] = ("context_length", .int(1)) }, containing: "context_length")
    }
}
