import LookoutJSON

/// A byte-fallback BPE tokenizer read from a Hugging Face `tokenizer.json` (the `tokenizers` library's format), as
/// Gemma's and SigLIP 2's are, exact to `tokenizers`' `Tokenizer.encode(text).ids`:
///
/// 1. Added tokens whose `normalized` is false (`<bos>`, `<eos>`, …) are cut out of the raw text, leftmost and
///    longest first; `lstrip`/`rstrip` take the whitespace beside them.
/// 2. Each other part is normalised (`Replace` of a string, `Sequence` of them) and pre-tokenised (`Split` on a
///    string with one of its five behaviours; none).
/// 3. Each piece becomes symbols, one per character in the vocabulary; a character outside it becomes its UTF-8
///    bytes' `<0xNN>` pieces (byte fallback), or `<unk>` (runs of them fused where `fuse_unk`). Merges are then
///    applied lowest rank first, leftmost among equal ranks, until none applies (`tokenizers`' `Word::merge_all`).
/// 4. The post-processor's `TemplateProcessing` puts its special tokens around the ids.
///
/// What Lookout does not compute (a regex split, another normaliser, pre-tokeniser or model, BPE dropout, subword
/// prefixes) is refused by name when the file is read.
public struct BPETokenizer: Sendable {
    public let vocabulary: [String: Int]
    /// Pair of ids → (rank, merged id).
    let merges: [UInt64: (rank: Int32, id: Int32)]
    let unknownID: Int?
    let fuseUnknown: Bool
    let byteFallback: Bool
    let ignoreMerges: Bool
    /// `<0xNN>`'s id for each byte, where the vocabulary has it.
    let bytes: [Int?]
    let replacements: [(pattern: String, content: String)]
    let split: (pattern: String, behavior: String)?
    /// Added tokens matched in the raw text, with their ids and whether they take the whitespace before/after.
    let added: [(text: [Unicode.Scalar], id: Int, lstrip: Bool, rstrip: Bool)]
    /// Ids the post-processor puts before and after a single text.
    let before: [Int]
    let after: [Int]

    public init(contentsOf path: String) throws(VocabularyError) {
        try self.init(json: try VocabularyError.read(path, maximumSize: 1 << 30), path: path)
    }

    public init(json bytes: [UInt8], path: String) throws(VocabularyError) {
        func fail(_ problem: String) -> VocabularyError {
            VocabularyError(path: path, kind: .invalid, problem: problem)
        }
        let document: JSONDocument
        do { document = try JSONDocument(bytes: bytes) } catch { throw fail("not JSON: \(error)") }
        let root = document.root
        guard let model = root["model"], model["type"]?.string == "BPE" else {
            throw fail("model.type \(root["model"]?["type"]?.string ?? "none"): Lookout reads BPE tokenizers")
        }
        if let dropout = model["dropout"]?.number, dropout != 0 {
            throw fail("model.dropout \(dropout) is not computed")
        }
        for key in ["continuing_subword_prefix", "end_of_word_suffix"] {
            if let value = model[key]?.string, !value.isEmpty { throw fail("model.\(key) \(value) is not computed") }
        }
        guard let vocab = model["vocab"], vocab.kind == .object, let mergeList = model["merges"] else {
            throw fail("model.vocab and model.merges are missing")
        }
        var vocabulary: [String: Int] = [:]
        var invalid: String?
        vocab.forEachMember { name, value in
            guard let id = value.int, id >= 0, id < 1 << 24 else {
                invalid = String(decoding: name, as: UTF8.self)
                return
            }
            vocabulary[String(decoding: name, as: UTF8.self)] = Int(id)
        }
        if let invalid { throw fail("model.vocab[\(invalid)] is not an id") }
        var merges: [UInt64: (rank: Int32, id: Int32)] = [:]
        for rank in 0..<mergeList.count {
            let entry = mergeList[rank]
            let pair: (String, String)
            if let text = entry.string {  // the older format: "a b"
                let parts = text.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2 else { throw fail("merge \(rank) \"\(text)\" is not two pieces") }
                pair = (String(parts[0]), String(parts[1]))
            } else if entry.count == 2, let a = entry[0].string, let b = entry[1].string {
                pair = (a, b)
            } else {
                throw fail("merge \(rank) is not two pieces")
            }
            guard let a = vocabulary[pair.0], let b = vocabulary[pair.1], let merged = vocabulary[pair.0 + pair.1]
            else { throw fail("merge \(rank) (\(pair.0) \(pair.1)) names a piece the vocabulary lacks") }
            let key = UInt64(a) << 32 | UInt64(b)
            if merges[key] == nil { merges[key] = (Int32(rank), Int32(merged)) }
        }
        self.vocabulary = vocabulary
        self.merges = merges
        let unknown = model["unk_token"]?.string
        unknownID = unknown.flatMap { vocabulary[$0] }
        fuseUnknown = model["fuse_unk"]?.bool ?? false
        byteFallback = model["byte_fallback"]?.bool ?? false
        ignoreMerges = model["ignore_merges"]?.bool ?? false
        let hex = Array("0123456789ABCDEF")
        self.bytes = (0..<256).map { byte in vocabulary["<0x\(hex[byte >> 4])\(hex[byte & 15])>"] }

        // The normaliser.
        var replacements: [(String, String)] = []
        func normalizer(_ node: JSONNode) throws(VocabularyError) {
            switch node["type"]?.string {
            case "Sequence":
                guard let list = node["normalizers"] else { throw fail("normalizer Sequence without normalizers") }
                for index in 0..<list.count { try normalizer(list[index]) }
            case "Replace":
                guard let pattern = node["pattern"]?["String"]?.string, let content = node["content"]?.string else {
                    throw fail("normalizer Replace: only a String pattern is computed, not a Regex")
                }
                replacements.append((pattern, content))
            case let other:
                throw fail("normalizer \(other ?? "?"): Lookout computes Replace and Sequence")
            }
        }
        if let node = root["normalizer"], node.kind != .null { try normalizer(node) }
        self.replacements = replacements

        // The pre-tokeniser.
        if let node = root["pre_tokenizer"], node.kind != .null {
            guard node["type"]?.string == "Split", let pattern = node["pattern"]?["String"]?.string,
                let behavior = node["behavior"]?.string, node["invert"]?.bool != true
            else {
                throw fail(
                    "pre_tokenizer \(node["type"]?.string ?? "?"): Lookout computes a Split on a String pattern only")
            }
            let behaviors = ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]
            guard behaviors.contains(behavior), !pattern.isEmpty else {
                throw fail("pre_tokenizer Split behavior \(behavior) is not computed")
            }
            split = (pattern, behavior)
        } else {
            split = nil
        }

        // Added tokens.
        var added: [(text: [Unicode.Scalar], id: Int, lstrip: Bool, rstrip: Bool)] = []
        if let list = root["added_tokens"] {
            for index in 0..<list.count {
                let token = list[index]
                guard let content = token["content"]?.string, let id = token["id"]?.int, !content.isEmpty else {
                    throw fail("added_tokens[\(index)] needs content and id")
                }
                if token["normalized"]?.bool == true || token["single_word"]?.bool == true {
                    throw fail("added token \(content): normalized or single_word added tokens are not computed")
                }
                added.append(
                    (
                        Array(content.unicodeScalars), Int(id), token["lstrip"]?.bool ?? false,
                        token["rstrip"]?.bool ?? false
                    ))
            }
        }
        // Longest first, so that the first match at a position is the longest.
        self.added = added.sorted { $0.text.count > $1.text.count }

        // The post-processor: TemplateProcessing's single template, or none.
        var before: [Int] = []
        var after: [Int] = []
        if let node = root["post_processor"], node.kind != .null {
            guard node["type"]?.string == "TemplateProcessing", let single = node["single"] else {
                throw fail(
                    "post_processor \(node["type"]?.string ?? "?"): Lookout computes TemplateProcessing only")
            }
            var seenSequence = false
            for index in 0..<single.count {
                let part = single[index]
                if part["Sequence"] != nil {
                    seenSequence = true
                } else if let name = part["SpecialToken"]?["id"]?.string {
                    guard let ids = node["special_tokens"]?[name]?["ids"], ids.count > 0 else {
                        throw fail("post_processor names \(name) without its ids")
                    }
                    let values = (0..<ids.count).compactMap { ids[$0].int.map(Int.init) }
                    if seenSequence { after += values } else { before += values }
                }
            }
        }
        (self.before, self.after) = (before, after)
    }

    /// The ids of `text`, as `Tokenizer.encode(text).ids`.
    public func encode(_ text: String) -> [Int] {
        var ids = before
        for part in parts(Array(text.unicodeScalars)) {
            switch part {
            case .added(let id): ids.append(id)
            case .text(let scalars):
                var normalized = String(String.UnicodeScalarView(scalars))
                for (pattern, content) in replacements {
                    normalized = normalized.replacing(pattern, with: content)
                }
                for piece in pretokenized(normalized) { ids += model(piece) }
            }
        }
        return ids + after
    }

    /// `length` ids as transformers' tokenizer call gives them with `padding="max_length", max_length=length,
    /// truncation=True`: the ids cut to `length` (from the end), then `pad` added on the left or the right.
    public func padded(_ text: String, length: Int, pad: Int, left: Bool) -> [Int] {
        var ids = encode(text)
        if ids.count > length { ids.removeLast(ids.count - length) }
        let padding = [Int](repeating: pad, count: length - ids.count)
        return left ? padding + ids : ids + padding
    }

    enum Part {
        case text([Unicode.Scalar])
        case added(Int)
    }

    /// The raw text cut at its added tokens.
    func parts(_ scalars: [Unicode.Scalar]) -> [Part] {
        var parts: [Part] = []
        var text: [Unicode.Scalar] = []
        var at = 0
        func flush() {
            if !text.isEmpty { parts.append(.text(text)) }
            text = []
        }
        while at < scalars.count {
            guard
                let token = added.first(where: { token in
                    at + token.text.count <= scalars.count
                        && scalars[at..<(at + token.text.count)].elementsEqual(token.text)
                })
            else {
                text.append(scalars[at])
                at += 1
                continue
            }
            if token.lstrip { while let last = text.last, last.properties.isWhitespace { text.removeLast() } }
            flush()
            parts.append(.added(token.id))
            at += token.text.count
            if token.rstrip { while at < scalars.count, scalars[at].properties.isWhitespace { at += 1 } }
        }
        flush()
        return parts
    }

    /// The normalised text split by the pre-tokeniser.
    func pretokenized(_ text: String) -> [[Unicode.Scalar]] {
        let scalars = Array(text.unicodeScalars)
        guard let (pattern, behavior) = split else { return scalars.isEmpty ? [] : [scalars] }
        let delimiter = Array(pattern.unicodeScalars)
        // Alternating runs: (scalars, is a delimiter).
        var pieces: [([Unicode.Scalar], Bool)] = []
        var current: [Unicode.Scalar] = []
        var at = 0
        while at < scalars.count {
            if at + delimiter.count <= scalars.count && scalars[at..<(at + delimiter.count)].elementsEqual(delimiter) {
                if !current.isEmpty { pieces.append((current, false)) }
                current = []
                pieces.append((delimiter, true))
                at += delimiter.count
            } else {
                current.append(scalars[at])
                at += 1
            }
        }
        if !current.isEmpty { pieces.append((current, false)) }
        var out: [[Unicode.Scalar]] = []
        switch behavior {
        case "Removed":
            out = pieces.filter { !$0.1 }.map(\.0)
        case "Isolated":
            out = pieces.map(\.0)
        case "Contiguous":
            // Consecutive delimiters are one piece.
            var lastWasDelimiter = false
            for (piece, isDelimiter) in pieces {
                if isDelimiter && lastWasDelimiter, !out.isEmpty {
                    out[out.count - 1] += piece
                } else {
                    out.append(piece)
                }
                lastWasDelimiter = isDelimiter
            }
        case "MergedWithPrevious":
            var pending: [Unicode.Scalar] = []
            for (piece, isDelimiter) in pieces {
                pending += piece
                if isDelimiter {
                    out.append(pending)
                    pending = []
                }
            }
            if !pending.isEmpty { out.append(pending) }
        default:  // MergedWithNext
            var pending: [Unicode.Scalar] = []
            for (piece, isDelimiter) in pieces {
                if isDelimiter {
                    if !pending.isEmpty { out.append(pending) }
                    pending = piece
                } else {
                    pending += piece
                }
            }
            if !pending.isEmpty { out.append(pending) }
        }
        return out.filter { !$0.isEmpty }
    }

    /// The BPE model on one pre-token.
    func model(_ piece: [Unicode.Scalar]) -> [Int] {
        if ignoreMerges, let id = vocabulary[String(String.UnicodeScalarView(piece))] { return [id] }
        // Symbols: ids with a doubly linked list (prev, next) and a length (0: merged away).
        var ids: [Int32] = []
        var unknownRun = false
        for scalar in piece {
            if let id = vocabulary[String(Character(scalar))] {
                ids.append(Int32(id))
                unknownRun = false
                continue
            }
            if byteFallback {
                let utf8 = Array(String(Character(scalar)).utf8)
                let fallback = utf8.compactMap { bytes[Int($0)] }
                if fallback.count == utf8.count {
                    ids += fallback.map { Int32($0) }
                    unknownRun = false
                    continue
                }
            }
            guard let unknown = unknownID else { continue }
            if fuseUnknown && unknownRun { continue }
            ids.append(Int32(unknown))
            unknownRun = true
        }
        let count = ids.count
        guard count > 1 else { return ids.map(Int.init) }
        var previous = (0..<count).map { $0 - 1 }
        var next = (0..<count).map { $0 + 1 }
        var alive = [Bool](repeating: true, count: count)
        var queue = MergeQueue()
        func merge(_ a: Int32, _ b: Int32) -> (rank: Int32, id: Int32)? {
            merges[UInt64(UInt32(a)) << 32 | UInt64(UInt32(b))]
        }
        for position in 0..<(count - 1) {
            if let found = merge(ids[position], ids[position + 1]) {
                queue.push(rank: found.rank, position: Int32(position), id: found.id)
            }
        }
        while let top = queue.pop() {
            let position = Int(top.position)
            guard alive[position], next[position] < count else { continue }
            let right = next[position]
            guard let found = merge(ids[position], ids[right]), found.id == top.id else { continue }
            ids[position] = found.id
            alive[right] = false
            next[position] = next[right]
            if next[right] < count { previous[next[right]] = position }
            if previous[position] >= 0, let left = merge(ids[previous[position]], ids[position]) {
                queue.push(rank: left.rank, position: Int32(previous[position]), id: left.id)
            }
            if next[position] < count, let after = merge(ids[position], ids[next[position]]) {
                queue.push(rank: after.rank, position: Int32(position), id: after.id)
            }
        }
        return (0..<count).filter { alive[$0] }.map { Int(ids[$0]) }
    }
}

/// A text tokenizer that gives every text the same number of ids (a tower's context), padding included.
public protocol TextTokenizer: Sendable {
    func tokenize(_ text: String) -> [Int]
}

extension SigLIPTokenizer: TextTokenizer {}

/// A `tokenizer.json` called as SigLIP's processor calls it (`padding="max_length"`, `max_length`, truncation):
/// SigLIP 2's Gemma tokenizer, with the side and token of its `tokenizer_config.json`.
public struct PaddedBPETokenizer: TextTokenizer {
    public let bpe: BPETokenizer
    public let length: Int
    public let pad: Int
    public let left: Bool

    public init(bpe: BPETokenizer, length: Int, pad: Int, left: Bool) {
        (self.bpe, self.length, self.pad, self.left) = (bpe, length, pad, left)
    }

    /// `tokenizer.json` and, where it is beside it, `tokenizer_config.json` (`padding_side`, `pad_token`; a
    /// GemmaTokenizer pads on the left unless it says otherwise, as transformers' does).
    public init(folder: String, length: Int) throws(VocabularyError) {
        let bpe = try BPETokenizer(contentsOf: folder + "/tokenizer.json")
        var (padText, left) = ("<pad>", false)
        let configuration = folder + "/tokenizer_config.json"
        if let bytes = try? VocabularyError.read(configuration, maximumSize: 1 << 24) {
            guard let root = try? JSONDocument(bytes: bytes).root else {
                throw VocabularyError(path: configuration, kind: .invalid, problem: "not JSON")
            }
            let kind = root["tokenizer_class"]?.string ?? ""
            left = root["padding_side"]?.string.map { $0 == "left" } ?? kind.hasPrefix("Gemma")
            padText = root["pad_token"]?.string ?? root["pad_token"]?["content"]?.string ?? padText
        }
        guard let pad = bpe.vocabulary[padText] else {
            throw VocabularyError(
                path: folder + "/tokenizer.json", kind: .invalid, problem: "no pad token \(padText) in the vocabulary")
        }
        self.init(bpe: bpe, length: length, pad: pad, left: left)
    }

    public func tokenize(_ text: String) -> [Int] { bpe.padded(text, length: length, pad: pad, left: left) }
}

/// A binary min-heap of merges ordered by rank, then position (tokenizers' `Merge` ordering).
struct MergeQueue {
    private var items: [(rank: Int32, position: Int32, id: Int32)] = []

    private static func before(
        _ a: (rank: Int32, position: Int32, id: Int32), _ b: (rank: Int32, position: Int32, id: Int32)
    ) -> Bool {
        a.rank != b.rank ? a.rank < b.rank : a.position < b.position
    }

    mutating func push(rank: Int32, position: Int32, id: Int32) {
        items.append((rank, position, id))
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard Self.before(items[child], items[parent]) else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> (rank: Int32, position: Int32, id: Int32)? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let top = items.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < items.count && Self.before(items[left], items[smallest]) { smallest = left }
            if right < items.count && Self.before(items[right], items[smallest]) { smallest = right }
            guard smallest != parent else { break }
            items.swapAt(parent, smallest)
            parent = smallest
        }
        return top
    }
}
