/// SigLIP's text pipeline on a SentencePiece model, exact to `transformers`' `SiglipTokenizer` called as SigLIP's
/// processor calls it (`padding="max_length"`, `max_length=64`, truncation): `▁` put before the text (a `▁` in
/// the text read as a space); the text cut at the special tokens `</s>` and `<unk>` (the spaces around them
/// dropped); each other part lowercased as Python lowercases (final sigma included), its ASCII punctuation
/// removed, its runs of whitespace made one space and its ends stripped, then encoded after `<unk>` and the pieces
/// `<unk>` gave dropped (how the reference keeps the model's dummy prefix off); a leading lone `▁` before a
/// special token dropped; at most 63 ids, `</s>`, then `</s>` as padding to 64.
public struct SigLIPTokenizer: Sendable {
    public let model: SentencePieceModel
    /// Ids per text, `</s>` and padding included.
    public let length: Int
    public let endID: Int
    let unknownText = "<unk>"
    /// How many ids `<unk>` written as text encodes to.
    let unknownLength: Int
    /// The special tokens the text is cut at, with their ids.
    let specials: [(text: [Unicode.Scalar], id: Int)]

    public init(model: SentencePieceModel, length: Int = 64) throws(VocabularyError) {
        guard let end = model.pieces.firstIndex(of: "</s>") else {
            throw VocabularyError(path: "", kind: .invalid, problem: "a SigLIP tokenizer needs a </s> piece")
        }
        self.model = model
        self.length = length
        endID = end
        unknownLength = model.encode(unknownText).count
        specials = [(Array("</s>".unicodeScalars), end), (Array(unknownText.unicodeScalars), model.unknownID)]
    }

    public init(contentsOf path: String, length: Int = 64) throws(VocabularyError) {
        try self.init(model: SentencePieceModel(contentsOf: path), length: length)
    }

    /// The `length` ids of `text`.
    public func tokenize(_ text: String) -> [Int] {
        var marked = String.UnicodeScalarView(["▁"])
        for scalar in text.unicodeScalars { marked.append(scalar == "▁" ? " " : scalar) }
        var ids = tokens(String(marked))
        if ids.count > length - 1 { ids.removeLast(ids.count - (length - 1)) }
        ids.append(endID)
        return ids + [Int](repeating: endID, count: length - ids.count)
    }

    /// The ids before `</s>` and padding.
    func tokens(_ text: String) -> [Int] {
        let scalars = Array(text.unicodeScalars)
        // Parts: text between special tokens (the whitespace beside a special token dropped), and the tokens.
        var parts: [(text: [Unicode.Scalar], special: Int?)] = []
        var start = 0, at = 0
        while at < scalars.count {
            guard
                let special = specials.first(where: { special in
                    at + special.text.count <= scalars.count
                        && Array(scalars[at..<(at + special.text.count)]) == special.text
                })
            else {
                at += 1
                continue
            }
            var before = Array(scalars[start..<at])
            while let last = before.last, Self.isSpace(last) { before.removeLast() }
            parts.append((before, nil))
            parts.append((special.text, special.id))
            at += special.text.count
            while at < scalars.count && Self.isSpace(scalars[at]) { at += 1 }
            start = at
        }
        parts.append((Array(scalars[start...]), nil))
        var tokens: [(id: Int, special: Bool)] = []
        for part in parts where !part.text.isEmpty {
            if let special = part.special {
                tokens.append((special, true))
                continue
            }
            var text = String.UnicodeScalarView()
            text.append(contentsOf: part.text)
            let encoded = model.encode(unknownText + Self.canonical(String(text)))
            let kept = encoded.count >= unknownLength ? encoded.dropFirst(unknownLength) : encoded[...]
            tokens += kept.map { ($0, false) }
        }
        // A leading lone ▁ before a special token goes.
        if tokens.count > 1 && model.pieces[tokens[0].id] == "▁" && !tokens[0].special && tokens[1].special {
            tokens.removeFirst()
        }
        return tokens.map(\.id)
    }

    /// Python's `str.isspace`: Unicode White_Space, and the information separators U+001C–U+001F.
    static func isSpace(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.isWhitespace || (0x1C...0x1F).contains(scalar.value)
    }

    /// SiglipTokenizer's `canonicalize_text`: lowercased, ASCII punctuation removed, whitespace runs made one
    /// space, stripped.
    public static func canonical(_ text: String) -> String {
        var out = String.UnicodeScalarView()
        var pendingSpace = false
        for scalar in lowercased(text).unicodeScalars {
            if scalar.isASCII && "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~".unicodeScalars.contains(scalar) { continue }
            if isSpace(scalar) {
                pendingSpace = true
                continue
            }
            if pendingSpace && !out.isEmpty { out.append(" ") }
            pendingSpace = false
            out.append(scalar)
        }
        return String(out)
    }

    /// Python's `str.lower`: each character's full lowercase mapping, and capital sigma as final sigma (ς) where
    /// a cased letter precedes it and none follows (case-ignorable characters skipped both ways).
    public static func lowercased(_ text: String) -> String {
        let scalars = Array(text.unicodeScalars)
        var out = String.UnicodeScalarView()
        for (index, scalar) in scalars.enumerated() {
            if scalar.value == 0x3A3 {
                var before = index - 1
                while before >= 0 && scalars[before].properties.isCaseIgnorable { before -= 1 }
                var after = index + 1
                while after < scalars.count && scalars[after].properties.isCaseIgnorable { after += 1 }
                let precededByCased = before >= 0 && scalars[before].properties.isCased
                let followedByCased = after < scalars.count && scalars[after].properties.isCased
                if precededByCased && !followedByCased {
                    out.append("\u{3C2}")
                    continue
                }
            }
            out.append(contentsOf: scalar.properties.lowercaseMapping.unicodeScalars)
        }
        return String(out)
    }
}
