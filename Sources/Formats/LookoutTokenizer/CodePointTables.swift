/// A set of code points stored as sorted, inclusive ranges.
///
/// - Complexity: membership is O(log r) for r ranges, with an O(1) table for the first 256 code points.
struct CodePointSet: Sendable {
    private let lows: [UInt32]
    private let highs: [UInt32]
    private let latin1: [Bool]

    /// `flatRanges` holds `lo, hi` pairs in increasing order (the generated tables' layout).
    init(flatRanges: [UInt32]) {
        precondition(flatRanges.count % 2 == 0)
        var lows: [UInt32] = []
        var highs: [UInt32] = []
        lows.reserveCapacity(flatRanges.count / 2)
        highs.reserveCapacity(flatRanges.count / 2)
        for index in stride(from: 0, to: flatRanges.count, by: 2) {
            lows.append(flatRanges[index])
            highs.append(flatRanges[index + 1])
        }
        self.lows = lows
        self.highs = highs
        var latin1 = [Bool](repeating: false, count: 256)
        for (low, high) in zip(lows, highs) where low < 256 {
            for value in low...min(high, 255) { latin1[Int(value)] = true }
        }
        self.latin1 = latin1
    }

    func contains(_ value: UInt32) -> Bool {
        if value < 256 { return latin1[Int(value)] }
        var low = 0
        var high = lows.count
        while low < high {
            let middle = (low + high) / 2
            if lows[middle] <= value { low = middle + 1 } else { high = middle }
        }
        return low > 0 && value <= highs[low - 1]
    }
}

/// A map from a code point to a sequence of code points (the generated `key, count, scalars...` layout).
struct CodePointMap: Sendable {
    private let storage: [UInt32: [UInt32]]

    init(flat: [UInt32]) {
        var storage: [UInt32: [UInt32]] = [:]
        var index = 0
        while index < flat.count {
            let key = flat[index]
            let count = Int(flat[index + 1])
            storage[key] = Array(flat[(index + 2)..<(index + 2 + count)])
            index += 2 + count
        }
        self.storage = storage
    }

    subscript(_ value: UInt32) -> [UInt32]? { storage[value] }

    var keys: Dictionary<UInt32, [UInt32]>.Keys { storage.keys }
}

/// The reference tables, parsed once on first use.
enum Tables {
    static let regexLetter = CodePointSet(flatRanges: ReferenceTables.regexLetter)
    static let regexNumber = CodePointSet(flatRanges: ReferenceTables.regexNumber)
    static let regexOther = CodePointSet(flatRanges: ReferenceTables.regexOther)
    static let regexSpace = CodePointSet(flatRanges: ReferenceTables.regexSpace)
    static let regexCaseInsensitiveExtras = CodePointMap(flat: ReferenceTables.regexCaseInsensitiveExtras)
    static let pythonSpace = CodePointSet(flatRanges: ReferenceTables.pythonSpace)
    static let pythonLowercase = CodePointMap(flat: ReferenceTables.pythonLowercase)
    static let pythonCased = CodePointSet(flatRanges: ReferenceTables.pythonCased)
    static let pythonCaseIgnorable = CodePointSet(flatRanges: ReferenceTables.pythonCaseIgnorable)
    static let reDigit = CodePointSet(flatRanges: ReferenceTables.reDigit)
    static let htmlInvalidCharrefs = CodePointMap(flat: ReferenceTables.htmlInvalidCharrefs)
    static let htmlInvalidCodepoints = CodePointSet(flatRanges: ReferenceTables.htmlInvalidCodepoints)
    static let ftfyLigatures = CodePointMap(flat: ReferenceTables.ftfyLigatures)
    static let ftfyWidthMap = CodePointMap(flat: ReferenceTables.ftfyWidthMap)
    static let ftfyControlChars = CodePointSet(flatRanges: ReferenceTables.ftfyControlChars)
    static let ftfyC1Controls = CodePointMap(flat: ReferenceTables.ftfyC1Controls)

    /// `html.entities.html5`, keyed by the name's code points (without `&`, with `;` where the name has one).
    static let html5Entities: [[UInt32]: [UInt32]] = entityTable(ReferenceTables.html5Entities)
    /// ftfy's extra upper-cased entity names (with `&` and `;`).
    static let ftfyUppercaseEntities: [[UInt32]: [UInt32]] = entityTable(ReferenceTables.ftfyUppercaseEntities)

    private static func entityTable(_ entries: [String]) -> [[UInt32]: [UInt32]] {
        var table: [[UInt32]: [UInt32]] = [:]
        table.reserveCapacity(entries.count)
        for entry in entries {
            let scalars = entry.unicodeScalars.map(\.value)
            // Layout: name, U+001F, value, U+001E.
            guard let separator = scalars.firstIndex(of: 0x1F), scalars.last == 0x1E else {
                preconditionFailure("malformed generated entity entry")
            }
            table[Array(scalars[..<separator])] = Array(scalars[(separator + 1)..<(scalars.count - 1)])
        }
        return table
    }
}
