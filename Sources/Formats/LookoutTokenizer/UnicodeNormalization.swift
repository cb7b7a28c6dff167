/// Unicode NFC as Python's `unicodedata.normalize("NFC", ...)` computes it, from the reference
/// environment's own decomposition, combining-class and composition data (see the generated tables),
/// so that results do not depend on the Unicode version of the Swift toolchain.
///
/// The algorithm is the standard one (UAX #15): full canonical decomposition (Hangul syllables
/// algorithmically), canonical ordering of non-starters, then canonical composition.
enum UnicodeNormalization {
    private static let decomposition = CodePointMap(flat: ReferenceTables.canonicalDecomposition)
    private static let combiningClasses: [UInt32: UInt8] = {
        var table: [UInt32: UInt8] = [:]
        let flat = ReferenceTables.combiningClass
        for index in stride(from: 0, to: flat.count, by: 3) {
            for value in flat[index]...flat[index + 1] { table[value] = UInt8(flat[index + 2]) }
        }
        return table
    }()
    private static let compositions: [UInt64: UInt32] = {
        var table: [UInt64: UInt32] = [:]
        let flat = ReferenceTables.primaryComposites
        for index in stride(from: 0, to: flat.count, by: 3) {
            table[UInt64(flat[index]) << 32 | UInt64(flat[index + 1])] = flat[index + 2]
        }
        return table
    }()

    private static let hangulBase: UInt32 = 0xAC00, leadBase: UInt32 = 0x1100, vowelBase: UInt32 = 0x1161
    private static let trailBase: UInt32 = 0x11A7, vowelCount: UInt32 = 21, trailCount: UInt32 = 28
    private static let syllableCount: UInt32 = 11172, leadCount: UInt32 = 19

    static func combiningClass(_ value: UInt32) -> UInt8 {
        value < 0x300 ? 0 : combiningClasses[value] ?? 0
    }

    static func nfc(_ text: [UInt32]) -> [UInt32] {
        // Fast path: text below U+0300 has no decompositions that matter and nothing to compose.
        if text.allSatisfy({ $0 < 0xC0 }) { return text }
        return compose(decompose(text))
    }

    static func decompose(_ text: [UInt32]) -> [UInt32] {
        var out: [UInt32] = []
        out.reserveCapacity(text.count)
        for value in text { appendDecomposition(of: value, to: &out) }
        // Canonical ordering: stable sort of each run of non-starters by combining class.
        var index = 1
        while index < out.count {
            let current = combiningClass(out[index])
            if current != 0 {
                var position = index
                while position > 0 {
                    let previous = combiningClass(out[position - 1])
                    guard previous > current else { break }
                    out.swapAt(position, position - 1)
                    position -= 1
                }
            }
            index += 1
        }
        return out
    }

    private static func appendDecomposition(of value: UInt32, to out: inout [UInt32]) {
        if value >= hangulBase && value < hangulBase + syllableCount {
            let index = value - hangulBase
            out.append(leadBase + index / (vowelCount * trailCount))
            out.append(vowelBase + (index % (vowelCount * trailCount)) / trailCount)
            let trail = index % trailCount
            if trail != 0 { out.append(trailBase + trail) }
        } else if let parts = decomposition[value] {
            for part in parts { appendDecomposition(of: part, to: &out) }
        } else {
            out.append(value)
        }
    }

    private static func composePair(_ first: UInt32, _ second: UInt32) -> UInt32? {
        if first >= leadBase && first < leadBase + leadCount && second >= vowelBase && second < vowelBase + vowelCount {
            return hangulBase + ((first - leadBase) * vowelCount + (second - vowelBase)) * trailCount
        }
        if first >= hangulBase && first < hangulBase + syllableCount && (first - hangulBase) % trailCount == 0
            && second > trailBase && second < trailBase + trailCount
        {
            return first + (second - trailBase)
        }
        return compositions[UInt64(first) << 32 | UInt64(second)]
    }

    static func compose(_ text: [UInt32]) -> [UInt32] {
        var out: [UInt32] = []
        out.reserveCapacity(text.count)
        var starter = -1
        var lastClass: UInt8 = 0
        for value in text {
            let currentClass = combiningClass(value)
            if starter >= 0 {
                let adjacent = out.count - 1 == starter
                let blocked = !adjacent && (lastClass == 0 || lastClass >= currentClass)
                if !blocked, let composite = composePair(out[starter], value) {
                    out[starter] = composite
                    continue
                }
            }
            if currentClass == 0 { starter = out.count }
            out.append(value)
            lastClass = currentClass
        }
        return out
    }
}
