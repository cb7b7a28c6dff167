import LookoutDetector

/// One query as a person types it:
///
/// - `sofa|couch|settee`: one label (the first name); each box takes the best score of the alternatives,
///   which all enter the neck as texts of their own;
/// - `dog@0.4`: a confidence threshold for this query alone;
/// - `-person`: a negative query, scored like the others and never reported; a box of another query that
///   overlaps a higher-scoring negative box by more than the NMS IoU threshold is dropped (with agnostic NMS
///   a negative suppresses like any query);
/// - `\,` `\|` `\@` `\-` (at the start) and `\\` stand for the characters themselves.
public struct Query: Sendable, Equatable {
    /// What detections are labelled with: the first alternative.
    public var label: String { alternatives[0] }
    /// The texts whose best score the query takes (at least one).
    public var alternatives: [String]
    /// This query's confidence threshold, replacing the global one.
    public var threshold: Float?
    public var negative: Bool

    public init(alternatives: [String], threshold: Float? = nil, negative: Bool = false) {
        precondition(!alternatives.isEmpty, "a query needs a text")
        self.alternatives = alternatives
        self.threshold = threshold
        self.negative = negative
    }

    /// A plain query: the text as it is, no syntax.
    public init(_ text: String) { self.init(alternatives: [text]) }

    /// The query written back in the syntax (escaped where needed).
    public var written: String {
        func escaped(_ text: String, first: Bool) -> String {
            var out = ""
            for (i, c) in text.enumerated() {
                if c == "\\" || c == "," || c == "|" || c == "@" || (c == "-" && i == 0 && first) { out.append("\\") }
                out.append(c)
            }
            return out
        }
        let body = alternatives.enumerated().map { escaped($1, first: $0 == 0) }.joined(separator: "|")
        return (negative ? "-" : "") + body + (threshold.map { "@\($0)" } ?? "")
    }
}

/// A query that cannot be read, with what is wrong.
public struct QuerySyntaxError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public var description: String { message }
}

public enum QuerySyntax {
    /// The queries of a line such as `-q` takes: split at commas that are not escaped, each part parsed
    /// (``parse(_:)``), empty parts dropped (counted), repeats collapsed (the first kept).
    public static func parseLine(_ line: String) throws(QuerySyntaxError) -> (queries: [Query], emptyParts: Int) {
        var queries: [Query] = []
        var empty = 0
        for part in split(line) {
            guard let query = try parse(part) else {
                empty += 1
                continue
            }
            if !queries.contains(query) { queries.append(query) }
        }
        return (queries, empty)
    }

    /// A line's parts as written (escapes kept), split at the commas that are not escaped.
    public static func split(_ line: String) -> [String] {
        var parts: [String] = []
        var current = ""
        var escape = false
        for character in line {
            if escape {
                current.append("\\")
                current.append(character)
                escape = false
            } else if character == "\\" {
                escape = true
            } else if character == "," {
                parts.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        if escape { current.append("\\") }
        parts.append(current)
        return parts
    }

    /// One query (a queries-file line: commas are part of the text); nil when it holds no text.
    /// The one query of a search (`lookout search`, `/api/v1/search`): alternatives (`sofa|couch`) and a
    /// threshold allowed; several comma-separated queries, or none, refused with a sentence (a search ranks photos
    /// for one thing: the text is never searched literally with its commas).
    public static func single(_ text: String) throws(QuerySyntaxError) -> Query {
        let (queries, _) = try parseLine(text)
        guard !queries.isEmpty else { throw QuerySyntaxError(message: "The query is empty.") }
        guard queries.count == 1 else {
            let shown = queries.map(\.label).joined(separator: ", ")
            throw QuerySyntaxError(
                message:
                    "A search ranks photos for one thing, and \"\(text)\" names \(queries.count) (\(shown)): search each, or write \(queries.map(\.label).joined(separator: "|")) for photos with any of them (an escaped comma, \\,, is part of the text)."
            )
        }
        return queries[0]
    }

    public static func parse(_ text: String) throws(QuerySyntaxError) -> Query? {
        // Characters with a flag: true when escaped (taken literally).
        var characters: [(Character, Bool)] = []
        var escape = false
        for character in text {
            if escape {
                if "\\,|@-".contains(character) {
                    characters.append((character, true))
                } else {
                    characters.append(("\\", true))
                    characters.append((character, false))
                }
                escape = false
            } else if character == "\\" {
                escape = true
            } else {
                characters.append((character, false))
            }
        }
        if escape { characters.append(("\\", true)) }
        func trimmed(_ list: ArraySlice<(Character, Bool)>) -> ArraySlice<(Character, Bool)> {
            var list = list
            while let first = list.first, !first.1, first.0.isWhitespace { list.removeFirst() }
            while let last = list.last, !last.1, last.0.isWhitespace { list.removeLast() }
            return list
        }
        var body = trimmed(characters[...])
        guard !body.isEmpty else { return nil }
        var negative = false
        if let first = body.first, first.0 == "-", !first.1 {
            negative = true
            body = trimmed(body.dropFirst())
        }
        // A threshold: the last unescaped "@" after some text, followed by a number.
        var threshold: Float?
        if let at = body.lastIndex(where: { $0.0 == "@" && !$0.1 }), at > body.startIndex {
            let tail = String(body[(at + 1)...].map(\.0)).trimmingCharacters(in: " \t")
            let numeric =
                tail.first.map {
                    $0.isNumber || $0 == "." || (($0 == "-" || $0 == "+") && tail.dropFirst().first?.isNumber == true)
                } == true
            if let value = Float(tail), numeric {
                guard value >= 0 && value < 1 else {
                    throw QuerySyntaxError(
                        message:
                            "\"\(text)\": the threshold after @ must be in [0, 1), got \(tail) (write \\@ for the character)"
                    )
                }
                threshold = value
                body = trimmed(body[..<at])
            }
        }
        var alternatives: [String] = []
        var current: [(Character, Bool)] = []
        for item in body + [("|", false)] {
            if item.0 == "|" && !item.1 {
                let text = String(trimmed(current[...]).map(\.0))
                if !text.isEmpty && !alternatives.contains(text) { alternatives.append(text) }
                current = []
            } else {
                current.append(item)
            }
        }
        guard !alternatives.isEmpty else {
            throw QuerySyntaxError(message: "\"\(text)\" holds no text to look for")
        }
        return Query(alternatives: alternatives, threshold: threshold, negative: negative)
    }
}

/// What the network is asked for a query set: the distinct texts (each alternative of each query, and any
/// query given as an embedding, such as a photo), and how they make the queries.
public struct QueryPlan: Sendable, Equatable {
    /// The label of each query, in order.
    public private(set) var labels: [String] = []
    /// The texts that enter the neck (an embedding query's label stands for its embedding).
    public private(set) var texts: [String] = []
    /// Per query: its texts (indices into ``texts``).
    public private(set) var groups: [[Int]] = []
    /// Thresholds of single queries (query index → threshold).
    public private(set) var thresholds: [Int: Float] = [:]
    /// The negative queries (their indices).
    public private(set) var negatives: Set<Int> = []
    /// The texts that are given as embeddings (indices into ``texts``), not embedded from text.
    public private(set) var embedded: [Int: [Float]] = [:]
    /// Text rows whose embeddings are the head's class embeddings already (YOLOE visual prompts), not text-tower
    /// output.
    public private(set) var asIs: Set<Int> = []

    public init(_ queries: [Query] = []) {
        for query in queries { append(query) }
    }

    public var count: Int { labels.count }

    public mutating func append(_ query: Query) {
        let index = labels.count
        labels.append(query.label)
        groups.append(query.alternatives.map { text in texts.firstIndex(of: text) ?? add(text) })
        if let threshold = query.threshold { thresholds[index] = threshold }
        if query.negative { negatives.insert(index) }
    }

    /// A query given as its embedding (a photo of the thing), with its own threshold if given. `asIs`: the
    /// embedding is a class embedding already (a YOLOE visual prompt's), not a text tower's.
    public mutating func append(label: String, embedding: [Float], threshold: Float? = nil, asIs: Bool = false) {
        let index = labels.count
        labels.append(label)
        let text = texts.count
        texts.append(label)
        embedded[text] = embedding
        if asIs { self.asIs.insert(text) }
        groups.append([text])
        if let threshold { thresholds[index] = threshold }
    }

    /// The queries of a prompt-free model (YOLOE `-pf`): its vocabulary's names, in order, with no text to embed
    /// (the network ignores the features; each is one zero).
    public static func promptFree(_ names: [String]) -> QueryPlan {
        var plan = QueryPlan()
        for name in names { plan.append(label: name, embedding: [0]) }
        return plan
    }

    /// Gives the text `texts[index]` as an embedding instead of embedding it (`--text-embeddings`).

    public mutating func setEmbedding(_ embedding: [Float], forText index: Int, asIs: Bool = false) {
        embedded[index] = embedding
        if asIs { self.asIs.insert(index) } else { self.asIs.remove(index) }
    }

    /// One more alternative of query `query`, given as an embedding (examples of the thing beside its text): the
    /// query takes the best of its texts' scores and this one's at each place.
    public mutating func appendAlternative(to query: Int, embedding: [Float], asIs: Bool = false) {
        let text = texts.count
        texts.append(labels[query] + " (examples)")
        embedded[text] = embedding
        if asIs { self.asIs.insert(text) }
        groups[query].append(text)
    }

    private mutating func add(_ text: String) -> Int {
        texts.append(text)
        return texts.count - 1
    }

    /// True when every query is one text of its own, in order: the network's output is the answer as is.
    var isPlain: Bool { groups.enumerated().allSatisfy { $0.element == [$0.offset] } && groups.count == texts.count }

    /// `options` with this plan's thresholds for its queries (a query's own threshold wins).
    public func applied(to options: SuppressionOptions) -> SuppressionOptions {
        var options = options
        for (query, threshold) in thresholds { options.perClassConfidence[query] = threshold }
        return options
    }
}
