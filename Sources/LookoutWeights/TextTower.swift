/// The text tower whose embeddings a detector family was trained against: queries must come through it.
public enum TextTower: String, Sendable {
    /// OpenAI CLIP ViT-B/32 (YOLO-World).
    case clip = "CLIP"
    /// Apple's MobileCLIP-B (LT), as ultralytics traces it into `mobileclip_blt.ts` (YOLOE-v8, YOLOE-11).
    case mobileCLIP = "MobileCLIP"

    /// The file a user gives for it, in words.
    public var file: String {
        switch self {
        case .clip: "CLIP ViT-B/32 (OpenAI's ViT-B-32.pt)"
        case .mobileCLIP: "MobileCLIP-B (ultralytics' mobileclip_blt.ts)"
        }
    }
}
