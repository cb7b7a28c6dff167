import Dispatch
import LookoutDetector
import LookoutImage
import LookoutSupport
import LookoutTensor
import Synchronization

/// A photo letterboxed where the engine's backend computes (``Engine/letterboxed(_:name:size:)``), ready to join a
/// batch of photos of its letterboxed size.
public struct LetterboxedPhoto: Sendable {
    public let name: String
    /// The photo's own size.
    public let width: Int
    public let height: Int
    public let letterbox: Letterbox
    /// The network's input, where the backend keeps it.
    public let input: FeatureMap
}

/// Several photos through the network at once, where the backend batches (a GPU's ``ComputeBackend/batched(_:_:)``):
/// photos of one letterboxed size go through each layer together, as one map of the photos stacked, so that a
/// GPU multiplies one large product instead of many small ones. Each photo's results are its own: the same
/// operations on its own pixels, within the rounding a larger product's summation order may give. Elsewhere (the
/// CPU, YOLOE) one photo after another.
extension Engine {
    /// The most photos computed as one batch: the backend's for a network whose layers all keep to each image
    /// (YOLO-World on a GPU), else 1.
    public var batchLimit: Int { network.batches ? backend.batchLimit : 1 }

    /// ``prepare(image:name:size:square:)`` of each photo, those of one letterboxed size together in batches of
    /// up to `batch` (and ``batchLimit``). Each photo's preprocessing and backbone times are its batch's shared
    /// out.
    public func prepare(images: [(image: Image, name: String)], size: Int = 640, batch: Int = 32) -> [PreparedImage] {
        let limit = min(max(batch, 1), batchLimit)
        guard limit > 1, images.count > 1 else {
            return images.map { prepare(image: $0.image, name: $0.name, size: size) }
        }
        var clock = Stopwatch()
        let photos = images.map { letterboxed($0.image, name: $0.name, size: size) }
        let preprocess = clock.lap() / Double(images.count)
        var prepared = [PreparedImage?](repeating: nil, count: images.count)
        for chunk in Self.batches(of: photos.map { [$0.letterbox.width, $0.letterbox.height] }, limit: limit) {
            let group = chunk.map { photos[$0] }
            let features = imageFeatures(of: group)
            let perImage = features.map { backend.unstack($0, images: chunk.count) }
            backend.settle()
            let backbone = clock.lap() / Double(chunk.count)
            for (position, index) in chunk.enumerated() {
                var timings = StageTimings()
                (timings.preprocess, timings.backbone) = (preprocess, backbone)
                prepared[index] = PreparedImage(
                    name: photos[index].name, width: photos[index].width, height: photos[index].height,
                    letterbox: photos[index].letterbox, features: perImage.map { $0[position] }, timings: timings)
            }
        }
        return prepared.map { $0! }
    }

    /// A photo letterboxed where the backend computes (its bytes copied over once), waited for, so that another
    /// thread may take it into a batch (``imageFeatures(of:)``): the same floats as ``prepare(image:name:size:square:)``'s
    /// input.
    public func letterboxed(_ image: Image, name: String, size: Int = 640) -> LetterboxedPhoto {
        let letterbox = Letterbox(width: image.width, height: image.height, size: size, auto: true)
        let input = networkInput(image, letterbox: letterbox)
        backend.settle()
        return LetterboxedPhoto(
            name: name, width: image.width, height: image.height, letterbox: letterbox, input: input)
    }

    /// The image features (``PreparedImage/features``) of photos letterboxed to one size, computed as one batch
    /// (at most ``batchLimit``): each map holds the photos stacked (``ComputeBackend/stack(_:)``). A lone photo's
    /// is recorded where the backend can, as ``prepare(image:name:size:square:)``'s is; a batch's is not (a GPU's
    /// graphs pay for one photo's many short launches, not for a batch's).
    public func imageFeatures(of photos: [LetterboxedPhoto]) -> [FeatureMap] {
        precondition(
            !photos.isEmpty && photos.allSatisfy { $0.letterbox.width == photos[0].letterbox.width }
                && photos.allSatisfy { $0.letterbox.height == photos[0].letterbox.height },
            "a batch holds photos letterboxed to one size")
        let (network, backend) = (self.network, self.backend)
        let stacked = backend.stack(photos.map(\.input))
        let key = ReplayKey(network: network, stage: "image features", sizes: [stacked.height, stacked.width])
        func run() -> [FeatureMap] {
            backend.replay(key, [stacked]) { network.imageFeatures($0[0], backend: backend) }
        }
        return backend.batched(photos.count, run)
    }

    /// Neck and head of `images` photos' features stacked level by level: the raw output of all of them.
    private func score(stacked maps: [FeatureMap], images: Int, labels: [String], text: [Float]) -> [Float] {
        let (network, backend) = (self.network, self.backend)
        func run() -> [Float] { network.score(maps, text: text, classes: labels.count, backend: backend).output }
        return backend.batched(images, run)
    }

    /// ``score(_:labels:text:asIs:)`` of each prepared photo for one query set, those with features of one size
    /// together in batches of up to `batch` (and ``batchLimit``). Each photo's neck and head time is its batch's
    /// shared out.
    public func score(_ prepared: [PreparedImage], labels: [String], text: [Float], batch: Int = 32) -> [ScoredImage] {
        let limit = min(max(batch, 1), batchLimit)
        guard limit > 1, prepared.count > 1 else { return prepared.map { score($0, labels: labels, text: text) } }
        precondition(text.count == labels.count * network.embeddingSize, "text features do not match the labels")
        let shapes = prepared.map { $0.features.flatMap { [$0.channels, $0.height, $0.width] } }
        var scored = [ScoredImage?](repeating: nil, count: prepared.count)
        for chunk in Self.batches(of: shapes, limit: limit) {
            guard chunk.count > 1, !prepared[chunk[0]].features.isEmpty else {
                for index in chunk { scored[index] = score(prepared[index], labels: labels, text: text) }
                continue
            }
            var clock = Stopwatch()
            let levels = prepared[chunk[0]].features.indices
            let maps = levels.map { level in backend.stack(chunk.map { prepared[$0].features[level] }) }
            let output = score(stacked: maps, images: chunk.count, labels: labels, text: text)
            let seconds = clock.lap() / Double(chunk.count)
            let planes = anchorPlanes(prepared[chunk[0]].letterbox)
            let (anchors, rows) = (planes.reduce(0, +), 4 + labels.count)
            precondition(output.count == rows * chunk.count * anchors, "a batch's output of another size")
            for (position, index) in chunk.enumerated() {
                let values = Self.rows(
                    output, count: rows, anchors: Self.anchors(ofImage: position, images: chunk.count, planes: planes))
                var timings = prepared[index].timings
                timings.neckAndHead = seconds
                scored[index] = ScoredImage(
                    prepared: prepared[index], labels: labels, output: values, timings: timings)
            }
        }
        return scored.map { $0! }
    }

    /// Detects `labels` (their text features `text`) in each photo: ``prepare(images:size:batch:)``,
    /// ``score(_:labels:text:batch:)``, then each photo's thresholds and NMS on threads of their own.
    public func detect(
        images: [(image: Image, name: String)], labels: [String], text: [Float], options: SuppressionOptions = .init(),
        size: Int = 640, batch: Int = 32
    ) -> [ImageDetections] {
        let prepared = prepare(images: images, size: size, batch: batch)
        let scored = score(prepared, labels: labels, text: text, batch: batch)
        let results = Synchronization.Mutex([ImageDetections?](repeating: nil, count: scored.count))
        DispatchQueue.concurrentPerform(iterations: scored.count) { index in
            let detections = self.detections(scored[index], options: options)
            results.withLock { $0[index] = detections }
        }
        return results.withLock { $0.map { $0! } }
    }

    /// Each level's anchors a photo letterboxed to `letterbox`.
    public func anchorPlanes(_ letterbox: Letterbox) -> [Int] {
        network.strides.map { (letterbox.height / $0) * (letterbox.width / $0) }
    }

    /// Where photo `image`'s anchors lie among a batch's (of `images` photos, `planes` anchors a photo in each
    /// level): each level's anchors are the photos' in turn (the head's levels of a tall map), in order.
    public static func anchors(ofImage image: Int, images: Int, planes: [Int]) -> [Int] {
        var anchors: [Int] = []
        anchors.reserveCapacity(planes.reduce(0, +))
        var start = 0
        for plane in planes {
            anchors += (start + image * plane)..<(start + (image + 1) * plane)
            start += images * plane
        }
        return anchors
    }

    /// `count` rows of a batch's output (row-major, each row all the batch's anchors) at `anchors` only.
    public static func rows(_ output: [Float], count: Int, anchors: [Int]) -> [Float] {
        let width = output.count / max(count, 1)
        var values = [Float](repeating: 0, count: count * anchors.count)
        output.withUnsafeBufferPointer { source in
            values.withUnsafeMutableBufferPointer { target in
                for row in 0..<count {
                    let (from, to) = (row * width, row * anchors.count)
                    for (column, anchor) in anchors.enumerated() { target[to + column] = source[from + anchor] }
                }
            }
        }
        return values
    }

    /// Indices grouped by equal `shapes`, in order of first appearance, each group cut into runs of `limit`.
    public static func batches(of shapes: [[Int]], limit: Int) -> [[Int]] {
        var groups: [[Int]: [Int]] = [:]
        var order: [[Int]] = []
        for (index, shape) in shapes.enumerated() {
            if groups[shape] == nil { order.append(shape) }
            groups[shape, default: []].append(index)
        }
        return order.flatMap { shape in
            let members = groups[shape]!
            return stride(from: 0, to: members.count, by: limit).map {
                Array(members[$0..<min($0 + limit, members.count)])
            }
        }
    }
}
