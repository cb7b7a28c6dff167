import ArgumentParser
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

/// Thresholds shared by the commands that detect.
struct ThresholdOptions: ParsableArguments {
    // `.unconditional`: a value that starts with "-" (`--conf -1`) is read as the value, and then refused
    // with the option's range, instead of "Missing value".
    @Option(parsing: .unconditional, help: "Confidence threshold: keep detections scoring above it.")
    var conf: Float = 0.25

    @Option(parsing: .unconditional, help: "IoU above which a lower-scoring box of the same query is suppressed.")
    var iou: Double = 0.7

    @Option(parsing: .unconditional, help: "At most this many detections per image.")
    var maxDet = 300

    @Flag(
        inversion: .prefixedNo,
        help: ArgumentHelp(
            "Suppress overlapping boxes across queries too (one NMS for all queries).",
            discussion: "Default: off for YOLO-World, on for YOLOE (as ultralytics' predict does for each)."))
    var agnostic: Bool?

    @Option(parsing: .unconditional, help: "Network input size: the longer side is scaled to it (multiple of 32).")
    var imgsz = 640

    func validate() throws { try Self.check(conf: conf, iou: iou, maxDet: maxDet, imgsz: imgsz) }

    /// The ranges of these options, for every command that takes them.
    static func check(conf: Float, iou: Double, maxDet: Int, imgsz: Int) throws {
        guard conf >= 0 && conf < 1 else { throw ValidationError("--conf must be in [0, 1), got \(conf).") }
        guard iou > 0 && iou <= 1 else { throw ValidationError("--iou must be in (0, 1], got \(iou).") }
        guard maxDet > 0 else { throw ValidationError("--max-det must be positive, got \(maxDet).") }
        guard imgsz >= 32 && imgsz <= 4096 && imgsz % 32 == 0 else {
            throw ValidationError("--imgsz must be a multiple of 32 from 32 to 4096, got \(imgsz).")
        }
    }

    /// The thresholds for `network`: without `--agnostic` or `--no-agnostic`, its family's default.
    func options(for network: any DetectorNetwork) -> SuppressionOptions {
        var options = SuppressionOptions()
        options.confidence = conf
        options.iou = iou
        options.maximumDetections = maxDet
        options.agnostic = agnostic ?? network.agnosticSuppressionByDefault
        return options
    }
}

/// `--query-conf`: thresholds for single queries of a fixed query set (detect only).
struct QueryThresholdOptions: ParsableArguments {
    @Option(
        name: .customLong("query-conf"), parsing: .unconditionalSingleValue,
        help: ArgumentHelp(
            "A threshold for one query, as QUERY=VALUE (repeatable), e.g. --query-conf \"red car=0.1\".",
            valueName: "query=value"))
    var queryThresholds: [String] = []

    func validate() throws {
        for entry in queryThresholds {
            guard let (_, value) = Self.queryThreshold(entry) else {
                throw ValidationError("--query-conf takes QUERY=VALUE, got \"\(entry)\".")
            }
            guard value.isFinite && value >= 0 && value < 1 else {
                throw ValidationError("--query-conf \"\(entry)\": the threshold must be a number in [0, 1).")
            }
        }
    }

    /// `options` with the per-query thresholds of `queries`.
    func apply(to options: SuppressionOptions, queries: [String]) throws -> SuppressionOptions {
        var options = options
        for entry in queryThresholds {
            guard let (query, value) = Self.queryThreshold(entry) else {
                throw ValidationError("--query-conf takes QUERY=VALUE, got \"\(entry)\"")
            }
            guard let index = queries.firstIndex(of: query) else {
                throw ValidationError(
                    "--query-conf names \"\(query)\", which is not one of the queries: \(queries.joined(separator: ", "))"
                )
            }
            options.perClassConfidence[index] = value
        }
        return options
    }

    /// `QUERY=VALUE` (the last `=` splits) with VALUE a number; nil otherwise.
    static func queryThreshold(_ entry: String) -> (query: String, value: Float)? {
        guard let equals = entry.lastIndex(of: "="), let value = Float(entry[entry.index(after: equals)...]) else {
            return nil
        }
        return (String(entry[..<equals]).trimmingCharacters(in: " "), value)
    }
}

/// `--image-model` and `--image-query-conf`: photos as queries (`detect --query-image`, `@crop.jpg` in `query`).
struct ImagePromptOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The CLIP image tower that embeds query photos (default: the model's own: the demo model's, the manifest's image_encoder, or --text-model when it is OpenAI's ViT-B-32.pt).",
            valueName: "path"))
    var imageModel: String?

    @Option(
        parsing: .unconditional,
        help:
            "Confidence threshold of photo queries (default: the best single threshold measured on the demo model, BENCHMARKS.md)."
    )
    var imageQueryConf: Float = ImagePrompts.defaultConfidence

    func validate() throws {
        guard imageQueryConf >= 0 && imageQueryConf < 1 else {
            throw ValidationError("--image-query-conf must be in [0, 1).")
        }
    }

    /// The embeddings of `paths` (labels: their file names); no tower is loaded when there are none.
    func embed(_ paths: [String], model: ModelOptions, engine: Engine) throws -> [(label: String, embedding: [Float])] {
        guard !paths.isEmpty else { return [] }
        let prompts = try ImagePrompts(
            path: try imageModel.map(EngineConfiguration.towerPath), configuration: model.configuration, engine: engine)
        return try paths.map { (ImagePrompts.label($0), try prompts.embedding(path: $0)) }
    }
}

/// Says which queries CLIP cuts (it reads 75 tokens between the start and end tokens).
func warnAboutLongQueries(_ queries: [String], engine: Engine) {
    guard let tokenizer = engine.embedder?.tokenizer else { return }
    for query in queries {
        let count = tokenizer.encode(query).count
        if count > 75 {
            printError(
                "lookout: the query \"\(Report.visible(String(query.prefix(40))))…\" is \(count) tokens; CLIP reads the first 75"
            )
        }
    }
}
