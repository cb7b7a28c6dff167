import LookoutSupport
import LookoutWeights
import Testing

/// FIPS 180-4 test vectors, fed whole and in uneven pieces.
@Suite struct SHA256Tests {
    static func digest(_ bytes: [UInt8], pieces: Int = 1) -> String {
        var hasher = SHA256()
        let size = max(1, bytes.count / pieces)
        var start = 0
        while start < bytes.count {
            hasher.update(Array(bytes[start..<min(bytes.count, start + size)]))
            start += size
        }
        return hasher.finalize()
    }

    @Test func knownVectors() {
        #expect(Self.digest([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Self.digest(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let long = Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
        #expect(Self.digest(long, pieces: 7) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        let million = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(Self.digest(million, pieces: 13) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }
}
