/// The text tower whose embeddings a detector family was trained against: queries must come through it.
public enum TextTower: String, Sendable {
    /// OpenAI CLIP ViT-B/32 (YOLO-World).
    case clip = "CLIP"
    /// Apple's MobileCLIP-B (LT), as ultralytics traces it into `mobileclip_blt.ts` (YOLOE-v8, YOLOE-11).
    case mobileCLIP = "MobileCLIP"
    /// Apple's MobileCLIP2-B as ultralytics ships it in `mobileclip2_b.ts` (YOLOE-26): open_clip's text
    /// transformer with exact GELU.
    case mobileCLIP2 = "MobileCLIP2"

    /// The file a user gives for it, in words.
    public var file: String {
        switch self {
        case .clip: "CLIP ViT-B/32 (OpenAI's ViT-B-32.pt)"
        case .mobileCLIP: "MobileCLIP-B (ultralytics' mobileclip_blt.ts)"
        case .mobileCLIP2: "MobileCLIP2-B (ultralytics' mobileclip2_b.ts)"
        }
    }
}
