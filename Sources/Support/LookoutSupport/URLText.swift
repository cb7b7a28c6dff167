/// URLs in messages: a password, token or signature never shown.
public enum URLText {
    /// Query parameters whose values are secrets (compared without case): `?password=…`, `?token=…`, a signed
    /// URL's `sig=`, an API `key=`.
    public static let secretParameters: Set<String> = [
        "password", "passwd", "pwd", "pass", "sslpassword", "token", "access_token", "auth", "auth_token", "key",
        "apikey", "api_key", "sig", "signature", "secret", "client_secret", "x-amz-signature", "x-amz-credential",
        "x-amz-security-token", "credential",
    ]

    /// `text` with every URL's password (`scheme://user:password@host…`) and the values of secret query
    /// parameters (``secretParameters``) replaced by `***`; anything else unchanged.
    public static func redacted(_ text: String) -> String {
        guard text.contains("://") || text.contains("=") else { return text }
        var characters = Array(text)
        var output: [Character] = []
        output.reserveCapacity(characters.count)
        var index = 0
        // Userinfo passwords: after each "://", up to the first "/", whitespace or end.
        while index < characters.count {
            if index + 2 < characters.count && characters[index] == ":" && characters[index + 1] == "/"
                && characters[index + 2] == "/"
            {
                output += "://"
                index += 3
                var end = index
                while end < characters.count && !"/ \t\n\"'<>".contains(characters[end]) { end += 1 }
                let authority = Array(characters[index..<end])
                if let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") {
                    output += authority[...colon]
                    output += "***"
                    output += authority[at...]
                } else {
                    output += authority
                }
                index = end
                continue
            }
            output.append(characters[index])
            index += 1
        }
        characters = output
        output = []
        index = 0
        // Secret parameters: `?name=` or `&name=` (or `;name=`), the value up to the next separator.
        while index < characters.count {
            let character = characters[index]
            output.append(character)
            index += 1
            guard character == "?" || character == "&" || character == ";" else { continue }
            var end = index
            while end < characters.count && characters[end] != "=" && !"&?#; \t\n\"'".contains(characters[end]) {
                end += 1
            }
            guard end < characters.count, characters[end] == "=",
                secretParameters.contains(String(characters[index..<end]).lowercased())
            else { continue }
            output += characters[index...end]
            var valueEnd = end + 1
            while valueEnd < characters.count && !"&#; \t\n\"'".contains(characters[valueEnd]) { valueEnd += 1 }
            if valueEnd > end + 1 { output += "***" }
            index = valueEnd
        }
        return String(output)
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
