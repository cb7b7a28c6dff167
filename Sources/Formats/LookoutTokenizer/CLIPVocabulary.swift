import LookoutJSON
import LookoutSupport

/// A CLIP BPE vocabulary: token strings, merge ranks and special tokens.
///
/// Loaded from the JSON layout of `Vocab/clip_vocab.json` (the one the iOS YOLO-World demo reads):
/// `{"encoder": {token: id}, "merges": ["a b", ...], "bos_token", "eos_token", "context_length"}`.
/// Merges are held as pairs of token ids, so BPE never hashes strings.
public struct CLIPVocabulary: Sendable {
    let table: TokenTable
    public let startOfText: Int32
    public let endOfText: Int32
    public let contextLength: Int
    public let mergeCount: Int
    /// Digest of the vocabulary file's bytes (128-bit FNV-1a, hexadecimal), for cache keys.
    public let digest: String
    /// Id of each byte's symbol, and of the same symbol with `</w>` (a word's last symbol).
    let byteSymbol: [Int32]
    let byteEndSymbol: [Int32]
    /// `left << 32 | right` → `rank << 32 | merged id`.
    let merges: PairTable

    /// Reads and validates a vocabulary file.
    public init(contentsOf path: String) throws(VocabularyError) {
        try self.init(json: VocabularyError.read(path, maximumSize: 256 << 20), path: path)
    }

    /// Parses and validates vocabulary JSON; `path` names the source in errors.
    public init(json bytes: [UInt8], path: String) throws(VocabularyError) {
        try self.init(json: bytes, path: path, digest: ContentDigest(bytes))
    }

    /// `digest` is the bytes' digest when the caller has already computed it.
    init(json bytes: [UInt8], path: String, digest: ContentDigest) throws(VocabularyError) {
        func fail(_ problem: String) -> VocabularyError {
            VocabularyError(path: path, kind: .invalid, problem: problem)
        }
        let document: JSONDocument
        do {
            document = try JSONDocument(bytes: bytes)
        } catch {
            throw fail("not valid JSON (\(error))")
        }
        let root = document.root
        guard root.kind == .object else { throw fail("top level is not a JSON object") }
        guard let encoder = root["encoder"], encoder.kind == .object else {
            throw fail("missing \"encoder\" object")
        }
        guard let mergeList = root["merges"], mergeList.kind == .array else {
            throw fail("missing \"merges\" array")
        }

        // Encoder: ids must be distinct and cover 0..<count. Tokens are first gathered by id.
        let count = encoder.count
        var byID = [(UnsafeBufferPointer<UInt8>)?](repeating: nil, count: count)
        var problem: String?
        encoder.forEachMember { key, value in
            guard problem == nil else { return }
            guard let id = value.int else {
                problem = "id of token \(quoted(key)) is not an integer"
                return
            }
            guard id >= 0 && id < count else {
                problem = "id \(id) of token \(quoted(key)) is outside 0..<\(count) (\(count) tokens)"
                return
            }
            if let other = byID[Int(id)] {
                problem = "duplicate id \(id) (tokens \(quoted(other)) and \(quoted(key)))"
                return
            }
            byID[Int(id)] = key
        }
        if let problem { throw fail(problem) }
        var table = TokenTable(capacity: count)
        for (id, key) in byID.enumerated() {
            // json-c keeps one key per name, so a repeated token can only come from ids.
            if let previous = table.append(key!) {
                throw fail("token \(quoted(key!)) has two ids, \(previous) and \(id)")
            }
        }

        // Byte symbols.
        var byteSymbol = [Int32](repeating: 0, count: 256)
        var byteEndSymbol = [Int32](repeating: 0, count: 256)
        for byte in 0..<256 {
            let symbol = String(Character(ByteEncoder.scalarForByte[byte]))
            guard let id = table.id(of: symbol), let endID = table.id(of: symbol + "</w>") else {
                throw fail("byte symbol \(quoted(symbol)) (byte \(byte)) or its \"</w>\" form is missing")
            }
            byteSymbol[byte] = id
            byteEndSymbol[byte] = endID
        }

        // Merges: "a b", both parts tokens, and "ab" a token.
        var merges = PairTable(capacity: mergeList.count)
        var joined: [UInt8] = []
        for rank in 0..<mergeList.count {
            let item = mergeList[rank]
            let outcome: String? =
                item.withStringBytes { text -> String? in
                    guard let space = text.firstIndex(of: 0x20), space > 0, space < text.count - 1,
                        text[(space + 1)...].firstIndex(of: 0x20) == nil
                    else { return "merge \(rank) \(quoted(text)) is not two symbols" }
                    let left = UnsafeBufferPointer(rebasing: text[..<space])
                    let right = UnsafeBufferPointer(rebasing: text[(space + 1)...])
                    guard let leftID = table.id(of: left), let rightID = table.id(of: right) else {
                        return "merge \(rank) \(quoted(text)) uses a symbol that is not in the vocabulary"
                    }
                    joined.removeAll(keepingCapacity: true)
                    joined.append(contentsOf: left)
                    joined.append(contentsOf: right)
                    guard let mergedID = joined.withUnsafeBufferPointer({ table.id(of: $0) }) else {
                        return "merge \(rank) \(quoted(text)) does not produce a vocabulary entry"
                    }
                    let key = UInt64(UInt32(leftID)) << 32 | UInt64(UInt32(rightID))
                    guard merges.insert(key, UInt64(rank) << 32 | UInt64(UInt32(mergedID))) else {
                        return "merge \(rank) \(quoted(text)) is listed twice"
                    }
                    return nil
                } ?? "merge \(rank) is not a string"
            if let outcome { throw fail(outcome) }
        }

        let bos = root["bos_token"]?.string ?? "<|startoftext|>"
        let eos = root["eos_token"]?.string ?? "<|endoftext|>"
        guard let startID = table.id(of: bos) else { throw fail("start token \(quoted(bos)) is not in the vocabulary") }
        guard let endID = table.id(of: eos) else { throw fail("end token \(quoted(eos)) is not in the vocabulary") }
        let expected = 512 + mergeList.count + 2
        guard count == expected else {
            throw fail(
                "\(count) tokens, but 256 byte symbols ×2 + \(mergeList.count) merges + 2 special tokens make \(expected)"
            )
        }
        var contextLength = 77
        if let node = root["context_length"] {
            guard let value = node.int, value >= 2, value <= 1 << 16 else {
                throw fail("\"context_length\" must be an integer from 2 to 65536")
            }
            contextLength = Int(value)
        }

        self.table = table
        self.digest = digest.hex
        self.startOfText = startID
        self.endOfText = endID
        self.contextLength = contextLength
        self.mergeCount = mergeList.count
        self.byteSymbol = byteSymbol
        self.byteEndSymbol = byteEndSymbol
        self.merges = merges
    }

    /// Byte-pair encoding of one pre-token given as UTF-8 bytes (`SimpleTokenizer.bpe`): the bytes'
    /// symbols, the last one with `</w>`; then, repeatedly, the adjacent pair with the lowest merge rank
    /// is merged at every non-overlapping occurrence, left to right, until no pair has a rank.
    ///
    /// - Complexity: O(n²) in the number of bytes of the pre-token.
    public func bpe<Bytes: BidirectionalCollection<UInt8>>(_ bytes: Bytes) -> [Int32] {
        guard let last = bytes.last else { return [] }
        var word = bytes.dropLast().map { byteSymbol[Int($0)] }
        word.append(byteEndSymbol[Int(last)])
        var merged: [Int32] = []
        while word.count > 1 {
            var best = UInt64.max
            var bestPosition = 0
            for position in 0..<(word.count - 1) {
                if let entry = merges[pairKey(word[position], word[position + 1])], entry < best {
                    best = entry
                    bestPosition = position
                }
            }
            guard best != .max else { break }
            let (first, second) = (word[bestPosition], word[bestPosition + 1])
            let result = Int32(truncatingIfNeeded: best & 0xFFFF_FFFF)
            var position = 0
            merged.removeAll(keepingCapacity: true)
            while position < word.count {
                if position + 1 < word.count && word[position] == first && word[position + 1] == second {
                    merged.append(result)
                    position += 2
                } else {
                    merged.append(word[position])
                    position += 1
                }
            }
            swap(&word, &merged)
        }
        return word
    }

    /// Number of tokens (ids are `0..<count`).
    public var count: Int { table.count }

    /// The token string of `id` (byte-mapped characters, `</w>` ending a word).
    public func token(_ id: Int32) -> String {
        table.string(Int(id))
    }

    /// The id of a token string, if it is in the vocabulary.
    public func id(of token: String) -> Int32? {
        table.id(of: token)
    }

    @inline(__always)
    private func pairKey(_ left: Int32, _ right: Int32) -> UInt64 {
        UInt64(UInt32(bitPattern: left)) << 32 | UInt64(UInt32(bitPattern: right))
    }
}

/// A vocabulary file that cannot be used, with the file, the problem, and its ``kind``.
public struct VocabularyError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Sendable, Equatable {
        /// The file cannot be opened or read.
        case unreadable
        /// The file is read, but it is not a valid vocabulary (JSON, layout, ids, merges).
        case invalid
    }

    public let path: String
    public let kind: Kind
    public let problem: String
    public var description: String { "vocabulary \(path): \(problem)" }

    public init(path: String, kind: Kind, problem: String) {
        self.path = path
        self.kind = kind
        self.problem = problem
    }

    /// A tokenizer file's bytes, or the error saying why it cannot be read.
    static func read(_ path: String, maximumSize: Int) throws(VocabularyError) -> [UInt8] {
        do {
            return try FileContents.read(path, maximumSize: maximumSize)
        } catch {
            throw VocabularyError(path: path, kind: .unreadable, problem: error.reason)
        }
    }
}

private func quoted(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
    quoted(String(decoding: bytes, as: UTF8.self))
}

private func quoted(_ text: String) -> String {
    var out = ""
    JSONValue.writeString(text, to: &out)
    return out
}
