import LookoutSupport
import LookoutWeights
import Testing

/// FIPS 180-4 test vectors, fed whole and in uneven pieces, with the CPU's SHA instructions where it has them and
/// with the Swift compression function.
@Suite struct SHA256Tests {
    static func digest(_ bytes: [UInt8], pieces: Int = 1, portable: Bool = false) -> String {
        var hasher = SHA256(portable: portable)
        let size = max(1, bytes.count / pieces)
        var start = 0
        while start < bytes.count {
            hasher.update(Array(bytes[start..<min(bytes.count, start + size)]))
            start += size
        }
        return hasher.finalize()
    }

    @Test(arguments: [false, true])
    func knownVectors(portable: Bool) {
        #expect(
            Self.digest([], portable: portable) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(
            Self.digest(Array("abc".utf8), portable: portable)
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let long = Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
        #expect(
            Self.digest(long, pieces: 7, portable: portable)
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        let million = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(
            Self.digest(million, pieces: 13, portable: portable)
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// The CPU's instructions (where it has them) and the Swift function give the same digest at every length
    /// around the block and padding boundaries, whole and in pieces.
    @Test func instructionsEqualTheSwiftFunction() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        let bytes = (0..<5000).map { _ -> UInt8 in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
        for length in Array(0...200) + [447, 448, 511, 512, 513, 4999] {
            for pieces in [1, 3] {
                let part = Array(bytes.prefix(length))
                #expect(
                    Self.digest(part, pieces: pieces) == Self.digest(part, pieces: pieces, portable: true),
                    "\(length) bytes in \(pieces) pieces")
            }
        }
    }
}
