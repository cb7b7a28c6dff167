/// Pyramidal Lucas–Kanade point tracking as OpenCV's `calcOpticalFlowPyrLK` computes it with its defaults (21×21
/// window, 3 pyramid levels at most, 30 iterations or a step under 0.01 px, minimum eigenvalue 1e-4): pyramids by
/// `pyrDown` with 21-pixel BORDER_REFLECT_101 margins, Scharr derivatives of the previous picture (zero outside),
/// and OpenCV's fixed-point bilinear interpolation (14-bit weights; pictures kept with 5 fractional bits).
enum OpticalFlow {
    static let window = 21

    /// A pyramid level with its margins, stored as OpenCV stores it: rows of `width + 2·window`, continuous.
    struct Level {
        let width: Int
        let height: Int
        let stride: Int
        /// The bordered picture (BORDER_REFLECT_101), plus a zero row of slack at the end.
        let pixels: [Int32]
        /// The Scharr derivatives (dx, dy interleaved) with a zero margin, plus slack.
        let derivatives: [Int32]
    }

    /// The levels `buildOpticalFlowPyramid` makes: the picture, then halvings while a level's half would still
    /// be larger than the window.
    static func pyramid(_ picture: GreyPicture, maxLevel: Int = 3) -> [GreyPicture] {
        var levels = [picture]
        var size = (picture.width, picture.height)
        for level in 0...maxLevel {
            if level > 0 { levels.append(pyrDown(levels[level - 1])) }
            size = ((size.0 + 1) / 2, (size.1 + 1) / 2)
            if size.0 <= window || size.1 <= window { break }
        }
        return levels
    }

    /// `pyrDown`: the 5×5 binomial filter ([1 4 6 4 1]²/256, rounded), every other pixel, BORDER_REFLECT_101.
    static func pyrDown(_ picture: GreyPicture) -> GreyPicture {
        let (w, h) = (picture.width, picture.height)
        let (dw, dh) = ((w + 1) / 2, (h + 1) / 2)
        let kernel = [1, 4, 6, 4, 1]
        var rows = [Int](repeating: 0, count: h * dw)
        for y in 0..<h {
            for x in 0..<dw {
                var sum = 0
                for k in 0..<5 { sum += kernel[k] * Int(picture.pixels[y * w + reflect(2 * x + k - 2, w)]) }
                rows[y * dw + x] = sum
            }
        }
        var out = [UInt8](repeating: 0, count: dw * dh)
        for y in 0..<dh {
            for x in 0..<dw {
                var sum = 0
                for k in 0..<5 { sum += kernel[k] * rows[reflect(2 * y + k - 2, h) * dw + x] }
                out[y * dw + x] = UInt8((sum + 128) >> 8)
            }
        }
        return GreyPicture(width: dw, height: dh, pixels: out)
    }

    static func level(_ picture: GreyPicture) -> Level {
        let (w, h) = (picture.width, picture.height)
        let stride = w + 2 * window
        let rows = h + 2 * window
        var pixels = [Int32](repeating: 0, count: (rows + 2) * stride)
        for y in 0..<rows {
            let sy = reflect(y - window, h)
            for x in 0..<stride {
                pixels[y * stride + x] = Int32(picture.pixels[sy * w + reflect(x - window, w)])
            }
        }
        // Scharr: vertical [3 10 3] and [-1 0 1], then horizontal, rows and columns reflected at the edges.
        var derivatives = [Int32](repeating: 0, count: (rows + 2) * stride * 2)
        let p = picture.pixels
        var smooth = [Int](repeating: 0, count: w)
        var difference = [Int](repeating: 0, count: w)
        for y in 0..<h {
            let above = y > 0 ? y - 1 : (h > 1 ? 1 : 0)
            let below = y < h - 1 ? y + 1 : (h > 1 ? h - 2 : 0)
            for x in 0..<w {
                let (a, m, b) = (Int(p[above * w + x]), Int(p[y * w + x]), Int(p[below * w + x]))
                smooth[x] = (a + b) * 3 + m * 10
                difference[x] = b - a
            }
            for x in 0..<w {
                let left = x > 0 ? x - 1 : (w > 1 ? 1 : 0)
                let right = x < w - 1 ? x + 1 : (w > 1 ? w - 2 : 0)
                let i = ((y + window) * stride + x + window) * 2
                derivatives[i] = Int32(Int16(truncatingIfNeeded: smooth[right] - smooth[left]))
                derivatives[i + 1] = Int32(
                    Int16(truncatingIfNeeded: (difference[right] + difference[left]) * 3 + difference[x] * 10))
            }
        }
        return Level(width: w, height: h, stride: stride, pixels: pixels, derivatives: derivatives)
    }

    /// Where each point of `previous` went in `next` (nil: lost — outside the picture, or a window without
    /// texture). Both pyramids have the same number of levels.
    static func follow(
        _ points: [(x: Float, y: Float)], from previous: [Level], to next: [Level]
    ) -> [(
        x: Float, y: Float
    )?] {
        let maxLevel = min(previous.count, next.count) - 1
        var found = points
        var ok = [Bool](repeating: true, count: points.count)
        let half = Float(window - 1) * 0.5
        for level in stride(from: maxLevel, through: 0, by: -1) {
            let i = previous[level]
            let j = next[level]
            let factor = Float(1.0 / Double(1 << level))
            for k in points.indices {
                let start = (x: points[k].x * factor, y: points[k].y * factor)
                let guess = level == maxLevel ? start : (x: found[k].x * 2, y: found[k].y * 2)
                found[k] = guess
                if let moved = track(start: start, guess: guess, i: i, j: j, half: half, lost: &ok[k], level: level) {
                    found[k] = moved
                }
            }
        }
        return points.indices.map { ok[$0] ? found[$0] : nil }
    }

    static let weightBits = 14

    /// OpenCV's bilinear weights for the fractional parts a, b: round((1−a)(1−b)·2¹⁴) and so on, the last one
    /// making up the sum.
    @inline(__always)
    static func weights(_ a: Float, _ b: Float) -> (Int32, Int32, Int32, Int32) {
        let one = Float(1 << weightBits)
        let w00 = Int32(((1 - a) * (1 - b) * one).rounded(.toNearestOrEven))
        let w01 = Int32((a * (1 - b) * one).rounded(.toNearestOrEven))
        let w10 = Int32(((1 - a) * b * one).rounded(.toNearestOrEven))
        return (w00, w01, w10, Int32(1 << weightBits) - w00 - w01 - w10)
    }

    @inline(__always)
    static func descale(_ value: Int32, _ bits: Int32) -> Int32 { (value + (1 << (bits - 1))) >> bits }

    /// One point at one level (`LKTrackerInvoker`). Returns the refined position, or nil when this level
    /// leaves the guess as it is (at level 0 such a point is lost).
    private static func track(
        start: (x: Float, y: Float), guess: (x: Float, y: Float), i: Level, j: Level, half: Float,
        lost ok: inout Bool, level: Int
    ) -> (x: Float, y: Float)? {
        let n = window
        let px = start.x - half
        let py = start.y - half
        let ix = Int(px.rounded(.down))
        let iy = Int(py.rounded(.down))
        if ix < -n || ix >= i.width || iy < -n || iy >= i.height {
            if level == 0 { ok = false }
            return nil
        }
        let (w00, w01, w10, w11) = weights(px - Float(ix), py - Float(iy))
        var patch = [Int32](repeating: 0, count: n * n)
        var gradient = [Int32](repeating: 0, count: n * n * 2)
        var differences = [Int32](repeating: 0, count: n)
        // OpenCV adds the products in four float lanes (x mod 4, for x < 16) and the rest (x ≥ 16) in one
        // sum, then tail + ((lane 0 + lane 2) + (lane 1 + lane 3)); this keeps its rounding.
        var lanes11 = [Float](repeating: 0, count: 4)
        var lanes12 = lanes11
        var lanes22 = lanes11
        var tail11: Float = 0
        var tail12: Float = 0
        var tail22: Float = 0
        let vectorWidth = (n / 8) * 8
        i.pixels.withUnsafeBufferPointer { pixels in
            i.derivatives.withUnsafeBufferPointer { derivatives in
                for y in 0..<n {
                    let row = (y + iy + n) * i.stride + ix + n
                    for x in 0..<n {
                        let s = row + x
                        let value =
                            pixels[s] * w00 + pixels[s + 1] * w01 + pixels[s + i.stride] * w10
                            + pixels[s + i.stride + 1] * w11
                        patch[y * n + x] = descale(value, Int32(weightBits - 5))
                        let d = 2 * s
                        let d2 = 2 * (s + i.stride)
                        let gx = descale(
                            derivatives[d] * w00 + derivatives[d + 2] * w01 + derivatives[d2] * w10
                                + derivatives[d2 + 2] * w11, Int32(weightBits))
                        let gy = descale(
                            derivatives[d + 1] * w00 + derivatives[d + 3] * w01 + derivatives[d2 + 1] * w10
                                + derivatives[d2 + 3] * w11, Int32(weightBits))
                        gradient[2 * (y * n + x)] = gx
                        gradient[2 * (y * n + x) + 1] = gy
                        if x < vectorWidth {
                            let lane = x & 3
                            let fx = Float(gx)
                            let fy = Float(gy)
                            lanes22[lane] += fy * fy
                            lanes12[lane] += fx * fy
                            lanes11[lane] += fx * fx
                        } else {
                            tail11 += Float(gx * gx)
                            tail12 += Float(gx * gy)
                            tail22 += Float(gy * gy)
                        }
                    }
                }
            }
        }
        func reduced(_ l: [Float]) -> Float { (l[0] + l[2]) + (l[1] + l[3]) }
        var a11 = tail11 + reduced(lanes11)
        var a12 = tail12 + reduced(lanes12)
        var a22 = tail22 + reduced(lanes22)
        let scale = Float(1.0 / Double(1 << 20))
        a11 *= scale
        a12 *= scale
        a22 *= scale
        let determinant = a11 * a22 - a12 * a12
        let minimumEigenvalue =
            (a22 + a11 - ((a11 - a22) * (a11 - a22) + 4 * a12 * a12).squareRoot()) / Float(2 * n * n)
        if minimumEigenvalue < 1e-4 || determinant < Float.ulpOfOne {
            if level == 0 { ok = false }
            return nil
        }
        let inverse = 1 / determinant
        var next = (x: guess.x - half, y: guess.y - half)
        var result = guess
        var previousDelta = (x: Float(0), y: Float(0))
        for iteration in 0..<30 {
            let jx = Int(next.x.rounded(.down))
            let jy = Int(next.y.rounded(.down))
            if jx < -n || jx >= j.width || jy < -n || jy >= j.height {
                if level == 0 { ok = false }
                break
            }
            let (v00, v01, v10, v11) = weights(next.x - Float(jx), next.y - Float(jy))
            // OpenCV's order again: per 8 columns (x < 16), lanes holding d(x)·g(x) + d(x+4)·g(x+4) in
            // integers, for x mod 4 in {0, 1} (first) and {2, 3} (second), added together at the end; the rest
            // in one sum.
            var first = [Float](repeating: 0, count: 4)  // x-part of lane pair 0, y-part, x-part of pair 1, y-part
            var second = [Float](repeating: 0, count: 4)
            var tail1: Float = 0
            var tail2: Float = 0
            j.pixels.withUnsafeBufferPointer { pixels in
                for y in 0..<n {
                    let row = (y + jy + n) * j.stride + jx + n
                    for x in 0..<n {
                        let s = row + x
                        let value =
                            pixels[s] * v00 + pixels[s + 1] * v01 + pixels[s + j.stride] * v10
                            + pixels[s + j.stride + 1] * v11
                        differences[x] = descale(value, Int32(weightBits - 5)) - patch[y * n + x]
                    }
                    let base = y * n
                    var x = 0
                    while x < vectorWidth {
                        for k in 0..<4 {
                            let (p, q) = (x + k, x + k + 4)
                            let gxSum =
                                differences[p] * gradient[2 * (base + p)] + differences[q] * gradient[2 * (base + q)]
                            let gySum =
                                differences[p] * gradient[2 * (base + p) + 1] + differences[q]
                                * gradient[2 * (base + q) + 1]
                            if k < 2 {
                                first[2 * k] += Float(gxSum)
                                first[2 * k + 1] += Float(gySum)
                            } else {
                                second[2 * (k - 2)] += Float(gxSum)
                                second[2 * (k - 2) + 1] += Float(gySum)
                            }
                        }
                        x += 8
                    }
                    for x in vectorWidth..<n {
                        tail1 += Float(differences[x] * gradient[2 * (base + x)])
                        tail2 += Float(differences[x] * gradient[2 * (base + x) + 1])
                    }
                }
            }
            let sum = (0..<4).map { first[$0] + second[$0] }  // X0, Y0, X1, Y1
            var b1 = tail1 + ((sum[0] + 0) + (sum[2] + 0))
            var b2 = tail2 + ((sum[1] + 0) + (sum[3] + 0))
            b1 *= scale
            b2 *= scale
            let delta = (x: (a12 * b2 - a22 * b1) * inverse, y: (a12 * b1 - a11 * b2) * inverse)
            next = (next.x + delta.x, next.y + delta.y)
            result = (next.x + half, next.y + half)
            if Double(delta.x) * Double(delta.x) + Double(delta.y) * Double(delta.y) <= 0.01 * 0.01 { break }
            if iteration > 0 && abs(delta.x + previousDelta.x) < 0.01 && abs(delta.y + previousDelta.y) < 0.01 {
                result = (result.x - delta.x * 0.5, result.y - delta.y * 0.5)
                break
            }
            previousDelta = delta
        }
        // At level 0 OpenCV measures the match error (Python always asks for it), which first checks that the
        // final window is still within reach.
        if level == 0 && ok {
            let fx = Int((result.x - half).rounded(.down))
            let fy = Int((result.y - half).rounded(.down))
            if fx < -n || fx >= j.width || fy < -n || fy >= j.height { ok = false }
        }
        return result
    }
}
