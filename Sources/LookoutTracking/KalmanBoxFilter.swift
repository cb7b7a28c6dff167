/// The constant-velocity Kalman filter ByteTrack follows a box with, as ultralytics' `KalmanFilterXYAH` defines it:
/// the state is the box's centre x, y, aspect ratio a = w/h and height h, then their velocities; noise scales
/// with the height (1/20 of it for positions, 1/160 for velocities). In doubles, as numpy computes it.
public struct KalmanBoxFilter: Sendable {
    public static let positionWeight = 1.0 / 20
    public static let velocityWeight = 1.0 / 160

    /// The state's mean (8 values) and covariance (8×8, row-major).
    public struct State: Sendable, Equatable {
        public var mean: [Double]
        public var covariance: [Double]
    }

    public init() {}

    /// A new track's state from its first measurement (x, y, a, h), velocities zero.
    public func initiate(_ measurement: [Double]) -> State {
        let h = measurement[3]
        let p = Self.positionWeight
        let v = Self.velocityWeight
        let deviations = [2 * p * h, 2 * p * h, 1e-2, 2 * p * h, 10 * v * h, 10 * v * h, 1e-5, 10 * v * h]
        var covariance = [Double](repeating: 0, count: 64)
        for i in 0..<8 { covariance[i * 9] = deviations[i] * deviations[i] }
        return State(mean: measurement + [0, 0, 0, 0], covariance: covariance)
    }

    /// One frame ahead: x += v, P = F P Fᵀ + Q (each sum has at most two terms, so the order numpy adds them
    /// in cannot change a bit).
    public func predict(_ state: State) -> State {
        let h = state.mean[3]
        let p = Self.positionWeight
        let v = Self.velocityWeight
        let deviations = [p * h, p * h, 1e-2, p * h, v * h, v * h, 1e-5, v * h]
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

    /// The state corrected by a measurement (x, y, a, h).
    public func update(_ state: State, measurement: [Double]) -> State {
        let h = state.mean[3]
        let p = Self.positionWeight
        let noise = [p * h, p * h, 1e-1, p * h]
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
