import LookoutDetector
import LookoutImage
import LookoutSupport
import LookoutTextEncoder

/// Examples as queries: boxes drawn around examples of a thing, on one or several reference photos, make one
/// query per label. With YOLOE each photo's boxes of a label give one SAVPE embedding (ultralytics'
/// `visual_prompts`); with YOLO-World each box's crop gives a CLIP image embedding (``ImagePrompts``). The
/// embeddings of one label are combined by ``Examples/average(_:)``: normalised, averaged and normalised again, as
/// ultralytics' YOLOE validator combines a class's prompts over a data set (`load_vp`), which is also what a YOLOE
/// author suggests for several reference photos.
public enum Examples {
    /// How a label given both as text and as examples makes one query.
    public enum Combination: String, Sendable, CaseIterable {
        /// The text and the examples' embedding are alternatives of the query: each place takes the better of
        /// their scores (as `sofa|couch`).
        case best
        /// One class embedding: the normalised average of the text's class embedding and the examples'.
        case mean
    }

    /// The normalised mean of normalised embeddings; one embedding is returned as it is (so that one example is
    /// exactly the single prompt it always was). The order of the inputs does not change a bit of the result:
    /// they are summed in a canonical order (lexicographic on their values), in double precision.
    public static func average(_ embeddings: [[Float]]) -> [Float] {
        precondition(!embeddings.isEmpty && embeddings.allSatisfy { $0.count == embeddings[0].count })
        if embeddings.count == 1 { return embeddings[0] }
        let normalised = embeddings.map(normalise)
        let ordered = normalised.sorted { a, b in
            for (x, y) in zip(a, b) where x != y { return x < y }
            return false
        }
        var sum = [Double](repeating: 0, count: ordered[0].count)
        for embedding in ordered {
            for (i, value) in embedding.enumerated() { sum[i] += Double(value) }
        }
        let norm = sum.reduce(0) { $0 + $1 * $1 }.squareRoot()
        guard norm > 0 else { return sum.map { _ in 0 } }
        return sum.map { Float($0 / norm) }
    }

    static func normalise(_ v: [Float]) -> [Float] {
        let norm = v.reduce(0.0) { $0 + Double($1) * Double($1) }.squareRoot()
        return norm > 0 ? v.map { Float(Double($0) / norm) } : v
    }

    /// Labels in the order they first appear, with the embeddings given for each.
    static func grouped(_ items: [(label: String, embedding: [Float])]) -> [(label: String, embeddings: [[Float]])] {
        var order: [String] = []
        var byLabel: [String: [[Float]]] = [:]
        for item in items {
            if byLabel[item.label] == nil { order.append(item.label) }
            byLabel[item.label, default: []].append(item.embedding)
        }
        return order.map { ($0, byLabel[$0]!) }
    }
}

/// A reference photo and the boxes drawn on it.
public struct ExamplePhoto: Sendable {
    public var photo: PreparedImage
    public var prompts: [VisualPrompt]

    public init(photo: PreparedImage, prompts: [VisualPrompt]) {
        self.photo = photo
        self.prompts = prompts
    }
}

/// One label's examples, combined: its class embedding (YOLOE) or CLIP image embedding (YOLO-World), and how many
/// examples (photos for YOLOE, boxes for YOLO-World) it averages.
public struct ExampleQuery: Sendable, Equatable {
    public var label: String
    public var embedding: [Float]
    public var examples: Int
    /// A YOLOE class embedding (scored as it is), not a text-tower one.
    public var classEmbedding: Bool
}

extension Engine {
    /// YOLOE: per photo, one SAVPE embedding per label (``visualPromptEmbeddings(_:on:)``); per label, their
    /// average over the photos (``Examples/average(_:)``). Labels in the order they first appear.
    public func exampleQueries(_ photos: [ExamplePhoto]) throws(VisualPromptError) -> [ExampleQuery] {
        var all: [(label: String, embedding: [Float])] = []
        for photo in photos { all += try visualPromptEmbeddings(photo.prompts, on: photo.photo) }
        return Examples.grouped(all).map {
            ExampleQuery(
                label: $0.label, embedding: Examples.average($0.embeddings), examples: $0.embeddings.count,
                classEmbedding: true)
        }
    }

    /// What an index's stored regions are scored against for query `query` of a plan (search): each of its texts'
    /// embeddings (``embed(_:)``), through ``regionQuery(_:)`` unless it is a class embedding already (YOLOE's
    /// examples).
    public func regionQueries(_ plan: QueryPlan, query: Int = 0) -> [[Float]] {
        let (rows, _) = embed(plan)
        let size = network.embeddingSize
        return plan.groups[query].map { text in
            let row = Array(rows[(text * size)..<((text + 1) * size)])
            return plan.asIs.contains(text) ? row : regionQuery(row)
        }
    }

    /// Adds examples to a plan. A label that is already a query of the plan (typed) gets them as `combination`
    /// says; any other label becomes a query of its own.
    public func add(_ examples: [ExampleQuery], to plan: inout QueryPlan, combination: Examples.Combination) {
        for example in examples {
            guard let query = plan.labels.firstIndex(of: example.label), !plan.negatives.contains(query) else {
                plan.append(label: example.label, embedding: example.embedding, asIs: example.classEmbedding)
                continue
            }
            switch combination {
            case .best:
                plan.appendAlternative(
                    to: query, embedding: example.embedding, asIs: example.classEmbedding)
            case .mean:
                // Each text of the query is averaged with the examples, in the space the head scores in: a YOLOE
                // text's class embedding (get_tpe), a YOLO-World text's CLIP embedding.
                let (features, _) = embed(plan)
                let size = network.embeddingSize
                for text in plan.groups[query] {
                    let row = Array(features[(text * size)..<((text + 1) * size)])
                    let own =
                        plan.asIs.contains(text) || !example.classEmbedding
                        ? row : network.classEmbeddings(row, classes: 1)
                    plan.setEmbedding(
                        Examples.average([own, example.embedding]), forText: text, asIs: example.classEmbedding)
                }
            }
        }
    }
}

extension ImagePrompts {
    /// YOLO-World: the CLIP image embedding of each box's crop of its photo (decoded as PIL opens it; the box
    /// rounded outwards to whole pixels and kept inside the photo), averaged per label over every box of every
    /// photo (``Examples/average(_:)``).
    public func exampleQueries(_ photos: [(path: String, prompts: [VisualPrompt])]) throws -> [ExampleQuery] {
        var all: [(label: String, embedding: [Float])] = []
        for (path, prompts) in photos {
            let decoded = try CLIPPreprocessing.decode(FileContents.read(path, maximumSize: 1 << 30), name: path)
            for prompt in prompts {
                let b = prompt.box
                let x1 = max(0, Int(b[0].rounded(.down)))
                let y1 = max(0, Int(b[1].rounded(.down)))
                let x2 = min(decoded.image.width, Int(b[2].rounded(.up)))
                let y2 = min(decoded.image.height, Int(b[3].rounded(.up)))
                guard x2 > x1, y2 > y1 else {
                    throw VisualPromptError(
                        description:
                            "the box \(b.map { "\($0)" }.joined(separator: ",")) does not overlap the \(decoded.image.width)×\(decoded.image.height) photo \(path)"
                    )
                }
                var crop = decoded
                crop.image = decoded.image.cropped(x: x1, y: y1, width: x2 - x1, height: y2 - y1)
                let input = CLIPPreprocessing.tensor(
                    CLIPPreprocessing.resizedAndCropped(crop, size: tower.configuration.inputResolution))
                all.append((prompt.label, tower.encode([input])[0]))
            }
        }
        return Examples.grouped(all).map {
            ExampleQuery(
                label: $0.label, embedding: Examples.average($0.embeddings), examples: $0.embeddings.count,
                classEmbedding: false)
        }
    }
}
