import LookoutDetector
import LookoutSupport

/// A query set ready to detect with, on any number of photos or frames: its plan (labels, alternatives,
/// thresholds, negatives, prompts), the text features of the plan's texts, and the suppression options with the
/// plan's own thresholds applied. Made once by ``Engine/prepare(_:options:)``, so that the command line, the
/// server, a video's frames and an index read a query the same way and embed it once.
public struct PreparedQuery: Sendable {
    public let plan: QueryPlan
    /// `plan.texts.count × embeddingSize`: the embedded texts, and the embeddings given (photos, prompts).
    public let features: [Float]
    /// The options as given, each query's own threshold applied (``QueryPlan/applied(to:)``); a caller with
    /// thresholds of its own for some queries (`--query-conf`) sets them here after.
    public var options: SuppressionOptions
    /// The seconds the texts took to embed (nothing for those in the cache).
    public let textEncodeSeconds: Double
    /// Texts whose embeddings came from the cache.
    public let cachedTexts: Int
}

extension Engine {
    /// Embeds a plan's texts (through the cache) and applies its thresholds to `options`.
    public func prepare(_ plan: QueryPlan, options: SuppressionOptions = .init()) -> PreparedQuery {
        var clock = Stopwatch()
        let (features, cached) = embed(plan)
        return PreparedQuery(
            plan: plan, features: features, options: plan.applied(to: options), textEncodeSeconds: clock.lap(),
            cachedTexts: cached)
    }

    /// Detects a prepared query in a prepared image. `textEncode`: whether the answer's timings count the
    /// query's embedding (the first photo of a set; later ones reuse it).
    public func detect(_ image: PreparedImage, _ query: PreparedQuery, textEncode: Bool = true) -> ImageDetections {
        var scored = score(image, plan: query.plan, text: query.features)
        if textEncode { scored.timings.textEncode = query.textEncodeSeconds }
        return detections(scored, options: query.options)
    }
}

extension QuerySyntax {
    /// Queries in one set at most, wherever they come from (50,000 took 52 s and 2.9 GB).
    public static let maximumQueries = 4096

    /// A query set fit to detect: at most ``maximumQueries`` with `others` (photos or boxes given as queries
    /// beside the typed ones) and `added` (queries the program adds, such as `--pad`'s), and not negative
    /// queries alone (they name nothing to find).
    public static func check(_ queries: [Query], others: Int = 0, added: Int = 0) throws(QuerySyntaxError) {
        let count = queries.count + others + added
        guard count <= maximumQueries else {
            throw QuerySyntaxError(
                message:
                    "\(count) queries: at most \(maximumQueries) at once (each costs the neck and head time and memory)."
            )
        }
        guard queries.isEmpty || others > 0 || queries.contains(where: { !$0.negative }) else {
            throw QuerySyntaxError(message: "Only negative queries (-\(queries[0].label)): name something to find too.")
        }
    }
}
