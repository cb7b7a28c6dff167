import LookoutDetector
import LookoutJSON

/// A mask as COCO stores it: run lengths over the pixels in column-major order, the first run counting zeros
/// (pycocotools' RLE). What `lookout eval` compares detections' masks with ground truth in.
public struct COCOMask: Sendable, Equatable {
    public let height: Int
    public let width: Int
    /// Alternating runs of 0s and 1s, summing to `height × width`.
    public let counts: [Int]

    public init(height: Int, width: Int, counts: [Int]) {
        self.height = height
        self.width = width
        self.counts = counts
    }

    /// Pixels set (pycocotools' `area`).
    public var area: Int {
        var total = 0
        var index = 1
        while index < counts.count {
            total += counts[index]
            index += 2
        }
        return total
    }

    /// Pixels set in both masks (the masks are the same size). Walks the two run lists together.
    public func intersection(_ other: COCOMask) -> Int {
        var (i, j) = (0, 0)
        var (leftA, leftB) = (counts.first ?? 0, other.counts.first ?? 0)
        var total = 0
        while i < counts.count && j < other.counts.count {
            let step = min(leftA, leftB)
            if i % 2 == 1 && j % 2 == 1 { total += step }
            leftA -= step
            leftB -= step
            while leftA == 0 && i < counts.count {
                i += 1
                if i < counts.count { leftA = counts[i] }
            }
            while leftB == 0 && j < other.counts.count {
                j += 1
                if j < other.counts.count { leftB = other.counts[j] }
            }
        }
        return total
    }

    /// Row-major pixels (0 or 1), `height × width`.
    public var pixels: [UInt8] {
        var pixels = [UInt8](repeating: 0, count: height * width)
        var position = 0
        for (index, run) in counts.enumerated() {
            if index % 2 == 1 {
                for p in position..<min(position + run, height * width) {
                    pixels[(p % height) * width + p / height] = 1
                }
            }
            position += run
        }
        return pixels
    }

    /// From row-major pixels (non-zero is set).
    public init(height: Int, width: Int, pixels: [UInt8]) {
        let mask = BinaryMask(width: width, height: height, pixels: pixels.map { $0 != 0 ? 1 : 0 })
        self.init(height: height, width: width, counts: mask.columnRuns)
    }

    /// A segmentation model's mask (``BinaryMask``, at the photo's size).
    public init(_ mask: BinaryMask) {
        self.init(height: mask.height, width: mask.width, counts: mask.columnRuns)
    }

    /// pycocotools' compressed string of the runs (what results files hold).
    public var compressed: String { BinaryMask.cocoString(counts) }

    /// pycocotools' compressed string form (`rleFrString`): 5 bits per character from `0`, a continuation bit
    /// 0x20, sign-extended from bit 0x10; from the third run on, each is stored as the difference from the run
    /// two before.
    public init(compressed text: String, height: Int, width: Int) throws(COCOError) {
        var counts: [Int] = []
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            var (value, shift, more) = (0, 0, true)
            while more {
                guard let first = bytes.first, first >= 48, first < 48 + 64, shift < 60 else {
                    throw COCOError(mask: "compressed RLE counts hold a character outside the code")
                }
                let c = Int(first) - 48
                bytes = bytes.dropFirst()
                value |= (c & 0x1f) << shift
                more = c & 0x20 != 0
                shift += 5
                if !more && c & 0x10 != 0 { value |= -1 << shift }
            }
            if counts.count > 2 { value += counts[counts.count - 2] }
            counts.append(value)
        }
        try self.init(checking: counts, height: height, width: width)
    }

    /// Runs as given (uncompressed RLE), checked to cover the image exactly.
    public init(checking counts: [Int], height: Int, width: Int) throws(COCOError) {
        guard height > 0, width > 0, height <= 1 << 15, width <= 1 << 15 else {
            throw COCOError(mask: "mask size \(height)×\(width) is not an image's")
        }
        guard counts.allSatisfy({ $0 >= 0 }), counts.reduce(0, +) == height * width else {
            throw COCOError(mask: "RLE counts do not add up to the mask's \(height)×\(width) pixels")
        }
        self.init(height: height, width: width, counts: counts)
    }

    /// A polygon `[x1, y1, x2, y2, …]` rasterised as pycocotools' `frPyObjects` does (`rleFrPoly`): the
    /// vertices scaled by 5 and rounded, the edges walked one step at a time in the major direction, and a
    /// pixel column's boundary taken where the walked x crosses a pixel centre, its row rounded up.
    public init(polygon xy: [Double], height: Int, width: Int) {
        let scale = 5.0
        let k = xy.count / 2
        guard k > 0 else {
            self.init(height: height, width: width, counts: [height * width])
            return
        }
        var x = (0..<k).map { Int(scale * xy[2 * $0] + 0.5) }
        var y = (0..<k).map { Int(scale * xy[2 * $0 + 1] + 0.5) }
        x.append(x[0])
        y.append(y[0])
        var u: [Int] = []
        var v: [Int] = []
        for j in 0..<k {
            var (xs, xe, ys, ye) = (x[j], x[j + 1], y[j], y[j + 1])
            let dx = abs(xe - xs)
            let dy = abs(ys - ye)
            let flip = (dx >= dy && xs > xe) || (dx < dy && ys > ye)
            if flip { (xs, xe, ys, ye) = (xe, xs, ye, ys) }
            if dx >= dy {
                let s = dx == 0 ? 0 : Double(ye - ys) / Double(dx)
                for d in 0...dx {
                    let t = flip ? dx - d : d
                    u.append(t + xs)
                    v.append(Int(Double(ys) + s * Double(t) + 0.5))
                }
            } else {
                let s = Double(xe - xs) / Double(dy)
                for d in 0...dy {
                    let t = flip ? dy - d : d
                    v.append(t + ys)
                    u.append(Int(Double(xs) + s * Double(t) + 0.5))
                }
            }
        }
        // Boundary points per pixel column, scaled back down.
        var boundary: [Int] = []
        for j in 1..<max(u.count, 1) where u[j] != u[j - 1] {
            var xd = Double(u[j] < u[j - 1] ? u[j] : u[j] - 1)
            xd = (xd + 0.5) / scale - 0.5
            if xd.rounded(.down) != xd || xd < 0 || xd > Double(width - 1) { continue }
            var yd = Double(v[j] < v[j - 1] ? v[j] : v[j - 1])
            yd = (yd + 0.5) / scale - 0.5
            yd = yd < 0 ? 0 : yd > Double(height) ? Double(height) : yd
            yd = yd.rounded(.up)
            boundary.append(Int(xd) * height + Int(yd))
        }
        boundary.append(height * width)
        boundary.sort()
        var previous = 0
        for index in boundary.indices {
            let t = boundary[index]
            boundary[index] -= previous
            previous = t
        }
        // Zero-length runs merge their neighbours.
        var counts: [Int] = [boundary[0]]
        var j = 1
        while j < boundary.count {
            if boundary[j] > 0 {
                counts.append(boundary[j])
                j += 1
            } else {
                j += 1
                if j < boundary.count {
                    counts[counts.count - 1] += boundary[j]
                    j += 1
                }
            }
        }
        self.init(height: height, width: width, counts: counts)
    }

    /// The union of masks of one size (pycocotools' `merge`, as `annToRLE` joins a multi-part polygon).
    public static func union(_ masks: [COCOMask], height: Int, width: Int) -> COCOMask {
        guard masks.count > 1 else {
            return masks.first ?? COCOMask(height: height, width: width, counts: [height * width])
        }
        var pixels = [UInt8](repeating: 0, count: height * width)
        for mask in masks {
            for (index, value) in mask.pixels.enumerated() where value != 0 { pixels[index] = 1 }
        }
        return COCOMask(height: height, width: width, pixels: pixels)
    }

    /// pycocotools' mask IoU: intersection over union, or over the detection's area alone for a crowd region;
    /// 0 when that is empty.
    static func iou(_ detection: COCOMask, _ truth: COCOMask, crowd: Bool) -> Double {
        let both = Double(detection.intersection(truth))
        let union = crowd ? Double(detection.area) : Double(detection.area + truth.area) - both
        return union > 0 ? both / union : 0
    }
}

/// A ground-truth annotation's `segmentation`: polygons (rasterised at the image's size when evaluated), or RLE.
public enum COCOSegmentation: Sendable {
    case polygons([[Double]])
    case mask(COCOMask)

    /// Parses `segmentation` as COCO writes it: a list of polygons, `{"counts": [runs], "size": [h, w]}` or
    /// `{"counts": "compressed", "size": [h, w]}`.
    static func parse(_ node: JSONNode, path: String, field: String) throws(COCOError) -> COCOSegmentation {
        if node.kind == .array {
            var polygons: [[Double]] = []
            for p in 0..<node.count {
                let polygon = node[p]
                guard polygon.kind == .array, polygon.count >= 6, polygon.count % 2 == 0 else {
                    throw COCOError(path, "\(field)[\(p)] must be a polygon: an even list of at least 6 coordinates")
                }
                var values: [Double] = []
                for c in 0..<polygon.count {
                    guard let value = polygon[c].number, value.isFinite, abs(value) < 1e6 else {
                        throw COCOError(path, "\(field)[\(p)][\(c)] must be a coordinate")
                    }
                    values.append(value)
                }
                polygons.append(values)
            }
            return .polygons(polygons)
        }
        guard node.kind == .object, let size = node["size"], size.kind == .array, size.count == 2,
            let height = size[0].int, let width = size[1].int, let counts = node["counts"]
        else {
            throw COCOError(path, "\(field) must be polygons or RLE ({\"counts\": …, \"size\": [h, w]})")
        }
        if let text = counts.string {
            do {
                return .mask(try COCOMask(compressed: text, height: Int(height), width: Int(width)))
            } catch {
                throw COCOError(path, "\(field): \(error.problem)")
            }
        }
        guard counts.kind == .array else { throw COCOError(path, "\(field).counts must be a text or a list") }
        var runs: [Int] = []
        for index in 0..<counts.count {
            guard let run = counts[index].int else { throw COCOError(path, "\(field).counts must be whole numbers") }
            runs.append(Int(run))
        }
        do {
            return .mask(try COCOMask(checking: runs, height: Int(height), width: Int(width)))
        } catch {
            throw COCOError(path, "\(field): \(error.problem)")
        }
    }

    /// As pycocotools' `annToRLE`: polygons rasterised at the image's size and joined, RLE as it is.
    func mask(height: Int, width: Int) -> COCOMask {
        switch self {
        case .mask(let mask): mask
        case .polygons(let polygons):
            COCOMask.union(
                polygons.map { COCOMask(polygon: $0, height: height, width: width) }, height: height, width: width)
        }
    }
}
