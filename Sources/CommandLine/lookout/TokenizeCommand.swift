import ArgumentParser
import LookoutEngine
import LookoutJSON
import LookoutTextEncoder
import LookoutTokenizer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

struct TokenizeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tokenize",
        abstract: "Print the CLIP token ids of each text.",
        discussion: """
            The ids are those of OpenAI CLIP `clip.tokenize(text, truncate=True)`, which ultralytics' \
            YOLO-World uses: a start token (49406), the text's tokens, an end token (49407), cut to \
            77 positions and padded with 0.

            Examples:
              lookout tokenize "a photo of a red car" "dog, cat"
              lookout tokenize --tokens "naïve café"
              printf '"red car"\\n"dog"\\n' | lookout tokenize --jsonl
            """
    )

    @Argument(help: "Texts to tokenize (each one separately).")
    var texts: [String] = []

    @Flag(
        help:
            "Read one JSON string per line from standard input; write one JSON array of all context-length ids per line."
    )
    var jsonl = false

    @Flag(help: "Also print the token string of each id.")
    var tokens = false

    @Flag(help: "Print all context-length ids, padding included.")
    var full = false

    @Option(help: ArgumentHelp("CLIP vocabulary file (JSON).", valueName: "path"))
    var vocab: String?

    @Flag(help: "Do not read or write Lookout's cache (a binary copy of the vocabulary).")
    var noCache = false

    func validate() throws {
        if jsonl && !texts.isEmpty {
            throw ValidationError("--jsonl reads texts from standard input; give no TEXT arguments with it.")
        }
        if !jsonl && texts.isEmpty {
            throw ValidationError("Give at least one TEXT, or --jsonl to read JSON strings from standard input.")
        }
    }

    func run() throws {
        let tokenizer = try loadTokenizer(vocab, cache: !noCache)
        if jsonl {
            try runJSONLines(tokenizer)
            return
        }
        var out = ""
        for text in texts {
            var ids = tokenizer.tokenize(text)
            if !full, let end = ids.firstIndex(of: tokenizer.vocabulary.endOfText) {
                ids.removeSubrange((end + 1)...)
            }
            out += ids.map(String.init).joined(separator: " ") + "\n"
            if tokens {
                out += "  " + tokenizer.tokenStrings(ids).map { $0 }.joined(separator: " ") + "\n"
            }
        }
        print(out, terminator: "")
    }

    private func runJSONLines(_ tokenizer: CLIPTokenizer) throws {
        var lineNumber = 0
        var out = ""
        while let line = readLine(strippingNewline: true) {
            lineNumber += 1
            let text: String
            do {
                text = try jsonString(line, number: lineNumber)
            } catch {
                print(out, terminator: "")
                throw error
            }
            out += "[" + tokenizer.tokenize(text).map(String.init).joined(separator: ",") + "]\n"
            if out.utf8.count > 1 << 16 {
                print(out, terminator: "")
                out = ""
            }
        }
        print(out, terminator: "")
    }
}

/// The JSON string on standard-input line `number` (1-based), or an error naming the line.
func jsonString(_ line: String, number: Int) throws -> String {
    do {
        guard let string = try JSONDocument(text: line).root.string else {
            throw LookoutError("standard input line \(number): not a JSON string")
        }
        return string
    } catch let error as JSONError {
        throw LookoutError("standard input line \(number): not a JSON string (\(error))")
    }
}

/// The tokenizer of `path` (or of the vocabulary that ships with Lookout), through the cache unless `cache` is off.
func loadTokenizer(_ path: String?, cache: Bool) throws -> CLIPTokenizer {
    try EngineConfiguration(vocabulary: path, caches: cache).loadTokenizer()
}

/// The text-embedding cache in force, nil when caches are off.
func textEmbeddingCache(enabled: Bool) -> TextEmbeddingCache? {
    EngineConfiguration(caches: enabled).textEmbeddingCache()
}

/// An error for the user: printed as is, exit status 1.
struct LookoutError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }

    /// An index without whole-photo embeddings, asked for scenes or similar photos: how to get them for the
    /// embedded models (their own tower, unless `--no-image-model` left it out) and for downloaded ones.
    static func noImageTower(_ path: String) -> LookoutError {
        LookoutError(
            "\(path) holds no whole-photo embeddings. Index the folder again without --no-image-model (the demo "
                + "models carry their CLIP image tower); a downloaded model without one takes "
                + "--image-model ViT-B-32.pt")
    }
}
