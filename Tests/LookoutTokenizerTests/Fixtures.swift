import LookoutJSON
import LookoutSupport
import LookoutTokenizer

/// Paths of the repository and the reference fixtures (made by `scripts/reference/make_tokenizer_corpus.py`).
enum Fixtures {
    static let repositoryRoot: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path
    }()
    static let directory = repositoryRoot + "/Tests/LookoutTokenizerTests/Fixtures"
    static let vocabularyPath = repositoryRoot + "/Vocab/clip_vocab.json"

    /// The shipped vocabulary, loaded once for all tests.
    static let tokenizer: CLIPTokenizer = {
        do {
            return try CLIPTokenizer(vocabularyFile: vocabularyPath)
        } catch {
            fatalError("\(error)")
        }
    }()

    /// One JSON object per line.
    static func records(_ name: String) throws -> [JSONNode] {
        let bytes = try FileContents.read(directory + "/" + name)
        var records: [JSONNode] = []
        for line in bytes.split(separator: UInt8(ascii: "\n")) where !line.isEmpty {
            let document = try JSONDocument(bytes: Array(line))
            records.append(document.root)
        }
        return records
    }

    static func ids(_ node: JSONNode?) -> [Int32] {
        guard let node else { return [] }
        return (0..<node.count).map { Int32(node[$0].int!) }
    }

    static func strings(_ node: JSONNode?) -> [String] {
        guard let node else { return [] }
        return (0..<node.count).map { node[$0].string! }
    }
}
