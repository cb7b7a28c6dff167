/// The text cleaning of OpenAI CLIP's `SimpleTokenizer.encode`, as ultralytics runs it:
///
///     whitespace_clean(basic_clean(text)).lower()
///     basic_clean(t)      = html.unescape(html.unescape(ftfy.fix_text(t))).strip()
///     whitespace_clean(t) = regex.sub(r"\s+", " ", t).strip()
///
/// Each stage is available on its own. All of them work on code points, as Python strings do,
/// with character data taken from the reference environment (Python 3.11, unicodedata 14.0.0).
/// The one departure: ftfy's mojibake repair is not performed (see ``TextFixer``).
public enum TextCleaner {
    /// The whole cleaning: what the pre-tokeniser sees.
    public static func clean(_ text: String) -> String {
        String(scalars: clean(text.unicodeScalars.map(\.value)))
    }

    static func clean(_ text: [UInt32]) -> [UInt32] {
        var value = TextFixer.fixText(text)
        value = HTMLUnescape.unescape(HTMLUnescape.unescape(value))
        value = pythonStrip(value)
        value = collapseWhitespace(value)
        return pythonLowercased(value)
    }

    /// `html.unescape(html.unescape(text))`.
    public static func htmlUnescapeTwice(_ text: String) -> String {
        String(scalars: HTMLUnescape.unescape(HTMLUnescape.unescape(text.unicodeScalars.map(\.value))))
    }

    /// Python's `str.lower()`, including the final-sigma rule.
    public static func lowercased(_ text: String) -> String {
        String(scalars: pythonLowercased(text.unicodeScalars.map(\.value)))
    }

    static func pythonStrip(_ text: [UInt32]) -> [UInt32] {
        guard let first = text.firstIndex(where: { !Tables.pythonSpace.contains($0) }),
            let last = text.lastIndex(where: { !Tables.pythonSpace.contains($0) })
        else { return [] }
        return Array(text[first...last])
    }

    static func collapseWhitespace(_ text: [UInt32]) -> [UInt32] {
        var out: [UInt32] = []
        out.reserveCapacity(text.count)
        var inRun = false
        for value in text {
            if Tables.regexSpace.contains(value) {
                if !inRun { out.append(0x20) }
                inRun = true
            } else {
                out.append(value)
                inRun = false
            }
        }
        return pythonStrip(out)
    }

    /// CPython `str.lower()`: each code point's full lower-case mapping, except that U+03A3 becomes
    /// final sigma (U+03C2) when preceded by a cased letter and not followed by one, ignoring
    /// case-ignorable characters in both directions (`handle_capital_sigma` in unicodeobject.c).
    static func pythonLowercased(_ text: [UInt32]) -> [UInt32] {
        var out: [UInt32] = []
        out.reserveCapacity(text.count)
        for (index, value) in text.enumerated() {
            if value < 0x80 {
                out.append((0x41...0x5A).contains(value) ? value + 0x20 : value)
            } else if value == 0x3A3 {
                out.append(isFinalSigma(text, at: index) ? 0x3C2 : 0x3C3)
            } else if let lower = Tables.pythonLowercase[value] {
                out.append(contentsOf: lower)
            } else {
                out.append(value)
            }
        }
        return out
    }

    private static func isFinalSigma(_ text: [UInt32], at index: Int) -> Bool {
        var before = index - 1
        while before >= 0 && Tables.pythonCaseIgnorable.contains(text[before]) { before -= 1 }
        guard before >= 0 && Tables.pythonCased.contains(text[before]) else { return false }
        var after = index + 1
        while after < text.count && Tables.pythonCaseIgnorable.contains(text[after]) { after += 1 }
        return after == text.count || !Tables.pythonCased.contains(text[after])
    }
}
