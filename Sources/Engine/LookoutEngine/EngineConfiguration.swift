import LookoutCUDA
import LookoutDetector
import LookoutSupport
import LookoutTensor
import LookoutTextEncoder
import LookoutTokenizer
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

/// Which model an engine runs and where its supporting files are: everything a program needs to say to
/// get an ``Engine`` (the command line, a server, or any other Swift program), resolved by
/// ``Engine/load(_:)``.
public struct EngineConfiguration: Sendable, Equatable {
    public enum Model: Sendable, Equatable {
        /// The demo model that ships with Lookout (`Models/demo`, found beside the executable or its
        /// checkout, under `share/lookout/`, or through `$LOOKOUT_DEFAULT_MODEL`).
        case demo
        /// A model directory with a `lookout-model.json` naming the detector and the text encoder, or the name
        /// of a model `lookout models fetch` put in ``ResourceLocator/modelsDirectory()``.
        case directory(String)
        /// A detector and a text encoder file; a detector alone (no text encoder) when queries come as
        /// embeddings (``TextEmbeddingsFile``).
        case files(detector: String, textEncoder: String?)
    }

    public var model: Model
    /// The CLIP vocabulary file; nil: the one that ships with Lookout (or `$LOOKOUT_VOCAB`).
    public var vocabulary: String?
    /// Whether to read and write the caches (the vocabulary's binary form, text embeddings).
    public var caches: Bool
    /// The cache folder; nil: `$LOOKOUT_CACHE_DIR`, else `$XDG_CACHE_HOME/lookout`, else `~/.cache/lookout`.
    public var cacheDirectory: String?
    /// The arithmetic of the detector's convolutions (``Precision``); fp32, exact to the reference, by default.
    public var precision: Precision = .fp32
    /// The CLIP towers' weights for ``precision``: bf16 for bf16 and int8 where the CPU has it (the towers
    /// have no int8 form), fp32 otherwise, and fp32 on a GPU (`cuda`), which rounds them to its own 16 bits
    /// (a layer packed for the CPU's bf16 would be computed on the CPU).
    public var towerPrecision: Precision {
        if case .cuda = device { return .fp32 }
        return precision != .fp32 && Precision.bf16.isNative ? .bf16 : .fp32
    }
    /// Records the range of every convolution's input as the detector runs (`lookout models calibrate`), or nil.
    public var recorder: ActivationRecorder?
    /// YOLOE-26's one-to-one head, its boxes kept by top-k instead of NMS (ultralytics' `nms=False`); other
    /// detectors are refused with it. Off: the one-to-many head and NMS, as ultralytics predicts by default.
    public var oneToOne = false
    /// How the CPU computes: the convolution algorithm, freed-memory reuse, threads (``KernelSettings``). The
    /// defaults, with `LOOKOUT_CONVOLUTION`, `LOOKOUT_KEEP_FREED_MEMORY` and `LOOKOUT_THREADS` as overrides.
    public var kernels = KernelSettings.environment
    /// Where the network computes (``ComputeDevice``): the CPU by default.
    public var device = ComputeDevice.cpu
    /// On a GPU, the operands of the convolutions' products (``GPUArithmetic``): fp16 or bf16 run on the tensor
    /// cores. A ``precision`` of bf16 on a GPU means bf16 here. Ignored on the CPU.
    public var gpuArithmetic = GPUArithmetic.fp32

    public init(model: Model = .demo, vocabulary: String? = nil, caches: Bool = true, cacheDirectory: String? = nil) {
        self.model = model
        self.vocabulary = vocabulary
        self.caches = caches
        self.cacheDirectory = cacheDirectory
    }

    /// The cache folder in force (nil when caches are off or no folder can be named).
    public var resolvedCacheDirectory: String? {
        guard caches else { return nil }
        return cacheDirectory ?? ResourceLocator.cacheDirectory()
    }

    /// The detector and text-encoder files this configuration names, and the model directory when there is
    /// one. For `.demo`, the demo model's directory.
    public func resolveModel() throws -> (detector: String, textEncoder: String?, directory: String?) {
        switch model {
        case .files(let detector, let textEncoder):
            return (detector, textEncoder, nil)
        case .directory(let given):
            let directory = Self.modelDirectory(given)
            let manifest = try ModelManifest(directory: directory)
            return (manifest.detector.path, manifest.textEncoder.path, directory)
        case .demo:
            let directory = try Self.demoDirectory()
            let manifest = try ModelManifest(directory: directory)
            return (manifest.detector.path, manifest.textEncoder.path, directory)
        }
    }

    /// The CLIP image tower that goes with this configuration's model, or nil when it has none: the manifest's
    /// `image_encoder` for a model directory (the demo model's included); for separate files, the text model
    /// file when it also holds the image tower (OpenAI's `ViT-B-32.pt` holds both).
    public func imageTowerPath() throws -> String? {
        switch model {
        case .files(_, let textEncoder):
            guard let textEncoder else { return nil }
            let file = try WeightFile.open(textEncoder)
            return file.names.contains { $0.hasPrefix("visual.") } ? textEncoder : nil
        case .directory(let directory):
            return try ModelManifest(directory: Self.modelDirectory(directory)).imageEncoder?.path
        case .demo:
            return try ModelManifest(directory: Self.demoDirectory()).imageEncoder?.path
        }
    }

    /// The whole-photo tower an index stores by default: the manifest's `scene_tower` when it names one (the demo
    /// model's multilingual SigLIP, which reads queries in five languages), else the image tower
    /// (``imageTowerPath()``).
    public func sceneTowerPath() throws -> String? {
        let manifest: ModelManifest
        switch model {
        case .files: return try imageTowerPath()
        case .directory(let directory): manifest = try ModelManifest(directory: Self.modelDirectory(directory))
        case .demo: manifest = try ModelManifest(directory: Self.demoDirectory())
        }
        return manifest.sceneTower?.path ?? manifest.imageEncoder?.path
    }

    /// The whole-photo towers that ship with the demo model, by the name `--image-model` and `--text-model`
    /// take, and their files or folders inside the demo model's: `multilingual` is a small SigLIP trained on the
    /// demo's scenes with captions in English, German, French, Spanish and Chinese (Models/demo/scene-tower, the
    /// demo index's default); `clip` the demo's CLIP image tower, in the detector's text space.
    public static let embeddedTowers = ["multilingual": "scene-tower", "clip": "image-encoder.safetensors"]

    /// The tower `given` names: an embedded tower's folder (``embeddedTowers``) when `given` is such a name and
    /// no file or folder of that name is here; otherwise `given` itself.
    public static func towerPath(_ given: String) throws -> String {
        guard let folder = embeddedTowers[given], access(given, F_OK) != 0 else { return given }
        return try demoDirectory() + "/" + folder
    }

    /// The models that ship with Lookout beside the default one, by the name `--model` takes: `Models/NAME`
    /// beside the demo model's folder, wherever that was found.
    public static let embeddedModels = ["demo-yoloe"]

    /// The folder `--model` names: `given` itself when it holds a manifest or is a path; a bare name
    /// (`yolov8s-worldv2`) is a fetched model's folder when there is one, else an embedded model's
    /// (``embeddedModels``).
    public static func modelDirectory(_ given: String) -> String {
        let manifest = given + "/" + ModelManifest.fileName
        guard access(manifest, F_OK) != 0, !given.contains("/"), !given.hasPrefix(".") else { return given }
        if let models = ResourceLocator.modelsDirectory(),
            access(models + "/" + given + "/" + ModelManifest.fileName, F_OK) == 0
        {
            return models + "/" + given
        }
        if embeddedModels.contains(given), let demo = try? demoDirectory() {
            let sibling =
                (demo.split(separator: "/", omittingEmptySubsequences: false).dropLast()
                + [Substring(given)]).joined(separator: "/")
            if access(sibling + "/" + ModelManifest.fileName, F_OK) == 0 { return sibling }
        }
        return given
    }

    /// The demo model's directory.
    public static func demoDirectory() throws -> String {
        let manifest = try ResourceLocator.find(
            "Models/demo/lookout-model.json", environment: "LOOKOUT_DEFAULT_MODEL", what: "The demo model",
            hint: """
                Pass --model DIR (a folder with lookout-model.json), or --detector FILE and --text-model FILE. \
                `lookout models fetch` downloads the official weights (then --model yolov8s-worldv2); see Models/README.md. A lookout copied on its \
                own finds no demo model: install it with scripts/install PREFIX, which puts the model beside it.
                """)
        return String(manifest.dropLast("/lookout-model.json".count))
    }

    /// The tokenizer of `vocabulary` (or the one that ships with Lookout), through the binary cache.
    public func loadTokenizer() throws -> CLIPTokenizer {
        let file =
            try vocabulary
            ?? ResourceLocator.find(
                "Vocab/clip_vocab.json", environment: "LOOKOUT_VOCAB", what: "CLIP vocabulary",
                hint: "Pass --vocab PATH, or set LOOKOUT_VOCAB.")
        return CLIPTokenizer(
            vocabulary: try CLIPVocabulary.load(contentsOf: file, cacheDirectory: resolvedCacheDirectory))
    }

    /// The text-embedding cache (memory and, with a cache folder, disk); nil when caches are off.
    public func textEmbeddingCache() -> TextEmbeddingCache? {
        guard caches else { return nil }
        return TextEmbeddingCache(directory: resolvedCacheDirectory.map { $0 + "/text-embeddings" })
    }
}

/// What ``Engine/load(_:)`` loaded.
public struct LoadedModel: Sendable {
    public let detectorPath: String
    /// nil for a detector loaded without a text encoder.
    public let textEncoderPath: String?
    /// The model directory, when the model came from one (the demo model's included).
    public let directory: String?
    /// Identity of the detector file (what an index records about the model).
    public let detectorFingerprint: String
    public let isDemo: Bool
}

extension Engine {
    /// Loads the detector, the text encoder and the tokenizer that `configuration` names, and checks that
    /// they fit together.
    /// `notice`: what `--device auto` says when it falls back to the CPU; `onDeviceFailure`: called when an
    /// operation on the GPU fails (``CUDABackend/onFailure``).
    public static func load(
        _ configuration: EngineConfiguration, notice: (String) -> Void = { _ in },
        onDeviceFailure: (@Sendable (CUDAError) -> Void)? = nil
    ) throws -> (engine: Engine, model: LoadedModel) {
        let (detectorPath, textPath, directory) = try configuration.resolveModel()
        // bf16's and int8's per-layer choices, kept beside the other caches, per CPU model.
        LayerChoices.shared.configure(
            file: configuration.resolvedCacheDirectory.map { $0 + "/layer-choices.txt" },
            cpu: AutomaticPrecision.cpuModel(), notice: notice)
        let weights = try WeightFile.open(detectorPath)
        let (backend, networkPrecision) = try configuration.makeBackend(notice: notice, onFailure: onDeviceFailure)
        let network = try openDetector(
            weights, precision: networkPrecision, recorder: configuration.recorder,
            oneToOne: configuration.oneToOne, kernels: configuration.kernels)
        var embedder: TextEmbedder? = nil
        if let textPath, let names = network.promptFreeNames {
            throw WeightsError(
                path: textPath, kind: .incompatibleModels,
                problem:
                    "\(detectorPath) is a prompt-free \(network.familyName) model (its own \(names.count) names, no queries): it takes no text model"
            )
        }
        if let textPath {
            let encoder = try CLIPTextEncoder(contentsOf: textPath, precision: configuration.towerPrecision)
            let family = encoder.configuration.family
            guard family == network.textTower else {
                throw WeightsError(
                    path: textPath, kind: .incompatibleModels,
                    problem:
                        "this is a \(family.rawValue) text encoder, but \(network.familyName) (\(detectorPath)) reads its queries through \(network.textTower.file); another tower's embeddings would mean nothing to it (lookout detect also takes the queries as that tower's embeddings, --text-embeddings FILE)"
                )
            }
            embedder = try TextEmbedder(
                tokenizer: configuration.loadTokenizer(), encoder: encoder, cache: configuration.textEmbeddingCache())
        }
        let engine = try Engine(network: network, embedder: embedder, kernels: configuration.kernels, backend: backend)
        let model = LoadedModel(
            detectorPath: detectorPath, textEncoderPath: textPath, directory: directory,
            detectorFingerprint: weights.fingerprint(), isDemo: configuration.model == .demo)
        return (engine, model)
    }
}
