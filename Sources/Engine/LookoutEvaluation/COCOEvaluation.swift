import LookoutJSON
import LookoutSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A COCO-format ground-truth file: `images`, `annotations` (`bbox` = [x, y, w, h]), `categories` (with
/// optional LVIS-style `synonyms`).
public struct COCODataset: Sendable {
    public struct ImageEntry: Sendable {
        public var id: Int64
        public var fileName: String
        /// The `width` and `height` fields, when given (polygon segmentations are rasterised at this size).
        public var width: Int? = nil
        public var height: Int? = nil
    }

    public struct Category: Sendable {
        public var id: Int64
        public var name: String
        public var synonyms: [String]
    }

    public struct Annotation: Sendable {
        public var id: Int64
        public var imageID: Int64
        public var categoryID: Int64
        /// `[x, y, w, h]` in pixels.
        public var box: [Double]
        /// The `area` field (COCOeval sorts ground truth into small, medium and large by it), else w × h.
        public var area: Double
        public var crowd: Bool
        /// The `segmentation` field (segmentation mAP), when given.
        public var segmentation: COCOSegmentation? = nil
    }

    public var images: [ImageEntry]
    public var categories: [Category]
    public var annotations: [Annotation]

    /// Reads and checks a ground-truth file: every error names the file and the field.
    public static func load(path: String) throws(COCOError) -> COCODataset {
        let document = try COCOError.document(path)
        let root = document.root
        guard root.kind == .object else { throw COCOError(path, "the file must hold a JSON object") }
        func list(_ key: String) throws(COCOError) -> JSONNode {
            guard let node = root[key], node.kind == .array else {
                throw COCOError(path, "\"\(key)\" must be an array (COCO format: images, annotations, categories)")
            }
            return node
        }
        func integer(_ node: JSONNode, _ key: String, _ field: String) throws(COCOError) -> Int64 {
            guard let value = node[key]?.int else { throw COCOError(path, "\(field).\(key) must be a whole number") }
            return value
        }
        var dataset = COCODataset(images: [], categories: [], annotations: [])
        let images = try list("images")
        var imageIDs = Set<Int64>()
        for index in 0..<images.count {
            let field = "images[\(index)]"
            let image = images[index]
            guard image.kind == .object else { throw COCOError(path, "\(field) must be an object") }
            let id = try integer(image, "id", field)
            guard let name = image["file_name"]?.string, !name.isEmpty else {
                throw COCOError(path, "\(field).file_name must be a file name")
            }
            guard imageIDs.insert(id).inserted else { throw COCOError(path, "\(field).id \(id) is given twice") }
            var entry = ImageEntry(id: id, fileName: name)
            if let width = image["width"]?.int, let height = image["height"]?.int, width > 0, height > 0,
                width <= 1 << 15, height <= 1 << 15
            {
                (entry.width, entry.height) = (Int(width), Int(height))
            }
            dataset.images.append(entry)
        }
        let categories = try list("categories")
        var categoryIDs = Set<Int64>()
        for index in 0..<categories.count {
            let field = "categories[\(index)]"
            let category = categories[index]
            guard category.kind == .object else { throw COCOError(path, "\(field) must be an object") }
            let id = try integer(category, "id", field)
            guard let name = category["name"]?.string, !name.trimmingCharacters(in: " \t").isEmpty else {
                throw COCOError(path, "\(field).name must be a non-empty text")
            }
            var synonyms: [String] = []
            if let list = category["synonyms"], list.kind != .null {
                guard list.kind == .array else { throw COCOError(path, "\(field).synonyms must be an array of texts") }
                for s in 0..<list.count {
                    guard let text = list[s].string else {
                        throw COCOError(path, "\(field).synonyms[\(s)] must be a text")
                    }
                    synonyms.append(text)
                }
            }
            guard categoryIDs.insert(id).inserted else { throw COCOError(path, "\(field).id \(id) is given twice") }
            dataset.categories.append(Category(id: id, name: name, synonyms: synonyms))
        }
        guard !dataset.categories.isEmpty else { throw COCOError(path, "\"categories\" is empty: nothing to look for") }
        let annotations = try list("annotations")
        var annotationIDs = Set<Int64>()
        for index in 0..<annotations.count {
            let field = "annotations[\(index)]"
            let annotation = annotations[index]
            guard annotation.kind == .object else { throw COCOError(path, "\(field) must be an object") }
            let imageID = try integer(annotation, "image_id", field)
            let categoryID = try integer(annotation, "category_id", field)
            guard imageIDs.contains(imageID) else {
                throw COCOError(path, "\(field).image_id \(imageID) is not among the images")
            }
            guard categoryIDs.contains(categoryID) else {
                throw COCOError(path, "\(field).category_id \(categoryID) is not among the categories")
            }
            let box = try Self.box(annotation["bbox"], path: path, field: "\(field).bbox")
            var area = box[2] * box[3]
            if let given = annotation["area"], given.kind != .null {
                guard let value = given.number, value.isFinite else {
                    throw COCOError(path, "\(field).area must be a number")
                }
                area = value
            }
            var crowd = false
            if let given = annotation["iscrowd"], given.kind != .null {
                guard let value = given.int ?? given.bool.map({ $0 ? 1 : 0 }) else {
                    throw COCOError(path, "\(field).iscrowd must be 0 or 1")
                }
                crowd = value != 0
            }
            let id = try integer(annotation, "id", field)
            guard annotationIDs.insert(id).inserted else { throw COCOError(path, "\(field).id \(id) is given twice") }
            var segmentation: COCOSegmentation? = nil
            if let given = annotation["segmentation"], given.kind != .null {
                segmentation = try COCOSegmentation.parse(given, path: path, field: "\(field).segmentation")
            }
            dataset.annotations.append(
                Annotation(
                    id: id, imageID: imageID, categoryID: categoryID, box: box, area: area, crowd: crowd,
                    segmentation: segmentation))
        }
        return dataset
    }

    static func box(_ node: JSONNode?, path: String, field: String) throws(COCOError) -> [Double] {
        guard let node, node.kind == .array, node.count == 4 else {
            throw COCOError(path, "\(field) must be [x, y, width, height]")
        }
        var box: [Double] = []
        for i in 0..<4 {
            guard let value = node[i].number, value.isFinite else {
                throw COCOError(path, "\(field) must be [x, y, width, height] (numbers)")
            }
            box.append(value)
        }
        return box
    }
}

/// One detection in COCO's results format: `{"image_id", "category_id", "bbox": [x, y, w, h], "score"}`.
public struct COCODetection: Sendable, Equatable {
    public var imageID: Int64
    public var categoryID: Int64
    public var box: [Double]
    public var score: Double
    /// The detection's mask at the image's size (segmentation models).
    public var mask: COCOMask?

    public init(imageID: Int64, categoryID: Int64, box: [Double], score: Double) {
        self.imageID = imageID
        self.categoryID = categoryID
        self.box = box
        self.score = score
    }

    /// A detection in photo pixels (`x1, y1, x2, y2`, float32) as the results file writes it: width and height
    /// in float32, each number as its shortest decimal, read back as a double (what pycocotools reads).
    public init(imageID: Int64, categoryID: Int64, corners: [Float], score: Float) {
        func written(_ value: Float) -> Double { Double("\(value)") ?? Double(value) }
        self.init(
            imageID: imageID, categoryID: categoryID,
            box: [
                written(corners[0]), written(corners[1]), written(corners[2] - corners[0]),
                written(corners[3] - corners[1]),
            ],
            score: written(score))
    }

    public var json: JSONValue {
        .object(
            [
                ("image_id", .int(imageID)), ("category_id", .int(categoryID)),
                ("bbox", .array(box.map { .double($0) })), ("score", .double(score)),
            ]
                + (mask.map { mask in
                    [
                        (
                            "segmentation",
                            .object([
                                ("size", .array([.int(Int64(mask.height)), .int(Int64(mask.width))])),
                                ("counts", .string(mask.compressed)),
                            ])
                        )
                    ]
                } ?? []))
    }

    /// A results file (a JSON array of detections).
    public static func load(path: String) throws(COCOError) -> [COCODetection] {
        let root = try COCOError.document(path).root
        guard root.kind == .array else { throw COCOError(path, "a results file must hold a JSON array of detections") }
        var detections: [COCODetection] = []
        for index in 0..<root.count {
            let item = root[index]
            let field = "[\(index)]"
            guard item.kind == .object, let image = item["image_id"]?.int, let category = item["category_id"]?.int,
                let score = item["score"]?.number
            else { throw COCOError(path, "\(field) needs image_id, category_id (whole numbers) and score") }
            let box = try COCODataset.box(item["bbox"], path: path, field: "\(field).bbox")
            var detection = COCODetection(imageID: image, categoryID: category, box: box, score: score)
            if let segmentation = item["segmentation"], segmentation.kind != .null {
                // Results carry compressed RLE, as pycocotools' loadRes expects of segmentation results.
                guard segmentation["counts"]?.string != nil,
                    case .mask(let mask) = try COCOSegmentation.parse(
                        segmentation, path: path, field: "\(field).segmentation")
                else { throw COCOError(path, "\(field).segmentation must be compressed RLE") }
                detection.mask = mask
            }
            detections.append(detection)
        }
        return detections
    }
}

/// A ground-truth or results file that cannot be used, naming the file and the field.
public struct COCOError: Error, CustomStringConvertible, Sendable {
    public let message: String

    /// The problem alone, without the file.
    public let problem: String

    public init(_ path: String, _ problem: String) {
        message = "\(path): \(problem)"
        self.problem = problem
    }

    /// A mask's own problem, before a file and field are known.
    init(mask problem: String) {
        message = problem
        self.problem = problem
    }

    public var description: String { message }

    static func document(_ path: String) throws(COCOError) -> JSONDocument {
        let bytes: [UInt8]
        do {
            bytes = try FileContents.read(path, maximumSize: 4 << 30)
        } catch {
            throw COCOError(path, "cannot be read (\(error))")
        }
        do {
            return try JSONDocument(bytes: bytes)
        } catch {
            throw COCOError(path, "is not JSON: \(error)")
        }
    }
}

/// pycocotools' `COCOeval` for boxes, step for step: the same matching (ten IoU thresholds 0.50:0.95,
/// crowd regions matched by intersection over the detection's area and any number of times, ground truth
/// outside an area range ignored, detections sorted by score with a stable sort and cut at 100 per image and
/// category), the same accumulation (images in id order, 101 recall points, the precision envelope) and the
/// same 12-number summary (-1 where nothing counts).
public enum COCOEvaluation {
    public static let iouThresholds = linspace(0.5, 0.95, 10)
    public static let recallThresholds = linspace(0, 1, 101)
    public static let maximumDetections = [1, 10, 100]
    public static let areaRanges: [(name: String, low: Double, high: Double)] = [
        ("all", 0, 1e10), ("small", 0, 1024), ("medium", 1024, 9216), ("large", 9216, 1e10),
    ]
    /// The names of the summary's numbers, in order.
    public static let statNames = [
        "AP", "AP50", "AP75", "AP_small", "AP_medium", "AP_large", "AR1", "AR10", "AR100", "AR_small", "AR_medium",
        "AR_large",
    ]

    /// numpy's `linspace`: `i × step + start`, the last value exactly `stop`.
    static func linspace(_ start: Double, _ stop: Double, _ count: Int) -> [Double] {
        let step = (stop - start) / Double(count - 1)
        var values = (0..<count).map { Double($0) * step + start }
        values[count - 1] = stop
        return values
    }

    public struct Summary: Sendable {
        /// The 12 numbers of `COCOeval.summarize()`, in ``COCOEvaluation/statNames`` order.
        public var stats: [Double]
        /// Per category (sorted by id): AP over IoU 0.50:0.95 (all areas, 100 detections), AP at IoU 0.5,
        /// the number of ground-truth boxes (crowd excluded) and of detections; -1 where nothing counts.
        public var categories: [(id: Int64, name: String, ap: Double, ap50: Double, truth: Int, detections: Int)]
    }

    struct ImageResult {
        var scores: [Double]
        var matched: [[Bool]]  // [threshold][detection]
        var ignored: [[Bool]]  // [threshold][detection]
        var truthIgnored: [Bool]
    }

    /// What overlap is measured on: boxes (`iouType="bbox"`) or masks (`"segm"`).
    public enum IoUType: String, Sendable {
        case bbox, segm
    }

    /// Evaluates `detections` against `truth` (detections of categories the truth does not have are left
    /// out, as COCOeval does; those of images it does not have are an error, as loadRes makes them).
    ///
    /// `.segm` compares masks as pycocotools does: ground-truth polygons rasterised at the image's size
    /// (`annToRLE`), RLE as given; a detection's area stays its box's (loadRes computes it from `bbox` when the
    /// results have one, as Lookout's do), ground truth's its `area` field, as for boxes.
    public static func evaluate(
        truth: COCODataset, detections: [COCODetection], iouType: IoUType = .bbox
    ) throws(COCOError) -> Summary {
        let imageIDs = Set(truth.images.map(\.id))
        if let stray = detections.first(where: { !imageIDs.contains($0.imageID) }) {
            throw COCOError("detections", "image_id \(stray.imageID) is not among the ground truth's images")
        }
        var truthMasks: [Int64: COCOMask] = [:]
        if iouType == .segm {
            var sizes: [Int64: (height: Int, width: Int)] = [:]
            for image in truth.images {
                if let height = image.height, let width = image.width { sizes[image.id] = (height, width) }
            }
            for annotation in truth.annotations {
                guard let segmentation = annotation.segmentation else {
                    throw COCOError(
                        "ground truth",
                        "annotation \(annotation.id) has no segmentation: segmentation mAP needs one for each")
                }
                guard let (height, width) = sizes[annotation.imageID] else {
                    throw COCOError(
                        "ground truth", "image \(annotation.imageID) has no width and height: masks need them")
                }
                let mask = segmentation.mask(height: height, width: width)
                guard mask.height == height && mask.width == width else {
                    throw COCOError(
                        "ground truth",
                        "annotation \(annotation.id)'s mask is \(mask.height)×\(mask.width), its image \(height)×\(width)"
                    )
                }
                truthMasks[annotation.id] = mask
            }
            for detection in detections {
                guard let mask = detection.mask else {
                    throw COCOError("detections", "a detection of image \(detection.imageID) has no mask")
                }
                guard let size = sizes[detection.imageID], size == (mask.height, mask.width) else {
                    throw COCOError(
                        "detections",
                        "a detection of image \(detection.imageID) has a \(mask.height)×\(mask.width) mask, not its image's size"
                    )
                }
            }
        }
        let images = truth.images.map(\.id).sorted()
        let categories = truth.categories.sorted { $0.id < $1.id }
        struct Key: Hashable {
            var image: Int64
            var category: Int64
        }
        var truthByKey: [Key: [COCODataset.Annotation]] = [:]
        // Annotations per image in file order, as COCO.getAnnIds gives them.
        for annotation in truth.annotations {
            truthByKey[Key(image: annotation.imageID, category: annotation.categoryID), default: []].append(annotation)
        }
        var detectionsByKey: [Key: [(id: Int64, box: [Double], score: Double, area: Double, mask: COCOMask?)]] = [:]
        for (index, d) in detections.enumerated() {
            detectionsByKey[Key(image: d.imageID, category: d.categoryID), default: []].append(
                (Int64(index + 1), d.box, d.score, d.box[2] * d.box[3], d.mask))
        }
        let limit = maximumDetections.last!
        let t = iouThresholds.count
        // evalImgs[category][area][image]
        var results: [[[ImageResult?]]] = []
        for category in categories {
            var perArea: [[ImageResult?]] = Array(repeating: [], count: areaRanges.count)
            for image in images {
                let key = Key(image: image, category: category.id)
                let gts = truthByKey[key] ?? []
                var dts = detectionsByKey[key] ?? []
                // Stable sort by descending score, at most 100: computeIoU and evaluateImg both do this.
                dts = stableSorted(dts) { $0.score > $1.score }
                if dts.count > limit { dts.removeLast(dts.count - limit) }
                let ious = dts.map { d in
                    gts.map { g in
                        iouType == .segm
                            ? COCOMask.iou(d.mask!, truthMasks[g.id]!, crowd: g.crowd)
                            : iou(d.box, g.box, crowd: g.crowd)
                    }
                }
                for (a, range) in areaRanges.enumerated() {
                    guard !(gts.isEmpty && dts.isEmpty) else {
                        perArea[a].append(nil)
                        continue
                    }
                    let outside = gts.map { $0.crowd || $0.area < range.low || $0.area > range.high }
                    let order = stableSorted(Array(gts.indices)) { !outside[$0] && outside[$1] }
                    let gtIgnore = order.map { outside[$0] }
                    let crowd = order.map { gts[$0].crowd }
                    let gtIDs = order.map { gts[$0].id }
                    var gtMatched = [[Int64]](repeating: [Int64](repeating: 0, count: gts.count), count: t)
                    var dtMatched = [[Int64]](repeating: [Int64](repeating: 0, count: dts.count), count: t)
                    var dtIgnore = [[Bool]](repeating: [Bool](repeating: false, count: dts.count), count: t)
                    if !gts.isEmpty && !dts.isEmpty {
                        for (ti, threshold) in iouThresholds.enumerated() {
                            for (di, d) in dts.enumerated() {
                                var best = min(threshold, 1 - 1e-10)
                                var match = -1
                                for gi in 0..<gts.count {
                                    if gtMatched[ti][gi] > 0 && !crowd[gi] { continue }
                                    if match > -1 && !gtIgnore[match] && gtIgnore[gi] { break }
                                    let overlap = ious[di][order[gi]]
                                    if overlap < best { continue }
                                    best = overlap
                                    match = gi
                                }
                                guard match >= 0 else { continue }
                                dtIgnore[ti][di] = gtIgnore[match]
                                dtMatched[ti][di] = gtIDs[match]
                                gtMatched[ti][match] = d.id
                            }
                        }
                    }
                    for ti in 0..<t {
                        for (di, d) in dts.enumerated() where dtMatched[ti][di] == 0 {
                            if d.area < range.low || d.area > range.high { dtIgnore[ti][di] = true }
                        }
                    }
                    perArea[a].append(
                        ImageResult(
                            scores: dts.map(\.score), matched: dtMatched.map { $0.map { $0 != 0 } }, ignored: dtIgnore,
                            truthIgnored: gtIgnore))
                }
            }
            results.append(perArea)
        }

        // accumulate(): precision[t][r][k][a][m], recall[t][k][a][m], -1 where nothing counts.
        let r = recallThresholds.count, k = categories.count, areas = areaRanges.count, m = maximumDetections.count
        var precision = [Double](repeating: -1, count: t * r * k * areas * m)
        var recall = [Double](repeating: -1, count: t * k * areas * m)
        func pIndex(_ ti: Int, _ ri: Int, _ ki: Int, _ ai: Int, _ mi: Int) -> Int {
            (((ti * r + ri) * k + ki) * areas + ai) * m + mi
        }
        func rIndex(_ ti: Int, _ ki: Int, _ ai: Int, _ mi: Int) -> Int { ((ti * k + ki) * areas + ai) * m + mi }
        for ki in 0..<k {
            for ai in 0..<areas {
                let evaluated = results[ki][ai].compactMap { $0 }
                guard !evaluated.isEmpty else { continue }
                for (mi, maxDet) in maximumDetections.enumerated() {
                    var scores: [Double] = []
                    var matched = [[Bool]](repeating: [], count: t)
                    var ignored = [[Bool]](repeating: [], count: t)
                    var truthCount = 0
                    for e in evaluated {
                        let n = min(maxDet, e.scores.count)
                        scores += e.scores[0..<n]
                        for ti in 0..<t {
                            matched[ti] += e.matched[ti][0..<n]
                            ignored[ti] += e.ignored[ti][0..<n]
                        }
                        truthCount += e.truthIgnored.count { !$0 }
                    }
                    guard truthCount > 0 else { continue }
                    let order = stableSorted(Array(scores.indices)) { scores[$0] > scores[$1] }
                    for ti in 0..<t {
                        // numpy's cumsum over every detection: an ignored one adds to neither sum but keeps
                        // its place (the same recall and precision again).
                        var tp = 0.0, fp = 0.0
                        var rc: [Double] = [], pr: [Double] = []
                        rc.reserveCapacity(order.count)
                        pr.reserveCapacity(order.count)
                        for index in order {
                            if !ignored[ti][index] {
                                if matched[ti][index] { tp += 1 } else { fp += 1 }
                            }
                            rc.append(tp / Double(truthCount))
                            pr.append(tp / (fp + tp + Double.ulpOfOne))
                        }
                        let nd = rc.count
                        recall[rIndex(ti, ki, ai, mi)] = nd > 0 ? rc[nd - 1] : 0
                        if nd > 1 {
                            for i in stride(from: nd - 1, to: 0, by: -1) where pr[i] > pr[i - 1] { pr[i - 1] = pr[i] }
                        }
                        var start = 0
                        for (ri, threshold) in recallThresholds.enumerated() {
                            while start < nd && rc[start] < threshold { start += 1 }
                            precision[pIndex(ti, ri, ki, ai, mi)] = start < nd ? pr[start] : 0
                        }
                    }
                }
            }
        }

        func mean(_ values: [Double]) -> Double {
            let counted = values.filter { $0 > -1 }
            return counted.isEmpty ? -1 : counted.reduce(0, +) / Double(counted.count)
        }
        func averagePrecision(threshold: Double?, area: Int, maxDet: Int, category: Int? = nil) -> Double {
            let mi = maximumDetections.firstIndex(of: maxDet)!
            let thresholds =
                threshold.map { value in iouThresholds.indices.filter { iouThresholds[$0] == value } }
                ?? Array(0..<t)
            var values: [Double] = []
            for ti in thresholds {
                for ri in 0..<r {
                    for ki in category.map({ [$0] }) ?? Array(0..<k) {
                        values.append(precision[pIndex(ti, ri, ki, area, mi)])
                    }
                }
            }
            return mean(values)
        }
        func averageRecall(area: Int, maxDet: Int) -> Double {
            let mi = maximumDetections.firstIndex(of: maxDet)!
            var values: [Double] = []
            for ti in 0..<t { for ki in 0..<k { values.append(recall[rIndex(ti, ki, area, mi)]) } }
            return mean(values)
        }
        let stats = [
            averagePrecision(threshold: nil, area: 0, maxDet: 100),
            averagePrecision(threshold: 0.5, area: 0, maxDet: 100),
            averagePrecision(threshold: 0.75, area: 0, maxDet: 100),
            averagePrecision(threshold: nil, area: 1, maxDet: 100),
            averagePrecision(threshold: nil, area: 2, maxDet: 100),
            averagePrecision(threshold: nil, area: 3, maxDet: 100),
            averageRecall(area: 0, maxDet: 1), averageRecall(area: 0, maxDet: 10), averageRecall(area: 0, maxDet: 100),
            averageRecall(area: 1, maxDet: 100), averageRecall(area: 2, maxDet: 100),
            averageRecall(area: 3, maxDet: 100),
        ]
        var perCategory: [(id: Int64, name: String, ap: Double, ap50: Double, truth: Int, detections: Int)] = []
        var truthCounts: [Int64: Int] = [:], detectionCounts: [Int64: Int] = [:]
        for a in truth.annotations where !a.crowd { truthCounts[a.categoryID, default: 0] += 1 }
        for d in detections { detectionCounts[d.categoryID, default: 0] += 1 }
        for (ki, category) in categories.enumerated() {
            perCategory.append(
                (
                    category.id, category.name, averagePrecision(threshold: nil, area: 0, maxDet: 100, category: ki),
                    averagePrecision(threshold: 0.5, area: 0, maxDet: 100, category: ki),
                    truthCounts[category.id] ?? 0, detectionCounts[category.id] ?? 0
                ))
        }
        return Summary(stats: stats, categories: perCategory)
    }

    /// pycocotools' box IoU (`[x, y, w, h]`; a crowd region divides by the detection's area alone).
    static func iou(_ d: [Double], _ g: [Double], crowd: Bool) -> Double {
        let width = min(d[0] + d[2], g[0] + g[2]) - max(d[0], g[0])
        guard width > 0 else { return 0 }
        let height = min(d[1] + d[3], g[1] + g[3]) - max(d[1], g[1])
        guard height > 0 else { return 0 }
        let intersection = width * height
        let union = crowd ? d[2] * d[3] : d[2] * d[3] + g[2] * g[3] - intersection
        return intersection / union
    }

    /// A stable sort (numpy's `kind='mergesort'`): equal elements keep their order.
    static func stableSorted<T>(_ items: [T], by before: (T, T) -> Bool) -> [T] {
        var indexed = Array(items.enumerated())
        indexed.sort { before($0.element, $1.element) || (!before($1.element, $0.element) && $0.offset < $1.offset) }
        return indexed.map(\.element)
    }

    /// The summary as COCOeval prints it.
    public static func summaryLines(_ stats: [Double]) -> [String] {
        let rows: [(String, String, String, String)] = [
            ("Average Precision", "(AP)", "0.50:0.95", "   all"), ("Average Precision", "(AP)", "0.50     ", "   all"),
            ("Average Precision", "(AP)", "0.75     ", "   all"), ("Average Precision", "(AP)", "0.50:0.95", " small"),
            ("Average Precision", "(AP)", "0.50:0.95", "medium"), ("Average Precision", "(AP)", "0.50:0.95", " large"),
            ("Average Recall   ", "(AR)", "0.50:0.95", "   all"), ("Average Recall   ", "(AR)", "0.50:0.95", "   all"),
            ("Average Recall   ", "(AR)", "0.50:0.95", "   all"), ("Average Recall   ", "(AR)", "0.50:0.95", " small"),
            ("Average Recall   ", "(AR)", "0.50:0.95", "medium"), ("Average Recall   ", "(AR)", "0.50:0.95", " large"),
        ]
        let dets = [100, 100, 100, 100, 100, 100, 1, 10, 100, 100, 100, 100]
        return rows.enumerated().map { i, row in
            let value = stats[i]
            let number = value < 0 ? "-1.000" : String(format3(value))
            return
                " \(row.0) \(row.1) @[ IoU=\(row.2) | area=\(row.3) | maxDets=\(String(repeating: " ", count: 3 - String(dets[i]).count))\(dets[i]) ] = \(number)"
        }
    }

    /// Three decimals, as `%.3f` prints them (the exact binary value rounded, as Python's format does).
    public static func format3(_ value: Double) -> String {
        var buffer = [CChar](repeating: 0, count: 64)
        _ = withVaList([value]) { vsnprintf(&buffer, buffer.count, "%.3f", $0) }
        return String(cString: buffer)
    }
}
