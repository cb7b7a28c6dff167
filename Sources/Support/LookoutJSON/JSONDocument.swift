import CJSONC

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A JSON document parsed by json-c and kept in json-c's own representation.
///
/// Large documents (a 49,408-entry vocabulary) are read through ``JSONNode`` without first being
/// converted into Swift values; small ones can be converted whole with ``JSONNode/value``.
/// The document is immutable once parsed, so it may be shared across threads.
public final class JSONDocument: @unchecked Sendable {
    let handle: OpaquePointer?

    /// Parses one JSON value that must span all of `bytes` (surrounding whitespace allowed).
    /// Strings must be valid UTF-8.
    public init(bytes: UnsafeRawBufferPointer, maximumDepth: Int32 = 64) throws(JSONError) {
        handle = try Self.parse(bytes, maximumDepth: maximumDepth)
    }

    /// Parses `text` as one JSON value.
    public convenience init(text: String) throws(JSONError) {
        var copy = text
        let result = copy.withUTF8 { Self.parseResult(UnsafeRawBufferPointer($0)) }
        self.init(handle: try result.get())
    }

    /// Parses the UTF-8 `bytes` as one JSON value.
    public convenience init(bytes: [UInt8]) throws(JSONError) {
        let result = bytes.withUnsafeBytes { Self.parseResult($0) }
        self.init(handle: try result.get())
    }

    private static func parseResult(_ bytes: UnsafeRawBufferPointer) -> Result<OpaquePointer?, JSONError> {
        do throws(JSONError) {
            return .success(try parse(bytes, maximumDepth: 64))
        } catch {
            return .failure(error)
        }
    }

    private init(handle: OpaquePointer?) {
        self.handle = handle
    }

    deinit {
        if let handle { json_object_put(handle) }
    }

    /// The top-level value.
    public var root: JSONNode { JSONNode(document: self, pointer: handle) }

    private static func parse(_ bytes: UnsafeRawBufferPointer, maximumDepth: Int32) throws(JSONError) -> OpaquePointer?
    {
        guard let tokener = json_tokener_new_ex(maximumDepth) else {
            throw JSONError(message: "json-c could not allocate a parser")
        }
        defer { json_tokener_free(tokener) }
        json_tokener_set_flags(tokener, Int32(JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8))
        let length = bytes.count
        var empty: CChar = 0
        let base = bytes.baseAddress?.assumingMemoryBound(to: CChar.self) ?? withUnsafePointer(to: &empty) { $0 }
        guard length < Int(Int32.max) else {
            throw JSONError(message: "document of \(length) bytes is larger than json-c accepts")
        }
        var parsed = json_tokener_parse_ex(tokener, base, Int32(length))
        var status = json_tokener_get_error(tokener)
        var end = Int(json_tokener_get_parse_end(tokener))
        if status == json_tokener_continue {
            // A bare number at the very end is complete only once json-c sees a terminator.
            parsed = json_tokener_parse_ex(tokener, &empty, 1)
            status = json_tokener_get_error(tokener)
            end = length
        }
        if status == json_tokener_continue {
            throw JSONError(message: "unexpected end of input (document truncated?)", offset: length, in: bytes)
        }
        guard status == json_tokener_success else {
            let description = String(cString: json_tokener_error_desc(status))
            throw JSONError(message: description, offset: end, in: bytes)
        }
        var position = end
        while position < length {
            let byte = bytes[position]
            guard byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 else {
                if let parsed { json_object_put(parsed) }
                throw JSONError(message: "unexpected content after the JSON value", offset: position, in: bytes)
            }
            position += 1
        }
        return parsed
    }
}

/// An error parsing JSON, with the position where json-c stopped.
public struct JSONError: Error, CustomStringConvertible, Sendable {
    public let message: String
    /// 1-based line and column of the failure, where known.
    public let line: Int?
    public let column: Int?

    public init(message: String) {
        self.message = message
        self.line = nil
        self.column = nil
    }

    init(message: String, offset: Int, in bytes: UnsafeRawBufferPointer) {
        self.message = message
        var line = 1
        var column = 1
        for index in 0..<min(offset, bytes.count) {
            if bytes[index] == 0x0A {
                line += 1
                column = 1
            } else {
                column += 1
            }
        }
        self.line = line
        self.column = column
    }

    public var description: String {
        if let line, let column { return "\(message) at line \(line), column \(column)" }
        return message
    }
}
