#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A binary mask over a `width × height` picture, stored as the window that can hold set pixels (a detection's
/// mask lies inside its box): `windowWidth × windowHeight` bytes (0 or 1), row-major, at `left`, `top`.
public struct BinaryMask: Sendable, Equatable, Codable {
    public let width: Int
    public let height: Int
    public let left: Int
    public let top: Int
    public let windowWidth: Int
    public let windowHeight: Int
    public var pixels: [UInt8]

    /// A mask given whole (`width × height` bytes).
    public init(width: Int, height: Int, pixels: [UInt8]) {
        self.init(
            width: width, height: height, left: 0, top: 0, windowWidth: width, windowHeight: height, pixels: pixels)
    }

    public init(width: Int, height: Int, left: Int, top: Int, windowWidth: Int, windowHeight: Int, pixels: [UInt8]) {
        precondition(pixels.count == windowWidth * windowHeight && left >= 0 && top >= 0)
        precondition(left + windowWidth <= width && top + windowHeight <= height)
        (self.width, self.height, self.left, self.top) = (width, height, left, top)
        (self.windowWidth, self.windowHeight, self.pixels) = (windowWidth, windowHeight, pixels)
    }

    public var area: Int { pixels.reduce(0) { $0 + Int($1) } }

    /// The pixel at column `x`, row `y` of the picture (0 or 1).
    public func pixel(x: Int, y: Int) -> UInt8 {
        let (column, row) = (x - left, y - top)
        guard column >= 0, column < windowWidth, row >= 0, row < windowHeight else { return 0 }
        return pixels[row * windowWidth + column]
    }

    /// Every pixel of the picture, row-major.
    public var wholePixels: [UInt8] {
        var whole = [UInt8](repeating: 0, count: width * height)
        for row in 0..<windowHeight {
            for column in 0..<windowWidth {
                whole[(top + row) * width + left + column] = pixels[row * windowWidth + column]
            }
        }
        return whole
    }

    /// COCO's run-length encoding (pycocotools `mask.encode`): runs over the pixels in column-major order,
    /// starting with a run of zeros (possibly empty), as the compressed string `rleToString` writes: each
    /// count (after the third, minus the count two before it) in 5-bit groups, low first, 0x20 marking that
    /// more follow, offset by 48.
    public var cocoRLE: String { Self.cocoString(columnRuns) }

    /// Runs over the whole photo in column-major order, the first counting zeros (COCO's uncompressed RLE).
    public var columnRuns: [Int] {
        var counts: [Int] = []
        var current: UInt8 = 0
        var run = 0
        for x in 0..<width {
            let inside = x >= left && x < left + windowWidth
            for y in 0..<height {
                let value =
                    inside && y >= top && y < top + windowHeight ? pixels[(y - top) * windowWidth + x - left] : 0
                if value != current {
                    counts.append(run)
                    run = 0
                    current = value
                }
                run += 1
            }
        }
        counts.append(run)
        return counts
    }

    /// pycocotools' compressed string (`rleToString`) of column-major runs: from the third run on, the
    /// difference from the run two before, 5 bits a character from `0`, 0x20 for more to come.
    public static func cocoString(_ counts: [Int]) -> String {
        var text: [UInt8] = []
        for (index, count) in counts.enumerated() {
            var x = count - (index > 2 ? counts[index - 2] : 0)
            var more = true
            while more {
                var c = UInt8(truncatingIfNeeded: x & 0x1f)
                x >>= 5  // arithmetic shift: negative differences end at −1
                more = (c & 0x10) != 0 ? x != -1 : x != 0
                if more { c |= 0x20 }
                text.append(c + 48)
            }
        }
        return String(decoding: text, as: UTF8.self)
    }
}

/// ultralytics' mask post-processing for segmentation heads (`utils/ops.py`, 8.4.190): mask logits are the
/// coefficients times the prototypes (no sigmoid: the threshold is at logit 0), bilinearly resized as
/// PyTorch's `F.interpolate(mode="bilinear", align_corners=False)` resizes, thresholded `> 0`, and cropped to
/// the box (a pixel at column c, row r is kept iff `x1 ≤ c < x2` and `y1 ≤ r < y2`).
public enum MaskProcessing {
    /// The logits of one detection at the prototypes' resolution: `Σ_c coefficient[c]·prototype[c]`.
    static func logits(_ masks: MaskPrototypes, anchor: Int) -> [Float] {
        let anchors = masks.coefficients.count / masks.count
        let plane = masks.prototypes.plane
        var out = [Float](repeating: 0, count: plane)
        masks.prototypes.data.withUnsafeBufferPointer { protos in
            for c in 0..<masks.count {
                let weight = masks.coefficients[c * anchors + anchor]
                let row = protos.baseAddress! + c * plane
                for p in 0..<plane { out[p] += weight * row[p] }
            }
        }
        return out
    }

    /// One axis of PyTorch's bilinear resize (`upsample_bilinear2d`, align_corners=False): for each output
    /// index, the two source indices and their weights, from `ratio` (input/output size, or 1/scale factor)
    /// computed in float as ATen does.
    static func axis(input: Int, output: Int, ratio: Float) -> [(Int, Int, Float, Float)] {
        (0..<output).map { index in
            guard input != output else { return (index, index, 1, 0) }
            let real = max(ratio * (Float(index) + 0.5) - 0.5, 0)
            let i0 = min(Int(floorf(real)), input - 1)
            let lambda1 = min(max(real - Float(i0), 0), 1)
            return (i0, i0 + (i0 < input - 1 ? 1 : 0), 1 - lambda1, lambda1)
        }
    }

    /// Bilinear resize of a `height × width` map (a sub-rectangle `rows × columns` of a map `stride` wide)
    /// to `outHeight × outWidth`.
    /// The output rows `window.rows` and columns `window.columns` only (default: all), as a map of that size.
    static func resize(
        _ source: [Float], stride: Int, top: Int = 0, left: Int = 0, rows: Int, columns: Int, outHeight: Int,
        outWidth: Int, ratioY: Float? = nil, ratioX: Float? = nil,
        window: (rows: Range<Int>, columns: Range<Int>)? = nil
    ) -> [Float] {
        let ys = axis(input: rows, output: outHeight, ratio: ratioY ?? Float(rows) / Float(outHeight))
        let xs = axis(input: columns, output: outWidth, ratio: ratioX ?? Float(columns) / Float(outWidth))
        let (outRows, outColumns) = window ?? (0..<outHeight, 0..<outWidth)
        var out = [Float](repeating: 0, count: outRows.count * outColumns.count)
        for (y, row) in outRows.enumerated() {
            let (y0, y1, h0, h1) = ys[row]
            let r0 = (top + y0) * stride + left, r1 = (top + y1) * stride + left
            for (x, column) in outColumns.enumerated() {
                let (x0, x1, w0, w1) = xs[column]
                let upper = source[r0 + x0] * w0 + source[r0 + x1] * w1
                let lower = source[r1 + x0] * w0 + source[r1 + x1] * w1
                out[y * outColumns.count + x] = upper * h0 + lower * h1
            }
        }
        return out
    }

    /// The pixels a box can keep: columns c with `x1 ≤ c < x2`, rows r with `y1 ≤ r < y2`, within the picture.
    static func window(_ box: [Float], width: Int, height: Int) -> (rows: Range<Int>, columns: Range<Int>) {
        func span(_ low: Float, _ high: Float, _ size: Int) -> Range<Int> {
            guard low.isFinite, high.isFinite else { return 0..<0 }
            let first = min(max(Int(ceilf(max(low, 0))), 0), size)
            let end = min(max(Int(ceilf(min(high, Float(size)))), first), size)
            return first..<end
        }
        return (span(box[1], box[3], height), span(box[0], box[2], width))
    }

    /// `> 0` over a box's window (the crop: nothing outside it is kept).
    static func binarize(
        _ logits: [Float], window: (rows: Range<Int>, columns: Range<Int>), width: Int, height: Int
    ) -> BinaryMask {
        BinaryMask(
            width: width, height: height, left: window.columns.lowerBound, top: window.rows.lowerBound,
            windowWidth: window.columns.count, windowHeight: window.rows.count,
            pixels: logits.map { $0 > 0 ? 1 : 0 })
    }

    /// `process_mask(..., upsample=True)`, what `predict` gives by default: masks at the letterboxed input's
    /// size, for `box` in input pixels (`x1, y1, x2, y2`).
    public static func inputMask(
        _ masks: MaskPrototypes, anchor: Int, box: [Float], inputWidth: Int, inputHeight: Int
    ) -> BinaryMask {
        let (mh, mw) = (masks.prototypes.height, masks.prototypes.width)
        let window = window(box, width: inputWidth, height: inputHeight)
        let up = resize(
            logits(masks, anchor: anchor), stride: mw, rows: mh, columns: mw, outHeight: inputHeight,
            outWidth: inputWidth, window: window)
        return binarize(up, window: window, width: inputWidth, height: inputHeight)
    }

    /// `process_mask_native`, what `predict(retina_masks=True)` gives: masks at the photo's size, for `box` in
    /// photo pixels. The logits are first upsampled by the smallest factor f ∈ {1, 2, 4} at which the
    /// letterbox padding falls on whole pixels, then `scale_masks` crops the padding and resizes to the photo.
    public static func photoMask(
        _ masks: MaskPrototypes, anchor: Int, box: [Float], photoWidth w: Int, photoHeight h: Int
    ) -> BinaryMask {
        let (mh, mw) = (masks.prototypes.height, masks.prototypes.width)
        var logits = logits(masks, anchor: anchor)
        let gain = min(4 * Double(mh) / Double(h), 4 * Double(mw) / Double(w))
        let pad =
            (4 * mh - max(Int((Double(h) * gain).rounded(.toNearestOrEven)), 1))
            | (4 * mw - max(Int((Double(w) * gain).rounded(.toNearestOrEven)), 1))
        let f = 4 / gcd(4, pad | (pad >> 1))
        var (height, width) = (mh, mw)
        if f > 1 {
            logits = resize(
                logits, stride: mw, rows: mh, columns: mw, outHeight: f * mh, outWidth: f * mw, ratioY: 1 / Float(f),
                ratioX: 1 / Float(f))
            (height, width) = (f * mh, f * mw)
        }
        if height != h || width != w {
            // scale_masks: the content rectangle of the letterboxed map, resized to the photo.
            let scale = min(Double(height) / Double(h), Double(width) / Double(w))
            let padW = Double(width - max(Int((Double(w) * scale).rounded(.toNearestOrEven)), 1)) / 2
            let padH = Double(height - max(Int((Double(h) * scale).rounded(.toNearestOrEven)), 1)) / 2
            let top = Int((padH - 0.1).rounded(.toNearestOrEven)), left = Int((padW - 0.1).rounded(.toNearestOrEven))
            let bottom = top + max(Int((Double(h) * scale).rounded(.toNearestOrEven)), 1)
            let right = left + max(Int((Double(w) * scale).rounded(.toNearestOrEven)), 1)
            // Python slicing clamps the rectangle to the map.
            let (t, l) = (min(max(top, 0), height), min(max(left, 0), width))
            let (b, r) = (min(max(bottom, t), height), min(max(right, l), width))
            guard b > t, r > l else {
                return BinaryMask(width: w, height: h, left: 0, top: 0, windowWidth: 0, windowHeight: 0, pixels: [])
            }
            let window = window(box, width: w, height: h)
            logits = resize(
                logits, stride: width, top: t, left: l, rows: b - t, columns: r - l, outHeight: h, outWidth: w,
                window: window)
            return binarize(logits, window: window, width: w, height: h)
        }
        let window = window(box, width: w, height: h)
        let cropped = window.rows.flatMap { row in window.columns.map { logits[row * w + $0] } }
        return binarize(cropped, window: window, width: w, height: h)
    }

    static func gcd(_ a: Int, _ b: Int) -> Int {
        var (a, b) = (abs(a), abs(b))
        while b != 0 { (a, b) = (b, a % b) }
        return a
    }
}
