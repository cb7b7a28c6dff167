/// ftfy 6.3.1 `fix_text` with its default configuration.
///
/// Ported step by step from `ftfy/__init__.py` (`fix_text`, `fix_and_explain`) and `ftfy/fixes.py`:
/// the text is cut after each `\n`; a segment containing `<` switches HTML unescaping off for it and
/// every later segment; each segment is fixed repeatedly until it no longer changes, each round
/// applying `unescape_html`, `fix_encoding` (the mojibake repair, `MojibakeRepair`), `fix_c1_controls`, `fix_latin_ligatures`, `fix_character_width`,
/// `uncurl_quotes`, `fix_line_breaks`, `remove_terminal_escapes`, `remove_control_chars` and NFC.
/// (`fix_surrogates` has nothing to do: Swift strings cannot hold surrogates.)
public enum TextFixer {
    static let maximumSegmentLength = 1_000_000

    public static func fixText(_ text: String) -> String {
        String(scalars: fixText(text.unicodeScalars.map(\.value)))
    }

    static func fixText(_ text: [UInt32]) -> [UInt32] {
        var out: [UInt32] = []
        out.reserveCapacity(text.count)
        var unescapeHTML = true
        var position = 0
        while position < text.count {
            var end = text[position...].firstIndex(of: 0x0A).map { $0 + 1 } ?? text.count
            if end - position > maximumSegmentLength { end = position + maximumSegmentLength }
            let segment = Array(text[position..<end])
            if unescapeHTML && segment.contains(0x3C) { unescapeHTML = false }
            out.append(contentsOf: fixSegment(segment, unescapeHTML: unescapeHTML))
            position = end
        }
        return out
    }

    static func fixSegment(_ segment: [UInt32], unescapeHTML: Bool) -> [UInt32] {
        var text = segment
        while true {
            let original = text
            if unescapeHTML { text = unescapeEntities(text) }
            text = MojibakeRepair.fixEncoding(text)
            text = text.flatMap { Tables.ftfyC1Controls[$0] ?? [$0] }
            text = text.flatMap { Tables.ftfyLigatures[$0] ?? [$0] }
            text = text.flatMap { Tables.ftfyWidthMap[$0] ?? [$0] }
            text = uncurlQuotes(text)
            text = fixLineBreaks(text)
            text = removeTerminalEscapes(text)
            text = text.filter { !Tables.ftfyControlChars.contains($0) }
            text = UnicodeNormalization.nfc(text)
            if text == original { return text }
        }
    }

    /// ftfy `unescape_html`: `&#?[0-9A-Za-z]{1,24};` replaced when it is a known entity (ftfy's table:
    /// html5's names with `;` plus some upper-cased ones), or a numeric reference that `html.unescape`
    /// decodes completely.
    static func unescapeEntities(_ text: [UInt32]) -> [UInt32] {
        guard text.contains(0x26) else { return text }
        var out: [UInt32] = []
        out.reserveCapacity(text.count)
        var index = 0
        while index < text.count {
            guard text[index] == 0x26, let end = entityEnd(text, from: index) else {
                out.append(text[index])
                index += 1
                continue
            }
            let match = Array(text[index..<end])
            if let value = Tables.html5Entities[Array(match.dropFirst())] ?? Tables.ftfyUppercaseEntities[match] {
                out.append(contentsOf: value)
            } else if match[1] == 0x23 {
                let unescaped = HTMLUnescape.unescape(match)
                out.append(contentsOf: unescaped.contains(0x3B) ? match : unescaped)
            } else {
                out.append(contentsOf: match)
            }
            index = end
        }
        return out
    }

    /// End (exclusive) of a match of `&#?[0-9A-Za-z]{1,24};` starting at `start`, if any.
    private static func entityEnd(_ text: [UInt32], from start: Int) -> Int? {
        var index = start + 1
        if index < text.count && text[index] == 0x23 { index += 1 }
        let first = index
        while index < text.count && index - first < 24 && isASCIIAlphanumeric(text[index]) { index += 1 }
        guard index > first, index < text.count, text[index] == 0x3B else { return nil }
        return index + 1
    }

    private static func isASCIIAlphanumeric(_ value: UInt32) -> Bool {
        (0x30...0x39).contains(value) || (0x41...0x5A).contains(value) || (0x61...0x7A).contains(value)
    }

    /// `[\u201c-\u201f]` → `"`, then `[\u02bc\u2018-\u201b]` → `'`.
    static func uncurlQuotes(_ text: [UInt32]) -> [UInt32] {
        text.map { value in
            switch value {
            case 0x201C...0x201F: 0x22
            case 0x02BC, 0x2018...0x201B: 0x27
            default: value
            }
        }
    }

    /// `\r\n`, `\r`, U+2028, U+2029 and U+0085 each become `\n`.
    static func fixLineBreaks(_ text: [UInt32]) -> [UInt32] {
        var out: [UInt32] = []
        out.reserveCapacity(text.count)
        var index = 0
        while index < text.count {
            let value = text[index]
            switch value {
            case 0x0D:
                out.append(0x0A)
                if index + 1 < text.count && text[index + 1] == 0x0A { index += 1 }
            case 0x2028, 0x2029, 0x85: out.append(0x0A)
            default: out.append(value)
            }
            index += 1
        }
        return out
    }

    /// Removes `\x1b\[((?:\d|;)*)([a-zA-Z])` (`\d` being Unicode decimal digits, as in Python's `re`).
    static func removeTerminalEscapes(_ text: [UInt32]) -> [UInt32] {
        guard text.contains(0x1B) else { return text }
        var out: [UInt32] = []
        var index = 0
        while index < text.count {
            if text[index] == 0x1B, index + 1 < text.count, text[index + 1] == 0x5B {
                var end = index + 2
                while end < text.count && (text[end] == 0x3B || Tables.reDigit.contains(text[end])) { end += 1 }
                if end < text.count, (0x41...0x5A).contains(text[end]) || (0x61...0x7A).contains(text[end]) {
                    index = end + 1
                    continue
                }
            }
            out.append(text[index])
            index += 1
        }
        return out
    }
}

extension String {
    init(scalars: [UInt32]) {
        var view = String.UnicodeScalarView()
        view.append(contentsOf: scalars.map { Unicode.Scalar($0) ?? "\u{FFFD}" })
        self = String(view)
    }
}
