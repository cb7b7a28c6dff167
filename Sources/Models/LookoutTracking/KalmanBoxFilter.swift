/// The constant-velocity Kalman filter a tracker follows a box with, as ultralytics defines it. ByteTrack's
/// `KalmanFilterXYAH`: the state is the box's centre x, y, aspect ratio a = w/h and height h, then their
/// velocities, noise scaled by the height. BoT-SORT's `KalmanFilterXYWH`: centre, width and height, noise scaled
/// by the width for x and w and by the height for y and h. Positions get 1/20 of the size, velocities 1/160. In
/// doubles, as numpy computes it.
public struct KalmanBoxFilter: Sendable {
    public static let positionWeight = 1.0 / 20
    public static let velocityWeight = 1.0 / 160

    public enum Layout: Sendable {
        /// x, y, aspect ratio, height (ByteTrack).
        case aspectHeight
        /// x, y, width, height (BoT-SORT).
        case widthHeight
    }

    public let layout: Layout

    /// The state's mean (8 values) and covariance (8×8, row-major).
    public struct State: Sendable, Equatable {
        public var mean: [Double]
        public var covariance: [Double]
    }

    public init(layout: Layout = .aspectHeight) {
        self.layout = layout
    }

    /// Each state value's size for the noise: the height, or (x, w) the width in the x, y, w, h layout.
    private func sizes(_ mean: [Double]) -> [Double] {
        switch layout {
        case .aspectHeight: return [mean[3], mean[3], .nan, mean[3]]
        case .widthHeight: return [mean[2], mean[3], mean[2], mean[3]]
        }
    }

    /// A new track's state from its first measurement (x, y, a, h or x, y, w, h), velocities zero.
    public func initiate(_ measurement: [Double]) -> State {
        let s = sizes(measurement)
        let p = Self.positionWeight
        let v = Self.velocityWeight
        var deviations = [2 * p * s[0], 2 * p * s[1], 2 * p * s[2], 2 * p * s[3]]
        deviations += [10 * v * s[0], 10 * v * s[1], 10 * v * s[2], 10 * v * s[3]]
        if layout == .aspectHeight {
            deviations[2] = 1e-2
            deviations[6] = 1e-5
        }
        var covariance = [Double](repeating: 0, count: 64)
        for i in 0..<8 { covariance[i * 9] = deviations[i] * deviations[i] }
        return State(mean: measurement + [0, 0, 0, 0], covariance: covariance)
    }

    /// One frame ahead: x += v, P = F P Fᵀ + Q (each sum has at most two terms, so the order numpy adds them
    /// in cannot change a bit).
    public func predict(_ state: State) -> State {
        let s = sizes(state.mean)
        let p = Self.positionWeight
        let v = Self.velocityWeight
        var deviations = [p * s[0], p * s[1], p * s[2], p * s[3], v * s[0], v * s[1], v * s[2], v * s[3]]
        if layout == .aspectHeight {
            deviations[2] = 1e-2
            deviations[6] = 1e-5
        }
        var mean = state.mean
        for i in 0..<4 { mean[i] = state.mean[i] + state.mean[i + 4] }
        let covariance = state.covariance
        // F P: row i < 4 is P[i] + P[i + 4].
        var left = covariance
        for i in 0..<4 {
            for j in 0..<8 { left[i * 8 + j] = covariance[i * 8 + j] + covariance[(i + 4) * 8 + j] }
        }
        // (F P) Fᵀ: column j < 4 is (FP)[:, j] + (FP)[:, j + 4].
        var next = left
        for i in 0..<8 {
            for j in 0..<4 { next[i * 8 + j] = left[i * 8 + j] + left[i * 8 + j + 4] }
        }
        for i in 0..<8 { next[i * 9] += deviations[i] * deviations[i] }
        return State(mean: mean, covariance: next)
    }

    /// The state corrected by a measurement (x, y, a, h or x, y, w, h).
    public func update(_ state: State, measurement: [Double]) -> State {
        let s = sizes(state.mean)
        let p = Self.positionWeight
        var noise = [p * s[0], p * s[1], p * s[2], p * s[3]]
        if layout == .aspectHeight { noise[2] = 1e-1 }
        // S = H P Hᵀ + R: the covariance's top-left 4×4 plus the measurement noise.
        var projected = [Double](repeating: 0, count: 16)
        for i in 0..<4 {
            for j in 0..<4 { projected[i * 4 + j] = state.covariance[i * 8 + j] }
            projected[i * 5] += noise[i] * noise[i]
        }
        // The gain K (8×4) solves S Kᵀ = (P Hᵀ)ᵀ, i.e. Kᵀ = S⁻¹ P[:, :4]ᵀ.
        var rightHandSides = [Double](repeating: 0, count: 32)  // 4×8: row i is P[:, i]
        for i in 0..<4 {
            for j in 0..<8 { rightHandSides[i * 8 + j] = state.covariance[j * 8 + i] }
        }
        let gainT = Self.solve(projected, rightHandSides, columns: 8)  // 4×8
        var innovation = [Double](repeating: 0, count: 4)
        for i in 0..<4 { innovation[i] = measurement[i] - state.mean[i] }
        var mean = state.mean
        for j in 0..<8 {
            var sum = 0.0
            for i in 0..<4 { sum += innovation[i] * gainT[i * 8 + j] }
            mean[j] += sum
        }
        // P − K S Kᵀ.
        var sk = [Double](repeating: 0, count: 32)  // S Kᵀ: 4×8
        for i in 0..<4 {
            for j in 0..<8 {
                var sum = 0.0
                for k in 0..<4 { sum += projected[i * 4 + k] * gainT[k * 8 + j] }
                sk[i * 8 + j] = sum
            }
        }
        var covariance = state.covariance
        for i in 0..<8 {
            for j in 0..<8 {
                var sum = 0.0
                for k in 0..<4 { sum += gainT[k * 8 + i] * sk[k * 8 + j] }
                covariance[i * 8 + j] -= sum
            }
        }
        return State(mean: mean, covariance: covariance)
    }

    /// Solves A X = B for a 4×4 A by LU decomposition with partial pivoting (as LAPACK's gesv does).
    static func solve(_ a: [Double], _ b: [Double], columns: Int) -> [Double] {
        var lu = a
        var x = b
        for k in 0..<4 {
            var pivot = k
            for i in (k + 1)..<4 where abs(lu[i * 4 + k]) > abs(lu[pivot * 4 + k]) { pivot = i }
            if pivot != k {
                for j in 0..<4 { lu.swapAt(k * 4 + j, pivot * 4 + j) }
                for j in 0..<columns { x.swapAt(k * columns + j, pivot * columns + j) }
            }
            let diagonal = lu[k * 4 + k]
            guard diagonal != 0 else { continue }
            for i in (k + 1)..<4 {
                let factor = lu[i * 4 + k] / diagonal
                lu[i * 4 + k] = factor
                for j in (k + 1)..<4 { lu[i * 4 + j] -= factor * lu[k * 4 + j] }
                for j in 0..<columns { x[i * columns + j] -= factor * x[k * columns + j] }
            }
        }
        for k in stride(from: 3, through: 0, by: -1) {
            let diagonal = lu[k * 4 + k]
            for j in 0..<columns {
                var value = x[k * columns + j]
                for i in (k + 1)..<4 { value -= lu[k * 4 + i] * x[i * columns + j] }
                x[k * columns + j] = diagonal != 0 ? value / diagonal : 0
            }
        }
        return x
    }
}
