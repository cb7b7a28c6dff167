import ArgumentParser
import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutJSON
import LookoutSupport
import LookoutTensor
import LookoutTextEncoder
import LookoutVideo
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

/// Text and JSON renderings of detections.
enum Report {
    /// The detections under a title line: the image's name and size, or `title` (a video's frame).
    static func table(_ result: ImageDetections, title: String? = nil) -> String {
        var out =
            "\(title ?? "\(visible(result.image)) (\(result.width)×\(result.height))"): \(result.detections.count) detection\(result.detections.count == 1 ? "" : "s")\n"
        let labels = result.detections.map { visible($0.label) }
        let width = max(5, labels.map(displayWidth).max() ?? 0)
        for (item, shown) in zip(result.detections, labels) {
            let label = shown + String(repeating: " ", count: width - displayWidth(shown))
            let box = item.box.map { String(format1($0)) }.joined(separator: " ")
            out += "  \(label)  \(format3(item.score))  [\(box)]\n"
        }
        return out
    }

    /// `text` safe for a terminal: control characters (escape sequences, newlines) shown as \u{…}, bytes
    /// of a file name that are not UTF-8 as \xE9.
    static func visible(_ text: String) -> String {
        var out = ""
        for scalar in FileName.shown(text).unicodeScalars {
            if scalar.value < 0x20 || (0x7F..<0xA0).contains(scalar.value) {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Terminal columns of `text`: East Asian wide characters and emoji take two, combining marks none.
    static func displayWidth(_ text: String) -> Int {
        var width = 0
        for scalar in text.unicodeScalars {
            let v = scalar.value
            if (0x0300..<0x0370).contains(v) || (0x200B...0x200F).contains(v) || (0xFE00...0xFE0F).contains(v) {
                continue
            }
            let wide =
                (0x1100...0x115F).contains(v) || (0x2E80...0xA4CF).contains(v) || (0xAC00...0xD7A3).contains(v)
                || (0xF900...0xFAFF).contains(v) || (0xFE30...0xFE4F).contains(v) || (0xFF00...0xFF60).contains(v)
                || (0xFFE0...0xFFE6).contains(v) || (0x1F300...0x1F64F).contains(v) || (0x1F900...0x1F9FF).contains(v)
                || (0x20000...0x3FFFD).contains(v)
            width += wide ? 2 : 1
        }
        return width
    }

    /// A mask as `Image.tinted` draws it, in the palette's colour `colorIndex`.
    static func tint(_ mask: BinaryMask, colorIndex: Int) -> MaskAnnotation {
        MaskAnnotation(
            left: mask.left, top: mask.top, width: mask.windowWidth, height: mask.windowHeight, pixels: mask.pixels,
            colorIndex: colorIndex)
    }

    /// The boxes as `--save` draws them: label and score, coloured by query.
    static func annotations(_ result: ImageDetections) -> [BoxAnnotation] {
        result.detections.map {
            BoxAnnotation(box: $0.box, label: "\($0.label) \(format2($0.score))", colorIndex: $0.queryIndex)
        }
    }

    static func json(_ result: ImageDetections) -> String {
        let timings = result.timings.milliseconds.map { ($0.0 + "_ms", JSONValue.double(($0.1 * 100).rounded() / 100)) }
        let value = JSONValue.object([
            ("image", .string(result.image)), ("width", .int(Int64(result.width))),
            ("height", .int(Int64(result.height))),
            ("detections", DetectionJSON.array(result.detections)), ("timings", .object(timings)),
        ])
        return value.serialized + "\n"
    }

    static func format1(_ value: Float) -> String { "\((value * 10).rounded() / 10)" }
    static func format2(_ value: Float) -> String {
        let text = "\((value * 100).rounded() / 100)"
        return text.count < 4 ? text + String(repeating: "0", count: 4 - text.count) : text
    }
    static func format3(_ value: Float) -> String {
        let text = "\((value * 1000).rounded() / 1000)"
        return text.count < 5 ? text + String(repeating: "0", count: 5 - text.count) : text
    }
}
