#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension StringProtocol {
    /// The string without leading and trailing characters from `set`.
    public func trimmingCharacters(in set: String) -> String {
        let characters = Set(set)
        var slice = self[...]
        while let first = slice.first, characters.contains(first) { slice = slice.dropFirst() }
        while let last = slice.last, characters.contains(last) { slice = slice.dropLast() }
        return String(slice)
    }
}

/// Wall-clock laps (CLOCK_MONOTONIC), for stage timings.
public struct Stopwatch: Sendable {
    private var last = Stopwatch.now()

    public init() {}

    public static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) * 1e-9
    }

    /// Seconds since the previous lap (or the start).
    public mutating func lap() -> Double {
        let current = Stopwatch.now()
        defer { last = current }
        return current - last
    }
}

/// SplitMix64: a small deterministic random number generator — the same numbers from the same seed on every run
/// and machine (region lists' training samples and centroid seeds, benchmarks' and tests' random data).
public struct SplitMix64: RandomNumberGenerator, Sendable {
    public var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
