import ArgumentParser
import LookoutEngine
import LookoutJSON
import LookoutSupport
import LookoutTextEncoder
import LookoutTokenizer
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

struct EmbedCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "embed",
        abstract: "Print the CLIP text embedding of each text (L2-normalised, as YOLO-World consumes it).",
        discussion: """
            One JSON array of floats per text, in order. Embeddings are cached in memory and on disk \
            (keyed by the weights, the vocabulary and the token ids), so repeated queries cost a look-up.

            Examples:
              lookout embed --text-model ViT-B-32.pt "red car" "dog"
              printf '"red car"\\n"dog"\\n' | lookout embed --text-model ViT-B-32.pt --jsonl
            """
    )

    @Argument(help: "Texts to embed.")
    var texts: [String] = []

    @Option(
        help: ArgumentHelp(
            "CLIP text encoder: OpenAI ViT-B-32.pt, Hugging Face or Lookout safetensors.", valueName: "path"))
    var textModel: String?

    @Option(
        help: ArgumentHelp("Model directory with a lookout-model.json (its text encoder is used).", valueName: "dir"))
    var model: String?

    @Flag(help: "Read one JSON string per line from standard input; write one JSON array per line.")
    var jsonl = false

    @Option(help: ArgumentHelp("CLIP vocabulary file (JSON).", valueName: "path"))
    var vocab: String?

    @Flag(help: "Do not read or write the caches (vocabulary and embeddings).")
    var noCache = false

    @Flag(help: "Report on standard error how many embeddings came from the cache and how long each stage took.")
    var timings = false

    func validate() throws {
        if jsonl == !texts.isEmpty {
            throw ValidationError(
                jsonl
                    ? "--jsonl reads texts from standard input; give no TEXT arguments with it."
                    : "Give at least one TEXT, or --jsonl.")
        }
        if textModel != nil && model != nil {
            throw ValidationError("Name the text encoder with --text-model PATH or --model DIR, not both.")
        }
    }

    func run() throws {
        var clock = Stopwatch()
        let tokenizer = try loadTokenizer(vocab, cache: !noCache)
        let loadedTokenizer = clock.lap()
        let path: String
        if let textModel {
            path = textModel
        } else if let model {
            path = try ModelManifest(directory: model).textEncoder.path
        } else {
            let directory = try EngineConfiguration.demoDirectory()
            printError("lookout: no model given, using the demo model's text encoder in \(directory)")
            path = try ModelManifest(directory: directory).textEncoder.path
        }
        let encoder = try CLIPTextEncoder(contentsOf: path)
        let loadedEncoder = clock.lap()
        let embedder = try TextEmbedder(
            tokenizer: tokenizer, encoder: encoder, cache: textEmbeddingCache(enabled: !noCache)
        )
        let inputs = jsonl ? try readJSONLines() : texts
        let (embeddings, report) = embedder.embed(inputs)
        let embedded = clock.lap()
        var out = ""
        for embedding in embeddings {
            out += "[" + embedding.map { "\($0)" }.joined(separator: ",") + "]\n"
        }
        print(out, terminator: "")
        if timings {
            printError(
                "vocabulary \(ms(loadedTokenizer)) ms, text encoder load \(ms(loadedEncoder)) ms, "
                    + "embed \(ms(embedded)) ms (\(report.cached) cached, \(report.computed) computed)")
        }
    }

    private func readJSONLines() throws -> [String] {
        var lines: [String] = []
        var number = 0
        while let line = readLine(strippingNewline: true) {
            number += 1
            lines.append(try jsonString(line, number: number))
        }
        return lines
    }
}

func ms(_ seconds: Double) -> String {
    let value = (seconds * 10_000).rounded() / 10
    return "\(value)"
}

func printError(_ text: String) {
    var line = FileName.shown(text) + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}
