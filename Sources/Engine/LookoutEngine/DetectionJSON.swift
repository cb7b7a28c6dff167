import LookoutDetector
import LookoutJSON

/// Detections as JSON, one writer for the command line (`detect --json`, `track --json`) and the server's
/// answers: `label`, `query_index`, `score` and `box` (each number a Float with its shortest round-tripping
/// digits, not the Double expansion), `track_id` when the detection is tracked, and a segmentation model's mask
/// as COCO compressed RLE (`{"size": [height, width], "counts": "..."}`, what pycocotools' `mask.decode` reads).
public enum DetectionJSON {
    /// A Float with its shortest round-tripping digits.
    public static func number(_ value: Float) -> JSONValue { .double(Double("\(value)") ?? Double(value)) }

    /// A mask as COCO's compressed RLE object.
    public static func mask(_ mask: BinaryMask) -> JSONValue {
        .object([
            ("size", .array([.int(Int64(mask.height)), .int(Int64(mask.width))])), ("counts", .string(mask.cocoRLE)),
        ])
    }

    /// One detection.
    public static func object(
        label: String, queryIndex: Int, score: Float, box: [Float], trackID: Int? = nil, mask: BinaryMask? = nil
    ) -> JSONValue {
        var fields: [(String, JSONValue)] = [
            ("label", .string(label)), ("query_index", .int(Int64(queryIndex))), ("score", number(score)),
            ("box", .array(box.map(number))),
        ]
        if let trackID { fields.append(("track_id", .int(Int64(trackID)))) }
        if let mask { fields.append(("mask", Self.mask(mask))) }
        return .object(fields)
    }

    /// A photo's detections, in order.
    public static func array(_ detections: [ImageDetections.Item]) -> JSONValue {
        .array(
            detections.map {
                object(label: $0.label, queryIndex: $0.queryIndex, score: $0.score, box: $0.box, mask: $0.mask)
            })
    }
}
