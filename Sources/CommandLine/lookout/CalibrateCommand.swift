import ArgumentParser
import LookoutEngine
import LookoutImage
import LookoutJSON
import LookoutSupport
import LookoutTensor
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

extension ModelsCommand {
    struct Calibrate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Calibrate a detector for --precision int8: record each convolution's input range on photos.",
            discussion: """
                Runs the detector in fp32 on the photos with the queries and records the smallest and largest \
                value every convolution's input takes. The result is a copy of the detector (Lookout's \
                safetensors, the weights unchanged) that carries those ranges; run it with --precision int8:

                  lookout models calibrate --model yolov8s-worldv2 ~/Pictures/sample -o s-int8.safetensors
                  lookout detect --detector s-int8.safetensors --text-model ViT-B-32.pt --precision int8 photo.jpg

                Calibration is a step of its own, not done at load, so that it runs once (a few seconds per photo), \
                an int8 run is repeatable (the same file gives the same detections wherever the int8 path is the same: \
                8-bit weights with AVX-512 VNNI, 7-bit without: AVX-512BW or AVX2; each layer runs int8 or fp32, \
                whichever this CPU computes faster, kept in the cache), and loading \
                stays instant. Use photos like those you will search — 50 to 200 are plenty — and the kind of \
                queries you will type (by default the detector's built-in class names). Without the detector's text \
                tower (YOLOE's MobileCLIP), give the queries' embeddings:

                  lookout models calibrate --detector yoloe-11s-seg.pt --text-embeddings q.npy -q a,b,c photos/ -o y.safetensors
                """)

        @OptionGroup var modelOptions: ModelOptions

        @Argument(
            help: ArgumentHelp(
                "Photos, or folders of photos (.jpg, .jpeg, .png), to calibrate on.", valueName: "photo|folder"))
        var photos: [String]

        @Option(
            name: .shortAndLong,
            help: ArgumentHelp("Output .safetensors file (the calibrated detector).", valueName: "path"))
        var output: String

        @Option(
            name: .shortAndLong,
            help: ArgumentHelp(
                "Queries to run, comma-separated (default: the detector's built-in class names).", valueName: "text"))
        var queries: String?

        @OptionGroup var textEmbeddings: TextEmbeddingOptions

        @Option(help: ArgumentHelp("Input size, as for detect.", valueName: "pixels"))
        var imgsz = 640

        @Option(help: ArgumentHelp("Use at most this many photos (the first, in name order).", valueName: "n"))
        var limit = 500

        func validate() throws {
            guard (modelOptions.precision ?? "fp32") == "fp32" else {
                throw ValidationError("calibration runs the detector in fp32; leave out --precision.")
            }
            guard !modelOptions.endToEnd else {
                throw ValidationError(
                    "calibration records the convolutions' inputs, whichever head; leave out --end-to-end.")
            }
            guard imgsz >= 32 && imgsz <= 4096 else { throw ValidationError("--imgsz \(imgsz): choose 32 to 4096.") }
            guard limit >= 1 else { throw ValidationError("--limit \(limit): give at least 1.") }
        }

        func run() throws {
            let files = try Self.photoFiles(photos).prefix(limit)
            guard !files.isEmpty else {
                throw LookoutError(
                    "no photos (.jpg, .jpeg, .png) in \(photos.joined(separator: ", ")): nothing to calibrate on")
            }
            let recorder = ActivationRecorder()
            guard modelOptions.chosenDevice == .cpu else {
                throw LookoutError(
                    "models calibrate records the ranges the CPU's convolutions see: run it without --device (on the CPU); the calibrated file then runs anywhere int8 does"
                )
            }
            var configuration = modelOptions.configuration
            configuration.recorder = recorder
            let (engine, loaded) = try Engine.load(configuration)
            let weights = try WeightFile.open(loaded.detectorPath)
            var labels =
                queries.map {
                    $0.split(separator: ",").map { $0.trimmingCharacters(in: " \t") }.filter { !$0.isEmpty }
                } ?? (textEmbeddings.path == nil ? weights.classNames : [])
            // The queries' embeddings from a file (every label it holds, or those -q names), or the text tower's.
            var text: [Float]? = nil
            if let path = textEmbeddings.path {
                let entries: [(label: String, embedding: [Float])]
                do {
                    entries = try TextEmbeddingsFile.load(
                        path, labels: labels.isEmpty ? nil : labels, size: engine.network.embeddingSize)
                } catch let problem as TextEmbeddingsFile.Problem {
                    throw LookoutError(problem.description)
                }
                labels = entries.map(\.label)
                text = entries.flatMap(\.embedding)
            } else if engine.embedder == nil {
                throw LookoutError(
                    "no text tower: give the detector's (--text-model FILE) or the queries' embeddings (--text-embeddings FILE)"
                )
            }
            guard !labels.isEmpty else {
                throw LookoutError("no queries: give -q \"dog, red car\" (the detector has no built-in class names)")
            }
            let progress = ProgressReporter(
                terminal: isatty(2) == 1, doing: "calibrating", did: "calibrated on", unit: "photos")
            var skipped: [String] = []
            for (index, path) in files.enumerated() {
                progress.report(done: index, total: files.count)
                do {
                    let prepared = try engine.prepare(path: path, size: imgsz)
                    if let text {
                        _ = engine.detect(prepared, labels: labels, text: text)
                    } else {
                        _ = engine.detect(prepared, queries: labels)
                    }
                    recorder.finishedImage()
                } catch {
                    skipped.append("\(FileName.shown(path)): \(error.problem)")
                }
            }
            progress.finish()
            for line in skipped { printError("lookout: skipped \(line)") }
            let (ranges, images) = recorder.recorded
            guard images > 0 else { throw LookoutError("none of the photos could be read: nothing to calibrate on") }
            let calibration = ActivationRanges(ranges: ranges, images: images)
            try weights.writeCanonical(
                to: output, keepHalf: true,
                extraMetadata: [
                    ActivationRanges.metadataKey: calibration.serialized,
                    "lookout.int8_queries": JSONValue.array(labels.map { .string($0) }).serialized,
                ])
            print(
                "wrote \(output): \(ranges.count) convolution input ranges from \(images) photo\(images == 1 ? "" : "s") "
                    + "and \(labels.count) quer\(labels.count == 1 ? "y" : "ies"); run it with --precision int8")
        }

        /// The photos named, folders replaced by their photos (not descending further), in name order.
        static func photoFiles(_ given: [String]) throws -> [String] {
            var found: [String] = []
            for path in given {
                var info = stat()
                guard FileSystem.stat(path, &info) == 0 else {
                    throw LookoutError("\(FileName.shown(path)): \(String(cString: strerror(errno)))")
                }
                guard (info.st_mode & S_IFMT) == S_IFDIR else {
                    found.append(path)
                    continue
                }
                guard let entries = FileSystem.entries(of: path) else {
                    throw LookoutError(
                        "\(FileName.shown(path)): cannot read the folder: \(String(cString: strerror(errno)))")
                }
                let names = entries.filter { name in
                    let lower = name.lowercased()
                    return !name.hasPrefix(".")
                        && (lower.hasSuffix(".jpg") || lower.hasSuffix(".jpeg") || lower.hasSuffix(".png"))
                }
                found += names.sorted().map { path + "/" + $0 }
            }
            return found
        }
    }
}
