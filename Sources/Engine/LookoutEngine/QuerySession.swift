import LookoutDetector
import LookoutImage
import LookoutSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Re-query state: photos prepared once (their backbone features kept in a ``FeatureStore``), then asked
/// again and again with new query sets, and re-thresholded without running the network. What
/// `lookout query` runs, usable by any program (a server keeps one per client).
public final class QuerySession {
    public let engine: Engine
    public let store: FeatureStore
    public let imageSize: Int
    /// The photos that could be prepared, in the order given.
    public private(set) var photos: [String] = []
    /// Thresholds applied to every answer; change them with ``rethreshold(_:)``.
    public private(set) var options: SuppressionOptions
    /// The confidence threshold of image queries (``ImagePrompts``), which match less sharply than text.
    public var imageConfidence: Float = ImagePrompts.defaultConfidence
    /// Photos cut into tiles (sliced inference), each tile's features kept; nil: whole photos.
    public let slicing: SliceOptions?
    private enum Scored {
        case whole(ScoredImage)
        case sliced(ScoredSlices)
    }
    private var last: [Scored] = []
    private var lastPlan = QueryPlan()
    /// The last question as asked, before the visual prompts joined it.
    private var lastQuestion = QueryPlan()
    /// YOLOE visual prompts drawn on the photos (``setVisualPrompts(_:photos:)``), one per label: they join every
    /// question.
    public private(set) var visualPrompts: [ExampleQuery] = []

    public init(
        engine: Engine, store: FeatureStore, imageSize: Int = 640, options: SuppressionOptions = .init(),
        slicing: SliceOptions? = nil
    ) {
        self.engine = engine
        self.store = store
        self.imageSize = imageSize
        self.options = options
        self.slicing = slicing
    }

    /// A sliced photo from the tiles kept in the store, or cut and prepared again (and kept) when any was dropped
    /// or the file changed.
    private func sliced(_ path: String, slicing: SliceOptions) throws(ImageError) -> SlicedImage {
        var info = stat()
        guard FileSystem.stat(path, &info) == 0 else {
            throw ImageError(
                path: path, kind: .unreadable, problem: "cannot be read (\(String(cString: strerror(errno))))")
        }
        let stamp = "\(info.st_size)|\(info.st_mtim.tv_sec)|\(info.st_mtim.tv_nsec)"
        let key = "session|\(imageSize)|\(slicing)|\(stamp)|\(path)"
        if let kept = store.kept(sliced: key) { return kept }
        let sliced = try engine.prepare(path: path, size: imageSize, slicing: slicing)
        store.keep(sliced, key: key)
        return sliced
    }

    /// Prepares `paths` (decode, letterbox, backbone), keeping those that can be read; returns the failures
    /// and the seconds spent.
    @discardableResult
    public func add(_ paths: [String]) -> (failures: [(path: String, error: ImageError)], seconds: Double) {
        var failures: [(String, ImageError)] = []
        var seconds = 0.0
        for path in paths {
            do {
                let timings: StageTimings
                if let slicing {
                    timings = try sliced(path, slicing: slicing).timings
                } else {
                    timings = try store.prepared(path: path, size: imageSize, engine: engine).timings
                }
                seconds += timings.backbone + timings.decode + timings.preprocess
                photos.append(path)
            } catch {
                failures.append((path, error))
            }
        }
        return (failures, seconds)
    }

    public struct Answer: Sendable {
        public var results: [ImageDetections]
        /// Photos whose features had to be prepared again and could not be (the file changed or went away).
        public var unreadable: [String]
        public var textSeconds: Double
        public var cachedEmbeddings: Int
    }

    /// Detects `queries` in every photo: the text through the embedding cache, the neck and head on the kept
    /// features (recomputed where the store dropped them).
    public func ask(_ queries: [String], images: [(label: String, embedding: [Float])] = []) -> Answer {
        var plan = QueryPlan(queries.map { Query($0) })
        for image in images { plan.append(label: image.label, embedding: image.embedding) }
        return ask(plan)
    }

    /// Detects a query plan (``Query``: alternatives, thresholds, negative queries; photos as embeddings)
    /// in every photo.
    public func ask(_ question: QueryPlan) -> Answer {
        lastQuestion = question
        var plan = question
        // A label also asked for is one query with its examples, as `detect` makes it.
        engine.add(visualPrompts, to: &plan, combination: .best)
        // Embedded once for every photo, as every other path prepares a query.
        let query = engine.prepare(plan, options: options)
        let textSeconds = query.textEncodeSeconds
        lastPlan = plan
        var unreadable: [String] = []
        last = []
        for path in photos {
            var stage = Stopwatch()
            if let slicing {
                guard let image = try? sliced(path, slicing: slicing) else {
                    unreadable.append(path)
                    continue
                }
                let fetch = stage.lap()
                var scored = engine.score(image, query)
                scored.timings.textEncode = textSeconds
                scored.timings.backbone = fetch
                scored.timings.decode = 0
                scored.timings.preprocess = 0
                last.append(.sliced(scored))
                continue
            }
            guard let image = try? store.prepared(path: path, size: imageSize, engine: engine) else {
                unreadable.append(path)
                continue
            }
            let fetch = stage.lap()
            var scored = engine.score(image, plan: query.plan, text: query.features).withoutFeatures()
            scored.timings.textEncode = textSeconds
            scored.timings.backbone = fetch  // 0 when the features were kept in memory
            scored.timings.decode = 0
            scored.timings.preprocess = 0
            last.append(.whole(scored))
        }
        return Answer(
            results: answers(answerOptions), unreadable: unreadable,
            textSeconds: textSeconds, cachedEmbeddings: query.cachedTexts)
    }

    /// ``options`` with the last question's own thresholds, and ``imageConfidence`` for its photo queries.
    private var answerOptions: SuppressionOptions {
        let options = lastPlan.applied(to: self.options)
        var answer = options
        for (query, group) in lastPlan.groups.enumerated()
        where group.count == 1 && lastPlan.embedded[group[0]] != nil && !lastPlan.asIs.contains(group[0])
            && lastPlan.thresholds[query] == nil
        {
            answer.perClassConfidence[query] = imageConfidence
        }
        return answer
    }

    /// Boxes drawn on the photos as YOLOE visual prompts (their embeddings from the photos' kept features), joining
    /// this and every later question; none to drop them. `photos`: per box, the index of the photo it is drawn on
    /// (default: the first); a label's examples on several photos are averaged (``Engine/exampleQueries(_:)``).
    /// Then the last question again, or nil before the first.
    public func setVisualPrompts(
        _ prompts: [VisualPrompt], photos indices: [Int] = []
    ) throws(VisualPromptError)
        -> Answer?
    {
        if prompts.isEmpty {
            visualPrompts = []
        } else {
            guard slicing == nil else {
                throw VisualPromptError(description: "boxes drawn on a photo are not taken with --slice")
            }
            var order: [Int] = []
            var byPhoto: [Int: [VisualPrompt]] = [:]
            for (index, prompt) in prompts.enumerated() {
                let photo = index < indices.count ? indices[index] : 0
                guard photos.indices.contains(photo) else {
                    throw VisualPromptError(
                        description: "there is no photo \(photo + 1): the boxes go on photos 1 to \(photos.count)")
                }
                if byPhoto[photo] == nil { order.append(photo) }
                byPhoto[photo, default: []].append(prompt)
            }
            var examples: [ExamplePhoto] = []
            for photo in order {
                guard let prepared = try? store.prepared(path: photos[photo], size: imageSize, engine: engine) else {
                    throw VisualPromptError(
                        description: "photo \(photo + 1), where boxes are drawn, can no longer be read")
                }
                examples.append(ExamplePhoto(photo: prepared, prompts: byPhoto[photo]!))
            }
            visualPrompts = try engine.exampleQueries(examples)
        }
        return lastQuestion.count > 0 || !visualPrompts.isEmpty ? ask(lastQuestion) : nil
    }

    /// New thresholds for this and later answers; the last answer again under them (NMS only), or nil
    /// before the first question.
    public func rethreshold(_ options: SuppressionOptions) -> [ImageDetections]? {
        self.options = options
        return last.isEmpty ? nil : answers(answerOptions)
    }

    private func answers(_ options: SuppressionOptions) -> [ImageDetections] {
        last.map {
            switch $0 {
            case .whole(let scored): engine.detections(scored, options: options)
            case .sliced(let scored): engine.detections(scored, options: options)
            }
        }
    }
}
