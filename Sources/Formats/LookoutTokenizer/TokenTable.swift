/// Token strings stored as UTF-8 in one buffer, with an open-addressing hash index from bytes to id.
///
/// Loading CLIP's vocabulary means 49,408 insertions and ~147,000 look-ups of short byte strings;
/// keying by raw bytes (FNV-1a) instead of `String` avoids Unicode-aware hashing and all per-token
/// allocations.
struct TokenTable: Sendable {
    private var bytes: [UInt8] = []
    private var offsets: [Int32] = [0]
    private var slots: [Int32]
    private let mask: Int

    init(capacity: Int) {
        var size = 16
        while size < capacity * 2 { size <<= 1 }
        slots = [Int32](repeating: -1, count: size)
        mask = size - 1
        bytes.reserveCapacity(capacity * 8)
        offsets.reserveCapacity(capacity + 1)
    }

    /// Rebuilds from stored arrays; nil unless they are consistent.
    init?(bytes: [UInt8], offsets: [Int32], slots: [Int32]) {
        guard offsets.first == 0, offsets.last == Int32(bytes.count), slots.count >= 16,
            slots.count & (slots.count - 1) == 0, slots.count >= (offsets.count - 1) * 2,
            zip(offsets, offsets.dropFirst()).allSatisfy({ $0 <= $1 }),
            slots.allSatisfy({ $0 >= -1 && $0 < Int32(offsets.count - 1) })
        else { return nil }
        self.bytes = bytes
        self.offsets = offsets
        self.slots = slots
        self.mask = slots.count - 1
    }

    /// The arrays behind the table, for storing.
    var storage: (bytes: [UInt8], offsets: [Int32], slots: [Int32]) { (bytes, offsets, slots) }

    var count: Int { offsets.count - 1 }

    /// Appends a token with the next id (`count`); returns the id it already had if present.
    mutating func append(_ token: UnsafeBufferPointer<UInt8>) -> Int32? {
        var slot = Self.hash(token) & mask
        while slots[slot] >= 0 {
            if equals(Int(slots[slot]), token) { return slots[slot] }
            slot = (slot + 1) & mask
        }
        slots[slot] = Int32(count)
        bytes.append(contentsOf: token)
        offsets.append(Int32(bytes.count))
        return nil
    }

    func id(of token: UnsafeBufferPointer<UInt8>) -> Int32? {
        var slot = Self.hash(token) & mask
        while slots[slot] >= 0 {
            if equals(Int(slots[slot]), token) { return slots[slot] }
            slot = (slot + 1) & mask
        }
        return nil
    }

    func id(of token: String) -> Int32? {
        var copy = token
        return copy.withUTF8 { id(of: $0) }
    }

    func string(_ id: Int) -> String {
        String(decoding: bytes[Int(offsets[id])..<Int(offsets[id + 1])], as: UTF8.self)
    }

    private func equals(_ id: Int, _ token: UnsafeBufferPointer<UInt8>) -> Bool {
        let start = Int(offsets[id])
        let length = Int(offsets[id + 1]) - start
        guard length == token.count else { return false }
        return bytes.withUnsafeBufferPointer { stored in
            memcmpEqual(stored.baseAddress! + start, token.baseAddress, length)
        }
    }

    @inline(__always)
    private static func hash(_ token: UnsafeBufferPointer<UInt8>) -> Int {
        var value: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in token { value = (value ^ UInt64(byte)) &* 0x100_0000_01B3 }
        return Int(truncatingIfNeeded: value ^ (value >> 29))
    }
}

@inline(__always)
private func memcmpEqual(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>?, _ length: Int) -> Bool {
    guard let b else { return length == 0 }
    for index in 0..<length where a[index] != b[index] { return false }
    return true
}
