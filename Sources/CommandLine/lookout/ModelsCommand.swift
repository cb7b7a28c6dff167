import ArgumentParser
import LookoutDetector
import LookoutEngine
import LookoutJSON
import LookoutSupport
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

struct ModelsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "models",
        abstract: "Fetch, inspect and convert models and weight files.",
        subcommands: [Fetch.self, Inspect.self, Convert.self, Verify.self, Calibrate.self, Tune.self]
    )

    struct Inspect: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Say what a weight file is: detector scale or text-encoder size, dtypes, tensors, metadata.",
            discussion: """
                Reads ultralytics checkpoints (yolov8s-worldv2.pt, …), OpenAI CLIP TorchScript archives \
                (ViT-B-32.pt), Hugging Face safetensors and Lookout's own safetensors. Nothing in a file is \
                executed: pickles are read by a restricted reader that only builds data.
                """)

        @Argument(help: "Weight file.")
        var file: String

        @Flag(help: "List every tensor with its shape and dtype.")
        var tensors = false

        func run() throws {
            let weights = try WeightFile.open(file)
            let summary = WeightSummary(weights)
            var out = "\(file)\n  file format: \(weights.format.rawValue)\n"
            switch ModelKind(weights) {
            case .detector(let detector) where detector.embedding != nil:
                out += "  model: \(detector)\n"
            case .detector(let detector):
                let runs = "Lookout runs: " + detector.modes.joined(separator: ", ")
                out +=
                    "  model: \(detector.family) \(detector.segments ? "segmentation" : "detection") model, scale \(detector.scale); prompts in the file: \(detector.modes.joined(separator: ", ")) (\(runs))\n"
                if let textTower = detector.textTower {
                    out += "  text tower: \(textTower) (named in the file's metadata, instead of the family's own)\n"
                }
            case .textEncoder(let text):
                out += "  model: \(text)\n"
            case .imageEncoder(let image):
                out += "  model: \(image)\n"
            case .unknown:
                out +=
                    "  model: not recognised (neither a YOLO-World or YOLOE detector nor a CLIP or MobileCLIP text encoder or CLIP image tower)\n"
            }
            if let text = weights.metadata[ActivationRanges.metadataKey] {
                if let calibration = ActivationRanges(serialized: text) {
                    out +=
                        "  int8 calibration: input ranges of \(calibration.ranges.count) convolutions from \(calibration.images) photos (runs with --precision int8)\n"
                } else {
                    out += "  int8 calibration: DAMAGED (\(ActivationRanges.metadataKey) is not readable)\n"
                }
            }
            let dtypes = summary.dtypes.sorted { $0.key.rawValue < $1.key.rawValue }.map {
                "\($0.key.rawValue) ×\($0.value)"
            }
            out +=
                "  tensors: \(summary.tensorCount) (\(dtypes.joined(separator: ", "))), \(summary.parameterCount) values\n"
            if !weights.attributes.isEmpty {
                out += "  attributes: "
                out += weights.attributes.keys.sorted().map { "\($0) \(weights.attributes[$0]!.shape)" }.joined(
                    separator: ", ")
                out += "\n"
            }
            if !weights.metadata.isEmpty { out += "  metadata:\n" }
            for key in weights.metadata.keys.sorted() {
                var value = weights.metadata[key]!
                if value.count > 200 { value = String(value.prefix(200)) + "… (\(value.count) characters)" }
                out += "    \(key): \(value)\n"
            }
            if tensors {
                for name in weights.names {
                    let view = weights.tensors[name]!
                    out += "  \(name) \(view.shape) \(view.dtype.rawValue)\n"
                }
            }
            print(out, terminator: "")
        }
    }

    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check a model directory: its manifest, its files' SHA-256 digests, and what each file is.",
            discussion:
                "A model directory holds lookout-model.json naming a detector and a text encoder (see Models/README.md)."
        )

        @Argument(help: "Model directory.")
        var directory: String

        func run() throws {
            let manifest = try ModelManifest(directory: directory)
            var failed = false
            var entries = [("detector", manifest.detector), ("text encoder", manifest.textEncoder)]
            if let image = manifest.imageEncoder { entries.append(("image encoder", image)) }
            for (role, entry) in entries {
                let digest = try SHA256.hex(ofFile: entry.path)
                var line = "\(role): \(Report.visible(entry.path))\n  sha256 \(digest)"
                if let expected = entry.sha256 {
                    line +=
                        expected == digest ? " (matches the manifest)" : " DOES NOT MATCH the manifest (\(expected))"
                    failed = failed || expected != digest
                } else {
                    line += " (the manifest records none)"
                }
                // The digest is reported even when the file is not a weight file at all.
                do {
                    line += "\n  \(ModelKind(try WeightFile.open(entry.path)))"
                } catch {
                    line += "\n  NOT READABLE: \(error.problem)"
                    failed = true
                }
                print(line)
            }
            if let scene = manifest.sceneTower {
                // A folder (open_clip, SigLIP) has no one digest: it is checked by loading it.
                var line = "scene tower: \(Report.visible(scene.path))"
                do {
                    let tower = try ImageTower(contentsOf: scene.path)
                    line += "\n  \(tower.family.rawValue) image tower, \(tower.embeddingSize)-d embeddings"
                    if tower.ownTextSize != nil { line += ", with its own text tower" }
                } catch {
                    line += "\n  NOT READABLE: \(error.problem)"
                    failed = true
                }
                print(line)
            }
            if failed { throw ExitCode.failure }
        }
    }

    struct Convert: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Write a weight file as Lookout's canonical safetensors (F32, or F16 kept with --keep-half; state-dict names).",
            discussion: """
                The result loads with one memory map and no conversion. Attributes that inference needs \
                (ultralytics txt_feats and head stride) are kept as tensors named "attribute.<name>", and \
                class names, BatchNorm epsilons and the source format as metadata.
                """)

        @Argument(help: "Weight file to convert.")
        var file: String

        @Option(name: .shortAndLong, help: ArgumentHelp("Output .safetensors file.", valueName: "path"))
        var output: String

        @Flag(help: "Keep F16 tensors as F16 (bits copied, values unchanged): half the size of all-F32.")
        var keepHalf = false

        @Option(
            help: ArgumentHelp(
                "The text tower a YOLOE detector was trained against, when not its family's MobileCLIP (\(TextTower.names)); written into the file's metadata, so that only that tower's queries are taken.",
                valueName: "name"))
        var textTower: String?

        func validate() throws {
            if let textTower, TextTower(named: textTower) == nil {
                throw ValidationError("--text-tower \(textTower): not a text tower (\(TextTower.names))")
            }
        }

        func run() throws {
            let weights = try WeightFile.open(file)
            var extra: [String: String] = [:]
            if let textTower, let tower = TextTower(named: textTower) {
                guard let (family, _) = DetectorFamilies.recognise(weights), family == YOLOENetwork.self else {
                    throw WeightsError(
                        path: file, kind: .wrongModel,
                        problem: "--text-tower names a YOLOE detector's text tower; this is not a YOLOE detector")
                }
                extra[TextTower.metadataKey] = tower.rawValue
            }
            try weights.writeCanonical(to: output, keepHalf: keepHalf, extraMetadata: extra)
            print("wrote \(output): \(weights.names.count) tensors")
        }
    }
}
