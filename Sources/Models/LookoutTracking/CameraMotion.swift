import Foundation

/// How the picture moved between two frames, as the 2×3 matrix [a b tx; c d ty] that maps a point of the previous
/// frame onto the current one.
public struct CameraWarp: Sendable, Equatable {
    /// Row-major: a, b, tx, c, d, ty.
    public var values: [Double]

    public init(_ values: [Double]) {
        precondition(values.count == 6, "a warp has 6 values")
        self.values = values
    }

    public static let identity = CameraWarp([1, 0, 0, 0, 1, 0])
}

/// A one-byte-per-pixel grey picture.
public struct GreyPicture: Sendable, Equatable {
    public let width: Int
    public let height: Int
    public var pixels: [UInt8]

    public init(width: Int, height: Int, pixels: [UInt8]) {
        precondition(pixels.count == width * height, "pixel count does not match \(width)×\(height)")
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    /// Grey from interleaved BGR (Lookout's and OpenCV's order) as `cvtColor(BGR2GRAY)` gives it in the
    /// opencv-python wheels (Intel IPP): (3735 B + 19235 G + 9798 R + 2¹⁴) >> 15.
    public init(bgr: [UInt8], width: Int, height: Int) {
        precondition(bgr.count == width * height * 3, "pixel count does not match \(width)×\(height)×3")
        var grey = [UInt8](repeating: 0, count: width * height)
        bgr.withUnsafeBufferPointer { source in
            for i in 0..<(width * height) {
                let b = Int(source[3 * i])
                let g = Int(source[3 * i + 1])
                let r = Int(source[3 * i + 2])
                grey[i] = UInt8((r * 9798 + g * 19235 + b * 3735 + 16384) >> 15)
            }
        }
        self.init(width: width, height: height, pixels: grey)
    }

    /// `cv2.resize(grey, (width / factor, height / factor))` (INTER_LINEAR). Halving an even size is the mean of
    /// each 2×2 block, rounded ((sum + 2) >> 2), as OpenCV does it then; other sizes use OpenCV's fixed-point
    /// bilinear arithmetic (11-bit weights).
    public func reduced(by factor: Int) -> GreyPicture {
        guard factor > 1 else { return self }
        let w = width / factor
        let h = height / factor
        guard w > 0 && h > 0 else { return self }
        var out = [UInt8](repeating: 0, count: w * h)
        if factor == 2 && width == 2 * w && height == 2 * h {
            for y in 0..<h {
                for x in 0..<w {
                    let i = 2 * y * width + 2 * x
                    let sum = Int(pixels[i]) + Int(pixels[i + 1]) + Int(pixels[i + width]) + Int(pixels[i + width + 1])
                    out[y * w + x] = UInt8((sum + 2) >> 2)
                }
            }
            return GreyPicture(width: w, height: h, pixels: out)
        }
        func taps(_ count: Int, _ source: Int) -> [(Int, Int, Int)] {
            let scale = Double(source) / Double(count)
            return (0..<count).map { d in
                var f = Float((Double(d) + 0.5) * scale - 0.5)
                var s = Int(f.rounded(.down))
                f -= Float(s)
                if s < 0 {
                    s = 0
                    f = 0
                }
                if s >= source - 1 {
                    s = source - 1
                    f = 0
                }
                let w1 = Int((f * 2048).rounded(.toNearestOrEven))
                return (s, 2048 - w1, w1)
            }
        }
        let xs = taps(w, width)
        let ys = taps(h, height)
        func row(_ y: Int) -> [Int] {
            xs.map { s, w0, w1 in
                let next = min(s + 1, width - 1)
                return Int(pixels[y * width + s]) * w0 + Int(pixels[y * width + next]) * w1
            }
        }
        for (y, (s, w0, w1)) in ys.enumerated() {
            let top = row(s)
            let bottom = row(min(s + 1, height - 1))
            for x in 0..<w {
                let value = (((w0 * (top[x] >> 4)) >> 16) + ((w1 * (bottom[x] >> 4)) >> 16) + 2) >> 2
                out[y * w + x] = UInt8(min(max(value, 0), 255))
            }
        }
        return GreyPicture(width: w, height: h, pixels: out)
    }
}

/// Global motion compensation by sparse optical flow, as ultralytics' `GMC(method="sparseOptFlow")` computes it
/// for BoT-SORT: each frame in grey at half size; OpenCV's `goodFeaturesToTrack` (400 Shi–Tomasi corners, quality
/// 0.01, no minimum distance); those of the previous frame followed into this one by `calcOpticalFlowPyrLK`
/// (21×21 window, up to 3 pyramid levels); `estimateAffinePartial2D` (RANSAC, 3 px, OpenCV's seeded generator,
/// then its Levenberg–Marquardt refinement) on the points that were followed; the translation doubled back to
/// full size. The identity when there is no previous frame, too few points (5) or no estimate.
///
/// Every step is OpenCV's arithmetic (fixed-point interpolation, the same random draws), so the points and
/// inliers are OpenCV's; sums of floats are added in another order, and the refinement's geodesic step adds
/// cancellation noise, so warps agree to about 1e-6 rather than to the last bit.
public final class CameraMotion {
    public let downscale: Int
    private var previous: [OpticalFlow.Level]?
    private var corners: [(x: Float, y: Float)] = []

    public init(downscale: Int = 2) {
        self.downscale = max(1, downscale)
    }

    public func reset() {
        previous = nil
        corners = []
    }

    /// The warp from the previous frame to this one (interleaved BGR pixels).
    public func estimate(bgr: [UInt8], width: Int, height: Int) -> CameraWarp {
        estimate(GreyPicture(bgr: bgr, width: width, height: height).reduced(by: downscale))
    }

    /// The warp from the previous frame to this one, given the grey, reduced picture.
    public func estimate(_ picture: GreyPicture) -> CameraWarp {
        let found = Self.corners(picture)
        let pyramid = OpticalFlow.pyramid(picture).map(OpticalFlow.level)
        defer {
            previous = found.isEmpty ? nil : pyramid
            corners = found
        }
        guard let previous, previous[0].width == picture.width, previous[0].height == picture.height else {
            return .identity
        }
        let flow = OpticalFlow.follow(corners, from: previous, to: pyramid)
        var from: [(x: Float, y: Float)] = []
        var to: [(x: Float, y: Float)] = []
        for (i, moved) in flow.enumerated() {
            guard let moved else { continue }
            from.append(corners[i])
            to.append(moved)
        }
        guard from.count > 4, var warp = SimilarityEstimate.ransac(from: from, to: to) else { return .identity }
        warp.values[2] *= Double(downscale)
        warp.values[5] *= Double(downscale)
        return warp
    }

    /// `goodFeaturesToTrack(maxCorners 400, qualityLevel 0.01, minDistance 0, blockSize 3)`: the minimum
    /// eigenvalue of each pixel's 3×3 gradient covariance (Sobel, BORDER_REFLECT_101), kept above 1% of the
    /// largest, local maxima of a 3×3 neighbourhood (the image's outer ring excluded), strongest first (equal
    /// values: the later pixel first), at most `maxCorners`.
    public static func corners(
        _ picture: GreyPicture, maxCorners: Int = 400, quality: Double = 0.01
    ) -> [(
        x: Float, y: Float
    )] {
        let w = picture.width
        let h = picture.height
        guard w >= 3 && h >= 3 else { return [] }
        let eigen = minimumEigenvalues(picture)
        var largest: Float = 0
        for value in eigen where value > largest { largest = value }
        let threshold = Float(Double(largest) * quality)
        let kept = eigen.map { $0 > threshold ? $0 : 0 }
        var candidates: [(value: Float, offset: Int)] = []
        for y in 1..<(h - 1) {
            for x in 1..<(w - 1) {
                let value = kept[y * w + x]
                guard value != 0 else { continue }
                var peak = value
                for dy in -1...1 {
                    for dx in -1...1 { peak = max(peak, kept[(y + dy) * w + x + dx]) }
                }
                if value == peak { candidates.append((value, y * w + x)) }
            }
        }
        candidates.sort { $0.value != $1.value ? $0.value > $1.value : $0.offset > $1.offset }
        return candidates.prefix(maxCorners).map { (Float($0.offset % w), Float($0.offset / w)) }
    }

    /// `calcOpticalFlowPyrLK(previous, next, points)` with its defaults: where each point went (nil: lost).
    public static func follow(
        _ points: [(x: Float, y: Float)], from previous: GreyPicture, to next: GreyPicture
    )
        -> [(x: Float, y: Float)?]
    {
        OpticalFlow.follow(
            points, from: OpticalFlow.pyramid(previous).map(OpticalFlow.level),
            to: OpticalFlow.pyramid(next).map(OpticalFlow.level))
    }

    /// `estimateAffinePartial2D(from, to, RANSAC)` with its defaults (nil: no estimate).
    public static func similarity(from: [(x: Float, y: Float)], to: [(x: Float, y: Float)]) -> CameraWarp? {
        SimilarityEstimate.ransac(from: from, to: to)
    }

    /// `cornerMinEigenVal(blockSize 3, ksize 3)` in float32.
    static func minimumEigenvalues(_ picture: GreyPicture) -> [Float] {
        let w = picture.width
        let h = picture.height
        let scale = Float(1.0 / (4.0 * 3.0 * 255.0))
        // The picture with a one-pixel BORDER_REFLECT_101 margin.
        let pw = w + 2
        var padded = [Float](repeating: 0, count: pw * (h + 2))
        for y in 0..<(h + 2) {
            let sy = reflect(y - 1, h)
            for x in 0..<pw { padded[y * pw + x] = Float(picture.pixels[sy * w + reflect(x - 1, w)]) }
        }
        var xx = [Float](repeating: 0, count: pw * (h + 2))
        var xy = xx
        var yy = xx
        padded.withUnsafeBufferPointer { p in
            for y in 0..<h {
                for x in 0..<w {
                    // Sobel as a row filter, then a column filter, the scale inside the derivative's kernel.
                    let c = (y + 1) * pw + x + 1
                    let r0 = p[c - pw + 1] * scale - p[c - pw - 1] * scale
                    let r1 = p[c + 1] * scale - p[c - 1] * scale
                    let r2 = p[c + pw + 1] * scale - p[c + pw - 1] * scale
                    let s0 = p[c - pw - 1] + p[c - pw] * 2 + p[c - pw + 1]
                    let s2 = p[c + pw - 1] + p[c + pw] * 2 + p[c + pw + 1]
                    let dx = r0 + r1 * 2 + r2
                    let dy = s2 * scale - s0 * scale
                    xx[c] = dx * dx
                    xy[c] = dx * dy
                    yy[c] = dy * dy
                }
            }
        }
        // The products' margins, reflected again for the box filter.
        for field in [0, 1, 2] {
            func fill(_ a: inout [Float]) {
                for y in 0..<(h + 2) {
                    let sy = reflect(y - 1, h) + 1
                    for x in [0, pw - 1] { a[y * pw + x] = a[sy * pw + reflect(x - 1, w) + 1] }
                    if y == 0 || y == h + 1 {
                        for x in 1..<(pw - 1) { a[y * pw + x] = a[sy * pw + x] }
                    }
                }
            }
            if field == 0 { fill(&xx) } else if field == 1 { fill(&xy) } else { fill(&yy) }
        }
        var eigen = [Float](repeating: 0, count: w * h)
        for y in 0..<h {
            for x in 0..<w {
                // The 3×3 box sum: each row's three, then the three rows.
                var a: Float = 0
                var b: Float = 0
                var c: Float = 0
                for j in 0..<3 {
                    let m = (y + j) * pw + x + 1
                    a += xx[m - 1] + xx[m] + xx[m + 1]
                    b += xy[m - 1] + xy[m] + xy[m + 1]
                    c += yy[m - 1] + yy[m] + yy[m + 1]
                }
                a *= 0.5
                c *= 0.5
                eigen[y * w + x] = (a + c) - ((a - c) * (a - c) + b * b).squareRoot()
            }
        }
        return eigen
    }
}

/// BORDER_REFLECT_101: …, 2, 1 | 0, 1, 2, … n−1 | n−2, ….
@inline(__always)
func reflect(_ i: Int, _ n: Int) -> Int {
    guard n > 1 else { return 0 }
    var i = i
    while i < 0 || i >= n { i = i < 0 ? -i : 2 * n - 2 - i }
    return i
}
