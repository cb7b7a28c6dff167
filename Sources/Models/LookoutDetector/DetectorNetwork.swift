import LookoutTensor
import LookoutWeights

/// An open-vocabulary detector as the engine runs it: an image-only backbone whose outputs can be kept, then a
/// text-conditioned rest that turns a query set's text embeddings into ultralytics' raw output.
/// ``YOLOWorldNetwork`` (text in the neck and head) and ``YOLOENetwork`` (text in the head only, masks) are
/// the two.
public protocol DetectorNetwork: AnyObject, Sendable {
    /// The weight file it was loaded from.
    var path: String { get }
    /// The family in words, as `models inspect` and error messages name it: `YOLO-World v2`, `YOLOE-11`.
    var familyName: String { get }
    /// Size of the text embeddings it consumes.
    var embeddingSize: Int { get }
    var strides: [Int] { get }
    /// Channels of the backbone's outputs (P3, P4, P5).
    var featureChannels: [Int] { get }
    /// Class text features stored in the checkpoint, if any (`classes × embeddingSize`).
    var builtinText: [Float]? { get }
    var builtinClassCount: Int { get }
    var precision: Precision { get }
    /// What caches and indexes key results by (see ``YOLOWorldNetwork/arithmetic``).
    var arithmetic: String { get }
    /// Per level, the contrastive head's `(logitScale, bias)`.
    var scoreParameters: [(logitScale: Float, bias: Float)] { get }
    /// Whether ultralytics' `predict` suppresses across classes by default for this family (YOLOE does).
    var agnosticSuppressionByDefault: Bool { get }
    /// Whether its head gives masks.
    var segments: Bool { get }
    /// Whether its output is kept by top-k instead of NMS (YOLOE-26's one-to-one head, asked for at load:
    /// ``NonMaxSuppression/topK(_:classes:options:)``).
    var keepsTopK: Bool { get }
    /// The text tower its queries must come through.
    var textTower: TextTower { get }
    /// A prompt-free model's vocabulary: it takes no queries and names what it sees with these (YOLOE `-pf`);
    /// nil for a model that is asked.
    var promptFreeNames: [String]? { get }

    /// Whether every layer keeps to each image of a batch (``ComputeBackend/batched(_:_:)``): YOLO-World's do;
    /// YOLOE's attention over a map's pixels and its masks take one image at a time.
    var batches: Bool { get }
    /// The image-only part: P3, P4, P5.
    func backbone(_ image: FeatureMap, backend: any ComputeBackend) -> [FeatureMap]
    /// What a prepared image keeps for its queries: ``backbone(_:backend:)``'s maps and, in YOLO-World, the part of
    /// the neck the text does not enter. The rest (``score(_:text:classes:backend:)``) takes either.
    func imageFeatures(_ image: FeatureMap, backend: any ComputeBackend) -> [FeatureMap]
    /// Channels and stride (of the input) of each map ``imageFeatures(_:backend:)`` gives.
    var keptMaps: [(channels: Int, stride: Int)] { get }
    /// The rest, for text-tower embeddings `text` (`classes × embeddingSize`).
    func score(_ features: [FeatureMap], text: [Float], classes: Int, backend: any ComputeBackend) -> HeadOutput
    /// ``score(_:text:classes:backend:)``'s output plus the region embeddings (what the contrastive head dots with
    /// ``classEmbeddings(_:classes:)``) as the head keeps them: per level `embeddingSize × plane`, channel-major
    /// (the index reads only its kept regions' columns).
    func headWithRegionMaps(
        _ features: [FeatureMap], text: [Float], classes: Int, backend: any ComputeBackend
    ) -> (output: [Float], embeddings: [[Float]])
    /// What the head dots region embeddings with (after normalisation), from text-tower embeddings: the text
    /// itself for YOLO-World, YOLOE's `get_tpe` for YOLOE.
    func classEmbeddings(_ text: [Float], classes: Int) -> [Float]
    /// ``score(_:text:classes:backend:)`` where the rows `asIs` are class embeddings already (YOLOE's visual prompt
    /// embeddings, which do not go through `get_tpe`) and the others text-tower embeddings.
    func score(
        _ features: [FeatureMap], text: [Float], classes: Int, asIs: Set<Int>, backend: any ComputeBackend
    ) -> HeadOutput
}

extension DetectorNetwork {
    /// Channels and stride of ``backbone(_:backend:)``'s maps: P3, P4, P5 at strides 8, 16 and 32.
    var backboneMaps: [(channels: Int, stride: Int)] { zip(featureChannels, [8, 16, 32]).map { ($0, $1) } }

    public func score(
        _ features: [FeatureMap], text: [Float], classes: Int, asIs: Set<Int>, backend: any ComputeBackend
    ) -> HeadOutput {
        score(features, text: text, classes: classes, backend: backend)
    }
}

extension YOLOWorldNetwork: DetectorNetwork {
    public var familyName: String { "YOLO-World v2" }
    public var batches: Bool { true }
    public var keepsTopK: Bool { false }
    public var textTower: TextTower { .clip }
    public var promptFreeNames: [String]? { nil }
    public var agnosticSuppressionByDefault: Bool { false }
    public var segments: Bool { false }

    /// Neck and head, recorded once per query set and feature sizes where the backend can (a GPU's graph), then
    /// replayed on other photos' features.
    public func score(_ features: [FeatureMap], text: [Float], classes: Int, backend: any ComputeBackend) -> HeadOutput
    {
        let key = ReplayKey(
            network: self, stage: "neck and head",
            sizes: [classes] + features.flatMap { [$0.channels, $0.height, $0.width] }, values: text)
        let output = backend.replay(key, features) { maps in
            var unused: [[Float]]? = nil
            return [
                detectHead.runMap(
                    neck(maps, text: text, classes: classes, backend: backend), text: text, classes: classes,
                    strides: strides, embeddings: &unused, backend: backend
                ).output
            ]
        }
        return HeadOutput(output: backend.floats(output[0]), masks: nil)
    }

    public func classEmbeddings(_ text: [Float], classes: Int) -> [Float] { text }
}

extension YOLOENetwork: DetectorNetwork {
    public var familyName: String { family.rawValue }
    public var batches: Bool { false }
    public func imageFeatures(_ image: FeatureMap, backend: any ComputeBackend) -> [FeatureMap] {
        backbone(image, backend: backend)
    }
    public var keptMaps: [(channels: Int, stride: Int)] { backboneMaps }
    public var agnosticSuppressionByDefault: Bool { true }
    public var builtinText: [Float]? { nil }
    public var builtinClassCount: Int { 0 }

    public func score(_ features: [FeatureMap], text: [Float], classes: Int, backend: any ComputeBackend) -> HeadOutput
    {
        run(features, text: text, classes: classes, backend: backend)
    }

    public func score(
        _ features: [FeatureMap], text: [Float], classes: Int, asIs: Set<Int>, backend: any ComputeBackend
    ) -> HeadOutput {
        guard !asIs.isEmpty else { return run(features, text: text, classes: classes, backend: backend) }
        var embeddings = classEmbeddings(text, classes: classes)
        let size = embeddingSize
        for row in asIs where row < classes {
            embeddings.replaceSubrange((row * size)..<((row + 1) * size), with: text[(row * size)..<((row + 1) * size)])
        }
        return run(features, classEmbeddings: embeddings, classes: classes, backend: backend)
    }

    public func headWithRegionMaps(
        _ features: [FeatureMap], text: [Float], classes: Int, backend: any ComputeBackend
    ) -> (output: [Float], embeddings: [[Float]]) {
        guard let detectHead else { preconditionFailure("a prompt-free model has no region embeddings to index") }
        let maps = neck(features, backend: backend)
        var kept: [[Float]]? = []
        let output = detectHead.run(
            maps, text: classEmbeddings(text, classes: classes), classes: classes, strides: strides,
            embeddings: &kept, masks: false, backend: backend
        ).output
        return (output, kept!)
    }
}

/// What a backend's recorded work (``ComputeBackend/replay(_:_:_:)``) is known by: the network (held, so that its
/// identity cannot name another network's weights while the recording lives), the stage, the sizes of its inputs
/// and any values the recording copies in (a query set's embeddings, compared bit for bit).
public struct ReplayKey: Hashable, @unchecked Sendable {
    let network: any DetectorNetwork
    let stage: String
    let sizes: [Int]
    let values: [Float]

    public init(network: any DetectorNetwork, stage: String, sizes: [Int], values: [Float] = []) {
        (self.network, self.stage, self.sizes, self.values) = (network, stage, sizes, values)
    }

    public static func == (a: ReplayKey, b: ReplayKey) -> Bool {
        a.network === b.network && a.stage == b.stage && a.sizes == b.sizes
            && a.values.elementsEqual(b.values) { $0.bitPattern == $1.bitPattern }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(network))
        hasher.combine(stage)
        hasher.combine(sizes)
        for value in values { hasher.combine(value.bitPattern) }
    }
}
