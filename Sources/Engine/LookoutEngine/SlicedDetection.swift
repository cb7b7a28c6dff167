import LookoutDetector
import LookoutImage
import LookoutSupport
import LookoutTensor

extension Image {
    /// The pixels of a rectangle of the image (rows `y..<y + height`, columns `x..<x + width`), as PIL's `crop`
    /// and numpy's slicing give sahi its tiles.
    public func cropped(x: Int, y: Int, width: Int, height: Int) -> Image {
        precondition(
            x >= 0 && y >= 0 && width > 0 && height > 0 && x + width <= self.width && y + height <= self.height)
        if x == 0 && y == 0 && width == self.width && height == self.height { return self }
        let rowBytes = width * channels
        var pixels = [UInt8](repeating: 0, count: rowBytes * height)
        self.pixels.withUnsafeBufferPointer { source in
            pixels.withUnsafeMutableBufferPointer { target in
                for row in 0..<height {
                    let from = ((y + row) * self.width + x) * channels
                    target.baseAddress!.advanced(by: row * rowBytes).update(
                        from: source.baseAddress!.advanced(by: from), count: rowBytes)
                }
            }
        }
        return Image(width: width, height: height, channels: channels, pixels: pixels)
    }
}

/// A photo cut into tiles (``SliceOptions``), each tile letterboxed and through the backbone, and the whole photo
/// too where sahi's standard prediction asks for it: what any query set then reuses.
public struct SlicedImage: Sendable {
    public let name: String
    public let width: Int
    public let height: Int
    public let options: SliceOptions
    public let tiles: [Tile]
    /// One prepared image per tile, in ``tiles``' order.
    public internal(set) var parts: [PreparedImage]
    /// The whole photo (nil with one tile, or without the standard prediction).
    public internal(set) var whole: PreparedImage?
    public var timings: StageTimings
}

/// A sliced photo's raw scores for one query set: each part's (the tiles', then the whole photo's), so that new
/// thresholds cost only the suppressions and the merge.
public struct ScoredSlices: Sendable {
    public let name: String
    public let width: Int
    public let height: Int
    public let tiles: [Tile]
    public let merge: SliceMerge
    /// One per tile, then the whole photo's where it was detected.
    public var parts: [ScoredImage]
    public var timings: StageTimings
}

extension Engine {
    /// Decodes a photo, cuts it into tiles and runs the backbone on each (and on the whole photo).
    public func prepare(
        path: String, size: Int = 640, pixelLimit: Int = ImageFile.defaultPixelLimit, slicing: SliceOptions,
        lanes: Int? = nil
    ) throws(ImageError) -> SlicedImage {
        var clock = Stopwatch()
        let image = try ImageFile.read(path, pixelLimit: pixelLimit)
        let decode = clock.lap()
        var sliced = try prepare(image: image, name: path, size: size, slicing: slicing, lanes: lanes)
        sliced.timings.decode = decode
        return sliced
    }

    /// Cuts a decoded photo into tiles (sahi's ``Slicing/tiles(width:height:options:)``) and runs the backbone on
    /// each, then on the whole photo where there are several tiles and ``SliceOptions/wholePhoto`` is set. A
    /// photo that would make too many tiles fails as too large for them.
    ///
    /// The tiles run side by side: `lanes` threads (default: ``SliceOptions/lanes``, else one per thread of the
    /// engine's pool; at most one per tile), each an engine of its own with one thread and the shared weights, as `index` and `detect` run
    /// photos. On the CPU, small layers keep one core busier than they keep several (two tiles on two cores took
    /// 0.6–0.7 times the time of one after the other, BENCHMARKS.md); the arithmetic is the same bits on any
    /// thread count, so the tiles' features are those of one at a time. 1: one tile at a time on every thread.
    /// Engines on a GPU run one tile at a time.
    public func prepare(
        image: Image, name: String, size: Int = 640, slicing: SliceOptions, lanes: Int? = nil
    ) throws(ImageError)
        -> SlicedImage
    {
        let tiles: [Tile]
        do {
            tiles = try Slicing.tiles(width: image.width, height: image.height, options: slicing)
        } catch {
            throw ImageError(path: name, kind: .tooLarge, problem: error.description)
        }
        var timings = StageTimings()
        var parts: [PreparedImage] = []
        parts.reserveCapacity(tiles.count)
        let laneCount = backend is CPUBackend ? min(max(lanes ?? slicing.lanes ?? pool.threadCount, 1), tiles.count) : 1
        // Each tile's crop, letterbox and backbone; the seconds of the crop.
        func part(_ engine: Engine, _ tile: Tile) -> (PreparedImage, Double) {
            var clock = Stopwatch()
            let crop = image.cropped(x: tile.x1, y: tile.y1, width: tile.width, height: tile.height)
            let cut = clock.lap()
            return (engine.prepare(image: crop, name: name, size: size), cut)
        }
        if laneCount > 1 {
            let pipeline = LanePipeline<(PreparedImage, Double)>(count: tiles.count, lanes: laneCount) {
                let lane = sharingWeights(pool: ComputePool(threads: 1))
                return { index in part(lane, tiles[index]) }
            }
            var clock = Stopwatch()
            var (preprocess, backbone) = (0.0, 0.0)
            for index in tiles.indices {
                let (prepared, cut) = pipeline.result(index)
                preprocess += cut + prepared.timings.preprocess
                backbone += prepared.timings.backbone
                parts.append(prepared)
            }
            // The lanes' seconds overlap: the stages get their shares of the wall time the tiles took.
            let wall = clock.lap(), spent = preprocess + backbone
            if spent > 0 {
                timings.preprocess += wall * preprocess / spent
                timings.backbone += wall * backbone / spent
            }
        } else {
            for tile in tiles {
                let (prepared, cut) = part(self, tile)
                timings.preprocess += cut + prepared.timings.preprocess
                timings.backbone += prepared.timings.backbone
                parts.append(prepared)
            }
        }
        var whole: PreparedImage? = nil
        if slicing.wholePhoto && tiles.count > 1 {
            let part = prepare(image: image, name: name, size: size)
            timings.preprocess += part.timings.preprocess
            timings.backbone += part.timings.backbone
            whole = part
        }
        return SlicedImage(
            name: name, width: image.width, height: image.height, options: slicing, tiles: tiles, parts: parts,
            whole: whole, timings: timings)
    }

    /// Detects a query in every tile and in the whole photo, moves the tiles' boxes (and masks) to the photo's
    /// pixels, and merges them as sahi does (``SliceMerge``, switched to NMS with IoU below a confidence of 0.1 as
    /// sahi switches). Boxes that are empty after clipping are dropped, as sahi drops them.
    public func detect(_ sliced: SlicedImage, _ query: PreparedQuery, textEncode: Bool = true) -> ImageDetections {
        var result = detections(score(sliced, query), options: query.options)
        if textEncode {
            var timings = result.timings
            timings.textEncode = query.textEncodeSeconds
            result = ImageDetections(
                image: result.image, width: result.width, height: result.height, detections: result.detections,
                timings: timings)
        }
        return result
    }

    /// The neck and head of every part for one query set: what any thresholds are then applied to
    /// (``detections(_:options:)``), without the backbones' features.
    public func score(_ sliced: SlicedImage, _ query: PreparedQuery) -> ScoredSlices {
        let parts = (sliced.parts + (sliced.whole.map { [$0] } ?? [])).map {
            score($0, plan: query.plan, text: query.features).withoutFeatures()
        }
        return ScoredSlices(
            name: sliced.name, width: sliced.width, height: sliced.height, tiles: sliced.tiles,
            merge: sliced.options.merge,
            parts: parts, timings: sliced.timings)
    }

    /// Each part's detections under `options`, placed in the photo and merged.
    public func detections(_ scored: ScoredSlices, options: SuppressionOptions) -> ImageDetections {
        var timings = scored.timings
        var candidates: [ImageDetections.Item] = []
        var clock = Stopwatch()
        var networkSeconds = 0.0
        let labels = scored.parts.first?.labels ?? []
        for (index, part) in scored.parts.enumerated() {
            networkSeconds += part.timings.neckAndHead
            let tile = index < scored.tiles.count ? scored.tiles[index] : nil
            for item in detections(part, options: options).detections {
                guard let moved = Self.moved(item, from: tile, photoWidth: scored.width, photoHeight: scored.height)
                else { continue }
                candidates.append(moved)
            }
        }
        // sahi looks at the model's one threshold, not at a query's own.
        let merge = scored.merge.forConfidence(options.confidence)
        let merged = Slicing.merge(
            candidates.map { MergeBox(box: $0.box, score: $0.score, category: $0.queryIndex) }, merge)
        let items = merged.map { result -> ImageDetections.Item in
            var item = ImageDetections.Item(
                label: labels[result.merged.category], queryIndex: result.merged.category, score: result.merged.score,
                box: result.merged.box)
            let masks = result.members.compactMap { candidates[$0].mask }
            if masks.count == result.members.count, let first = masks.first {
                item.mask = masks.dropFirst().reduce(first) { $0.union($1) }
            }
            return item
        }
        timings.neckAndHead = networkSeconds
        timings.suppression = clock.lap()
        return ImageDetections(
            image: scored.name, width: scored.width, height: scored.height, detections: items, timings: timings)
    }

    /// A tile's detection in the photo's pixels (``Slicing/place(_:from:photoWidth:photoHeight:)``), its mask
    /// moved with it; nil when its box is empty.
    static func moved(
        _ item: ImageDetections.Item, from tile: Tile?, photoWidth: Int, photoHeight: Int
    )
        -> ImageDetections.Item?
    {
        guard let box = Slicing.place(item.box, from: tile, photoWidth: photoWidth, photoHeight: photoHeight) else {
            return nil
        }
        var moved = ImageDetections.Item(label: item.label, queryIndex: item.queryIndex, score: item.score, box: box)
        if let mask = item.mask, let tile {
            moved.mask = BinaryMask(
                width: photoWidth, height: photoHeight, left: mask.left + tile.x1, top: mask.top + tile.y1,
                windowWidth: mask.windowWidth, windowHeight: mask.windowHeight, pixels: mask.pixels)
        } else {
            moved.mask = item.mask
        }
        return moved
    }
}

extension BinaryMask {
    /// The pixels set in either mask (both of the same picture size), in the window that holds both.
    public func union(_ other: BinaryMask) -> BinaryMask {
        precondition(width == other.width && height == other.height)
        let left = min(self.left, other.left)
        let top = min(self.top, other.top)
        let right = max(self.left + windowWidth, other.left + other.windowWidth)
        let bottom = max(self.top + windowHeight, other.top + other.windowHeight)
        let (w, h) = (right - left, bottom - top)
        var pixels = [UInt8](repeating: 0, count: w * h)
        for mask in [self, other] {
            for row in 0..<mask.windowHeight {
                let target = (mask.top - top + row) * w + (mask.left - left)
                let source = row * mask.windowWidth
                for column in 0..<mask.windowWidth where mask.pixels[source + column] != 0 {
                    pixels[target + column] = 1
                }
            }
        }
        return BinaryMask(
            width: width, height: height, left: left, top: top, windowWidth: w, windowHeight: h, pixels: pixels)
    }
}

extension Engine {
    /// One decoded photo's detections: sliced where `slicing` is given (``prepare(image:name:size:slicing:)``),
    /// whole otherwise. What every command that can slice calls.
    public func detect(
        image: Image, name: String, size: Int, slicing: SliceOptions?, _ query: PreparedQuery, textEncode: Bool = false
    ) throws(ImageError) -> ImageDetections {
        guard let slicing else {
            return detect(prepare(image: image, name: name, size: size), query, textEncode: textEncode)
        }
        return detect(
            try prepare(image: image, name: name, size: size, slicing: slicing), query, textEncode: textEncode)
    }

    /// A photo file's detections, sliced or whole, the decoding counted in its timings.
    public func detect(
        path: String, size: Int, slicing: SliceOptions?, _ query: PreparedQuery, textEncode: Bool = false
    ) throws(ImageError) -> ImageDetections {
        guard let slicing else { return detect(try prepare(path: path, size: size), query, textEncode: textEncode) }
        return detect(try prepare(path: path, size: size, slicing: slicing), query, textEncode: textEncode)
    }
}

extension BinaryMask {
    /// The outer boundary of the mask's largest 8-connected region, as pixel coordinates in the picture, clockwise
    /// from its top-left pixel (Moore-neighbour tracing): the polygon a YOLO-seg label file holds for it (as
    /// ultralytics writes `masks.xy`, the contour of the mask). Empty for an empty mask.
    public func outline() -> [(x: Int, y: Int)] {
        let (w, h) = (windowWidth, windowHeight)
        guard w > 0, h > 0 else { return [] }
        // The largest component, by a flood fill over the window.
        var component = [Int32](repeating: -1, count: w * h)
        var best = (label: Int32(-1), size: 0, start: 0)
        var next: Int32 = 0
        for start in 0..<(w * h) where pixels[start] != 0 && component[start] < 0 {
            var stack = [start]
            component[start] = next
            var size = 0
            while let index = stack.popLast() {
                size += 1
                let (x, y) = (index % w, index / w)
                for dy in -1...1 {
                    for dx in -1...1 where dx != 0 || dy != 0 {
                        let (nx, ny) = (x + dx, y + dy)
                        guard nx >= 0, ny >= 0, nx < w, ny < h else { continue }
                        let n = ny * w + nx
                        if pixels[n] != 0 && component[n] < 0 {
                            component[n] = next
                            stack.append(n)
                        }
                    }
                }
            }
            if size > best.size { best = (next, size, start) }
            next += 1
        }
        guard best.size > 0 else { return [] }
        func inside(_ x: Int, _ y: Int) -> Bool {
            x >= 0 && y >= 0 && x < w && y < h && component[y * w + x] == best.label
        }
        // Moore-neighbour tracing from the first pixel in row order (its west neighbour is outside).
        let directions = [(-1, 0), (-1, -1), (0, -1), (1, -1), (1, 0), (1, 1), (0, 1), (-1, 1)]
        let start = (best.start % w, best.start / w)
        var points = [start]
        if best.size == 1 { return points.map { (left + $0.0, top + $0.1) } }
        func direction(_ dx: Int, _ dy: Int) -> Int { directions.firstIndex { $0 == (dx, dy) }! }
        var current = start
        var back = 0  // the outside neighbour the sweep starts from: west of the start
        var steps = 0
        while steps < 4 * w * h + 8 {
            var moved = false
            for k in 1...8 {
                let d = (back + k) % 8
                let candidate = (current.0 + directions[d].0, current.1 + directions[d].1)
                guard inside(candidate.0, candidate.1) else { continue }
                // The neighbour swept just before it is outside: the next sweep starts there.
                let previous = (current.0 + directions[(d + 7) % 8].0, current.1 + directions[(d + 7) % 8].1)
                back = direction(previous.0 - candidate.0, previous.1 - candidate.1)
                current = candidate
                moved = true
                break
            }
            guard moved, current != start else { break }
            points.append(current)
            steps += 1
        }
        return points.map { (left + $0.0, top + $0.1) }
    }
}
