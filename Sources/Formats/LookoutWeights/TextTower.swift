/// The text tower whose embeddings a detector family was trained against: queries must come through it.
public enum TextTower: String, Sendable {
    /// OpenAI CLIP ViT-B/32 (YOLO-World).
    case clip = "CLIP"
    /// Apple's MobileCLIP-B (LT), as ultralytics traces it into `mobileclip_blt.ts` (YOLOE-v8, YOLOE-11).
    case mobileCLIP = "MobileCLIP"
    /// Apple's MobileCLIP2-B as ultralytics ships it in `mobileclip2_b.ts` (YOLOE-26): open_clip's text
    /// transformer with exact GELU.
    case mobileCLIP2 = "MobileCLIP2"

    /// The metadata key of a detector file trained against another tower than its family's (the YOLOE demo
    /// model learned the demo's CLIP text encoder): `lookout models convert --text-tower NAME` writes it.
    public static let metadataKey = "lookout.text_tower"

    /// The tower a detector file says it was trained against (``metadataKey``), nil when it says nothing;
    /// a name that is no tower is an error, not a silent default.
    public static func declared(by weights: WeightFile) throws(WeightsError) -> TextTower? {
        guard let name = weights.metadata[metadataKey] else { return nil }
        guard let tower = TextTower(named: name) else {
            throw WeightsError(
                path: weights.path,
                problem:
                    "its metadata \(metadataKey) names \"\(name)\", not a text tower Lookout knows (\(Self.names))")
        }
        return tower
    }

    /// A tower by its name, in any case (`clip`, `MobileCLIP`).
    public init?(named name: String) {
        guard
            let tower = [TextTower.clip, .mobileCLIP, .mobileCLIP2].first(where: {
                $0.rawValue.lowercased() == name.lowercased()
            })
        else { return nil }
        self = tower
    }

    /// The towers' names, for messages and help.
    public static let names = "CLIP, MobileCLIP, MobileCLIP2"

    /// The file a user gives for it, in words.
    public var file: String {
        switch self {
        case .clip: "CLIP ViT-B/32 (OpenAI's ViT-B-32.pt)"
        case .mobileCLIP: "MobileCLIP-B (ultralytics' mobileclip_blt.ts)"
        case .mobileCLIP2: "MobileCLIP2-B (ultralytics' mobileclip2_b.ts)"
        }
    }
}
