/// URLs in messages: a password never shown.
public enum URLText {
    /// `text` with a URL's password (`scheme://user:password@host…`) replaced by `***`; anything else unchanged.
    public static func redacted(_ text: String) -> String {
        guard let schemeEnd = text.firstRange(of: "://") else { return text }
        let rest = text[schemeEnd.upperBound...]
        guard let slash = rest.firstIndex(of: "/") ?? Optional(rest.endIndex),
            let at = rest[..<slash].lastIndex(of: "@"),
            let colon = rest[..<at].firstIndex(of: ":")
        else { return text }
        return String(text[..<rest.index(after: colon)]) + "***" + String(rest[at...])
    }

    /// The scheme of a URL, lower-cased (`rtsp` for `RTSP://…`); nil for anything else (a path).
    public static func scheme(_ text: String) -> String? {
        guard let end = text.firstRange(of: "://") else { return nil }
        let scheme = text[..<end.lowerBound]
        guard !scheme.isEmpty,
            scheme.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "+" || $0 == "-") })
        else { return nil }
        return scheme.lowercased()
    }
}
