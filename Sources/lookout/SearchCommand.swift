import ArgumentParser
import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutIndex
import LookoutJSON
import LookoutSupport

#if canImport(Glibc)
    import Glibc
#endif

struct SearchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search",
        abstract: "Find photos in the index by text: ranked photos with the matching boxes.",
        discussion: """
            Scores every stored region of every indexed photo against the query, as the detector's \
            contrastive head would, and lists the photos best first with the boxes above --conf. The query \
            embedding comes from the text-embedding cache. The index was built with the detector's neck \
            conditioned on its built-in vocabulary, so these scores approximate what a fresh detection with \
            the query gives; --exact re-runs the real, query-conditioned detector on the best candidates \
            (about 0.2 s per photo for the demo model) and ranks by its scores.

            Examples:
              lookout search "red star"
              lookout search "red car" --db photos.sqlite --top 50 --json
              lookout search "ring" --html rings.html
            """
    )

    @Argument(help: "What to look for (one query).")
    var query: String

    @OptionGroup var database: IndexDatabaseOption

    @OptionGroup var modelOptions: ModelOptions

    @Option(help: "Photos to list.")
    var top = 20

    @Option(help: "Boxes scoring above this are shown; photos without one are not listed.")
    var conf: Float = 0.1

    @Flag(help: "Re-score the best candidates with the real query-conditioned detector.")
    var exact = false

    @Flag(help: "One JSON object per photo per line, best first.")
    var json = false

    @Option(
        help: ArgumentHelp("Also write a self-contained HTML contact sheet (thumbnails with boxes).", valueName: "file")
    )
    var html: String?

    func validate() throws {
        guard top > 0 else { throw ValidationError("--top must be positive.") }
        guard conf >= 0 && conf < 1 else { throw ValidationError("--conf must be in [0, 1).") }
        guard !query.trimmingCharacters(in: " \t\n").isEmpty else { throw ValidationError("The query is empty.") }
    }

    func run() throws {
        let path = try database.path()
        let index = try PhotoIndex(path: path, readOnly: true)
        guard let stored = try index.storedModel() else {
            throw LookoutError("\(path) holds no indexed photos yet: run `lookout index FOLDER` first")
        }
        let (engine, detectorFingerprint) = try modelOptions.load()
        let embedder = engine.embedder!
        guard embedder.encoder.fingerprint == stored.textEncoderFingerprint,
            detectorFingerprint == stored.detectorFingerprint
        else {
            throw LookoutError(
                "\(path) was indexed with another model: search with the same --model, or index the folder again with this one"
            )
        }
        var clock = Stopwatch()
        let text = embedder.embed([query]).embeddings[0]
        let embedSeconds = clock.lap()
        var hits = try index.search(
            text: text, confidence: exact ? min(conf, 0.01) : conf, top: exact ? max(top * 3, 30) : top)
        let searchSeconds = clock.lap()
        if exact {
            var options = SuppressionOptions()
            options.confidence = conf
            var rescored: [PhotoIndex.Hit] = []
            for hit in hits {
                do {
                    let prepared = try engine.prepare(path: hit.path, size: stored.imageSize)
                    let result = engine.detect(prepared, queries: [query], options: options)
                    guard let best = result.detections.first else { continue }
                    rescored.append(
                        PhotoIndex.Hit(
                            path: hit.path, width: hit.width, height: hit.height, score: best.score,
                            detections: result.detections.map { ($0.score, $0.box) }))
                } catch {
                    printError("lookout: \(error)")
                }
            }
            hits = Array(rescored.sorted { $0.score > $1.score }.prefix(top))
        }
        let exactSeconds = clock.lap()
        for hit in hits {
            if json {
                let detections = hit.detections.map { item -> JSONValue in
                    .object([
                        ("label", .string(query)), ("score", Report.shortest(item.score)),
                        ("box", .array(item.box.map(Report.shortest))),
                    ])
                }
                print(
                    JSONValue.object([
                        ("image", .string(hit.path)), ("score", Report.shortest(hit.score)),
                        ("detections", .array(detections)),
                    ]).serialized)
            } else {
                print(
                    "\(Report.format3(hit.score))  \(hit.path)  (\(hit.detections.count) box\(hit.detections.count == 1 ? "" : "es"))"
                )
                for item in hit.detections {
                    print(
                        "         \(Report.format3(item.score))  [\(item.box.map { Report.format1($0) }.joined(separator: " "))]"
                    )
                }
            }
        }
        if hits.isEmpty && !json { print("nothing found for \"\(query)\" above conf \(conf)") }
        let timing =
            "lookout: embed \(ms(embedSeconds)) ms, search \(ms(searchSeconds)) ms"
            + (exact ? ", exact re-scoring \(ms(exactSeconds)) ms" : "")
        printError(timing)
        if let html {
            try ContactSheet.write(hits: hits, query: query, to: html)
            printError("lookout: wrote \(html)")
        }
    }

    private func ms(_ seconds: Double) -> String { "\((seconds * 10000).rounded() / 10)" }
}

/// A self-contained HTML page: one card per photo, a JPEG thumbnail (boxes drawn in) embedded as a data URL.
enum ContactSheet {
    static func write(hits: [PhotoIndex.Hit], query: String, to path: String) throws {
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
                let image = try ImageFile.read(hit.path)
                let scale = min(1, 320 / Double(max(image.width, image.height)))
                let width = max(1, Int((Double(image.width) * scale).rounded()))
                let height = max(1, Int((Double(image.height) * scale).rounded()))
                let small = image.resizedBilinear(width: width, height: height)
                let boxes = hit.detections.map { item in
                    BoxAnnotation(
                        box: item.box.map { $0 * Float(scale) }, label: Report.format2(item.score), colorIndex: 0)
                }
                let annotated = small.annotated(with: boxes)
                thumbnail =
                    "data:image/jpeg;base64," + base64(try ImageFile.encode(annotated, format: .jpeg(quality: 85)))
            } catch {
                thumbnail = ""
            }
            page += """
                <div class="card">\(thumbnail.isEmpty ? "<p>(photo not readable)</p>" : "<img src=\"\(thumbnail)\" alt=\"\">")
                <div><b>\(Report.format3(hit.score))</b> · \(hit.detections.count) box\(hit.detections.count == 1 ? "" : "es")</div>
                <div class="path">\(escape(hit.path))</div></div>

                """
        }
        page += "</div></body></html>\n"
        try FileContents.writeAtomically(Array(page.utf8), to: path)
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

    static func base64(_ bytes: [UInt8]) -> String {
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
