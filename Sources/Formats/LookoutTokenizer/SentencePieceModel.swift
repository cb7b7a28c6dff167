import LookoutSupport

/// A SentencePiece model (`spiece.model`, `tokenizer.model`: a serialised `ModelProto`) and its encoding, exact to
/// Google's `SentencePieceProcessor.encode` for unigram models: the normaliser (the model's precompiled character
/// map, a double-array trie of rules such as NFKC; leading, trailing and repeated spaces; the dummy prefix; spaces
/// as `▁`), Viterbi over the pieces by their scores (an unknown character scored 10 below the lowest piece), then
/// byte fallback (an unknown character as its UTF-8 bytes' pieces, `<0xE9>`) or runs of unknown characters merged
/// into one `<unk>`. The tokenizer of SigLIP and of many multilingual towers. Read without protobuf: the few
/// fields it needs are decoded from the wire format.
public struct SentencePieceModel: Sendable {
    /// A piece's kind (`ModelProto.SentencePiece.Type`).
    public enum PieceType: Int, Sendable {
        case normal = 1, unknown = 2, control = 3, userDefined = 4, unused = 5, byte = 6
    }

    public let pieces: [String]
    public let scores: [Float]
    public let types: [PieceType]
    /// The id of `<unk>` (the piece of type unknown).
    public let unknownID: Int
    /// Unknown characters as their bytes' pieces (`TrainerSpec.byte_fallback`).
    public let byteFallback: Bool

    let addDummyPrefix: Bool
    let removeExtraWhitespaces: Bool
    let escapeWhitespaces: Bool
    let whitespaceAsSuffix: Bool
    /// The normaliser's rules: darts-clone double-array units and the replacement strings they point into.
    let rules: (units: [UInt32], replacements: [UInt8])?
    /// The pieces the text is matched against (normal, user-defined, unused) and, for the normaliser, the
    /// user-defined ones (kept as written).
    let matcher: PieceTable
    let userDefined: PieceTable?
    /// `<0x00>` … `<0xFF>`'s ids (with byte fallback).
    let byteIDs: [Int]
    let lowestScore: Float
    let highestScore: Float

    /// Reads a model file.
    public init(contentsOf path: String) throws(VocabularyError) {
        try self.init(bytes: VocabularyError.read(path, maximumSize: 64 << 20), path: path)
    }

    public init(bytes: [UInt8], path: String) throws(VocabularyError) {
        func invalid(_ problem: String) -> VocabularyError {
            VocabularyError(path: path, kind: .invalid, problem: "not a SentencePiece model: \(problem)")
        }
        var pieces: [String] = [], scores: [Float] = [], types: [PieceType] = []
        var modelType = 1, byteFallback = false, whitespaceAsSuffix = false
        var addDummyPrefix = true, removeExtraWhitespaces = true, escapeWhitespaces = true
        var charsmap: [UInt8] = []
        do throws(ProtobufReader.Failure) {
            var model = ProtobufReader(bytes[...])
            while let field = try model.next() {
                switch (field.number, field.value) {
                case (1, .bytes(let message)):
                    var piece = ProtobufReader(message)
                    var (text, score, type) = ("", Float(0), PieceType.normal)
                    while let item = try piece.next() {
                        switch (item.number, item.value) {
                        case (1, .bytes(let utf8)):
                            guard let decoded = String(validating: utf8, as: UTF8.self) else {
                                throw ProtobufReader.Failure.malformed("a piece that is not UTF-8")
                            }
                            text = decoded
                        case (2, .fixed32(let bits)): score = Float(bitPattern: bits)
                        case (3, .varint(let value)):
                            guard let known = PieceType(rawValue: Int(truncatingIfNeeded: value)) else {
                                throw ProtobufReader.Failure.malformed("a piece of unknown type \(value)")
                            }
                            type = known
                        default: break
                        }
                    }
                    pieces.append(text)
                    scores.append(score)
                    types.append(type)
                case (2, .bytes(let message)):
                    var trainer = ProtobufReader(message)
                    while let item = try trainer.next() {
                        switch (item.number, item.value) {
                        case (3, .varint(let value)): modelType = Int(truncatingIfNeeded: value)
                        case (24, .varint(let value)): whitespaceAsSuffix = value != 0
                        case (35, .varint(let value)): byteFallback = value != 0
                        default: break
                        }
                    }
                case (3, .bytes(let message)):
                    var normalizer = ProtobufReader(message)
                    while let item = try normalizer.next() {
                        switch (item.number, item.value) {
                        case (2, .bytes(let blob)): charsmap = Array(blob)
                        case (3, .varint(let value)): addDummyPrefix = value != 0
                        case (4, .varint(let value)): removeExtraWhitespaces = value != 0
                        case (5, .varint(let value)): escapeWhitespaces = value != 0
                        default: break
                        }
                    }
                default: break
                }
            }
        } catch {
            throw invalid(error.description)
        }
        guard !pieces.isEmpty else { throw invalid("it has no pieces") }
        guard modelType == 1 else {
            let name = [2: "BPE", 3: "word", 4: "character"][modelType] ?? "type \(modelType)"
            throw VocabularyError(
                path: path, kind: .invalid,
                problem: "a SentencePiece \(name) model: Lookout reads unigram models (SigLIP's, T5's) only")
        }
        guard let unknownID = types.firstIndex(of: .unknown) else { throw invalid("it has no <unk> piece") }
        var byteIDs = [Int](repeating: unknownID, count: 256)
        if byteFallback {
            for (id, type) in types.enumerated() where type == .byte {
                let piece = pieces[id]
                guard piece.count == 6, piece.hasPrefix("<0x"), piece.hasSuffix(">"),
                    let value = UInt8(piece.dropFirst(3).prefix(2), radix: 16)
                else { throw invalid("a byte piece \(piece)") }
                byteIDs[Int(value)] = id
            }
            guard !byteIDs.contains(unknownID) else { throw invalid("byte fallback without all 256 byte pieces") }
        }
        if !charsmap.isEmpty {
            guard charsmap.count > 4 else { throw invalid("a broken normalisation map") }
            let size = Int(charsmap[0]) | Int(charsmap[1]) << 8 | Int(charsmap[2]) << 16 | Int(charsmap[3]) << 24
            guard size < charsmap.count - 4, size % 4 == 0, size > 0 else {
                throw invalid("a normalisation map whose trie is larger than the map")
            }
            let units = (0..<(size / 4)).map { index -> UInt32 in
                let at = 4 + 4 * index
                return UInt32(charsmap[at]) | UInt32(charsmap[at + 1]) << 8 | UInt32(charsmap[at + 2]) << 16
                    | UInt32(charsmap[at + 3]) << 24
            }
            rules = (units, Array(charsmap[(4 + size)...]))
        } else {
            rules = nil
        }
        var matched: [(String, Int)] = [], user: [(String, Int)] = []
        var (lowest, highest) = (Float.greatestFiniteMagnitude, Float.leastNormalMagnitude)
        for (id, type) in types.enumerated() {
            if type == .normal || type == .userDefined || type == .unused { matched.append((pieces[id], id)) }
            if type == .userDefined { user.append((pieces[id], id)) }
            if type == .normal {
                lowest = min(lowest, scores[id])
                highest = max(highest, scores[id])
            }
        }
        self.pieces = pieces
        self.scores = scores
        self.types = types
        self.unknownID = unknownID
        self.byteFallback = byteFallback
        self.addDummyPrefix = addDummyPrefix
        self.removeExtraWhitespaces = removeExtraWhitespaces
        self.escapeWhitespaces = escapeWhitespaces
        self.whitespaceAsSuffix = whitespaceAsSuffix
        self.byteIDs = byteIDs
        matcher = PieceTable(matched)
        userDefined = user.isEmpty ? nil : PieceTable(user)
        lowestScore = lowest
        highestScore = highest
    }

    /// The ids of `text`: normalised, cut by Viterbi, unknowns as bytes or merged (no start or end piece).
    public func encode(_ text: String) -> [Int] {
        let normalized = normalize(text)
        var ids: [Int] = []
        var previousUnknown = false
        for (range, id) in viterbi(normalized) {
            let unknown = id == unknownID
            if unknown && byteFallback {
                for index in range { ids.append(byteIDs[Int(normalized[index])]) }
            } else if !(unknown && previousUnknown) {
                ids.append(id)
            }
            previousUnknown = unknown
        }
        return ids
    }

    // MARK: The normaliser

    static let space: [UInt8] = [0xE2, 0x96, 0x81]  // ▁

    /// `text` as the model's normaliser gives it (UTF-8).
    public func normalize(_ text: String) -> [UInt8] {
        let input = Array(text.utf8)
        var at = 0
        if removeExtraWhitespaces {
            while at < input.count {
                let (replacement, length) = normalizedPrefix(input, at)
                guard replacement == [0x20] else { break }
                at += length
            }
        }
        guard at < input.count else { return [] }
        var out: [UInt8] = []
        out.reserveCapacity(3 * (input.count - at))
        func addSpace() { out += escapeWhitespaces ? Self.space : [0x20] }
        if !whitespaceAsSuffix && addDummyPrefix { addSpace() }
        var previousSpace = removeExtraWhitespaces
        while at < input.count {
            let (replacement, length) = normalizedPrefix(input, at)
            var piece = replacement[...]
            while previousSpace, piece.first == 0x20 { piece = piece.dropFirst() }
            if !piece.isEmpty {
                for byte in piece {
                    if escapeWhitespaces && byte == 0x20 { out += Self.space } else { out.append(byte) }
                }
                previousSpace = piece.last == 0x20
            }
            at += length
            if !removeExtraWhitespaces { previousSpace = false }
        }
        if removeExtraWhitespaces {
            let space = escapeWhitespaces ? Self.space : [0x20]
            while out.count >= space.count && Array(out.suffix(space.count)) == space {
                out.removeLast(space.count)
            }
        }
        if whitespaceAsSuffix && addDummyPrefix { addSpace() }
        return out
    }

    /// The replacement of the longest rule at `at` and the bytes it consumes: a user-defined piece as written, a
    /// rule's replacement, else the character itself (a malformed byte as U+FFFD, consuming one byte).
    func normalizedPrefix(_ input: [UInt8], _ at: Int) -> (replacement: [UInt8], length: Int) {
        if let userDefined, let length = userDefined.longestMatch(input, at) {
            return (Array(input[at..<(at + length)]), length)
        }
        if let rules, let (length, value) = Self.longestRule(rules.units, input, at) {
            var end = value
            while end < rules.replacements.count && rules.replacements[end] != 0 { end += 1 }
            return (Array(rules.replacements[min(value, end)..<end]), length)
        }
        guard let length = Self.characterLength(input, at) else { return ([0xEF, 0xBF, 0xBD], 1) }
        return (Array(input[at..<(at + length)]), length)
    }

    /// darts-clone's `commonPrefixSearch`, the longest match: the key's bytes from `at` walked through the
    /// double array (a unit's label, leaf bit, offset and value as darts-clone packs them).
    static func longestRule(_ units: [UInt32], _ key: [UInt8], _ at: Int) -> (length: Int, value: Int)? {
        func offset(_ unit: UInt32) -> Int { Int((unit >> 10) << ((unit & (1 << 9)) >> 6)) }
        func label(_ unit: UInt32) -> UInt32 { unit & ((1 << 31) | 0xFF) }
        var found: (Int, Int)? = nil
        guard !units.isEmpty else { return nil }
        var position = offset(units[0])
        for index in at..<key.count {
            position ^= Int(key[index])
            guard position < units.count else { return found }
            let unit = units[position]
            guard label(unit) == UInt32(key[index]) else { return found }
            position ^= offset(unit)
            guard position < units.count else { return found }
            if (unit >> 8) & 1 == 1 {
                found = (index - at + 1, Int(units[position] & ((1 << 31) - 1)))
            }
        }
        return found
    }

    /// The length of the well-formed UTF-8 character at `at` (sentencepiece's `IsValidDecodeUTF8`), or nil.
    static func characterLength(_ bytes: [UInt8], _ at: Int) -> Int? {
        let first = bytes[at]
        if first < 0x80 { return 1 }
        let (length, minimum): (Int, UInt32) =
            first >= 0xF0 && first < 0xF8
            ? (4, 0x10000) : first >= 0xE0 ? (3, 0x800) : first >= 0xC0 ? (2, 0x80) : (0, 0)
        guard length > 0, at + length <= bytes.count else { return nil }
        var value = UInt32(first) & (0xFF >> (length + 1))
        for index in (at + 1)..<(at + length) {
            guard bytes[index] & 0xC0 == 0x80 else { return nil }
            value = value << 6 | UInt32(bytes[index] & 0x3F)
        }
        guard value >= minimum, value <= 0x10FFFF, !(0xD800...0xDFFF).contains(value) else { return nil }
        return length
    }

    // MARK: Viterbi

    /// sentencepiece's optimised unigram Viterbi over UTF-8 positions: at each character, every piece starting
    /// there (shortest first) extends the best path ending where it starts; a character no piece of its own
    /// length covers is also an unknown piece; ties keep the first.
    func viterbi(_ text: [UInt8]) -> [(range: Range<Int>, id: Int)] {
        guard !text.isEmpty else { return [] }
        let unknownScore = lowestScore - 10
        var best = [(score: Float, start: Int, id: Int)](repeating: (0, -1, -1), count: text.count + 1)
        var start = 0
        while start < text.count {
            let before = best[start].score
            let characterLength = min(Self.characterLength(text, start) ?? 1, text.count - start)
            var single = false
            matcher.forEachMatch(text, start) { length, id in
                guard types[id] != .unused else { return }
                let score =
                    types[id] == .userDefined ? Float(length) * highestScore - 0.1 : scores[id]
                let candidate = score + before
                if best[start + length].start == -1 || candidate > best[start + length].score {
                    best[start + length] = (candidate, start, id)
                }
                if length == characterLength { single = true }
            }
            if !single {
                let candidate = unknownScore + before
                let end = start + characterLength
                if best[end].start == -1 || candidate > best[end].score { best[end] = (candidate, start, unknownID) }
            }
            start += characterLength
        }
        var path: [(Range<Int>, Int)] = []
        var end = text.count
        while end > 0 {
            let node = best[end]
            path.append((node.start..<end, node.id))
            end = node.start
        }
        return path.reversed()
    }
}

/// Pieces sorted by their bytes, for every piece that is a prefix of a text at a position, shortest first.
struct PieceTable: Sendable {
    private let storage: [UInt8]
    private let starts: [Int32]
    private let lengths: [Int32]
    private let ids: [Int32]

    init(_ pieces: [(String, Int)]) {
        let encoded = pieces.map { (Array($0.0.utf8), $0.1) }.sorted { $0.0.lexicographicallyPrecedes($1.0) }
        var storage: [UInt8] = [], starts: [Int32] = [], lengths: [Int32] = [], ids: [Int32] = []
        for (bytes, id) in encoded {
            starts.append(Int32(storage.count))
            lengths.append(Int32(bytes.count))
            ids.append(Int32(id))
            storage += bytes
        }
        (self.storage, self.starts, self.lengths, self.ids) = (storage, starts, lengths, ids)
    }

    private func piece(_ index: Int) -> ArraySlice<UInt8> {
        storage[Int(starts[index])..<Int(starts[index] + lengths[index])]
    }

    /// The first piece not below `key`.
    private func lowerBound(_ key: ArraySlice<UInt8>) -> Int {
        var (low, high) = (0, ids.count)
        while low < high {
            let middle = (low + high) / 2
            if piece(middle).lexicographicallyPrecedes(key) { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Each piece equal to `text[at..<at + length]`, by increasing length, with its id; stops where no piece
    /// starts with the prefix.
    func forEachMatch(_ text: [UInt8], _ at: Int, _ body: (Int, Int) -> Void) {
        var length = 1
        while at + length <= text.count {
            let prefix = text[at..<(at + length)]
            let index = lowerBound(prefix)
            guard index < ids.count, piece(index).starts(with: prefix) else { return }
            if piece(index).count == length { body(length, Int(ids[index])) }
            length += 1
        }
    }

    /// The length of the longest piece at `at`, or nil.
    func longestMatch(_ text: [UInt8], _ at: Int) -> Int? {
        var longest: Int? = nil
        forEachMatch(text, at) { length, _ in longest = length }
        return longest
    }
}

/// The protobuf wire format, as far as a model file needs: varints, 32- and 64-bit values, length-delimited
/// bytes (strings and messages), field by field.
struct ProtobufReader {
    enum Value {
        case varint(UInt64)
        case fixed64(UInt64)
        case bytes(ArraySlice<UInt8>)
        case fixed32(UInt32)
    }

    enum Failure: Error, CustomStringConvertible {
        case malformed(String)
        var description: String {
            switch self {
            case .malformed(let what): what
            }
        }
    }

    private var bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    private mutating func varint() throws(Failure) -> UInt64 {
        var (value, shift) = (UInt64(0), UInt64(0))
        while let byte = bytes.first {
            bytes = bytes.dropFirst()
            guard shift < 64 else { throw .malformed("a varint longer than 10 bytes") }
            value |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return value }
            shift += 7
        }
        throw .malformed("a truncated varint")
    }

    private mutating func take(_ count: Int) throws(Failure) -> ArraySlice<UInt8> {
        guard count >= 0, bytes.count >= count else { throw .malformed("a field longer than the file") }
        defer { bytes = bytes.dropFirst(count) }
        return bytes.prefix(count)
    }

    /// The next field, or nil at the end.
    mutating func next() throws(Failure) -> (number: Int, value: Value)? {
        guard !bytes.isEmpty else { return nil }
        let key = try varint()
        let number = Int(truncatingIfNeeded: key >> 3)
        guard number > 0 else { throw .malformed("field number 0") }
        switch key & 7 {
        case 0: return (number, .varint(try varint()))
        case 1:
            let raw = try take(8)
            return (number, .fixed64(raw.reversed().reduce(0) { $0 << 8 | UInt64($1) }))
        case 2:
            let length = try varint()
            guard length <= UInt64(bytes.count) else { throw .malformed("a field longer than the file") }
            return (number, .bytes(try take(Int(length))))
        case 5:
            let raw = try take(4)
            return (number, .fixed32(raw.reversed().reduce(0) { $0 << 8 | UInt32($1) }))
        default: throw .malformed("wire type \(key & 7)")
        }
    }
}
