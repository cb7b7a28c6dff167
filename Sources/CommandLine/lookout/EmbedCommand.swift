import ArgumentParser
import LookoutEngine
import LookoutImage
import LookoutJSON
import LookoutSupport
import LookoutTensor
import LookoutTextEncoder
import LookoutTokenizer
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

struct EmbedCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "embed",
        abstract: "Print the CLIP embedding of each text, or with --image of each photo (L2-normalised).",
        discussion: """
            One JSON array of floats per text, in order. Embeddings are cached in memory and on disk \
            (keyed by the weights, the vocabulary and the token ids), so repeated queries cost a look-up.

            With --image the arguments are photos (JPEG or PNG) and the CLIP image tower embeds them, as \
            OpenAI's clip.load(…).encode_image(preprocess(photo)) does: PIL's bicubic resize, centre crop, \
            normalisation. One JSON array per photo, in order; a photo that cannot be read gets `null` and \
            an error naming it (exit status 2). The tower comes from --image-model (OpenAI's ViT-B-32.pt \
            holds both towers), from --model DIR (its manifest's image_encoder, else its text encoder's \
            file), else the demo model's. Lookout applies a JPEG's EXIF orientation; PIL's Image.open does not.

            Examples:
              lookout embed --text-model ViT-B-32.pt "red car" "dog"
              printf '"red car"\\n"dog"\\n' | lookout embed --text-model ViT-B-32.pt --jsonl
              lookout embed --image --image-model ViT-B-32.pt beach.jpg cake.png
              lookout embed --image --image-model ~/models/ViT-B-32-256-datacomp beach.jpg
              lookout embed --text-model ~/models/ViT-B-32-256-datacomp "red car"
              lookout embed --text-model ~/models/siglip-base-patch16-224 "blauer Kreis"

            An open_clip model is read from its folder as Hugging Face holds it (open_clip_config.json \
            with open_clip_model.safetensors or open_clip_pytorch_model.bin): ViT towers with a class \
            token, GELU or quick_gelu, and the preprocessing its preprocess_cfg names (bicubic; \
            shortest side and crop, or squash). A SigLIP model is read from its transformers folder \
            (config.json, model.safetensors, preprocessor_config.json, spiece.model): its own image \
            processor, tokenizer and text tower.
            """
    )

    @Argument(help: "Texts to embed (photos with --image).")
    var texts: [String] = []

    @Flag(help: "The arguments are photos: embed them with the CLIP image tower.")
    var image = false

    @Option(
        help: ArgumentHelp(
            "CLIP image tower for --image: OpenAI ViT-B-32.pt (or any OpenAI CLIP file with visual.* tensors), an open_clip model's folder (open_clip_config.json with open_clip_model.safetensors), or a SigLIP model's folder (config.json, model.safetensors), or `multilingual` (the demo's SigLIP tower).",
            valueName: "path"))
    var imageModel: String?

    @Option(
        help: ArgumentHelp(
            "CLIP text encoder: OpenAI ViT-B-32.pt, Hugging Face or Lookout safetensors, or an open_clip or SigLIP model's folder, or `multilingual` (the demo's SigLIP tower, for English, German, French, Spanish and Chinese).",
            valueName: "path"))
    var textModel: String?

    @Option(
        help: ArgumentHelp(
            "Model directory with a lookout-model.json, or a model's name as --model takes it everywhere (yolov8s-worldv2, demo-yoloe): its text encoder is used, with --image its image tower.",
            valueName: "model"))
    var model: String?

    @Flag(help: "Read one JSON string per line from standard input; write one JSON array per line.")
    var jsonl = false

    @Option(help: ArgumentHelp("CLIP vocabulary file (JSON).", valueName: "path"))
    var vocab: String?

    @Flag(help: "Do not read or write the caches (vocabulary and embeddings).")
    var noCache = false

    @Flag(help: "Report on standard error how many embeddings came from the cache and how long each stage took.")
    var timings = false

    @Option(
        help: ArgumentHelp(
            "Where the image tower computes with --image: cpu (the default), cuda or cuda:N (an NVIDIA GPU, in fp32: "
                + "the photos' 8-bit pixels cross over and the activations stay there from the first layer to the "
                + "last), or auto (the GPU where one works, else the CPU).",
            valueName: "cpu|cuda[:N]|auto"),
        completion: .list(["cpu", "cuda", "auto"]))
    var device: String?

    func validate() throws {
        if let device, ComputeDevice(device) == nil {
            throw ValidationError("--device \(device): choose cpu, cuda, cuda:N (a GPU's number, from 0) or auto.")
        }
        if device != nil && !image {
            throw ValidationError(
                "--device is where --image's tower computes: add --image (texts are embedded on the CPU).")
        }
        if jsonl == !texts.isEmpty {
            throw ValidationError(
                jsonl
                    ? "--jsonl reads texts from standard input; give no TEXT arguments with it."
                    : "Give at least one TEXT, or --jsonl.")
        }
        if textModel != nil && model != nil {
            throw ValidationError("Name the text encoder with --text-model PATH or --model DIR, not both.")
        }
        if image && (jsonl || textModel != nil) {
            throw ValidationError(
                "--image embeds photos: use --image-model PATH or --model DIR (not --text-model, --jsonl).")
        }
        if imageModel != nil && !image {
            throw ValidationError("--image-model is for photos: add --image.")
        }
        if imageModel != nil && model != nil {
            throw ValidationError("Name the image tower with --image-model PATH or --model DIR, not both.")
        }
    }

    func run() throws {
        if image { return try embedPhotos() }
        if let model, let hint = notFetchedHint(model) { throw LookoutError(hint) }
        var clock = Stopwatch()
        let tokenizer = try loadTokenizer(vocab, cache: !noCache)
        let loadedTokenizer = clock.lap()
        let path: String
        if let textModel {
            path = try EngineConfiguration.towerPath(textModel)
        } else if let model {
            path = try ModelManifest(directory: EngineConfiguration.modelDirectory(model)).textEncoder.path
        } else {
            let directory = try EngineConfiguration.demoDirectory()
            printError("lookout: no model given, using the demo model's text encoder in \(directory)")
            path = try ModelManifest(directory: directory).textEncoder.path
        }
        let inputs = jsonl ? try readJSONLines() : texts
        _ = clock.lap()
        let embeddings: [[Float]]
        var report = TextEmbedder.Report()
        let loadedEncoder: Double
        if SigLIPModel.isModel(path), let own = try ImageTower.sceneText(path, tokenizer: tokenizer) {
            // A SigLIP folder: its own tokenizer and text tower (not cached).
            loadedEncoder = clock.lap()
            embeddings = own.embed(inputs)
            report.computed = inputs.count
        } else {
            let encoder =
                try OpenCLIPModel.isModel(path)
                ? OpenCLIPModel.textEncoder(contentsOf: path) : CLIPTextEncoder(contentsOf: path)
            loadedEncoder = clock.lap()
            let embedder = try TextEmbedder(
                tokenizer: tokenizer, encoder: encoder, cache: textEmbeddingCache(enabled: !noCache))
            (embeddings, report) = embedder.embed(inputs)
        }
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

    /// `--image`: one JSON array per photo (null for a photo that cannot be read), in batches of 8.
    private func embedPhotos() throws {
        if let model, let hint = notFetchedHint(model) { throw LookoutError(hint) }
        var clock = Stopwatch()
        let path: String
        if let imageModel {
            path = try EngineConfiguration.towerPath(imageModel)
        } else if let model {
            let manifest = try ModelManifest(directory: EngineConfiguration.modelDirectory(model))
            path = manifest.imageEncoder?.path ?? manifest.textEncoder.path
        } else if let demo = try EngineConfiguration(model: .demo).imageTowerPath() {
            path = demo
        } else {
            throw ValidationError(
                "--image needs a CLIP image tower: --image-model ViT-B-32.pt, or --model DIR whose manifest names one."
            )
        }
        // An open_clip or SigLIP folder brings its own preprocessing; OpenAI's files take clip._transform's.
        let tower = try ImageTower(contentsOf: path)
        var configuration = EngineConfiguration()
        configuration.device = device.flatMap(ComputeDevice.init) ?? .cpu
        var backend: any ComputeBackend =
            try configuration.makeBackend(
                notice: { printError("lookout: \($0)") },
                onFailure: { error in
                    printError("lookout: the GPU failed: \(error.description)")
                    Glibc.exit(1)
                }
            ).backend ?? CPUBackend.shared
        if !(backend is CPUBackend) && !tower.keepsActivationsOnGPU {
            printError(
                "lookout: --device \(configuration.device): a SigLIP tower computes on the CPU (its pooling head has no GPU form)"
            )
            backend = CPUBackend.shared
        }
        let loaded = clock.lap()
        var failures = 0
        var computeSeconds = 0.0
        for start in stride(from: 0, to: texts.count, by: 8) {
            let batch = Array(texts[start..<min(start + 8, texts.count)])
            var inputs: [[Float]?] = []
            for photo in batch {
                do {
                    inputs.append(
                        try CLIPPreprocessing.input(
                            try FileContents.read(photo, maximumSize: 1 << 30), name: photo, transform: tower.transform)
                    )
                } catch {
                    printError("lookout: \(error)")
                    inputs.append(nil)
                }
            }
            var compute = Stopwatch()
            var embeddings = tower.encode(inputs.compactMap { $0 }, backend: backend).makeIterator()
            computeSeconds += compute.lap()
            var out = ""
            for input in inputs {
                if input != nil, let embedding = embeddings.next() {
                    out += "[" + embedding.map { "\($0)" }.joined(separator: ",") + "]\n"
                } else {
                    out += "null\n"
                    failures += 1
                }
            }
            print(out, terminator: "")
        }
        if timings {
            printError(
                "image tower load \(ms(loaded)) ms, preprocessing and embedding \(ms(clock.lap())) ms for \(texts.count) photo\(texts.count == 1 ? "" : "s") (tower \(ms(computeSeconds)) ms)"
            )
        }
        if failures > 0 {
            printError("lookout: \(failures) of \(texts.count) photos could not be read")
            throw failures == texts.count ? ExitCode.failure : ExitCode.partialFailure
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
