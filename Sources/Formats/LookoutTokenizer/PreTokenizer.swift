/// CLIP's pre-tokenisation: `findall` of
///
///     <\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+
///
/// compiled by the `regex` module with `IGNORECASE`, on the cleaned, lower-cased text. At each position
/// the first alternative that matches wins; a position where none matches (whitespace) is skipped.
/// Character classes and case-insensitive letter matches come from the reference environment.
public enum PreTokenizer {
    public static func split(_ cleaned: String) -> [String] {
        split(cleaned.unicodeScalars.map(\.value)).map { String(scalars: Array($0)) }
    }

    private static let specialTokens: [[UInt8]] = [Array("<|startoftext|>".utf8), Array("<|endoftext|>".utf8)]
    private static let contractions: [[UInt8]] = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"].map { Array($0.utf8) }

    static func split(_ text: [UInt32]) -> [ArraySlice<UInt32>] {
        var pieces: [ArraySlice<UInt32>] = []
        var index = 0
        while index < text.count {
            if let end = matchLiteral(text, at: index, among: specialTokens)
                ?? matchLiteral(text, at: index, among: contractions)
            {
                pieces.append(text[index..<end])
                index = end
            } else if Tables.regexLetter.contains(text[index]) {
                var end = index + 1
                while end < text.count && Tables.regexLetter.contains(text[end]) { end += 1 }
                pieces.append(text[index..<end])
                index = end
            } else if Tables.regexNumber.contains(text[index]) {
                pieces.append(text[index..<(index + 1)])
                index += 1
            } else if Tables.regexOther.contains(text[index]) {
                var end = index + 1
                while end < text.count && Tables.regexOther.contains(text[end]) { end += 1 }
                pieces.append(text[index..<end])
                index = end
            } else {
                index += 1
            }
        }
        return pieces
    }

    /// End of the first of `literals` that matches at `start` case-insensitively as `regex` does.
    private static func matchLiteral(_ text: [UInt32], at start: Int, among literals: [[UInt8]]) -> Int? {
        guard text[start] == UInt32(literals[0][0]) else { return nil }
        for literal in literals where start + literal.count <= text.count {
            var matched = true
            for (offset, expected) in literal.enumerated() where !matchesIgnoringCase(text[start + offset], expected) {
                matched = false
                break
            }
            if matched { return start + literal.count }
        }
        return nil
    }

    private static func matchesIgnoringCase(_ value: UInt32, _ expected: UInt8) -> Bool {
        let lower = UInt32(expected)
        if value == lower { return true }
        guard (0x61...0x7A).contains(lower) else { return false }
        return value == lower - 0x20 || (Tables.regexCaseInsensitiveExtras[lower]?.contains(value) ?? false)
    }
}
