import LookoutDetector
import LookoutEngine
import LookoutImage

/// The best candidates of an index search re-scored by the real, query-conditioned detector.
extension PhotoIndex {
    /// Runs the engine with `query` on each of `hits` (at the index's input size) and ranks the photos by
    /// their best detection above `confidence`; photos without one drop out, photos that cannot be read are
    /// returned as failures.
    public func exact(
        _ hits: [Hit], query: String, engine: Engine, confidence: Float, imageSize: Int
    ) -> (hits: [Hit], failures: [(path: String, error: ImageError)]) {
        exact(hits, query: Query(query), engine: engine, confidence: confidence, imageSize: imageSize)
    }

    /// ``exact(_:query:engine:confidence:imageSize:)`` for a query in Lookout's syntax (alternatives). `slicing`:
    /// the detector runs sliced (``Engine/detect(_:_:textEncode:)`` of a ``SlicedImage``), as a sliced index's
    /// regions were found.
    public func exact(
        _ hits: [Hit], query: Query, engine: Engine, confidence: Float, imageSize: Int, slicing: SliceOptions? = nil
    ) -> (hits: [Hit], failures: [(path: String, error: ImageError)]) {
        var options = SuppressionOptions()
        options.confidence = confidence
        // The query embedded once for every candidate.
        let preparedQuery = engine.prepare(QueryPlan([query]), options: options)
        var rescored: [Hit] = []
        var failures: [(String, ImageError)] = []
        for hit in hits {
            do throws(ImageError) {
                let image: Image
                if hit.time != nil {  // a video's best frame
                    do {
                        image = try VideoFrames.image(at: hit.entry)
                    } catch {
                        throw ImageError(path: hit.path, kind: .damaged, problem: "\(error)")
                    }
                } else {
                    image = try ImageFile.read(hit.path)
                }
                let result =
                    try slicing.map { options throws(ImageError) in
                        engine.detect(
                            try engine.prepare(image: image, name: hit.entry, size: imageSize, slicing: options),
                            preparedQuery)
                    } ?? engine.detect(engine.prepare(image: image, name: hit.entry, size: imageSize), preparedQuery)
                guard let best = result.detections.first else { continue }
                var found = Hit(
                    path: hit.path, width: hit.width, height: hit.height, score: best.score,
                    detections: result.detections.map { ($0.score, $0.box) })
                found.time = hit.time
                rescored.append(found)
            } catch {
                failures.append((hit.path, error))
            }
        }
        return (rescored.sorted { $0.score != $1.score ? $0.score > $1.score : $0.path < $1.path }, failures)
    }
}

/// Photo-level retrieval quality of a search.
public enum SearchEvaluation {
    /// Average precision of a ranking: the mean, over the relevant photos, of the precision at the rank where
    /// each is found (a relevant photo never found counts 0). 1 when every relevant photo comes first.
    public static func averagePrecision(ranked: [String], relevant: Set<String>) -> Double {
        guard !relevant.isEmpty else { return 0 }
        var found = 0
        var total = 0.0
        for (rank, photo) in ranked.enumerated() where relevant.contains(photo) {
            found += 1
            total += Double(found) / Double(rank + 1)
        }
        return total / Double(relevant.count)
    }
}
