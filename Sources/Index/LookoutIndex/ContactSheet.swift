import LookoutImage
import LookoutSupport

/// A self-contained HTML page: one card per photo, a JPEG thumbnail (boxes drawn in) embedded as a data URL.
public enum ContactSheet {
    /// The page for `hits` of `query` (photos that cannot be read get a note instead of a thumbnail).
    public static func page(hits: [PhotoIndex.Hit], query: String) -> String {
        var page = """
            <!doctype html>
            <html><head><meta charset="utf-8"><title>Lookout: \(escape(query))</title>
            <style>
            body { font: 14px system-ui, sans-serif; margin: 16px; background: #f4f4f4; }
            .grid { display: flex; flex-wrap: wrap; gap: 12px; }
            .card { background: white; padding: 8px; border-radius: 6px; box-shadow: 0 1px 3px #0003; max-width: 340px; }
            .card img { display: block; max-width: 320px; max-height: 320px; }
            .path { word-break: break-all; color: #444; font-size: 12px; }
            </style></head><body>
            <h1>“\(escape(query))”: \(hits.count) photo\(hits.count == 1 ? "" : "s")</h1>
            <div class="grid">

            """
        for hit in hits {
            var thumbnail = ""
            do {
                let image = try VideoFrames.image(at: hit.entry)
                let scale = min(1, 320 / Double(max(image.width, image.height)))
                let width = max(1, Int((Double(image.width) * scale).rounded()))
                let height = max(1, Int((Double(image.height) * scale).rounded()))
                let small = image.resizedBilinear(width: width, height: height)
                let boxes = hit.detections.map { item in
                    BoxAnnotation(
                        box: item.box.map { $0 * Float(scale) }, label: score(item.score, digits: 2), colorIndex: 0)
                }
                let annotated = small.annotated(with: boxes)
                thumbnail =
                    "data:image/jpeg;base64,"
                    + base64(try ImageFile.encode(annotated, format: .jpeg(quality: 85), name: hit.path))
            } catch {
                thumbnail = ""
            }
            page += """
                <div class="card">\(thumbnail.isEmpty ? "<p>(photo not readable)</p>" : "<img src=\"\(thumbnail)\" alt=\"\">")
                <div><b>\(score(hit.score, digits: 3))</b> · \(hit.detections.count) box\(hit.detections.count == 1 ? "" : "es")</div>
                <div class="path">\(escape(FileName.shown(hit.path)))\(hit.time.map { " at \(VideoFrames.seconds($0)) s" } ?? "")</div></div>

                """
        }
        page += "</div></body></html>\n"
        return page
    }

    /// `value` rounded to `digits` decimals, zero-padded.
    static func score(_ value: Float, digits: Int) -> String {
        var scale: Float = 1
        for _ in 0..<digits { scale *= 10 }
        var text = "\((value * scale).rounded() / scale)"
        while text.count < digits + 2 { text += "0" }
        return text
    }

    static func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(character)
            }
        }
        return out
    }

    public static func base64(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let a = UInt32(bytes[index])
            let b = index + 1 < bytes.count ? UInt32(bytes[index + 1]) : 0
            let c = index + 2 < bytes.count ? UInt32(bytes[index + 2]) : 0
            let value = a << 16 | b << 8 | c
            out.append(alphabet[Int(value >> 18 & 63)])
            out.append(alphabet[Int(value >> 12 & 63)])
            out.append(index + 1 < bytes.count ? alphabet[Int(value >> 6 & 63)] : UInt8(ascii: "="))
            out.append(index + 2 < bytes.count ? alphabet[Int(value & 63)] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
