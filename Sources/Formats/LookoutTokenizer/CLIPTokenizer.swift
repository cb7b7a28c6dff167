/// OpenAI CLIP's tokenizer, giving the ids of `clip.tokenize(text, truncate=True)`.
///
/// `encode` runs ``TextCleaner`` (ftfy without mojibake repair, HTML unescaping, whitespace and
/// case), ``PreTokenizer``, ``ByteEncoder`` and byte-pair merges; `tokenize` adds the start and end
/// tokens, truncates to the context length keeping the end token last, and pads with id 0.
public struct CLIPTokenizer: Sendable {
    public let vocabulary: CLIPVocabulary

    private let specialScalars: [(Int32, [UInt32])]

    public init(vocabulary: CLIPVocabulary) {
        self.vocabulary = vocabulary
        specialScalars = [vocabulary.startOfText, vocabulary.endOfText].map { id in
            (id, vocabulary.token(id).unicodeScalars.map(\.value))
        }
    }

    /// Loads the vocabulary at `path` (see ``CLIPVocabulary``).
    public init(vocabularyFile path: String) throws(VocabularyError) {
        self.init(vocabulary: try CLIPVocabulary(contentsOf: path))
    }

    /// Token ids of `text`, without start and end tokens (`SimpleTokenizer.encode`).
    public func encode(_ text: String) -> [Int32] {
        let cleaned = TextCleaner.clean(text.unicodeScalars.map(\.value))
        var ids: [Int32] = []
        var bytes: [UInt8] = []
        for piece in PreTokenizer.split(cleaned) {
            if let special = specialToken(piece) {
                ids.append(special)
                continue
            }
            bytes.removeAll(keepingCapacity: true)
            for value in piece { appendUTF8(value, to: &bytes) }
            ids.append(contentsOf: vocabulary.bpe(bytes))
        }
        return ids
    }

    /// `[start] + encode(text) + [end]`, cut to the context length with the end token kept last,
    /// padded with 0 to exactly ``CLIPVocabulary/contextLength`` ids.
    public func tokenize(_ text: String) -> [Int32] {
        let length = vocabulary.contextLength
        var ids = [vocabulary.startOfText]
        ids.append(contentsOf: encode(text))
        ids.append(vocabulary.endOfText)
        if ids.count > length {
            ids.removeLast(ids.count - length)
            ids[length - 1] = vocabulary.endOfText
        }
        ids.append(contentsOf: repeatElement(0, count: length - ids.count))
        return ids
    }

    /// The token strings of `ids` (for display).
    public func tokenStrings(_ ids: [Int32]) -> [String] {
        ids.map { id in
            id >= 0 && Int(id) < vocabulary.count ? vocabulary.token(id) : "<invalid \(id)>"
        }
    }

    /// `SimpleTokenizer.bpe` caches the two special tokens as themselves, so that an exact
    /// `<|startoftext|>` or `<|endoftext|>` pre-token maps straight to its id.
    private func specialToken(_ piece: ArraySlice<UInt32>) -> Int32? {
        guard piece.first == 0x3C else { return nil }
        for (id, scalars) in specialScalars where piece.elementsEqual(scalars) {
            return id
        }
        return nil
    }
}

@inline(__always)
func appendUTF8(_ value: UInt32, to bytes: inout [UInt8]) {
    switch value {
    case 0..<0x80:
        bytes.append(UInt8(value))
    case 0x80..<0x800:
        bytes.append(UInt8(0xC0 | (value >> 6)))
        bytes.append(UInt8(0x80 | (value & 0x3F)))
    case 0x800..<0x10000:
        bytes.append(UInt8(0xE0 | (value >> 12)))
        bytes.append(UInt8(0x80 | ((value >> 6) & 0x3F)))
        bytes.append(UInt8(0x80 | (value & 0x3F)))
    default:
        bytes.append(UInt8(0xF0 | (value >> 18)))
        bytes.append(UInt8(0x80 | ((value >> 12) & 0x3F)))
        bytes.append(UInt8(0x80 | ((value >> 6) & 0x3F)))
        bytes.append(UInt8(0x80 | (value & 0x3F)))
    }
}
