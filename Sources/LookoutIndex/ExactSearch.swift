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
        var options = SuppressionOptions()
        options.confidence = confidence
        var rescored: [Hit] = []
        var failures: [(String, ImageError)] = []
        for hit in hits {
            do {
                let prepared = try engine.prepare(path: hit.path, size: imageSize)
                let result = engine.detect(prepared, queries: [query], options: options)
                guard let best = result.detections.first else { continue }
                rescored.append(
                    Hit(
                        path: hit.path, width: hit.width, height: hit.height, score: best.score,
                        detections: result.detections.map { ($0.score, $0.box) }))
            } catch {
                failures.append((hit.path, error))
            }
        }
        return (rescored.sorted { $0.score != $1.score ? $0.score > $1.score : $0.path < $1.path }, failures)
    }
}
