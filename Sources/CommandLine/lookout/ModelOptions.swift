import ArgumentParser
import Foundation
import LookoutCUDA
import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutJSON
import LookoutSupport
import LookoutTensor
import LookoutTextEncoder
import LookoutVideo
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

/// Model choice shared by the commands that detect.
struct ModelOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Model directory with a lookout-model.json naming a detector and a text encoder, or the name of a model `lookout models fetch` downloaded (yolov8s-worldv2), or demo-yoloe: the embedded YOLOE demo (masks, visual prompts).",
            valueName: "dir|name"),
        completion: .custom(ModelOptions.modelCompletions))
    var model: String?

    @Option(
        help: ArgumentHelp(
            "Detector weights: YOLO-World v2 (yolov8s-worldv2.pt) or YOLOE-v8/11 (yoloe-11s-seg.pt), or safetensors.",
            valueName: "path"))
    var detector: String?

    @Option(
        help: ArgumentHelp(
            "Text tower of the detector's family: CLIP (ViT-B-32.pt, or safetensors) for YOLO-World, MobileCLIP (mobileclip_blt.ts) for YOLOE.",
            valueName: "path"))
    var textModel: String?

    @Option(help: ArgumentHelp("CLIP vocabulary file (JSON).", valueName: "path"))
    var vocab: String?

    @Flag(help: "Do not read or write Lookout's caches (vocabulary, text embeddings).")
    var noCache = false

    @Flag(
        help: ArgumentHelp(
            "YOLOE-26 only: keep the one-to-one head's best boxes instead of running NMS, as ultralytics does with "
                + "nms=False (the top max(--max-det, 300) by score, those above --conf, at most --max-det). By default "
                + "YOLOE-26, like ultralytics, uses its one-to-many head and NMS."))
    var endToEnd = false

    @Option(
        help: ArgumentHelp(
            "The detector's arithmetic: fp32 (exact to ultralytics), bf16 (bfloat16 products summed in fp32 "
                + "through AVX-512 BF16 or AMX: faster, scores within about 1%) or int8 (8-bit weights and inputs "
                + "through AMX, AVX-512 VNNI, or AVX-512BW or AVX2 with 7-bit weights, for a detector `lookout models calibrate` made). fp32 where the CPU "
                + "lacks them. auto: the fastest of those this CPU and file allow, measured once per CPU model and "
                + "detector and kept in the cache; it says what it picked. On a GPU (--device cuda): fp32, or fp16 "
                + "or bf16 products on its tensor cores (summed in fp32).",
            valueName: "fp32|bf16|int8|fp16|auto"),
        completion: .list(Precision.allCases.map(\.rawValue) + ["fp16", "auto"]))
    var precision: String?

    @Option(
        help: ArgumentHelp(
            "Where the detector computes: cpu (the default), cuda or cuda:N (an NVIDIA GPU: needs the NVIDIA "
                + "driver, and NVRTC and cuBLAS from the CUDA toolkit or pip's nvidia-* packages, found where the "
                + "loader looks or in LOOKOUT_CUDA_PATH; fp32, or fp16 and bf16 on its tensor cores), or auto (the GPU where one works, else "
                + "the CPU). `lookout devices` shows what this machine has.",
            valueName: "cpu|cuda[:N]|auto"),
        completion: .list(["cpu", "cuda", "auto"]))
    var device: String?

    /// The device asked for (the CPU by default).
    var chosenDevice: ComputeDevice { device.flatMap(ComputeDevice.init) ?? .cpu }

    /// The GPU's products for `--precision fp16|bf16` (fp32 otherwise).
    var gpuArithmetic: GPUArithmetic {
        guard chosenDevice != .cpu, let precision else { return .fp32 }
        return GPUArithmetic(rawValue: precision) ?? .fp32
    }

    /// The precision asked for, or fp32 with a notice where the CPU cannot run it; for `auto`, the one
    /// ``AutomaticPrecision`` picks (said once), and fp32 on a GPU.
    var chosenPrecision: Precision {
        if precision == "auto" && chosenDevice != .cpu { return .fp32 }
        // fp16 is a GPU's alone (``gpuArithmetic``; fp32 where auto falls back to the CPU); bf16 on a GPU is its
        // tensor cores', whatever this CPU has.
        if precision == "fp16" { return .fp32 }
        if case .cuda = chosenDevice, precision == "bf16" { return .bf16 }
        // int8 on a named GPU is refused there (``EngineConfiguration/makeBackend``), whatever this CPU lacks.
        if case .cuda = chosenDevice, precision == "int8" { return .int8 }
        if precision == "auto" { return automaticPrecision() }
        let asked = Precision(rawValue: precision ?? "fp32") ?? .fp32
        guard asked.isNative else {
            let lacks = asked == .bf16 ? "AVX-512 BF16" : "AVX2"
            printError("lookout: --precision \(asked.rawValue): this CPU has no \(lacks); running in fp32.")
            return .fp32
        }
        return asked
    }

    func validate() throws {
        if let device, ComputeDevice(device) == nil {
            throw ValidationError("--device \(device): choose cpu, cuda, cuda:N (a GPU's number, from 0) or auto.")
        }
        if let precision, Precision(rawValue: precision) == nil && precision != "auto" && precision != "fp16" {
            throw ValidationError("--precision \(precision): choose fp32, bf16, int8, fp16 (on a GPU) or auto.")
        }
        if precision == "fp16" && chosenDevice == .cpu {
            throw ValidationError(
                "--precision fp16 runs on an NVIDIA GPU's tensor cores (--device cuda); on the CPU choose fp32, bf16, int8 or auto."
            )
        }
        if model != nil && (detector != nil || textModel != nil) {
            throw ValidationError("Give --model DIR, or --detector and --text-model, not both.")
        }
        if model == nil && detector == nil && textModel != nil {
            throw ValidationError("--text-model goes with --detector (or use --model DIR).")
        }
    }

    /// What the shell completes after `--model`: the embedded and fetched models' names, and the folders
    /// starting with what was typed.
    @Sendable static func modelCompletions(_ words: [String], _ index: Int, _ prefix: String) -> [String] {
        var names = EngineConfiguration.embeddedModels
        if let models = ResourceLocator.modelsDirectory(), let fetched = FileSystem.entries(of: models) {
            names += fetched.filter { FileSystem.access(models + "/" + $0 + "/" + ModelManifest.fileName, F_OK) == 0 }
        }
        let folder = prefix.lastIndex(of: "/").map { String(prefix[...$0]) } ?? ""
        for entry in FileSystem.entries(of: folder.isEmpty ? "." : folder) ?? []
        where !entry.hasPrefix(".") && FileSystem.isDirectory(folder + entry) {
            names.append(folder + entry + "/")
        }
        return names.filter { $0.hasPrefix(prefix) }
    }

    /// These options as a command line gives them again (a name stays a name, a path becomes absolute); nil for
    /// the default model.
    var arguments: String? {
        func quoted(_ path: String) -> String {
            let absolute = absolutePath(path)
            return absolute.contains(where: { " '\"$\\".contains($0) }) ? "'\(absolute)'" : absolute
        }
        if let model {
            return "--model " + (model.contains("/") || model.hasPrefix(".") ? quoted(model) : model)
        }
        guard let detector else { return nil }
        return "--detector \(quoted(detector))" + (textModel.map { " --text-model \(quoted($0))" } ?? "")
    }

    /// `--precision auto`'s pick for this detector, measured (or read from the cache) once a process, and said
    /// once. fp32 when the detector cannot be read: loading it then says why.
    func automaticPrecision() -> Precision {
        let configuration = configuration(precision: .fp32)
        let key = (try? configuration.resolveModel().detector) ?? ""
        return AutomaticPrecisionPicks.shared.pick(key) {
            guard let choice = try? AutomaticPrecision.choose(configuration, notice: { printError("lookout: \($0)") })
            else { return .fp32 }
            printError("lookout: \(choice.summary)")
            return choice.precision
        }
    }

    /// The library's configuration for these options.
    var configuration: EngineConfiguration { configuration(precision: chosenPrecision) }

    private func configuration(precision: Precision) -> EngineConfiguration {
        let choice: EngineConfiguration.Model
        if let model {
            choice = .directory(model)
        } else if let detector {
            choice = .files(detector: detector, textEncoder: textModel)
        } else {
            choice = .demo
        }
        var configuration = EngineConfiguration(model: choice, vocabulary: vocab, caches: !noCache)
        configuration.precision = precision
        configuration.oneToOne = endToEnd
        configuration.device = chosenDevice
        configuration.gpuArithmetic = gpuArithmetic
        return configuration
    }

    /// Loads the detector and the text encoder, and checks that they fit together. `textEmbeddings`: the
    /// queries come as embeddings (`--text-embeddings`), so `--detector` may come without `--text-model`.
    /// `promptFree`: the command runs a prompt-free detector (YOLOE -pf) as such (detect without queries); the
    /// others refuse one.
    func engine(textEmbeddings: Bool = false, promptFree: Bool = false) throws -> Engine {
        try load(textEmbeddings: textEmbeddings, promptFree: promptFree).engine
    }

    /// The engine and the detector file's fingerprint (what an index records about the model).
    func load(
        textEmbeddings: Bool = false, promptFree: Bool = false
    ) throws -> (
        engine: Engine, detectorFingerprint: String
    ) {
        if let model, let hint = notFetchedHint(model) { throw LookoutError(hint) }
        let (engine, loaded) = try Engine.load(
            configuration, notice: { printError("lookout: \($0)") },
            onDeviceFailure: { error in
                printError("lookout: the GPU failed: \(error.description)")
                Glibc.exit(1)
            })
        if let names = engine.network.promptFreeNames, !promptFree {
            throw ValidationError(
                "\(loaded.detectorPath) is a prompt-free model (its own \(names.count) names, no queries): for now only `lookout detect` without queries runs it."
            )
        }
        // A prompt-free detector (YOLOE -pf) needs no text tower.
        if detector != nil && textModel == nil && !textEmbeddings && engine.network.promptFreeNames == nil {
            throw ValidationError(
                "--detector needs --text-model FILE, the text tower of its family (YOLO-World: CLIP's ViT-B-32.pt; YOLOE-v8/11: ultralytics' mobileclip_blt.ts; YOLOE-26: mobileclip2_b.ts), or, with detect, --text-embeddings FILE: the queries as embeddings."
            )
        }
        if loaded.isDemo {
            printError(
                """
                lookout: no model given, using the demo model in \(loaded.directory ?? "Models/demo"): it knows coloured \
                shapes ("red star", "ring"), not real objects. For photos, `lookout models fetch` downloads the official \
                weights; then pass --model yolov8s-worldv2.
                """)
        }
        return (engine, loaded.detectorFingerprint)
    }
}

/// `--text-embeddings FILE` (detect): queries as the text tower's embeddings (``TextEmbeddingsFile``).
struct TextEmbeddingOptions: ParsableArguments {
    @Option(
        name: .customLong("text-embeddings"),
        help: ArgumentHelp(
            "Queries as precomputed text-tower embeddings (YOLO-World: CLIP; YOLOE: MobileCLIP): a safetensors file with one vector per label (its tensor names; -q picks some, else all), or an .npy N×D array labelled by -q in order.",
            valueName: "file"))
    var path: String?

    /// Gives `plan`'s texts (or, without typed queries, every label of the file) their embeddings from the file.
    func apply(to plan: inout QueryPlan, typed: Bool, engine: Engine) throws {
        guard let path else { return }
        let entries: [(label: String, embedding: [Float])]
        do {
            entries = try TextEmbeddingsFile.load(
                path, labels: typed ? plan.texts : nil, size: engine.network.embeddingSize)
        } catch let problem as TextEmbeddingsFile.Problem {
            throw ValidationError(problem.description)
        }
        if typed {
            for (index, entry) in entries.enumerated() { plan.setEmbedding(entry.embedding, forText: index) }
        } else {
            for entry in entries { plan.append(label: entry.label, embedding: entry.embedding) }
        }
    }
}

/// `--precision auto`'s picks in this process, by detector path: measured once however often the options are read.
final class AutomaticPrecisionPicks: @unchecked Sendable {
    static let shared = AutomaticPrecisionPicks()
    private let lock = NSLock()
    private var picks: [String: Precision] = [:]

    func pick(_ key: String, _ measure: () -> Precision) -> Precision {
        lock.lock()
        defer { lock.unlock() }
        if let pick = picks[key] { return pick }
        let pick = measure()
        picks[key] = pick
        return pick
    }
}
