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
