import LookoutTensor
import LookoutWeights

/// The head of a prompt-free YOLOE file (`-pf`, ultralytics' `YOLOEDetect.forward_lrpc` with one `LRPCHead` per
/// level): the text-prompt head's box and classification branches without their last convolutions, and per
/// level a proposal filter `pf` (1×1 convolution to one objectness logit), a vocabulary `vocab` (the names'
/// embeddings fused into the classification branch's last convolution by `get_vocab`: a Linear on levels 0 and
/// 1, a 1×1 convolution on level 2) and the box branch's last convolution `loc`.
///
/// On levels 0 and 1 only the anchors whose `sigmoid(pf)` exceeds the head's threshold (0.001: the predictor
/// never sets `conf` on the head) are scored; level 2 scores every anchor. As in ultralytics the output holds
/// the kept anchors only, `(4 + names) × kept`, and the mask coefficients the same anchors.
///
/// A YOLOE-26 file made while YOLO26 predicted end to end by default (before ultralytics 8.4.142) has its `lrpc`
/// on the one-to-one twin (`one2one_cv2`, `one2one_cv3`, `one2one_cv5`; `branch`) and no one-to-many branches:
/// its output is kept by top-k, not NMS.
struct PromptFreeHead: Sendable {
    struct Level: Sendable {
        let box: [Convolution]
        let hidden: [HeadLayer]
        let mask: [Convolution]
        let location: Convolution
        /// The proposal filter: one weight per hidden channel and a bias (nil where the filter is off).
        let filter: (weights: [Float], bias: Float)?
        /// `names × hidden`, and a bias per name.
        let vocabulary: [Float]
        let vocabularyBias: [Float]
    }

    /// `LRPCHead`'s proposal threshold: `getattr(self, "conf", 0.001)`, which nothing sets in 8.4.190.
    static let threshold: Float = 0.001

    let levels: [Level]
    /// The branches' name prefix: empty, or `one2one_` (see above).
    let branch: String
    let names: Int
    let bins: Int
    let maskCoefficients: Int

    init(_ prefix: String, branch: String = "", masks: Bool, in file: WeightBinding) throws(WeightsError) {
        var levels: [Level] = []
        var index = 0
        let named = prefix + "." + branch
        while file.has("\(prefix).lrpc.\(index).vocab.weight") {
            let p2 = "\(named)cv2.\(index)", p3 = "\(named)cv3.\(index)", lrpc = "\(prefix).lrpc.\(index)"
            let box = [
                try Convolution(conv: p2 + ".0", stride: 1, in: file),
                try Convolution(conv: p2 + ".1", stride: 1, in: file),
            ]
            let hidden = try ContrastiveHead.hiddenLayers(p3, in: file)
            let mask = masks ? try ContrastiveHead.maskBranch("\(named)cv5.\(index)", in: file) : []
            let location = try Convolution(plain: lrpc + ".loc", in: file)
            let vocabularyView = try file.view(lrpc + ".vocab.weight")
            // Levels 0 and 1: a Linear (names × hidden); level 2 (filter off): a 1×1 Conv2d.
            let filtered = vocabularyView.shape.count == 2
            guard
                vocabularyView.shape.count == 2
                    || vocabularyView.shape.count == 4 && vocabularyView.shape[2...] == [1, 1]
            else {
                throw WeightsError(
                    path: file.path,
                    problem:
                        "tensor \(lrpc).vocab.weight has shape \(vocabularyView.shape), expected [names, channels] or a 1×1 convolution"
                )
            }
            let (count, depth) = (vocabularyView.shape[0], vocabularyView.shape[1])
            let vocabulary = vocabularyView.floats()
            let vocabularyBias = try file.floats(lrpc + ".vocab.bias", shape: [count])
            let filterWeights = try file.floats(lrpc + ".pf.weight", shape: [1, depth, 1, 1])
            let filterBias = try file.floats(lrpc + ".pf.bias", shape: [1])[0]
            levels.append(
                Level(
                    box: box, hidden: hidden, mask: mask, location: location,
                    filter: filtered ? (filterWeights, filterBias) : nil, vocabulary: vocabulary,
                    vocabularyBias: vocabularyBias))
            index += 1
        }
        guard levels.count == 3 else {
            throw WeightsError(path: file.path, problem: "\(prefix).lrpc has \(levels.count) levels, expected 3")
        }
        guard levels.map({ $0.vocabularyBias.count }).allSatisfy({ $0 == levels[0].vocabularyBias.count }),
            levels[0].vocabularyBias.count > 0
        else {
            throw WeightsError(path: file.path, problem: "\(prefix).lrpc levels name different numbers of classes")
        }
        guard levels[0].filter != nil, levels[1].filter != nil, levels[2].filter == nil else {
            throw WeightsError(
                path: file.path,
                problem:
                    "\(prefix).lrpc: expected the proposal filter on levels 0 and 1 (Linear vocab) and off on level 2")
        }
        self.levels = levels
        self.branch = branch
        names = levels[0].vocabularyBias.count
        bins = levels[0].location.outputs / 4
        maskCoefficients = levels[0].mask.last?.outputs ?? 0
        // YOLOE-26 (`reg_max=1`): the four channels are the distances, and there is no DFL.
        if bins > 1 {
            let dfl = try file.floats(prefix + ".dfl.conv.weight", shape: [1, bins, 1, 1])
            guard dfl == (0..<bins).map(Float.init) else {
                throw WeightsError(path: file.path, problem: "\(prefix).dfl.conv.weight is not 0, 1, …, \(bins - 1)")
            }
        }
    }

    /// The kept anchors' output `(4 + names) × kept` (box centre and size in input pixels, sigmoid scores) and
    /// mask coefficients `maskCoefficients × kept`, in level order.
    func run(
        _ inputs: [FeatureMap], strides: [Int], backend: any ComputeBackend
    ) -> (output: [Float], coefficients: [Float]?) {
        let kinds = maskCoefficients > 0 ? 3 : 2
        let levels = self.levels
        let maps = backend.tasks(kinds * levels.count) { branch in
            let (level, x) = (levels[branch / kinds], inputs[branch / kinds])
            switch branch % kinds {
            case 0: return level.hidden.reduce(x) { $1($0, backend: backend) }
            case 1:
                return level.location(
                    level.box[1](level.box[0](x, backend: backend), backend: backend), backend: backend)
            default:
                return level.mask[2](
                    level.mask[1](level.mask[0](x, backend: backend), backend: backend), backend: backend)
            }
        }
        // The anchors each level keeps.
        var kept: [[Int]] = []
        for (index, level) in levels.enumerated() {
            let hidden = maps[kinds * index]
            guard let filter = level.filter else {
                kept.append(Array(0..<hidden.plane))
                continue
            }
            let logits = backend.weightedChannelSum(hidden, weights: filter.weights)
            kept.append(logits.indices.filter { sigmoid(logits[$0] + filter.bias) > Self.threshold })
        }
        let total = kept.reduce(0) { $0 + $1.count }
        var output = [Float](repeating: 0, count: (4 + names) * total)
        var coefficients: [Float]? = kinds == 3 ? [Float](repeating: 0, count: maskCoefficients * total) : nil
        var column = 0
        for (index, level) in levels.enumerated() {
            let (hidden, box, anchors) = (maps[kinds * index], maps[kinds * index + 1], kept[index])
            guard !anchors.isEmpty else { continue }
            let depth = hidden.channels
            // The kept anchors' hidden features, depth × n, then names × n logits.
            let gathered = backend.gather(hidden, columns: anchors)
            let logits = backend.matmul(level.vocabulary, gathered, m: names, n: anchors.count, k: depth)
            let geometry = AnchorGeometry(
                plane: box.plane, width: box.width, anchors: anchors.count, offset: 0, stride: Float(strides[index]),
                bins: bins, classes: 0)
            let boxes = backend.decodeBoxes(box, anchors: anchors, geometry: geometry)
            let n = anchors.count
            for j in 0..<n {
                for side in 0..<4 { output[side * total + column + j] = boxes[side * n + j] }
                for k in 0..<names {
                    output[(4 + k) * total + column + j] = sigmoid(logits[k * n + j] + level.vocabularyBias[k])
                }
            }
            if kinds == 3 {
                let mask = backend.gather(maps[kinds * index + 2], columns: anchors)
                for c in 0..<maskCoefficients {
                    for j in 0..<n { coefficients![c * total + column + j] = mask[c * n + j] }
                }
            }
            column += n
        }
        return (output, coefficients)
    }
}
