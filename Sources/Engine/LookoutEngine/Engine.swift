import Dispatch
import LookoutCUDA
import LookoutDetector
import LookoutImage
import LookoutSupport
import LookoutTensor
import LookoutTextEncoder
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Time spent in each stage of a detection, in seconds.
public struct StageTimings: Sendable, Codable, Equatable {
    public var decode = 0.0
    public var preprocess = 0.0
    public var textEncode = 0.0
    public var backbone = 0.0
    public var neckAndHead = 0.0
    public var suppression = 0.0

    public init() {}

    public var total: Double { decode + preprocess + textEncode + backbone + neckAndHead + suppression }

    /// Named stages in pipeline order, in milliseconds.
    public var milliseconds: [(String, Double)] {
        [
            ("decode", decode), ("preprocess", preprocess), ("text_encode", textEncode), ("backbone", backbone),
            ("neck_head", neckAndHead), ("nms", suppression), ("total", total),
        ].map { ($0.0, $0.1 * 1000) }
    }
}

/// A decoded, letterboxed photo with its backbone features: what a new query set reuses.
public struct PreparedImage: Sendable {
    public let name: String
    public let width: Int
    public let height: Int
    public let letterbox: Letterbox
    public internal(set) var features: [FeatureMap]
    public var timings: StageTimings
}

/// Detections of one image for one query set.
public struct ImageDetections: Sendable, Codable, Equatable {
    public struct Item: Sendable, Codable, Equatable {
        public let label: String
        public let queryIndex: Int
        public let score: Float
        /// `x1, y1, x2, y2` in the original image's pixels.
        public let box: [Float]
        /// With a segmentation model (YOLOE): the detection's mask at the photo's size, as ultralytics'
        /// `predict(retina_masks=True)` computes it.
        public var mask: BinaryMask? = nil
    }

    public let image: String
    public let width: Int
    public let height: Int
    public let detections: [Item]
    public let timings: StageTimings
}

/// The detection pipeline: photo → letterbox → backbone → text-guided neck and head → NMS → original
/// pixels (ultralytics `predict`), with the image features kept so that new queries skip the backbone.
public final class Engine: Sendable {
    public let network: any DetectorNetwork
    public let embedder: TextEmbedder?
    /// The threads the network's loops run on (several engines may share one).
    public let pool: ComputePool

    /// Checks that the detector and the text encoder fit together (embedding sizes).
    /// `kernels`: how the CPU backend computes (its pool's threads where ``KernelSettings/threads`` is set and
    /// no pool is given).
    /// `backend`: what the network computes on (a GPU's ``ComputeBackend``); nil: the CPU, on the pool.
    public convenience init(
        network: any DetectorNetwork, embedder: TextEmbedder?, pool: ComputePool? = nil,
        kernels: KernelSettings = .environment, backend: (any ComputeBackend)? = nil
    ) throws(WeightsError) {
        if let embedder, embedder.encoder.configuration.embeddingSize != network.embeddingSize {
            throw WeightsError(
                path: embedder.encoder.path, kind: .incompatibleModels,
                problem:
                    "this text encoder makes \(embedder.encoder.configuration.embeddingSize)-d embeddings but the detector \(network.path) expects \(network.embeddingSize)-d: they do not belong together"
            )
        }
        let threads = kernels.threads ?? ComputePool.shared.threadCount
        let pool = pool ?? (threads == ComputePool.shared.threadCount ? .shared : ComputePool(threads: threads))
        self.init(checked: network, embedder: embedder, pool: pool, kernels: kernels, backend: backend)
    }

    private init(
        checked network: any DetectorNetwork, embedder: TextEmbedder?, pool: ComputePool, kernels: KernelSettings,
        backend: (any ComputeBackend)?
    ) {
        self.network = network
        self.embedder = embedder
        self.pool = pool
        self.kernels = kernels
        self.backend = backend ?? CPUBackend(pool: pool, settings: kernels)
    }

    /// How the backend computes.
    public let kernels: KernelSettings

    /// What the network computes on (``ComputeBackend``): the CPU, on ``pool``, or a GPU (the lanes of
    /// ``sharingWeights(pool:)`` share it).
    public let backend: any ComputeBackend

    /// The arithmetic its results depend on (what caches and indexes key them by): the network's
    /// (``YOLOWorldNetwork/arithmetic``), and for int8 also the CLIP towers', which are bf16 only where the CPU has
    /// it (with fp32 and bf16 the towers follow the network); on a GPU computing in fp16 or bf16, that.
    public var arithmetic: String {
        // A GPU's fp16 or bf16 products on the fp32 network.
        if let gpu = backend as? CUDABackend, gpu.arithmetic != .fp32 { return gpu.arithmetic.rawValue }
        guard network.precision == .int8, network.arithmetic.hasSuffix(")") else { return network.arithmetic }
        return network.arithmetic.dropLast() + ", towers \(embedder?.encoder.precision.rawValue ?? "fp32"))"
    }

    /// An engine on the same weights (network and text encoder, shared) computing on `pool`: a lane that
    /// works on one photo while another engine works on the next.
    public func sharingWeights(pool: ComputePool) -> Engine {
        Engine(
            checked: network, embedder: embedder, pool: pool, kernels: kernels,
            backend: backend is CPUBackend ? nil : backend)
    }

    /// Decodes, letterboxes (`size`, auto padding to a multiple of 32) and runs the backbone.
    public func prepare(
        path: String, size: Int = 640, pixelLimit: Int = ImageFile.defaultPixelLimit
    ) throws(ImageError) -> PreparedImage {
        var timings = StageTimings()
        var clock = Stopwatch()
        let image = try ImageFile.read(path, pixelLimit: pixelLimit)
        timings.decode = clock.lap()
        var prepared = prepare(image: image, name: path, size: size)
        prepared.timings.decode = timings.decode
        return prepared
    }

    /// `square`: letterboxed to `size × size` (ultralytics' `LetterBox(auto=False)`, as its visual-prompt predictor
    /// prepares a reference photo) rather than to the nearest multiple of the stride.
    public func prepare(image: Image, name: String, size: Int = 640, square: Bool = false) -> PreparedImage {
        var timings = StageTimings()
        var clock = Stopwatch()
        let letterbox = Letterbox(width: image.width, height: image.height, size: size, auto: !square)
        let input = networkInput(image, letterbox: letterbox)
        timings.preprocess = clock.lap()
        // Recorded once per network and input size where the backend can (a GPU's graph), then replayed.
        let network = self.network, backend = self.backend
        let key = ReplayKey(network: network, stage: "image features", sizes: [input.height, input.width])
        let features = backend.replay(key, [input]) { network.imageFeatures($0[0], backend: backend) }
        backend.settle()  // the features may be used on another thread (re-query, the feature store)
        timings.backbone = clock.lap()
        return PreparedImage(
            name: name, width: image.width, height: image.height, letterbox: letterbox, features: features,
            timings: timings)
    }

    /// The network's input: on a GPU from the photo's bytes; else resize, padding and planes in one pass per row,
    /// bands of rows across the pool. The same floats either way.
    func networkInput(_ image: Image, letterbox: Letterbox) -> FeatureMap {
        let pool = self.pool
        return backend.letterbox(
            image.pixels, width: image.width, height: image.height, channels: image.channels,
            plan: Self.plan(letterbox, for: image))
            ?? FeatureMap(
                channels: 3, height: letterbox.height, width: letterbox.width,
                data: letterbox.tensor(of: image) { count, body in pool.parallelFor(count, chunk: 1, body) })
    }

    /// The letterbox as a backend computes it (``ComputeBackend/letterbox(_:width:height:channels:plan:)``).
    public static func plan(_ letterbox: Letterbox, for image: Image, padding: UInt8 = 114) -> LetterboxPlan {
        var plan = LetterboxPlan(
            width: letterbox.width, height: letterbox.height, resizedWidth: letterbox.resizedWidth,
            resizedHeight: letterbox.resizedHeight, top: letterbox.top, left: letterbox.left, padding: padding)
        if let tables = letterbox.resizeTables(for: image) {
            (plan.sourceX, plan.alpha0, plan.alpha1, plan.xmax) =
                (tables.sourceX, tables.alpha0, tables.alpha1, tables.xmax)
            (plan.rowTop, plan.rowBottom, plan.beta0, plan.beta1) =
                (tables.top, tables.bottom, tables.beta0, tables.beta1)
        }
        return plan
    }

    /// Embeds the queries (through the cache) and detects them in a prepared image.
    public func detect(
        _ prepared: PreparedImage, queries: [String], options: SuppressionOptions = .init()
    ) -> ImageDetections {
        guard let embedder else { preconditionFailure("an engine without a text encoder needs text features") }
        var clock = Stopwatch()
        let (embeddings, _) = embedder.embed(queries)
        let seconds = clock.lap()
        var result = detect(prepared, labels: queries, text: embeddings.flatMap { $0 }, options: options)
        var timings = result.timings
        timings.textEncode = seconds
        result = ImageDetections(
            image: result.image, width: result.width, height: result.height, detections: result.detections,
            timings: timings)
        return result
    }

    /// The text features of a plan's texts (`plan.texts.count × embeddingSize`): through the embedding
    /// cache, embedding queries (photos) as given.
    public func embed(_ plan: QueryPlan) -> (features: [Float], cached: Int) {
        let words = plan.texts.indices.filter { plan.embedded[$0] == nil }
        var (embeddings, cached): ([[Float]], Int) = ([], 0)
        if !words.isEmpty {
            guard let embedder else { preconditionFailure("an engine without a text encoder needs text features") }
            let (computed, report) = embedder.embed(words.map { plan.texts[$0] })
            (embeddings, cached) = (computed, report.cached)
        }
        var rows = [[Float]](repeating: [], count: plan.texts.count)
        for (row, index) in words.enumerated() { rows[index] = embeddings[row] }
        for (index, embedding) in plan.embedded { rows[index] = embedding }
        return (rows.flatMap { $0 }, cached)
    }

    /// What an index's stored regions are scored against for a text-tower embedding: the embedding itself for
    /// YOLO-World, YOLOE's `get_tpe` of it (the head's auxiliary text network) for YOLOE.
    public func regionQuery(_ text: [Float]) -> [Float] {
        network.classEmbeddings(text, classes: 1)
    }

    /// Detects typed queries (``QuerySyntax``) in one image: ``prepare(_:options:)`` then ``detect(_:_:textEncode:)``.
    /// For several images, prepare the query once.
    public func detect(
        _ prepared: PreparedImage, queries: [Query], options: SuppressionOptions = .init()
    ) -> ImageDetections {
        detect(prepared, prepare(QueryPlan(queries), options: options))
    }

    /// Neck and head for a plan: every text enters the neck; a query scores each anchor with the best of
    /// its texts (before thresholds and NMS); negative queries are marked for ``detections(_:options:)``.
    public func score(_ prepared: PreparedImage, plan: QueryPlan, text: [Float]) -> ScoredImage {
        var scored = score(prepared, labels: plan.texts, text: text, asIs: plan.asIs)
        if !plan.isPlain { scored = scored.merging(groups: plan.groups, labels: plan.labels) }
        scored.negatives = plan.negatives
        return scored
    }

    /// Detects with given text features (`labels.count × embeddingSize`, L2-normalised as CLIP gives them).
    public func detect(
        _ prepared: PreparedImage, labels: [String], text: [Float], options: SuppressionOptions = .init()
    )
        -> ImageDetections
    {
        precondition(text.count == labels.count * network.embeddingSize, "text features do not match the labels")
        let scored = score(prepared, labels: labels, text: text)
        return detections(scored, options: options)
    }

    /// Neck and head for one query set: the raw scores that any threshold can then be applied to.
    /// `asIs`: rows of `text` that are class embeddings already (YOLOE visual prompts).
    public func score(
        _ prepared: PreparedImage, labels: [String], text: [Float], asIs: Set<Int> = []
    ) -> ScoredImage {
        var timings = prepared.timings
        var clock = Stopwatch()
        let result = network.score(prepared.features, text: text, classes: labels.count, asIs: asIs, backend: backend)
        timings.neckAndHead = clock.lap()
        return ScoredImage(
            prepared: prepared, labels: labels, output: result.output, timings: timings, masks: result.masks)
    }

    /// Thresholds, NMS and scaling to the photo's pixels (milliseconds: a new threshold costs only this).
    public func detections(_ scored: ScoredImage, options: SuppressionOptions) -> ImageDetections {
        var timings = scored.timings
        var clock = Stopwatch()
        let prepared = scored.prepared
        var kept: [Detection]
        // YOLOE-26's one-to-one head is kept by top-k, every other head by NMS.
        let backend = self.backend
        let keep: ([Float], Int, SuppressionOptions) -> [Detection] =
            network.keepsTopK
            ? { NonMaxSuppression.topK($0, classes: $1, options: $2) }
            : {
                NonMaxSuppression.run($0, classes: $1, options: $2) {
                    backend.suppress(
                        corners: $0, scores: $1, offsets: $2, count: $3,
                        candidates: SuppressionOptions.maximumCandidates, threshold: $4, maximum: $5)
                }
            }
        if scored.negatives.isEmpty {
            kept = keep(scored.output, scored.labels.count, options)
        } else {
            // Negative queries take no place among the kept boxes: keep without the cap, drop what a
            // higher-scoring negative box overlaps (agnostic NMS already did; top-k does not suppress), then the
            // negatives, then cap. Top-k keeps its own k candidates (max(max-det, 300)), uncapped below that.
            var uncapped = options
            uncapped.maximumDetections = network.keepsTopK ? max(options.maximumDetections, 300) : Int.max
            let all = keep(scored.output, scored.labels.count, uncapped)
            let negative = all.filter { scored.negatives.contains($0.classIndex) }
            kept = all.filter { box in
                !scored.negatives.contains(box.classIndex)
                    && !negative.contains { $0.score > box.score && Double(Self.iou($0.box, box.box)) > options.iou }
            }
            if kept.count > options.maximumDetections { kept.removeLast(kept.count - options.maximumDetections) }
        }
        let scaled = NonMaxSuppression.scaleBoxes(
            kept, inputWidth: prepared.letterbox.width, inputHeight: prepared.letterbox.height,
            imageWidth: prepared.width, imageHeight: prepared.height)
        var items = scaled.map {
            ImageDetections.Item(
                label: scored.labels[$0.classIndex], queryIndex: $0.classIndex, score: $0.score, box: $0.box)
        }
        if let masks = scored.masks {
            // ultralytics drops a detection whose mask is empty.
            items = zip(items, scaled).compactMap { item, detection in
                let mask = MaskProcessing.photoMask(
                    masks, anchor: detection.anchor, box: detection.box, photoWidth: prepared.width,
                    photoHeight: prepared.height)
                guard mask.area > 0 else { return nil }
                var item = item
                item.mask = mask
                return item
            }
        }
        timings.suppression = clock.lap()
        return ImageDetections(
            image: prepared.name, width: prepared.width, height: prepared.height, detections: items, timings: timings)
    }
}

extension Engine {
    /// Intersection over union of two `x1, y1, x2, y2` boxes.
    static func iou(_ a: [Float], _ b: [Float]) -> Float {
        let width = max(min(a[2], b[2]) - max(a[0], b[0]), 0)
        let height = max(min(a[3], b[3]) - max(a[1], b[1]), 0)
        let intersection = width * height
        guard intersection > 0 else { return 0 }
        return intersection / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - intersection)
    }
}

/// The padding query of the official YOLO-World demos (field notes, fact 2): appended to the query set
/// because it changes the other queries' scores (the neck takes a max over all queries); its own
/// detections are dropped.
public enum PaddingQuery {
    public static let text = " "

    /// `queries` with the padding query appended (unless it is already there).
    public static func appended(to queries: [String]) -> [String] {
        queries.contains(text) ? queries : queries + [text]
    }
}

extension ImageDetections {
    /// The same detections without those of the padding query.
    public func droppingPadding() -> ImageDetections {
        ImageDetections(
            image: image, width: width, height: height, detections: detections.filter { $0.label != PaddingQuery.text },
            timings: timings)
    }
}

/// The network's raw output for one image and one query set.
public struct ScoredImage: Sendable {
    public let prepared: PreparedImage
    public let labels: [String]
    /// `(4 + labels.count) × anchors`, as ultralytics' inference output.
    public let output: [Float]
    public var timings: StageTimings
    /// Queries that are never reported; they remove the boxes they overlap with a higher score (``Query``).
    public var negatives: Set<Int> = []
    /// With a segmentation model: mask coefficients per anchor and the prototypes.
    public var masks: MaskPrototypes? = nil

    public init(
        prepared: PreparedImage, labels: [String], output: [Float], timings: StageTimings, negatives: Set<Int> = [],
        masks: MaskPrototypes? = nil
    ) {
        self.prepared = prepared
        self.labels = labels
        self.output = output
        self.timings = timings
        self.negatives = negatives
        self.masks = masks
    }

    /// Scores per group of texts (indices into `labels`): boxes unchanged, each group's score the best of its
    /// members' at each anchor. Groups of one are plain queries.
    public func merging(groups: [[Int]], labels: [String]) -> ScoredImage {
        let texts = self.labels.count
        let anchors = output.count / (4 + texts)
        var merged = [Float](repeating: 0, count: (4 + groups.count) * anchors)
        merged[0..<(4 * anchors)] = output[0..<(4 * anchors)]
        for (g, members) in groups.enumerated() {
            let target = (4 + g) * anchors
            let first = (4 + members[0]) * anchors
            merged[target..<(target + anchors)] = output[first..<(first + anchors)]
            for member in members.dropFirst() {
                let source = (4 + member) * anchors
                for a in 0..<anchors where output[source + a] > merged[target + a] {
                    merged[target + a] = output[source + a]
                }
            }
        }
        return ScoredImage(prepared: prepared, labels: labels, output: merged, timings: timings, masks: masks)
    }

    /// The same scores without the image features (enough to re-threshold; frees the backbone outputs).
    public func withoutFeatures() -> ScoredImage {
        var light = prepared
        light.features = []
        return ScoredImage(
            prepared: light, labels: labels, output: output, timings: timings, negatives: negatives, masks: masks)
    }
}

/// Splits a query line as `lookout detect -q` takes it: comma-separated, trimmed, duplicates collapsed
/// (first kept), empty parts dropped. Returns the queries and the number of empty parts dropped.
public func parseQueries(_ line: String) -> (queries: [String], emptyParts: Int) {
    var queries: [String] = []
    var empty = 0
    for part in line.split(separator: ",", omittingEmptySubsequences: false) {
        let trimmed = part.trimmingCharacters(in: " \t\n\r")
        if trimmed.isEmpty {
            empty += 1
        } else if !queries.contains(trimmed) {
            queries.append(trimmed)
        }
    }
    return (queries, empty)
}

/// The lines of a queries file (`lookout detect --queries-file`): one query per line (commas included; each
/// line is then read by ``QuerySyntax/parse(_:)``), `\n` or `\r\n` line ends, empty lines skipped; nil
/// when the bytes are not UTF-8 text.
public func parseQueriesFile(_ bytes: [UInt8]) -> [String]? {
    guard String(validating: bytes, as: UTF8.self) != nil, !bytes.contains(0) else { return nil }
    // Split the bytes, not the String: Swift reads "\r\n" as one Character, so a CRLF file would not split.
    return bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        .map { String(decoding: $0.last == UInt8(ascii: "\r") ? $0.dropLast() : $0, as: UTF8.self) }
        .filter { !$0.isEmpty }
}

/// The engine for async callers (a server): each call runs on a thread outside Swift's cooperative pool,
/// since the network's loops block their thread until the compute pool is done.
extension Engine {
    public func prepare(path: String, size: Int = 640) async throws(ImageError) -> PreparedImage {
        try await Self.offCooperativePool { () throws(ImageError) in try self.prepare(path: path, size: size) }
    }

    public func prepare(image: Image, name: String, size: Int = 640) async -> PreparedImage {
        await Self.offCooperativePool { self.prepare(image: image, name: name, size: size) }
    }

    public func detect(
        _ prepared: PreparedImage, queries: [String], options: SuppressionOptions = .init()
    ) async
        -> ImageDetections
    {
        await Self.offCooperativePool { self.detect(prepared, queries: queries, options: options) }
    }

    static func offCooperativePool<T: Sendable, E: Error>(
        _ body: @escaping @Sendable () throws(E) -> T
    ) async throws(E)
        -> T
    {
        let result: Result<T, E> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                do throws(E) {
                    continuation.resume(returning: .success(try body()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    static func offCooperativePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: body()) }
        }
    }
}
