import Foundation
import LookoutJSON
import LookoutSupport
import Testing

/// One query path (issue 50): the server reads queries as `lookout detect -q` does. Every form of the syntax
/// docs/detect-and-queries.md teaches (alternatives, a query's own threshold, negative queries, escapes), sent as `?q=` to
/// `/api/v1/detect`, as `"q"` and as `"queries"` to the re-query endpoint, gives the command line's detections to
/// the bit; and the server's limits are the command line's.
@Suite(.serialized) struct QueryPathTests {
    static let photo = CLI.root + "/examples/scenes/scene-0001.jpg"

    /// Each line, and the same queries one per string (as a JSON array takes them: commas are text there).
    static let forms: [(line: String, list: [String])] = [
        ("green star|blue circle", ["green star|blue circle"]),
        ("green star@0.99, blue circle", ["green star@0.99", "blue circle"]),
        ("star|circle, ring@0.5, -square", ["star|circle", "ring@0.5", "-square"]),
        ("red\\, ring, star", ["red, ring", "star"]),
        ("\\-star, ring", ["\\-star", "ring"]),
        ("sofa|couch, dog@0.4, -cat", ["sofa|couch", "dog@0.4", "-cat"]),
        ("shape, -green star, -blue circle", ["shape", "-green star", "-blue circle"]),
    ]

    static func url(_ base: String, _ path: String, _ items: [(String, String)]) -> String {
        var components = URLComponents(string: base + path)!
        components.queryItems = items.map { URLQueryItem(name: $0.0, value: $0.1) }
        // URLComponents leaves "+" alone, which a form reads as a space.
        return components.url!.absoluteString.replacingOccurrences(of: "+", with: "%2B")
    }

    /// Label, query index, score and box of each detection, as printed (the same bits give the same text).
    static func rows(_ detections: JSONNode) -> [String] {
        (0..<detections.count).map { k in
            let d = detections[k]
            return "\(d["label"]!.string!) #\(d["query_index"]!.int!) \(d["score"]!.number!) "
                + Reference.numbers(d["box"]!).map { "\($0)" }.joined(separator: ",")
        }
    }

    @Test func theAPIReadsTheSyntaxAsTheCommandLineDoes() throws {
        let server = try ServeCommandTests.Server()
        let bytes = try FileContents.read(Self.photo)
        var found = 0
        for form in Self.forms {
            let cli = try CLI.run(["detect", Self.photo, "-q", form.line, "--json"])
            try #require(cli.status == 0, "\(form.line): \(cli.stderr)")
            let want = Self.rows(try Reference.lines(cli.stdout)[0]["detections"]!)
            found += want.count

            let sent = try ServeCommandTests.request(
                "POST", Self.url(server.url, "/api/v1/detect", [("q", form.line)]), body: bytes)
            try #require(sent.status == 200, "\(form.line): \(String(decoding: sent.body, as: UTF8.self))")
            #expect(Self.rows(sent.json["detections"]!) == want, "?q=\(form.line)")

            let id = sent.json["image_id"]!.string!
            for body: JSONValue in [
                .object([("q", .string(form.line))]), .object([("queries", .array(form.list.map { .string($0) }))]),
            ] {
                let again = try ServeCommandTests.request(
                    "POST", server.url + "/api/v1/images/\(id)/detect", body: Array(body.serialized.utf8))
                try #require(again.status == 200, "\(body.serialized): \(String(decoding: again.body, as: UTF8.self))")
                #expect(Self.rows(again.json["detections"]!) == want, "\(body.serialized)")
            }
        }
        #expect(found >= 8, "the forms find something to compare: \(found) detections")
    }

    @Test func theServersLimitsAreTheCommandLines() throws {
        let server = try ServeCommandTests.Server()
        let bytes = try FileContents.read(Self.photo)
        func send(_ q: String) throws -> ServeCommandTests.Reply {
            try ServeCommandTests.request("POST", Self.url(server.url, "/api/v1/detect", [("q", q)]), body: bytes)
        }
        // 300 queries (over the server's old 256) are taken, 4,097 refused with the command line's sentence.
        let many = try send((0..<300).map { "shape \($0)" }.joined(separator: ","))
        #expect(many.status == 200, "\(String(decoding: many.body, as: UTF8.self))")
        let tooMany = try send((0..<4097).map { "s\($0)" }.joined(separator: ","))
        #expect(tooMany.status == 400 && tooMany.json["error"]!.string!.contains("at most 4096"))
        let cli = try CLI.run(["detect", Self.photo, "-q", (0..<4097).map { "s\($0)" }.joined(separator: ",")])
        #expect(cli.status == 64 && cli.stderr.contains(tooMany.json["error"]!.string!), "\(cli.stderr)")
        // Negative queries alone name nothing to find; a query of syntax only holds no text.
        let negative = try send("-star, -ring")
        #expect(negative.status == 400 && negative.json["error"]!.string!.contains("Only negative queries"))
        let empty = try send("ring, -")
        #expect(empty.status == 400, "\(String(decoding: empty.body, as: UTF8.self))")
        let both = try ServeCommandTests.request(
            "POST", server.url + "/api/v1/images/0/detect", body: Array(#"{"q": "star", "queries": ["ring"]}"#.utf8))
        #expect(both.status == 400 && both.json["error"]!.string!.contains("not both"))
    }
}
