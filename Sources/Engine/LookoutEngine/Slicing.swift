/// Sliced inference (SAHI): a large photo is cut into overlapping tiles, each tile is detected at the network's
/// input size so that small objects keep their pixels, the whole photo is detected too, and the boxes of all
/// are merged. The tiles, the automatic tile size and the merge are those of the `sahi` library
/// (`get_slice_bboxes`, `get_auto_slice_params`, `get_sliced_prediction` and its postprocessors), so that a user
/// who tuned sahi's parameters gets the same boxes.
public struct SliceOptions: Sendable, Equatable {
    /// The tile size, or sahi's choice from the photo's size and orientation (`auto_slice_resolution`).
    public enum Size: Sendable, Equatable {
        case fixed(width: Int, height: Int)
        case automatic
    }

    public var size: Size
    /// The fraction of a tile shared with the next one, across and down (`overlap_width_ratio`,
    /// `overlap_height_ratio`); below 1. The automatic size brings its own overlap.
    public var overlapWidth: Double
    public var overlapHeight: Double
    /// Whether the whole photo is detected too, as sahi's standard prediction (`perform_standard_pred`): it finds
    /// the large objects that no tile holds whole. sahi skips it when there is a single tile.
    public var wholePhoto: Bool
    public var merge: SliceMerge
    /// How many tiles are computed side by side (``Engine/prepare(image:name:size:slicing:lanes:)``); nil: one
    /// per thread of the engine's pool. In fp32 and int8 it changes the time, never the boxes (bf16's per-layer
    /// choices are measured per thread count, so a lane of one thread may choose another kernel).
    public var lanes: Int?

    public init(
        size: Size, overlapWidth: Double = 0.2, overlapHeight: Double = 0.2, wholePhoto: Bool = true,
        merge: SliceMerge = .init()
    ) {
        self.size = size
        self.overlapWidth = overlapWidth
        self.overlapHeight = overlapHeight
        self.wholePhoto = wholePhoto
        self.merge = merge
    }

    /// The most tiles one photo may be cut into (a 10,000-pixel photo in tiles of 320 with the default overlap
    /// takes about 1,600).
    public static let maximumTiles = 4096
    /// The smallest tile side.
    public static let minimumSide = 32

    /// Checks the sizes and overlaps, with a message a person can act on.
    public func validated() throws(SliceError) -> SliceOptions {
        if case .fixed(let width, let height) = size,
            width < Self.minimumSide || height < Self.minimumSide || width > 1 << 16 || height > 1 << 16
        {
            throw SliceError(
                "tiles of \(width)×\(height): each side must be between \(Self.minimumSide) and 65536 pixels")
        }
        for (name, value) in [("across", overlapWidth), ("down", overlapHeight)]
        where !(value >= 0 && value < 1) {
            throw SliceError(
                "an overlap of \(value) \(name): it is a fraction of the tile, from 0 to below 1 (0.2: a fifth)")
        }
        guard merge.threshold.isFinite, merge.threshold >= 0, merge.threshold <= 1 else {
            throw SliceError("a merge threshold of \(merge.threshold): give a fraction from 0 to 1")
        }
        return self
    }

    /// How the photo is cut, in one word an index records and reads back (``init(tiling:)``): `640x640@0.2,0.2`,
    /// `auto`, with `/tiles-only` when the whole photo is left out. The merge is not part of it.
    public var tiling: String {
        let cut: String
        switch size {
        case .fixed(let width, let height): cut = "\(width)x\(height)@\(overlapWidth),\(overlapHeight)"
        case .automatic: cut = "auto"
        }
        return cut + (wholePhoto ? "" : "/tiles-only")
    }

    /// The options a ``tiling`` word describes (default merge); nil for a word that is not one.
    public init?(tiling: String) {
        var text = Substring(tiling)
        let whole = !text.hasSuffix("/tiles-only")
        if !whole { text = text.dropLast("/tiles-only".count) }
        if text == "auto" {
            self.init(size: .automatic, wholePhoto: whole)
            return
        }
        let parts = text.split(separator: "@")
        guard parts.count == 2, let size = try? Self.parseSize(String(parts[0])) else { return nil }
        let overlaps = parts[1].split(separator: ",").compactMap { Double($0) }
        guard overlaps.count == 2 else { return nil }
        self.init(size: size, overlapWidth: overlaps[0], overlapHeight: overlaps[1], wholePhoto: whole)
        guard (try? validated()) != nil else { return nil }
    }

    /// Parses `WxH`, `N` (square) or `auto`.
    public static func parseSize(_ text: String) throws(SliceError) -> Size {
        let trimmed = text.trimmingCharacters(in: " \t")
        if trimmed.lowercased() == "auto" { return .automatic }
        let parts = trimmed.lowercased().split(separator: "x", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let width = Int(parts[0]), let height = Int(parts.last!) else {
            throw SliceError(
                "\"\(text)\" is not a tile size: give WIDTHxHEIGHT in pixels (640x640), one number for a square, or auto"
            )
        }
        return .fixed(width: width, height: height)
    }
}

/// How the boxes of the tiles and of the whole photo are merged (sahi's `postprocess_type`,
/// `postprocess_match_metric`, `postprocess_match_threshold`, `postprocess_class_agnostic`).
public struct SliceMerge: Sendable, Equatable {
    public enum Method: String, Sendable, CaseIterable {
        /// Greedy non-maximum merging: each box, best first, absorbs the boxes that overlap it (their union is
        /// its box, the best score its score).
        case greedyNMM = "greedynmm"
        /// Non-maximum merging, transitive: a box absorbs what overlaps it and what overlaps those.
        case nmm
        /// Non-maximum suppression: the overlapping boxes are dropped, nothing is merged.
        case nms
    }

    public enum Metric: String, Sendable, CaseIterable {
        /// Intersection over the smaller box's area.
        case ios
        /// Intersection over union.
        case iou
    }

    public var method: Method = .greedyNMM
    public var metric: Metric = .ios
    /// Boxes match from this overlap up (`>=`).
    public var threshold: Float = 0.5
    /// Boxes of different queries merge too.
    public var classAgnostic = false
    /// Keeps the method at any confidence threshold (sahi's `force_postprocess_type`).
    public var forced = false

    public init(
        method: Method = .greedyNMM, metric: Metric = .ios, threshold: Float = 0.5, classAgnostic: Bool = false,
        forced: Bool = false
    ) {
        self.method = method
        self.metric = metric
        self.threshold = threshold
        self.classAgnostic = classAgnostic
        self.forced = forced
    }

    /// sahi's switch for low confidence thresholds: below 0.1 the merges would grow boxes over clutter, so
    /// `get_sliced_prediction` uses NMS with IoU instead (unless `force_postprocess_type`).
    public func forConfidence(_ confidence: Float) -> SliceMerge {
        guard confidence < 0.1, method != .nms, !forced else { return self }
        var merge = self
        merge.method = .nms
        merge.metric = .iou
        return merge
    }
}

public struct SliceError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// A tile: `x1, y1, x2, y2` in the photo's pixels (right and bottom exclusive).
public struct Tile: Sendable, Equatable {
    public let x1: Int
    public let y1: Int
    public let x2: Int
    public let y2: Int
    public var width: Int { x2 - x1 }
    public var height: Int { y2 - y1 }

    public init(x1: Int, y1: Int, x2: Int, y2: Int) {
        (self.x1, self.y1, self.x2, self.y2) = (x1, y1, x2, y2)
    }
}

/// A box to merge: `x1, y1, x2, y2`, its score and its query.
public struct MergeBox: Sendable, Equatable {
    public var box: [Float]
    public var score: Float
    public var category: Int

    public init(box: [Float], score: Float, category: Int) {
        self.box = box
        self.score = score
        self.category = category
    }
}

/// A merged box and the inputs it came from (the kept one first), for the caller to merge what else they
/// carry (masks: their union, as sahi's `get_merged_mask`).
public struct MergedBox: Sendable, Equatable {
    public var merged: MergeBox
    public var members: [Int]
}

public enum Slicing {
    /// The tiles of a photo, in sahi's order (rows from the top, left to right): `get_slice_bboxes`. The last
    /// tile of a row or column is moved back to end at the photo's edge; a photo smaller than a tile is one
    /// tile, the whole photo.
    public static func tiles(width: Int, height: Int, options: SliceOptions) throws(SliceError) -> [Tile] {
        guard width > 0, height > 0 else { throw SliceError("an empty photo (\(width)×\(height)) has no tiles") }
        let (xOverlap, yOverlap, sliceWidth, sliceHeight): (Int, Int, Int, Int)
        switch options.size {
        case .fixed(let w, let h):
            // Python's int(ratio * size): the double product, truncated.
            (xOverlap, yOverlap, sliceWidth, sliceHeight) = (
                Int(options.overlapWidth * Double(w)), Int(options.overlapHeight * Double(h)), w, h
            )
        case .automatic:
            (xOverlap, yOverlap, sliceWidth, sliceHeight) = automaticParameters(width: width, height: height)
        }
        guard sliceWidth > 0, sliceHeight > 0 else {
            throw SliceError("a \(width)×\(height) photo is too small to slice automatically")
        }
        // Count first: a tiny tile on a huge photo must not allocate millions of rectangles.
        let across = Self.count(length: width, slice: sliceWidth, overlap: xOverlap)
        let down = Self.count(length: height, slice: sliceHeight, overlap: yOverlap)
        guard across.multipliedReportingOverflow(by: down).partialValue <= SliceOptions.maximumTiles,
            across <= SliceOptions.maximumTiles, down <= SliceOptions.maximumTiles
        else {
            throw SliceError(
                "tiles of \(sliceWidth)×\(sliceHeight) would cut this \(width)×\(height) photo into more than \(SliceOptions.maximumTiles) pieces: give larger tiles or a smaller overlap"
            )
        }
        var tiles: [Tile] = []
        var (yMin, yMax) = (0, 0)
        while yMax < height {
            var (xMin, xMax) = (0, 0)
            yMax = yMin + sliceHeight
            while xMax < width {
                xMax = xMin + sliceWidth
                if yMax > height || xMax > width {
                    xMax = min(width, xMax)
                    yMax = min(height, yMax)
                    xMin = max(0, xMax - sliceWidth)
                    yMin = max(0, yMax - sliceHeight)
                }
                tiles.append(Tile(x1: xMin, y1: yMin, x2: xMax, y2: yMax))
                xMin = xMax - xOverlap
            }
            yMin = yMax - yOverlap
        }
        return tiles
    }

    /// Steps along one side (sahi's loop, counted without building the tiles).
    private static func count(length: Int, slice: Int, overlap: Int) -> Int {
        if slice >= length { return 1 }
        let step = slice - overlap
        guard step > 0 else { return Int.max }
        // Starts at 0, step, 2·step, … until one reaches the end.
        return (length - slice + step - 1) / step + 1
    }

    /// A box found in a tile (`tile`; nil: the whole photo) in the photo's pixels, as sahi's ultralytics wrapper
    /// and `get_shifted_object_prediction` make it: coordinates clipped at 0 and at the photo's size (in the
    /// tile's own pixels), nil when the box is then empty, else shifted by the tile's corner.
    public static func place(_ box: [Float], from tile: Tile?, photoWidth: Int, photoHeight: Int) -> [Float]? {
        var box = box.map { max(0, $0) }
        box[0] = min(Float(photoWidth), box[0])
        box[1] = min(Float(photoHeight), box[1])
        box[2] = min(Float(photoWidth), box[2])
        box[3] = min(Float(photoHeight), box[3])
        guard box[0] < box[2], box[1] < box[3] else { return nil }
        guard let tile else { return box }
        let (dx, dy) = (Float(tile.x1), Float(tile.y1))
        return [box[0] + dx, box[1] + dy, box[2] + dx, box[3] + dy]
    }

    /// sahi's `get_auto_slice_params`: `(x overlap, y overlap, tile width, tile height)` from the photo's pixel
    /// count (below 2^18 one tile; below 2^21 two with 0.8 overlap; below 2^24 four by two with 0.4; above,
    /// eight by four) and orientation. The tile height divides the height by the column count and the width by
    /// the row count, as sahi does.
    public static func automaticParameters(width: Int, height: Int) -> (Int, Int, Int, Int) {
        let resolution = width * height
        var exponent = 0
        while exponent < 62, (1 << exponent) < resolution { exponent += 1 }
        let factor = exponent - 1
        let slide: Int
        let ratio: Double
        if factor <= 18 {
            // One tile, the whole photo (overlap ratio 1).
            return (width, height, width, height)
        } else if factor < 21 {
            (slide, ratio) = (1, 0.8)
        } else if factor < 24 {
            (slide, ratio) = (2, 0.4)
        } else {
            (slide, ratio) = (4, 0.4)
        }
        let (rows, columns): (Int, Int)
        if width < height {
            (rows, columns) = (slide, slide * 2)
        } else if width > height {
            (rows, columns) = (slide * 2, slide)
        } else {
            (rows, columns) = (slide, slide)
        }
        let sliceHeight = height / columns
        let sliceWidth = width / rows
        return (Int(Double(sliceWidth) * ratio), Int(Double(sliceHeight) * ratio), sliceWidth, sliceHeight)
    }

    /// sahi's postprocess of a sliced prediction: per query (unless class-agnostic; queries in ascending order)
    /// the boxes in descending score (ties: by x1, y1, x2, y2), overlaps in float32 as its numpy backend computes
    /// them; merges check each absorbed box against the growing one in double precision (`has_match`) and drop
    /// it when it no longer matches. NMS's answer is in descending score over all queries.
    public static func merge(_ boxes: [MergeBox], _ merge: SliceMerge) -> [MergedBox] {
        guard boxes.count > 1 else { return boxes.indices.map { MergedBox(merged: boxes[$0], members: [$0]) } }
        let groups: [[Int]]
        if merge.classAgnostic {
            groups = [Array(boxes.indices)]
        } else {
            let categories = Set(boxes.map(\.category)).sorted()
            groups = categories.map { category in boxes.indices.filter { boxes[$0].category == category } }
        }
        switch merge.method {
        case .nms:
            var kept: [Int] = []
            for group in groups { kept += suppress(group.map { boxes[$0] }, merge).map { group[$0] } }
            // A stable sort by score, descending (Python's sort over the insertion order).
            let order = kept.enumerated().sorted { a, b in
                boxes[a.element].score != boxes[b.element].score
                    ? boxes[a.element].score > boxes[b.element].score : a.offset < b.offset
            }
            return order.map { MergedBox(merged: boxes[$0.element], members: [$0.element]) }
        case .greedyNMM, .nmm:
            var result: [MergedBox] = []
            for group in groups {
                let local = group.map { boxes[$0] }
                let plan = merge.method == .nmm ? mergeTransitively(local, merge) : mergeGreedily(local, merge)
                for (keep, absorbed) in plan {
                    var merged = local[keep]
                    var members = [group[keep]]
                    for index in absorbed where matches(merged.box, local[index].box, merge) {
                        let other = local[index]
                        merged = MergeBox(
                            box: [
                                min(merged.box[0], other.box[0]), min(merged.box[1], other.box[1]),
                                max(merged.box[2], other.box[2]), max(merged.box[3], other.box[3]),
                            ],
                            score: max(merged.score, other.score),
                            category: merged.score > other.score ? merged.category : other.category)
                        members.append(group[index])
                    }
                    result.append(MergedBox(merged: merged, members: members))
                }
            }
            return result
        }
    }

    /// Indices in descending score, ties by x1, y1, x2, y2 ascending (numpy's stable `lexsort`).
    static func order(_ boxes: [MergeBox]) -> [Int] {
        boxes.indices.sorted { i, j in
            let (a, b) = (boxes[i], boxes[j])
            if a.score != b.score { return a.score > b.score }
            for k in 0..<4 where a.box[k] != b.box[k] { return a.box[k] < b.box[k] }
            return i < j
        }
    }

    /// The overlap of two boxes in float32, as sahi's numpy backend computes its matrix.
    static func overlap(_ a: [Float], _ b: [Float], _ metric: SliceMerge.Metric) -> Float {
        let areaA = (a[2] - a[0]) * (a[3] - a[1])
        let areaB = (b[2] - b[0]) * (b[3] - b[1])
        let width = max(0, min(a[2], b[2]) - max(a[0], b[0]))
        let height = max(0, min(a[3], b[3]) - max(a[1], b[1]))
        let intersection = width * height
        let denominator = metric == .iou ? areaA + areaB - intersection : min(areaA, areaB)
        return denominator > 0 ? intersection / denominator : 0
    }

    /// `has_match` on a merged box: in double precision, where a zero denominator gives no match.
    static func matches(_ a: [Float], _ b: [Float], _ merge: SliceMerge) -> Bool {
        let (a, b) = (a.map(Double.init), b.map(Double.init))
        let areaA = (a[2] - a[0]) * (a[3] - a[1])
        let areaB = (b[2] - b[0]) * (b[3] - b[1])
        let width = max(0, min(a[2], b[2]) - max(a[0], b[0]))
        let height = max(0, min(a[3], b[3]) - max(a[1], b[1]))
        let intersection = width * height
        let denominator = merge.metric == .iou ? areaA + areaB - intersection : min(areaA, areaB)
        // numpy: x / 0 is inf or nan, and neither is below a threshold of at most 1 unless nan.
        if denominator == 0 { return intersection > 0 }
        return intersection / denominator >= Double(merge.threshold)
    }

    private static func suppress(_ boxes: [MergeBox], _ merge: SliceMerge) -> [Int] {
        if merge.threshold <= 0 { return [order(boxes)[0]] }
        var suppressed = [Bool](repeating: false, count: boxes.count)
        var kept: [Int] = []
        for index in order(boxes) where !suppressed[index] {
            kept.append(index)
            for other in boxes.indices
            where overlap(boxes[index].box, boxes[other].box, merge.metric) >= merge.threshold {
                suppressed[other] = true
            }
        }
        return kept
    }

    private static func mergeGreedily(_ boxes: [MergeBox], _ merge: SliceMerge) -> [(Int, [Int])] {
        let sorted = order(boxes)
        if merge.threshold <= 0 { return [(sorted[0], Array(sorted.dropFirst()))] }
        var suppressed = [Bool](repeating: false, count: boxes.count)
        var plan: [(Int, [Int])] = []
        for (position, index) in sorted.enumerated() where !suppressed[index] {
            var absorbed: [Int] = []
            for other in sorted[(position + 1)...] where !suppressed[other] {
                if overlap(boxes[index].box, boxes[other].box, merge.metric) >= merge.threshold {
                    absorbed.append(other)
                    suppressed[other] = true
                }
            }
            plan.append((index, absorbed))
        }
        return plan
    }

    /// sahi's `nmm_from_matrix`: a box claims the boxes it dominates (a lower score, or the same score without
    /// sorting before it by coordinates) that overlap it; a claimed box passes its own claims to its keeper.
    private static func mergeTransitively(_ boxes: [MergeBox], _ merge: SliceMerge) -> [(Int, [Int])] {
        let count = boxes.count
        let sorted = order(boxes)
        func before(_ i: Int, _ j: Int) -> Bool {
            for k in 0..<4 where boxes[i].box[k] != boxes[j].box[k] { return boxes[i].box[k] < boxes[j].box[k] }
            return false
        }
        func dominates(_ i: Int, _ j: Int) -> Bool {
            i != j
                && (boxes[i].score > boxes[j].score || (boxes[i].score == boxes[j].score && !before(i, j)))
        }
        if merge.threshold <= 0 {
            // Every pair matches: the top box claims what it dominates; boxes tied with it stay alone.
            let top = sorted[0]
            var plan: [(Int, [Int])] = [(top, (0..<count).filter { dominates(top, $0) })]
            for index in sorted where index != top && !dominates(top, index) { plan.append((index, [])) }
            return plan
        }
        var keeperOf = [Int](repeating: -1, count: count)
        var plan: [(Int, [Int])] = []
        var planIndex: [Int: Int] = [:]
        for current in sorted {
            let keeper: Int
            if keeperOf[current] < 0 {
                keeperOf[current] = current
                keeper = current
                planIndex[current] = plan.count
                plan.append((current, []))
            } else {
                keeper = keeperOf[current]
            }
            for other in 0..<count
            where dominates(current, other)
                && overlap(boxes[current].box, boxes[other].box, merge.metric) >= merge.threshold
                && keeperOf[other] < 0
            {
                plan[planIndex[keeper]!].1.append(other)
                keeperOf[other] = keeper
            }
        }
        return plan
    }
}
