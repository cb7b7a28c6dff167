/// One detection: a box in image pixels (`x1, y1, x2, y2`), a score and the index of its query.
public struct Detection: Sendable, Equatable {
    public var box: [Float]
    public var score: Float
    public var classIndex: Int
    /// The anchor (column of the raw output) it came from: where its mask coefficients are (−1 if unknown).
    public var anchor: Int

    public init(box: [Float], score: Float, classIndex: Int, anchor: Int = -1) {
        self.box = box
        self.score = score
        self.classIndex = classIndex
        self.anchor = anchor
    }

    /// Two detections are equal when their boxes, scores and queries are: where they came from is not part of
    /// what was detected (a reference's detections carry no anchor).
    public static func == (a: Detection, b: Detection) -> Bool {
        a.box == b.box && a.score == b.score && a.classIndex == b.classIndex
    }
}

/// Thresholds of ultralytics' `non_max_suppression` as `predict` calls it (ultralytics `utils/nms.py`; kept boxes have IoU ≤ the threshold).
public struct SuppressionOptions: Sendable, Equatable {
    /// Keep candidates whose best score is strictly above this (as float32).
    public var confidence: Float = 0.25
    /// Suppress a box whose IoU with a kept one is above this.
    public var iou: Double = 0.7
    public var maximumDetections = 300
    /// One suppression over all queries instead of one per query.
    public var agnostic = false
    /// Per-query confidence thresholds replacing `confidence` (empty: none).
    public var perClassConfidence: [Int: Float] = [:]
    /// Every query above its threshold at an anchor is a candidate, not only the best one (ultralytics'
    /// validator, `multi_label=True`; predict uses the best query).
    public var multiLabel = false
    public static let maximumCandidates = 30_000
    public static let classOffset: Float = 7680

    public init() {}
}

public enum NonMaxSuppression {
    /// `non_max_suppression` on one image's raw output (`(4 + classes) × anchors`, boxes as centre and size):
    /// best query per anchor (the first on ties; with `multiLabel` every query, anchor by anchor), strict `>`
    /// thresholds, at most 30,000 candidates by score, boxes offset by `query × 7680` unless agnostic, greedy
    /// suppression in descending score order keeping a box when its IoU with every kept box is ≤ the
    /// threshold, at most `maximumDetections`. `suppress`: where a GPU sorts many candidates, computes their
    /// overlaps and makes the greedy pass over them
    /// (``ComputeBackend/suppress(corners:scores:offsets:count:candidates:threshold:maximum:)``, nil where it does
    /// not), keeping what the loop keeps (``apart(corners:scores:offsets:count:threshold:maximum:)`` is the same
    /// steps on the host).
    public static func run(
        _ output: [Float], classes: Int, options: SuppressionOptions = .init(),
        suppress: (
            (
                _ corners: [Float], _ scores: [Float], _ offsets: [Float], _ count: Int, _ threshold: Double,
                _ maximum: Int
            ) -> [Int]?
        )? = nil
    ) -> [Detection] {
        let anchors = output.count / (4 + classes)
        guard classes > 0 else { return [] }
        // Candidates in flat arrays (corners, score, query, anchor): a photo of random or untrained weights gives
        // thousands, and a Detection (with its own box array) is made only for the kept. One pass over the
        // anchors through pointers (no appends, no captured arrays: a photo of random weights gives thousands).
        let thresholds = (0..<classes).map { options.perClassConfidence[$0] ?? options.confidence }
        let capacity = options.multiLabel ? anchors * classes : anchors
        var corners = [Float](repeating: 0, count: 4 * capacity), scores = [Float](repeating: 0, count: capacity)
        var queries = [Int32](repeating: 0, count: capacity), fromAnchor = [Int32](repeating: 0, count: capacity)
        var found = 0
        output.withUnsafeBufferPointer { output in
            corners.withUnsafeMutableBufferPointer { corners in
                scores.withUnsafeMutableBufferPointer { scores in
                    queries.withUnsafeMutableBufferPointer { queries in
                        fromAnchor.withUnsafeMutableBufferPointer { fromAnchor in
                            var n = 0
                            for anchor in 0..<anchors {
                                // Every query (multi-label), or the best (the first on ties).
                                var (first, last) = (0, classes)
                                if !options.multiLabel {
                                    var best: Float = -.infinity
                                    for k in 0..<classes where output[(4 + k) * anchors + anchor] > best {
                                        best = output[(4 + k) * anchors + anchor]
                                        first = k
                                    }
                                    last = first + 1
                                }
                                for k in first..<last {
                                    let score = output[(4 + k) * anchors + anchor]
                                    guard score > thresholds[k] else { continue }
                                    // The anchor's box, centre and size → corners.
                                    let cx = output[anchor], cy = output[anchors + anchor]
                                    let halfWidth = output[2 * anchors + anchor] / 2
                                    let halfHeight = output[3 * anchors + anchor] / 2
                                    corners[4 * n] = cx - halfWidth
                                    corners[4 * n + 1] = cy - halfHeight
                                    corners[4 * n + 2] = cx + halfWidth
                                    corners[4 * n + 3] = cy + halfHeight
                                    scores[n] = score
                                    queries[n] = Int32(k)
                                    fromAnchor[n] = Int32(anchor)
                                    n += 1
                                }
                            }
                            found = n
                        }
                    }
                }
            }
        }
        func detection(_ index: Int) -> Detection {
            Detection(
                box: Array(corners[(4 * index)..<(4 * index + 4)]), score: scores[index],
                classIndex: Int(queries[index]), anchor: Int(fromAnchor[index]))
        }
        // Each candidate's offset: its query's, so that boxes of different queries never overlap (none when
        // agnostic).
        let offsets = (0..<found).map { options.agnostic ? 0 : Float(queries[$0]) * SuppressionOptions.classOffset }
        if found >= overlapsOnBackend, let suppress,
            let kept = suppress(corners, scores, offsets, found, options.iou, options.maximumDetections)
        {
            return kept.map(detection)
        }
        let order = descending(scores, count: found).prefix(SuppressionOptions.maximumCandidates)
        let (shifted, areas) = arranged(corners, offsets: offsets, order: order)
        var suppressed = [Bool](repeating: false, count: order.count)
        var kept: [Detection] = []
        shifted.withUnsafeBufferPointer { box in
            for i in 0..<order.count where !suppressed[i] {
                kept.append(detection(order[i]))
                if kept.count == options.maximumDetections { break }
                for j in (i + 1)..<order.count where !suppressed[j] {
                    let width = max(min(box[4 * i + 2], box[4 * j + 2]) - max(box[4 * i], box[4 * j]), 0)
                    let height = max(min(box[4 * i + 3], box[4 * j + 3]) - max(box[4 * i + 1], box[4 * j + 1]), 0)
                    let intersection = width * height
                    guard intersection > 0 else { continue }
                    let iou = intersection / (areas[i] + areas[j] - intersection)
                    if Double(iou) > options.iou { suppressed[j] = true }
                }
            }
        }
        return kept
    }

    /// The first `count` of `scores` in descending order, index order among equal ones (−0 equal to +0): the
    /// order NMS takes its candidates in. One integer per score, the score's order inverted in the high bits and
    /// the index in the low, sorted in ascending order by radix (no comparisons).
    public static func descending(_ scores: [Float], count: Int) -> [Int] {
        let indexBits = max(1, Int.bitWidth - count.leadingZeroBitCount)
        var keys = [UInt64](repeating: 0, count: count)
        for index in 0..<count {
            let bits = (scores[index] == 0 ? 0 : scores[index]).bitPattern  // −0 as +0: equal, as compared
            let ascending = bits & 0x8000_0000 != 0 ? ~bits : bits | 0x8000_0000  // the floats' order as integers
            keys[index] = UInt64(~ascending) << UInt64(indexBits) | UInt64(index)
        }
        Self.radixSort(&keys, bits: 32 + indexBits)
        let mask = UInt64(1) << UInt64(indexBits) - 1
        return keys.map { Int($0 & mask) }
    }

    /// The candidates in `order`, their corners moved by their offsets, and their areas: what the overlaps are
    /// computed from.
    static func arranged(
        _ corners: [Float], offsets: [Float], order: ArraySlice<Int>
    ) -> (boxes: [Float], areas: [Float]) {
        let count = order.count
        var boxes = [Float](repeating: 0, count: 4 * count), areas = [Float](repeating: 0, count: count)
        corners.withUnsafeBufferPointer { corners in
            offsets.withUnsafeBufferPointer { offsets in
                boxes.withUnsafeMutableBufferPointer { boxes in
                    areas.withUnsafeMutableBufferPointer { areas in
                        for (i, index) in order.enumerated() {
                            let offset = offsets[index]
                            for side in 0..<4 { boxes[4 * i + side] = corners[4 * index + side] + offset }
                            areas[i] = (boxes[4 * i + 2] - boxes[4 * i]) * (boxes[4 * i + 3] - boxes[4 * i + 1])
                        }
                    }
                }
            }
        }
        return (boxes, areas)
    }

    /// What a backend's suppression of candidates gives
    /// (``ComputeBackend/suppress(corners:scores:offsets:count:candidates:threshold:maximum:)``), step by step on
    /// the host as a backend takes them: the sort (``descending(_:count:)``), the first 30,000 arranged, their
    /// overlaps (``overlaps(_:areas:count:threshold:)``) and the greedy pass over them
    /// (``greedy(count:mask:maximum:)``); the candidates kept, in order. What the tests hold a backend to.
    public static func apart(
        corners: [Float], scores: [Float], offsets: [Float], count: Int, threshold: Double, maximum: Int
    ) -> [Int] {
        let order = descending(scores, count: count).prefix(SuppressionOptions.maximumCandidates)
        let (boxes, areas) = arranged(corners, offsets: offsets, order: order)
        let mask = overlaps(boxes, areas: areas, count: order.count, threshold: threshold)
        return greedy(count: order.count, mask: mask, maximum: maximum).map { order[$0] }
    }

    /// Sorts `keys` (their low `bits` bits used) in ascending order, 11 bits a pass, least significant first
    /// (stable); a pass where every key has the same digit is skipped.
    static func radixSort(_ keys: inout [UInt64], bits: Int) {
        let n = keys.count
        guard n > 1 else { return }
        var other = [UInt64](repeating: 0, count: n)
        var counts = [Int](repeating: 0, count: 2048)
        var shift = 0
        while shift < bits {
            let s = UInt64(shift)
            for i in 0..<2048 { counts[i] = 0 }
            for key in keys { counts[Int((key >> s) & 2047)] += 1 }
            if counts[Int((keys[0] >> s) & 2047)] != n {
                var total = 0
                for i in 0..<2048 {
                    let count = counts[i]
                    counts[i] = total
                    total += count
                }
                for key in keys {
                    let digit = Int((key >> s) & 2047)
                    other[counts[digit]] = key
                    counts[digit] += 1
                }
                swap(&keys, &other)
            }
            shift += 11
        }
    }

    /// Candidates from which a backend's suppression is used (below, the host's loop is quicker than a round trip).
    public static let overlapsOnBackend = 512

    /// The greedy pass over precomputed overlaps (``ComputeBackend/overlaps(_:areas:count:threshold:)``), `sorted`
    /// in descending score order: a box is kept unless a kept box before it overlaps it, as the loop above keeps.
    public static func greedy(_ sorted: [Detection], mask: [UInt64], maximum: Int) -> [Detection] {
        greedy(count: sorted.count, mask: mask, maximum: maximum).map { sorted[$0] }
    }

    /// The same over `count` boxes: the positions kept.
    public static func greedy(count: Int, mask: [UInt64], maximum: Int) -> [Int] {
        let words = (count + 63) / 64
        precondition(mask.count == count * words, "an overlap mask of \(count) boxes")
        var suppressed = [UInt64](repeating: 0, count: words)
        var kept: [Int] = []
        for i in 0..<count where suppressed[i / 64] & (1 << UInt64(i % 64)) == 0 {
            kept.append(i)
            if kept.count == maximum { break }
            for word in (i / 64)..<words { suppressed[word] |= mask[i * words + word] }
        }
        return kept
    }

    /// The overlaps ``greedy(_:mask:maximum:)`` reads, computed on the host as a backend computes them (what the
    /// tests hold the mask path to).
    public static func overlaps(_ boxes: [Float], areas: [Float], count: Int, threshold: Double) -> [UInt64] {
        let words = (count + 63) / 64
        var mask = [UInt64](repeating: 0, count: count * words)
        for i in 0..<count {
            for j in (i + 1)..<max(i + 1, count) {
                let width = max(min(boxes[4 * i + 2], boxes[4 * j + 2]) - max(boxes[4 * i], boxes[4 * j]), 0)
                let height = max(min(boxes[4 * i + 3], boxes[4 * j + 3]) - max(boxes[4 * i + 1], boxes[4 * j + 1]), 0)
                let intersection = width * height
                guard intersection > 0 else { continue }
                let iou = intersection / (areas[i] + areas[j] - intersection)
                if Double(iou) > threshold { mask[i * words + j / 64] |= 1 << UInt64(j % 64) }
            }
        }
        return mask
    }

    /// What YOLO26's one-to-one head is kept by instead of NMS (ultralytics 8.4.190 `Detect.postprocess`, then
    /// `non_max_suppression(end2end=True)`): k = min(max(`maximumDetections`, 300), anchors) candidates by score
    /// — class-agnostic: each anchor's best query, the k best anchors; otherwise the k best anchors by their best
    /// score, then the k best of their (anchor, query) pairs, so that one anchor can give several queries — in
    /// descending score order (index order among equal scores), those strictly above the threshold, at most
    /// `maximumDetections`. No box suppresses another: the head was trained to give one box per object.
    public static func topK(_ output: [Float], classes: Int, options: SuppressionOptions = .init()) -> [Detection] {
        let anchors = output.count / (4 + classes)
        guard anchors > 0, classes > 0 else { return [] }
        let k = min(max(options.maximumDetections, 300), anchors)
        var best = [Float](repeating: -.infinity, count: anchors)
        var bestClass = [Int](repeating: 0, count: anchors)
        for q in 0..<classes {
            for anchor in 0..<anchors where output[(4 + q) * anchors + anchor] > best[anchor] {
                best[anchor] = output[(4 + q) * anchors + anchor]
                bestClass[anchor] = q
            }
        }
        /// The first `count` of `items` by descending score, index order among equal scores.
        func strongest(
            _ items: [(score: Float, anchor: Int, query: Int)], _ count: Int
        )
            -> ArraySlice<(score: Float, anchor: Int, query: Int)>
        {
            let order = items.indices.sorted {
                items[$0].score > items[$1].score || (items[$0].score == items[$1].score && $0 < $1)
            }
            return order.prefix(count).map { items[$0] }[...]
        }
        let topAnchors = strongest((0..<anchors).map { (best[$0], $0, bestClass[$0]) }, k)
        let chosen =
            options.agnostic
            ? topAnchors
            : strongest(
                topAnchors.flatMap { item in
                    (0..<classes).map { q in (output[(4 + q) * anchors + item.anchor], item.anchor, q) }
                }, k)
        var kept: [Detection] = []
        for item in chosen where item.score > (options.perClassConfidence[item.query] ?? options.confidence) {
            let cx = output[item.anchor], cy = output[anchors + item.anchor]
            let halfWidth = output[2 * anchors + item.anchor] / 2, halfHeight = output[3 * anchors + item.anchor] / 2
            kept.append(
                Detection(
                    box: [cx - halfWidth, cy - halfHeight, cx + halfWidth, cy + halfHeight], score: item.score,
                    classIndex: item.query, anchor: item.anchor))
            if kept.count == options.maximumDetections { break }
        }
        return kept
    }

    /// Boxes from the letterboxed input back to the original image (`ops.scale_boxes`, ultralytics 8.4.190):
    /// per-axis gains from the rounded resized size, padding `round((input − resized)/2 − 0.1)`, float32
    /// arithmetic, clipped to the image.
    public static func scaleBoxes(
        _ detections: [Detection], inputWidth: Int, inputHeight: Int, imageWidth: Int, imageHeight: Int
    ) -> [Detection] {
        let gain = min(Double(inputHeight) / Double(imageHeight), Double(inputWidth) / Double(imageWidth))
        let resizedHeight = max(Int((Double(imageHeight) * gain).rounded(.toNearestOrEven)), 1)
        let resizedWidth = max(Int((Double(imageWidth) * gain).rounded(.toNearestOrEven)), 1)
        let gainY = Float(Double(resizedHeight) / Double(imageHeight))
        let gainX = Float(Double(resizedWidth) / Double(imageWidth))
        let padX = Float(Int((Double(inputWidth - resizedWidth) / 2 - 0.1).rounded(.toNearestOrEven)))
        let padY = Float(Int((Double(inputHeight - resizedHeight) / 2 - 0.1).rounded(.toNearestOrEven)))
        return detections.map { detection in
            var out = detection
            let b = detection.box
            out.box = [
                min(max((b[0] - padX) / gainX, 0), Float(imageWidth)),
                min(max((b[1] - padY) / gainY, 0), Float(imageHeight)),
                min(max((b[2] - padX) / gainX, 0), Float(imageWidth)),
                min(max((b[3] - padY) / gainY, 0), Float(imageHeight)),
            ]
            return out
        }
    }
}
