import LookoutJSON
import LookoutSupport

/// Detection quality against ground truth: COCO-style matching and average precision at one IoU threshold.
///
/// Matching: per image and label, detections in descending score order each take the unmatched ground-truth
/// box of the same label with the highest IoU, if that IoU is at least the threshold (a true positive);
/// otherwise they are false positives. AP: the precision envelope sampled at the 101 recall points
/// 0, 0.01, …, 1 (COCO's interpolation), for each label that has ground truth.
public struct DetectionEvaluation: Sendable {
    public struct Truth: Sendable {
        public var label: String
        public var box: [Float]
        public init(label: String, box: [Float]) {
            self.label = label
            self.box = box
        }
    }

    public struct Prediction: Sendable {
        public var label: String
        public var score: Float
        public var box: [Float]
        public init(label: String, score: Float, box: [Float]) {
            self.label = label
            self.score = score
            self.box = box
        }
    }

    public let iouThreshold: Float
    /// Per label: (score, is true positive) of every prediction.
    private var outcomes: [String: [(Float, Bool)]] = [:]
    /// Per label: the number of ground-truth boxes.
    public private(set) var truthCounts: [String: Int] = [:]

    public init(iouThreshold: Float = 0.5) {
        self.iouThreshold = iouThreshold
    }

    /// Adds one image's predictions and ground truth.
    public mutating func add(predictions: [Prediction], truth: [Truth]) {
        for item in truth { truthCounts[item.label, default: 0] += 1 }
        var used = [Bool](repeating: false, count: truth.count)
        let order = predictions.indices.sorted { predictions[$0].score > predictions[$1].score }
        for index in order {
            let prediction = predictions[index]
            var best = -1
            var bestIoU = iouThreshold
            for (t, item) in truth.enumerated() where !used[t] && item.label == prediction.label {
                let overlap = Self.iou(prediction.box, item.box)
                if overlap >= bestIoU {
                    bestIoU = overlap
                    best = t
                }
            }
            if best >= 0 { used[best] = true }
            outcomes[prediction.label, default: []].append((prediction.score, best >= 0))
        }
    }

    /// Average precision of one label (nil when it has no ground truth).
    public func averagePrecision(_ label: String) -> Double? {
        guard let total = truthCounts[label], total > 0 else { return nil }
        let sorted = (outcomes[label] ?? []).sorted { $0.0 > $1.0 }
        var precision: [Double] = []
        var recall: [Double] = []
        var truePositives = 0
        for (rank, outcome) in sorted.enumerated() {
            if outcome.1 { truePositives += 1 }
            precision.append(Double(truePositives) / Double(rank + 1))
            recall.append(Double(truePositives) / Double(total))
        }
        var envelope = precision
        if envelope.count > 1 {
            for i in stride(from: envelope.count - 2, through: 0, by: -1) {
                envelope[i] = max(envelope[i], envelope[i + 1])
            }
        }
        var sum = 0.0
        var cursor = 0
        for step in 0...100 {
            let target = Double(step) / 100
            while cursor < recall.count && recall[cursor] < target - 1e-12 { cursor += 1 }
            if cursor < recall.count { sum += envelope[cursor] }
        }
        return sum / 101
    }

    /// Mean AP over the given labels that have ground truth, and how many there were.
    public func meanAveragePrecision(over labels: [String]) -> (value: Double, labels: Int) {
        let values = labels.compactMap(averagePrecision)
        return (values.isEmpty ? 0 : values.reduce(0, +) / Double(values.count), values.count)
    }

    /// Precision and recall of the predictions scoring above `confidence`, over the given labels.
    public func precisionRecall(above confidence: Float, over labels: [String]) -> (precision: Double, recall: Double) {
        var truePositives = 0
        var predicted = 0
        var total = 0
        for label in labels {
            total += truthCounts[label] ?? 0
            for outcome in outcomes[label] ?? [] where outcome.0 > confidence {
                predicted += 1
                if outcome.1 { truePositives += 1 }
            }
        }
        return (
            predicted == 0 ? 1 : Double(truePositives) / Double(predicted),
            total == 0 ? 1 : Double(truePositives) / Double(total)
        )
    }

    public static func iou(_ a: [Float], _ b: [Float]) -> Float {
        let width = max(0, min(a[2], b[2]) - max(a[0], b[0]))
        let height = max(0, min(a[3], b[3]) - max(a[1], b[1]))
        let intersection = width * height
        let union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - intersection
        return union > 0 ? intersection / union : 0
    }
}

/// A generated scene set's ground truth (`truth.json` written by scripts/demo/scenes.py).
public struct SceneTruth: Sendable {
    public struct Scene: Sendable {
        public var file: String
        public var objects: [DetectionEvaluation.Truth]
    }

    public struct Problem: Error, CustomStringConvertible, Sendable {
        public let path: String
        public let reason: String
        public var description: String { "\(path): \(reason)" }
    }

    public var scenes: [Scene]
    /// Colour–shape captions held out of the demo model's training.
    public var heldOut: [String]

    public init(contentsOf path: String) throws {
        let document = try JSONDocument(bytes: FileContents.read(path, maximumSize: 64 << 20))
        let root = document.root
        guard let images = root["images"], images.kind == .array else {
            throw SceneTruth.Problem(path: path, reason: "no \"images\" array")
        }
        heldOut = []
        if let held = root["held_out"], held.kind == .array {
            heldOut = (0..<held.count).compactMap { held[$0].string }
        }
        let folder = path.lastIndex(of: "/").map { String(path[...$0]) } ?? ""
        scenes = []
        for index in 0..<images.count {
            let image = images[index]
            guard let file = image["file"]?.string, let objects = image["objects"], objects.kind == .array else {
                throw SceneTruth.Problem(path: path, reason: "image \(index) lacks \"file\" or \"objects\"")
            }
            var truth: [DetectionEvaluation.Truth] = []
            for k in 0..<objects.count {
                let object = objects[k]
                guard let label = object["label"]?.string, let box = object["box"], box.count == 4 else {
                    throw SceneTruth.Problem(
                        path: path, reason: "image \(index) object \(k) lacks \"label\" or a 4-number \"box\"")
                }
                truth.append(.init(label: label, box: (0..<4).map { Float(box[$0].number ?? .nan) }))
            }
            scenes.append(Scene(file: file.hasPrefix("/") ? file : folder + file, objects: truth))
        }
    }
}
