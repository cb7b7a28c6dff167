import Foundation

/// `estimateAffinePartial2D(from, to, RANSAC)` as OpenCV 5.0 computes it with its defaults (3 px, 2,000
/// iterations at most, confidence 0.99, 10 refinement iterations): rotation, uniform scale and translation.
enum SimilarityEstimate {
    /// OpenCV's `RNG` (multiply-with-carry), seeded as RANSAC seeds it: all ones.
    struct Generator {
        var state: UInt64 = .max

        mutating func next() -> UInt32 {
            state = UInt64(UInt32(truncatingIfNeeded: state)) &* 4_164_903_690 &+ (state >> 32)
            return UInt32(truncatingIfNeeded: state)
        }

        /// `uniform(a, b)` for integers: a + next() mod (b − a).
        mutating func uniform(_ a: Int, _ b: Int) -> Int {
            a == b ? a : Int(next() % UInt32(b - a)) + a
        }
    }

    /// The model from two point pairs, solved in closed form as OpenCV's `AffinePartial2DEstimatorCallback` does.
    static func model(_ f: [(x: Float, y: Float)], _ t: [(x: Float, y: Float)]) -> [Double] {
        let (x1, y1, x2, y2) = (Double(f[0].x), Double(f[0].y), Double(f[1].x), Double(f[1].y))
        let (u1, v1, u2, v2) = (Double(t[0].x), Double(t[0].y), Double(t[1].x), Double(t[1].y))
        let d = 1.0 / ((x1 - x2) * (x1 - x2) + (y1 - y2) * (y1 - y2))
        let s0 = d * ((u1 - u2) * (x1 - x2) + (v1 - v2) * (y1 - y2))
        let s1 = d * ((v1 - v2) * (x1 - x2) - (u1 - u2) * (y1 - y2))
        let s2 =
            d * ((v1 - v2) * (x1 * y2 - x2 * y1) - (u1 * y2 - u2 * y1) * (y1 - y2) - (u1 * x2 - u2 * x1) * (x1 - x2))
        let s3 =
            d * (-(u1 - u2) * (x1 * y2 - x2 * y1) - (v1 * x2 - v2 * x1) * (x1 - x2) - (v1 * y2 - v2 * y1) * (y1 - y2))
        return [s0, -s1, s2, s1, s0, s3]
    }

    /// `RANSACUpdateNumIters`.
    static func iterations(confidence: Double, outliers: Double, points: Int, limit: Int) -> Int {
        let p = min(max(confidence, 0), 1)
        let ep = min(max(outliers, 0), 1)
        var num = max(1 - p, Double.leastNormalMagnitude)
        var denom = 1 - pow(1 - ep, Double(points))
        if denom < Double.leastNormalMagnitude { return 0 }
        num = log(num)
        denom = log(denom)
        return denom >= 0 || -num >= Double(limit) * -denom ? limit : Int((num / denom).rounded(.toNearestOrEven))
    }

    /// RANSAC, then the refinement on its inliers; nil when no model has two inliers.
    static func ransac(
        from: [(x: Float, y: Float)], to: [(x: Float, y: Float)], threshold: Double = 3, confidence: Double = 0.99,
        maxIterations: Int = 2000, refineIterations: Int = 10
    ) -> CameraWarp? {
        let count = from.count
        guard count >= 2 else { return nil }
        var generator = Generator()
        var best: [Double]?
        var bestMask: [Bool] = []
        var bestCount = 0
        var limit = maxIterations
        let limitSquared = Float(threshold * threshold)
        var iteration = 0
        while iteration < limit {
            defer { iteration += 1 }
            var chosen: [Int] = []
            if count > 2 {
                let first = generator.uniform(0, count)
                var second = generator.uniform(0, count)
                while second == first { second = generator.uniform(0, count) }
                chosen = [first, second]
            } else {
                chosen = [0, 1]
            }
            let m = model(chosen.map { from[$0] }, chosen.map { to[$0] })
            var mask = [Bool](repeating: false, count: count)
            var good = 0
            for i in 0..<count {
                let (fx, fy) = (Double(from[i].x), Double(from[i].y))
                let a = m[0] * fx + m[1] * fy + m[2] - Double(to[i].x)
                let b = m[3] * fx + m[4] * fy + m[5] - Double(to[i].y)
                if Float(a * a + b * b) <= limitSquared {
                    mask[i] = true
                    good += 1
                }
            }
            if good > max(bestCount, 1) {
                best = m
                bestMask = mask
                bestCount = good
                limit = iterations(
                    confidence: confidence, outliers: Double(count - good) / Double(count), points: 2, limit: limit)
            }
            if count == 2 { break }
        }
        guard var model = best else { return nil }
        if count > 2 && refineIterations > 0 {
            let inliers = (0..<count).filter { bestMask[$0] }
            var parameters = [model[0], model[3], model[2], model[5]]
            refine(
                &parameters, from: inliers.map { from[$0] }, to: inliers.map { to[$0] }, iterations: refineIterations)
            model = [parameters[0], -parameters[1], parameters[2], parameters[1], parameters[0], parameters[3]]
        }
        return CameraWarp(model)
    }

    /// OpenCV 5's `LevMarq` (dense backend, default settings, geodesic acceleration on) minimising the squared
    /// distances of x' = a x − b y + tx, y' = b x + a y + ty over the parameters (a, b, tx, ty).
    static func refine(
        _ x: inout [Double], from: [(x: Float, y: Float)], to: [(x: Float, y: Float)], iterations: Int
    ) {
        let points = from.map { (Double($0.x), Double($0.y)) }
        let targets = to.map { (Double($0.x), Double($0.y)) }
        func residuals(_ h: [Double]) -> [Double] {
            var r = [Double](repeating: 0, count: 2 * points.count)
            for (i, (mx, my)) in points.enumerated() {
                r[2 * i] = h[0] * mx - h[1] * my + h[2] - targets[i].0
                r[2 * i + 1] = h[1] * mx + h[0] * my + h[3] - targets[i].1
            }
            return r
        }
        func jacobianRows(_ i: Int) -> ([Double], [Double]) {
            let (mx, my) = points[i]
            return ([mx, -my, 1, 0], [my, mx, 0, 1])
        }
        // JᵀJ does not depend on the parameters (the model is linear); Jᵀr does.
        var jtj = [Double](repeating: 0, count: 16)
        for i in points.indices {
            let (u, v) = jacobianRows(i)
            for p in 0..<4 {
                for q in 0..<4 { jtj[p * 4 + q] += u[p] * u[q] + v[p] * v[q] }
            }
        }
        func jtb(_ r: [Double]) -> [Double] {
            var out = [Double](repeating: 0, count: 4)
            for i in points.indices {
                let (u, v) = jacobianRows(i)
                for p in 0..<4 { out[p] += u[p] * r[2 * i] + v[p] * r[2 * i + 1] }
            }
            return out
        }
        func energy(_ r: [Double]) -> Double { r.reduce(0) { $0 + $1 * $1 } }

        var current = x
        var oldEnergy = energy(residuals(current))
        var gradient = jtb(residuals(current))
        var upFactor = 2.0
        var lambda = 1e-4
        var iteration = 0
        var done = false
        var smallGradient = false
        var smallStep = false
        var smallEnergyDelta = false
        while !done {
            let gradientMax = gradient.map(abs).max() ?? 0
            let diagonal = (0..<4).map { jtj[$0 * 5] }
            var enough = false
            while !enough && !done {
                let lmDiagonal = diagonal.map { min(max($0 * lambda, 1e-6), 1e32) }
                var system = jtj
                for p in 0..<4 { system[p * 5] = lmDiagonal[p] + diagonal[p] }
                var energyNow = 0.0
                var costChange = 0.0
                var stepNorm = 0.0
                var quality = 0.0
                var probe = current
                let solved = solve4(system, gradient.map { -$0 })
                if var step = solved {
                    var jacobianChange = 0.0
                    for p in 0..<4 { jacobianChange += step[p] * (gradient[p] - lmDiagonal[p] * step[p]) }
                    jacobianChange *= -0.5
                    stepNorm = step.reduce(0) { $0 + $1 * $1 }
                    // Geodesic acceleration (h = 1e-4, scale 0.5).
                    let h = 1e-4
                    let geo = (0..<4).map { current[$0] + step[$0] * h }
                    let gv = jtb(residuals(geo))
                    let rvv = (0..<4).map {
                        (gv[$0] + gradient[$0] * (h - 1) + lmDiagonal[$0] * step[$0] * h) / (h * h)
                    }
                    if let correction = solve4(system, rvv.map { -$0 }) {
                        let ratio = (correction.reduce(0) { $0 + $1 * $1 } / step.reduce(0) { $0 + $1 * $1 })
                            .squareRoot()
                        if ratio < 1 { for p in 0..<4 { step[p] += correction[p] * 0.5 } }
                    }
                    probe = (0..<4).map { current[$0] + step[$0] }
                    energyNow = energy(residuals(probe))
                    costChange = oldEnergy - energyNow
                    quality = costChange / jacobianChange
                }
                if solved == nil || costChange < 0 {
                    lambda *= upFactor
                    upFactor *= 2
                } else {
                    enough = true
                    lambda *= max(1.0 / 3.0, 1 - pow(2 * quality - 1, 3))
                    upFactor = 2
                    smallGradient = gradientMax < 1e-6
                    smallStep = stepNorm < 1e-6
                    smallEnergyDelta = costChange / energyNow < 1e-6
                    current = probe
                    oldEnergy = energyNow
                }
                iteration += 1
                done = iteration >= iterations || lambda >= 1e32 || smallGradient || smallStep || smallEnergyDelta
            }
            if !done { gradient = jtb(residuals(current)) }
        }
        x = current
    }

    /// Solves a 4×4 system by Gaussian elimination with partial pivoting; nil when singular.
    static func solve4(_ a: [Double], _ b: [Double]) -> [Double]? {
        var m = a
        var x = b
        for k in 0..<4 {
            var pivot = k
            for i in (k + 1)..<4 where abs(m[i * 4 + k]) > abs(m[pivot * 4 + k]) { pivot = i }
            guard m[pivot * 4 + k] != 0 else { return nil }
            if pivot != k {
                for j in 0..<4 { m.swapAt(k * 4 + j, pivot * 4 + j) }
                x.swapAt(k, pivot)
            }
            for i in (k + 1)..<4 {
                let factor = m[i * 4 + k] / m[k * 4 + k]
                for j in k..<4 { m[i * 4 + j] -= factor * m[k * 4 + j] }
                x[i] -= factor * x[k]
            }
        }
        for k in stride(from: 3, through: 0, by: -1) {
            var value = x[k]
            for j in (k + 1)..<4 { value -= m[k * 4 + j] * x[j] }
            x[k] = value / m[k * 4 + k]
        }
        return x
    }
}
