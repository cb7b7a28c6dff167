#if canImport(Glibc)
    import Glibc
#endif

/// How a whole-photo CLIP cosine becomes a score comparable with the detector's region scores (a
/// probability that the query is true of the photo): `sigmoid((cosine − center) · slope)`.
///
/// A tower trained here records its own, fitted by logistic regression on held-out scenes (the demo tower:
/// `scripts/demo/evaluate_image.py --calibrate`). For towers without (OpenAI's ViT-B/32), ``standard``: CLIP's
/// cosines between a photo and a matching caption sit around 0.25–0.35 and non-matching ones below 0.2; these
/// constants put a clear match near 0.9. They are not measured here (the official weights cannot be
/// downloaded on the machines this was built on).
public struct SceneScore: Sendable, Equatable {
    public var center: Float
    public var slope: Float

    public static let standard = SceneScore(center: 0.25, slope: 40)

    public init(center: Float, slope: Float) {
        self.center = center
        self.slope = slope
    }

    public func score(cosine: Float) -> Float { 1 / (1 + expf(-logit(cosine: cosine))) }
    /// The logit of ``score(cosine:)``.
    public func logit(cosine: Float) -> Float { (cosine - center) * slope }
}
