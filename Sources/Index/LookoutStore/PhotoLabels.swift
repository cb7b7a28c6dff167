import LookoutJSON

/// One thing a prompt-free detector (YOLOE `-pf`) named in an indexed photo: the name from its vocabulary, the
/// score, and the box in the photo's pixels. An index made with `--prompt-free` keeps these beside the regions,
/// so that a search can keep only the photos where something was named so (``PhotoFilter/labels``).
public struct PhotoLabel: Sendable, Equatable {
    public var name: String
    public var score: Float
    public var box: [Float]

    public init(name: String, score: Float, box: [Float]) {
        self.name = name
        self.score = score
        self.box = box
    }

    /// A photo's labels as the store keeps them: a JSON array of `{"label", "score", "box"}`, best first.
    public static func encode(_ labels: [PhotoLabel]) -> String {
        JSONValue.array(
            labels.map { label in
                .object([
                    ("label", .string(label.name)), ("score", .double(Double(label.score))),
                    ("box", .array(label.box.map { .double(Double($0)) })),
                ])
            }
        ).serialized
    }

    /// The labels of ``encode(_:)``'s text; nil when it is not that (a damaged row names nothing).
    public static func decode(_ text: String) -> [PhotoLabel]? {
        guard let root = try? JSONDocument(text: text).root, root.kind == .array else { return nil }
        var labels: [PhotoLabel] = []
        for index in 0..<root.count {
            let item = root[index]
            guard let name = item["label"]?.string, let score = item["score"]?.number, let boxNode = item["box"],
                boxNode.kind == .array, boxNode.count == 4
            else { return nil }
            let box = (0..<4).compactMap { boxNode[$0].number }
            guard box.count == 4 else { return nil }
            labels.append(PhotoLabel(name: name, score: Float(score), box: box.map { Float($0) }))
        }
        return labels
    }
}
