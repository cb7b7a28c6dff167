import LookoutJSON
import Testing

@Suite struct JSONTests {
    @Test func parsesValuesInOrder() throws {
        let value = try JSONValue(parsing: #"{"b": [1, 2.5, "x", null, true], "a": {"k": false}}"#)
        #expect(
            value
                == .object([
                    ("b", .array([.int(1), .double(2.5), .string("x"), .null, .bool(true)])),
                    ("a", .object([("k", .bool(false))])),
                ]))
    }

    @Test func bareNumbersAndSurroundingWhitespace() throws {
        #expect(try JSONValue(parsing: "5") == .int(5))
        #expect(try JSONValue(parsing: "  -7.25\n") == .double(-7.25))
    }

    @Test func stringsKeepNulAndDecodeSurrogatePairs() throws {
        #expect(try JSONValue(parsing: #""a\u0000b""#) == .string("a\u{0}b"))
        #expect(try JSONValue(parsing: #""\ud83d\ude00""#) == .string("😀"))
    }

    @Test func errorsSayWhere() {
        for (text, line) in [("{\"a\": }", 1), ("[1,\n2,\n]x", 3), ("\"open", 1), ("{} {}", 1)] {
            do {
                _ = try JSONValue(parsing: text)
                Issue.record("expected an error for \(text)")
            } catch {
                #expect(error.line == line, "\(text): \(error)")
            }
        }
    }

    @Test func rejectsInvalidUTF8() {
        let bytes: [UInt8] = [0x22, 0xFF, 0x22]
        #expect(throws: JSONError.self) { try JSONDocument(bytes: bytes) }
    }

    @Test func deepNestingIsAnErrorNotACrash() {
        let text = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: JSONError.self) { try JSONValue(parsing: text) }
    }

    @Test func serializationRoundTrips() throws {
        let value = JSONValue.object([
            ("text", .string("quote \" backslash \\ newline \n tab \t nul \u{0} emoji 😀")),
            ("numbers", .array([.int(-3), .double(0.5), .null])),
        ])
        #expect(try JSONValue(parsing: value.serialized) == value)
        #expect(JSONValue.double(.nan).serialized == "null")
    }
}
