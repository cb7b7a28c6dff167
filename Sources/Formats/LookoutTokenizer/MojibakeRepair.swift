/// ftfy 6.3.1's mojibake repair, `fix_encoding`: text that is UTF-8 decoded in a single-byte encoding
/// (`cafÃ©`) is encoded back in that encoding and decoded as UTF-8 (`café`), step by step until nothing
/// changes.
///
/// Ported from `ftfy/__init__.py` (`_fix_encoding_one_step_and_explain`), `ftfy/fixes.py`
/// (`restore_byte_a0`, `replace_lossy_sequences`, `decode_inconsistent_utf8`), `ftfy/chardata.py`
/// (`possible_encoding`, `ALTERED_UTF8_RE`, `LOSSY_UTF8_RE`, `UTF8_DETECTOR_RE`) and
/// `ftfy/bad_codecs/utf8_variants.py`. The codecs' byte tables and the character classes come from the
/// reference environment (`ReferenceTables`); the logic is written here.
enum MojibakeRepair {
    /// One of ftfy's `CHARMAP_ENCODINGS`: what bytes 0x80–0xFF and 0x1A decode to.
    struct Charmap {
        let name: String
        let decoded: [UInt32]
        let encode: [UInt32: UInt8]

        init(name: String, decoded: ArraySlice<UInt32>) {
            self.name = name
            self.decoded = Array(decoded)
            var encode: [UInt32: UInt8] = [:]
            for (offset, value) in decoded.enumerated() {
                encode[value] = offset == 128 ? 0x1A : UInt8(0x80 + offset)
            }
            self.encode = encode
        }

        /// `possible_encoding`: every character is ASCII other than U+001A, or one of the 129 characters.
        func canEncode(_ text: [UInt32]) -> Bool {
            text.allSatisfy { ($0 < 0x80 && $0 != 0x1A) || encode[$0] != nil }
        }

        func encoded(_ text: [UInt32]) -> [UInt8] {
            text.map { $0 < 0x80 && $0 != 0x1A ? UInt8($0) : encode[$0]! }
        }
    }

    static let charmaps: [Charmap] = ReferenceTables.ftfyCharmapNames.enumerated().map { index, name in
        Charmap(name: name, decoded: ReferenceTables.ftfyCharmaps[(index * 129)..<(index * 129 + 129)])
    }

    private static let utf8FirstOf2 = CodePointSet(flatRanges: ReferenceTables.ftfyUTF8FirstOf2)
    private static let utf8FirstOf3 = CodePointSet(flatRanges: ReferenceTables.ftfyUTF8FirstOf3)
    private static let utf8FirstOf4 = CodePointSet(flatRanges: ReferenceTables.ftfyUTF8FirstOf4)
    private static let utf8Continuation = CodePointSet(flatRanges: ReferenceTables.ftfyUTF8Continuation)
    private static let utf8ContinuationStrict = CodePointSet(flatRanges: ReferenceTables.ftfyUTF8ContinuationStrict)

    /// `fix_encoding`: one step at a time until the text no longer changes.
    static func fixEncoding(_ text: [UInt32]) -> [UInt32] {
        var text = text
        while true {
            let fixed = fixEncodingOneStep(text)
            if fixed == text { return text }
            text = fixed
        }
    }

    static func fixEncodingOneStep(_ text: [UInt32]) -> [UInt32] {
        if text.isEmpty || text.allSatisfy({ $0 < 0x80 }) || !MojibakeBadness.isBad(text) { return text }
        var possible: [String] = []
        for charmap in charmaps where charmap.canEncode(text) {
            possible.append(charmap.name)
            var bytes = charmap.encoded(text)
            if charmap.name != "macroman" && containsAlteredUTF8(bytes) { bytes = restoreByteA0(bytes) }
            if charmap.name.hasPrefix("sloppy") { bytes = replaceLossySequences(bytes) }
            if let fixed = decodeUTF8(bytes, variants: bytes.contains(0xED) || bytes.contains(0xC0)) {
                return fixed
            }
        }
        if containsUTF8Run(text) {
            let fixed = decodeInconsistentUTF8(text)
            if fixed != text { return fixed }
        }
        // ftfy checks for "windows-1252" among the possible encodings, a name the list never holds (it
        // holds "sloppy-windows-1252"): text that latin-1 can encode is always read as strict windows-1252.
        if possible.contains("latin-1") {
            if let fixed = decodeWindows1252(text), fixed != text { return fixed }
        }
        if text.contains(where: { (0x80...0x9F).contains($0) }) {
            return text.flatMap { Tables.ftfyC1Controls[$0] ?? [$0] }
        }
        return text
    }

    /// Latin-1 bytes (the code points themselves) decoded as strict windows-1252, where 0x81, 0x8D,
    /// 0x8F, 0x90 and 0x9D are undefined.
    static func decodeWindows1252(_ text: [UInt32]) -> [UInt32]? {
        let sloppy = charmaps[1]
        precondition(sloppy.name == "sloppy-windows-1252")
        var out: [UInt32] = []
        out.reserveCapacity(text.count)
        for value in text {
            switch value {
            case 0x81, 0x8D, 0x8F, 0x90, 0x9D: return nil
            case 0x80...0xFF: out.append(sloppy.decoded[Int(value) - 0x80])
            default: out.append(value)
            }
        }
        return out
    }

    // MARK: Byte patterns

    private static func isIn(_ bytes: [UInt8], _ index: Int, _ test: (UInt8) -> Bool) -> Bool {
        index < bytes.count && test(bytes[index])
    }

    private static func isContinuation(_ byte: UInt8) -> Bool { (0x80...0xBF).contains(byte) }
    /// `[\x80-\x84\x86-\x9f\xa1-\xbf]`: a continuation byte other than 0x85 and 0xA0.
    private static func isAlterableContinuation(_ byte: UInt8) -> Bool {
        isContinuation(byte) && byte != 0x85 && byte != 0xA0
    }

    /// Length of an `ALTERED_UTF8_RE` match at `index`, if one starts there.
    private static func alteredUTF8Match(_ bytes: [UInt8], at index: Int) -> Int? {
        let first = bytes[index]
        let space: (UInt8) -> Bool = { $0 == 0x20 }
        if [0xC2, 0xC3, 0xC5, 0xCE, 0xD0, 0xD9].contains(first) && isIn(bytes, index + 1, space) { return 2 }
        if (first == 0xE2 || first == 0xE3) && isIn(bytes, index + 1, space)
            && isIn(bytes, index + 2, isAlterableContinuation)
        {
            return 3
        }
        if (0xE0...0xE3).contains(first) && isIn(bytes, index + 1, isAlterableContinuation)
            && isIn(bytes, index + 2, space)
        {
            return 3
        }
        if first == 0xF0 {
            for spaceAt in 1...3 {
                let ok = (1...3).allSatisfy { isIn(bytes, index + $0, $0 == spaceAt ? space : isContinuation) }
                if ok { return 4 }
            }
        }
        return nil
    }

    static func containsAlteredUTF8(_ bytes: [UInt8]) -> Bool {
        bytes.indices.contains { alteredUTF8Match(bytes, at: $0) != nil }
    }

    /// `restore_byte_a0`: `Ã ` before a word that is not Portuguese `à` becomes `à ` (`C3 20` → `C3 A0 20`),
    /// then every space inside an `ALTERED_UTF8_RE` match becomes 0xA0.
    static func restoreByteA0(_ bytes: [UInt8]) -> [UInt8] {
        var step: [UInt8] = []
        step.reserveCapacity(bytes.count + 8)
        var index = 0
        let exceptions: [[UInt8]] = [" ", "quele", "quela", "quilo", "s "].map { Array($0.utf8) }
        while index < bytes.count {
            if bytes[index] == 0xC3, index + 1 < bytes.count, bytes[index + 1] == 0x20 {
                let rest = bytes[(index + 2)...]
                if !exceptions.contains(where: { rest.starts(with: $0) }) {
                    step.append(contentsOf: [0xC3, 0xA0, 0x20])
                    index += 2
                    continue
                }
            }
            step.append(bytes[index])
            index += 1
        }
        var out: [UInt8] = []
        out.reserveCapacity(step.count)
        index = 0
        while index < step.count {
            if let length = alteredUTF8Match(step, at: index) {
                out.append(contentsOf: step[index..<(index + length)].map { $0 == 0x20 ? 0xA0 : $0 })
                index += length
            } else {
                out.append(step[index])
                index += 1
            }
        }
        return out
    }

    /// Length of a `LOSSY_UTF8_RE` match at `index`, if one starts there.
    private static func lossyUTF8Match(_ bytes: [UInt8], at index: Int) -> Int? {
        let first = bytes[index]
        let lost: (UInt8) -> Bool = { $0 == 0x1A || $0 == 0x3F }
        let lostOrContinuation: (UInt8) -> Bool = { $0 == 0x1A || $0 == 0x3F || isContinuation($0) }
        let markOrContinuation: (UInt8) -> Bool = { $0 == 0x1A || isContinuation($0) }
        func sequence(_ tests: [(UInt8) -> Bool]) -> Bool {
            tests.enumerated().allSatisfy { isIn(bytes, index + 1 + $0.offset, $0.element) }
        }
        if (0xC2...0xDF).contains(first) && isIn(bytes, index + 1, { $0 == 0x1A }) { return 2 }
        if (0xC2...0xC3).contains(first) && isIn(bytes, index + 1, { $0 == 0x3F }) { return 2 }
        if first == 0xED {
            let high: (UInt8) -> Bool = { (0xA0...0xAF).contains($0) }
            let low: (UInt8) -> Bool = { (0xB0...0xBF).contains($0) }
            let ed: (UInt8) -> Bool = { $0 == 0xED }
            if sequence([high, lost, ed, low, lostOrContinuation]) { return 6 }
            if sequence([high, lostOrContinuation, ed, low, lost]) { return 6 }
        }
        if (0xE0...0xEF).contains(first) {
            if sequence([lost, markOrContinuation]) { return 3 }
            if sequence([markOrContinuation, lost]) { return 3 }
        }
        if (0xF0...0xF4).contains(first) {
            if sequence([lost, markOrContinuation, markOrContinuation]) { return 4 }
            if sequence([markOrContinuation, lost, markOrContinuation]) { return 4 }
            if sequence([markOrContinuation, markOrContinuation, lost]) { return 4 }
        }
        if first == 0x1A { return 1 }
        return nil
    }

    /// `replace_lossy_sequences`: UTF-8 sequences with a byte lost to 0x1A or `?` become U+FFFD's bytes.
    static func replaceLossySequences(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if let length = lossyUTF8Match(bytes, at: index) {
                out.append(contentsOf: [0xEF, 0xBF, 0xBD])
                index += length
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return out
    }

    // MARK: Decoding

    /// Strict UTF-8 as Python decodes it; with `variants` (ftfy's `utf-8-variants`) also `C0 80` as
    /// U+0000 and CESU-8 surrogate pairs as the code point they encode. `nil` where decoding fails.
    static func decodeUTF8(_ bytes: [UInt8], variants: Bool) -> [UInt32]? {
        var out: [UInt32] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        func continuation(_ offset: Int, _ range: ClosedRange<UInt8> = 0x80...0xBF) -> UInt32? {
            guard index + offset < bytes.count, range.contains(bytes[index + offset]) else { return nil }
            return UInt32(bytes[index + offset] & 0x3F)
        }
        while index < bytes.count {
            let first = bytes[index]
            if first < 0x80 {
                out.append(UInt32(first))
                index += 1
                continue
            }
            if variants && first == 0xC0, index + 1 < bytes.count, bytes[index + 1] == 0x80 {
                out.append(0)
                index += 2
                continue
            }
            if variants && first == 0xED, let high = continuation(1, 0xA0...0xAF), let middle = continuation(2),
                index + 3 < bytes.count, bytes[index + 3] == 0xED, let low = continuation(4, 0xB0...0xBF),
                let last = continuation(5)
            {
                out.append(((high & 0x0F) << 16) + (middle << 10) + ((low & 0x0F) << 6) + last + 0x10000)
                index += 6
                continue
            }
            switch first {
            case 0xC2...0xDF:
                guard let b1 = continuation(1) else { return nil }
                out.append((UInt32(first & 0x1F) << 6) | b1)
                index += 2
            case 0xE0...0xEF:
                let secondRange: ClosedRange<UInt8> =
                    first == 0xE0 ? 0xA0...0xBF : first == 0xED ? 0x80...0x9F : 0x80...0xBF
                guard let b1 = continuation(1, secondRange), let b2 = continuation(2) else { return nil }
                out.append((UInt32(first & 0x0F) << 12) | (b1 << 6) | b2)
                index += 3
            case 0xF0...0xF4:
                let secondRange: ClosedRange<UInt8> =
                    first == 0xF0 ? 0x90...0xBF : first == 0xF4 ? 0x80...0x8F : 0x80...0xBF
                guard let b1 = continuation(1, secondRange), let b2 = continuation(2), let b3 = continuation(3)
                else { return nil }
                out.append((UInt32(first & 0x07) << 18) | (b1 << 12) | (b2 << 6) | b3)
                index += 4
            default:
                return nil
            }
        }
        return out
    }

    // MARK: Inconsistent UTF-8

    /// Length of a `UTF8_DETECTOR_RE` match at `index` (0 where none starts there).
    private static func utf8RunLength(_ text: [UInt32], at index: Int) -> Int {
        if index > 0 && utf8ContinuationStrict.contains(text[index - 1]) { return 0 }
        var end = index
        func continuations(from start: Int, count: Int) -> Bool {
            start + count <= text.count && (start..<(start + count)).allSatisfy { utf8Continuation.contains(text[$0]) }
        }
        while end < text.count {
            let first = text[end]
            if utf8FirstOf2.contains(first) && continuations(from: end + 1, count: 1) {
                end += 2
            } else if utf8FirstOf3.contains(first) && continuations(from: end + 1, count: 2) {
                end += 3
            } else if utf8FirstOf4.contains(first) && continuations(from: end + 1, count: 3) {
                end += 4
            } else {
                break
            }
        }
        return end - index
    }

    static func containsUTF8Run(_ text: [UInt32]) -> Bool {
        text.indices.contains { utf8RunLength(text, at: $0) > 0 }
    }

    /// `decode_inconsistent_utf8`: each run of what looks like UTF-8 read as a single-byte encoding is
    /// repaired on its own, when it is not the whole text and the heuristic calls it bad.
    static func decodeInconsistentUTF8(_ text: [UInt32]) -> [UInt32] {
        var out: [UInt32] = []
        out.reserveCapacity(text.count)
        var index = 0
        while index < text.count {
            let length = utf8RunLength(text, at: index)
            guard length > 0 else {
                out.append(text[index])
                index += 1
                continue
            }
            let run = Array(text[index..<(index + length)])
            out.append(contentsOf: length < text.count && MojibakeBadness.isBad(run) ? fixEncoding(run) : run)
            index += length
        }
        return out
    }
}
