/// An open-addressing hash map from a pair of token ids (`left << 32 | right`) to
/// `rank << 32 | merged id`, for BPE. Plain arrays, so it can be stored and reloaded as is.
struct PairTable: Sendable, Equatable {
    static let empty = UInt64.max
    private(set) var keys: [UInt64]
    private(set) var values: [UInt64]
    private let mask: Int

    init(capacity: Int) {
        var size = 16
        while size < capacity * 2 { size <<= 1 }
        keys = [UInt64](repeating: Self.empty, count: size)
        values = [UInt64](repeating: 0, count: size)
        mask = size - 1
    }

    /// Rebuilds from stored arrays; nil unless they have the shape `init(capacity:)` gives.
    init?(keys: [UInt64], values: [UInt64]) {
        guard keys.count == values.count, keys.count >= 16, keys.count & (keys.count - 1) == 0 else { return nil }
        self.keys = keys
        self.values = values
        mask = keys.count - 1
    }

    @inline(__always)
    private static func slot(_ key: UInt64) -> Int {
        Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> 20)
    }

    /// Inserts; returns false if the key was already present.
    mutating func insert(_ key: UInt64, _ value: UInt64) -> Bool {
        var slot = Self.slot(key) & mask
        while keys[slot] != Self.empty {
            if keys[slot] == key { return false }
            slot = (slot + 1) & mask
        }
        keys[slot] = key
        values[slot] = value
        return true
    }

    @inline(__always)
    subscript(key: UInt64) -> UInt64? {
        var slot = Self.slot(key) & mask
        while true {
            let stored = keys[slot]
            if stored == key { return values[slot] }
            if stored == Self.empty { return nil }
            slot = (slot + 1) & mask
        }
    }
}
