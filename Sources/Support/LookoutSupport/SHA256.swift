import CLookoutHash

/// SHA-256 (FIPS 180-4), for verifying downloaded model files against their manifest and for the index's content
/// hashes: with the CPU's SHA instructions where it has them (about 900 MB/s on one core of the AMD EPYC, against
/// about 250 MB/s in Swift), the same digest either way.
public struct SHA256: Sendable {
    /// Whether this CPU's SHA instructions compress the blocks.
    public static let usesInstructions = lookout_sha256_instructions() != 0
    private var instructions = Self.usesInstructions
    private var state: [UInt32] = [
        0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19,
    ]
    private var buffer: [UInt8] = []
    private var length: UInt64 = 0

    /// The round constants: C's table (`lookout_sha256_constants`), which the SHA-instruction path reads too.
    nonisolated(unsafe) private static let k = UnsafeBufferPointer(start: lookout_sha256_constants(), count: 64)

    public init() {}

    /// For tests: the Swift compression function even where the CPU has SHA instructions (`portable: true`).
    public init(portable: Bool) { instructions = !portable && Self.usesInstructions }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        length &+= UInt64(bytes.count)
        var index = 0
        if !buffer.isEmpty {
            let take = min(64 - buffer.count, bytes.count)
            buffer.append(contentsOf: bytes[0..<take])
            index = take
            if buffer.count == 64 {
                buffer.withUnsafeBytes { compress($0.baseAddress!) }
                buffer.removeAll(keepingCapacity: true)
            }
        }
        if instructions, bytes.count - index >= 64 {
            let blocks = (bytes.count - index) / 64
            state.withUnsafeMutableBufferPointer { state in
                lookout_sha256_blocks(
                    state.baseAddress, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self) + index, blocks)
            }
            index += blocks * 64
        }
        while bytes.count - index >= 64 {
            compress(bytes.baseAddress! + index)
            index += 64
        }
        if index < bytes.count { buffer.append(contentsOf: bytes[index...]) }
    }

    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest as 64 lowercase hexadecimal digits.
    public mutating func finalize() -> String {
        let bits = length &* 8
        var padding: [UInt8] = [0x80]
        while (buffer.count + padding.count) % 64 != 56 { padding.append(0) }
        withUnsafeBytes(of: bits.bigEndian) { padding.append(contentsOf: $0) }
        let savedLength = length
        update(padding)
        length = savedLength
        return state.map { word in
            let hex = String(word, radix: 16)
            return String(repeating: "0", count: 8 - hex.count) + hex
        }.joined()
    }

    /// One 64-byte block into the state. The schedule lives on the stack and the constants are read without bounds
    /// checks: hashing a 12-megapixel photo's file took longer than decoding it with a heap array per block.
    private mutating func compress(_ block: UnsafeRawPointer) {
        var (a, b, c, d, e, f, g, h) = (state[0], state[1], state[2], state[3], state[4], state[5], state[6], state[7])
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
            let k = Self.k
            for t in 0..<16 {
                w[t] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: t * 4, as: UInt32.self))
            }
            for t in 16..<64 {
                let s0 = rotate(w[t - 15], 7) ^ rotate(w[t - 15], 18) ^ (w[t - 15] >> 3)
                let s1 = rotate(w[t - 2], 17) ^ rotate(w[t - 2], 19) ^ (w[t - 2] >> 10)
                w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
            }
            for t in 0..<64 {
                let s1 = rotate(e, 6) ^ rotate(e, 11) ^ rotate(e, 25)
                let choice = (e & f) ^ (~e & g)
                let t1 = h &+ s1 &+ choice &+ k[t] &+ w[t]
                let s0 = rotate(a, 2) ^ rotate(a, 13) ^ rotate(a, 22)
                let majority = (a & b) ^ (a & c) ^ (b & c)
                let t2 = s0 &+ majority
                (h, g, f, e, d, c, b, a) = (g, f, e, d &+ t1, c, b, a, t1 &+ t2)
            }
        }
        state[0] &+= a; state[1] &+= b; state[2] &+= c; state[3] &+= d
        state[4] &+= e; state[5] &+= f; state[6] &+= g; state[7] &+= h
    }

    @inline(__always)
    private func rotate(_ value: UInt32, _ count: UInt32) -> UInt32 { (value &>> count) | (value &<< (32 &- count)) }
}
