/// Python's `html.unescape`, code point for code point.
///
/// Matches `&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)` left to right and replaces:
/// numeric references through `_invalid_charrefs`, surrogates and values above U+10FFFF (U+FFFD)
/// and `_invalid_codepoints` (removed); named references by exact lookup in `html5`, else by the
/// longest prefix (of at least 2 characters) that is an entity, the rest kept; otherwise unchanged.
enum HTMLUnescape {
    static func unescape(_ text: [UInt32]) -> [UInt32] {
        guard text.contains(0x26) else { return text }
        var out: [UInt32] = []
        out.reserveCapacity(text.count)
        var index = 0
        while index < text.count {
            let value = text[index]
            if value == 0x26, let (replacement, end) = reference(in: text, at: index + 1) {
                out.append(contentsOf: replacement)
                index = end
            } else {
                out.append(value)
                index += 1
            }
        }
        return out
    }

    /// The replacement for a reference whose body starts at `start` (just after `&`), and where it ends.
    static func reference(in text: [UInt32], at start: Int) -> ([UInt32], Int)? {
        guard start < text.count else { return nil }
        if text[start] == 0x23 {  // '#'
            if let (number, end) = digits(in: text, from: start + 1, radix: 10) {
                return (numericReplacement(number), end)
            }
            if start + 1 < text.count, text[start + 1] == 0x78 || text[start + 1] == 0x58,
                let (number, end) = digits(in: text, from: start + 2, radix: 16)
            {
                return (numericReplacement(number), end)
            }
            return nil
        }
        var end = start
        while end < text.count && end - start < 32 && !isNameTerminator(text[end]) { end += 1 }
        guard end > start else { return nil }
        if end < text.count && text[end] == 0x3B { end += 1 }
        let name = Array(text[start..<end])
        if let value = Tables.html5Entities[name] { return (value, end) }
        var length = name.count - 1
        while length > 1 {
            if let value = Tables.html5Entities[Array(name[..<length])] {
                return (value + name[length...], end)
            }
            length -= 1
        }
        return ([0x26] + name, end)
    }

    private static func isNameTerminator(_ value: UInt32) -> Bool {
        // [^\t\n\f <&#;]
        value == 0x09 || value == 0x0A || value == 0x0C || value == 0x20 || value == 0x3C || value == 0x26
            || value == 0x23 || value == 0x3B
    }

    /// Parses ASCII digits (saturating just above U+10FFFF) and an optional `;`.
    private static func digits(in text: [UInt32], from start: Int, radix: UInt32) -> (UInt32, Int)? {
        var index = start
        var number: UInt32 = 0
        while index < text.count, let digit = digitValue(text[index], radix: radix) {
            number = min(number * radix + digit, 0x11_0000)  // anything above U+10FFFF is treated alike
            index += 1
        }
        guard index > start else { return nil }
        if index < text.count && text[index] == 0x3B { index += 1 }
        return (number, index)
    }

    private static func digitValue(_ value: UInt32, radix: UInt32) -> UInt32? {
        switch value {
        case 0x30...0x39: return value - 0x30
        case 0x61...0x66 where radix == 16: return value - 0x61 + 10
        case 0x41...0x46 where radix == 16: return value - 0x41 + 10
        default: return nil
        }
    }

    private static func numericReplacement(_ number: UInt32) -> [UInt32] {
        if let replacement = Tables.htmlInvalidCharrefs[number] { return replacement }
        if (0xD800...0xDFFF).contains(number) || number > 0x10FFFF { return [0xFFFD] }
        if Tables.htmlInvalidCodepoints.contains(number) { return [] }
        return [number]
    }
}
