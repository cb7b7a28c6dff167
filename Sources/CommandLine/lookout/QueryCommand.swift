import ArgumentParser
import LookoutDetector
import LookoutEngine
import LookoutSupport

#if canImport(Glibc)
    import Glibc
#endif

struct QueryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "Ask again and again: the photos are read and their image features computed once.",
        discussion: """
            Reads query lines — at a prompt on a terminal, or plain lines from a pipe — and answers each with \
            detections and per-stage timings. A new query set runs only the text-guided neck and head; a \
            new threshold runs only the suppression.

            Commands:
              :conf 0.1       confidence threshold
              :iou 0.5        IoU threshold
              :max-det 50     detections per image
              :agnostic on    one NMS across queries (on/off)
              :box [N] x1,y1,x2,y2[:label]   YOLOE: an example boxed on photo N (the first by default) joins
                              every query; a label's examples on several photos are averaged
              :box clear      drop the examples
              :image-conf 0.1 confidence threshold of photo queries
              :help           this list
              :quit           leave (so does end of input)

            At a terminal: ← → Home End move, ↑ ↓ walk the history (kept in \
            $XDG_STATE_HOME/lookout/query-history, else ~/.local/state/lookout/query-history), Ctrl-C clears \
            the line (while an answer is computed, a second Ctrl-C leaves), Ctrl-D leaves. The prompt is drawn \
            on the terminal, so `query --json > out.json` writes only answers.

            Queries are comma-separated, in Lookout's syntax: sofa|couch|settee is one query taking the best \
            score of its alternatives; dog@0.4 has its own threshold; -person is never reported and removes \
            the boxes it outscores; \\, \\| \\@ and a leading \\- stand for the characters.

            A query that starts with @ is a photo of what to find, cropped to it: `@crops/my-mug.jpg, cup` \
            looks for things like the photo and for cups (the photo is embedded by the model's image tower); \
            @crops/my-mug.jpg@0.3 gives it its own threshold.

            Example:
              printf 'dog, cat\\n:conf 0.1\\nred car\\n' | lookout query photo.jpg
            """
    )

    @Argument(help: "JPEG or PNG files.")
    var images: [String]

    @OptionGroup var modelOptions: ModelOptions
    @OptionGroup var thresholds: ThresholdOptions
    @OptionGroup var slicingOptions: SlicingOptions
    @OptionGroup var imagePromptOptions: ImagePromptOptions

    @Flag(help: "One JSON object per image per answer instead of a table.")
    var json = false

    @Option(
        help: "Memory for kept image features, in MiB; beyond it the least recently used are dropped and recomputed.")
    var featureMemory = 1024

    @Option(
        help: ArgumentHelp(
            "Also keep image features on disk in this folder (reused across runs; the oldest go beyond 4 GiB).",
            valueName: "dir"))
    var featureCache: String?

    func validate() throws {
        if images.isEmpty { throw ValidationError("Give at least one image.") }
        guard featureMemory >= 0 && featureMemory <= 1 << 30 else {
            throw ValidationError("--feature-memory is in MiB, from 0 to 1073741824 (1 PiB).")
        }
        _ = try slicingOptions.options()
    }

    func run() throws {
        let (engine, detectorFingerprint) = try modelOptions.load()
        guard engine.embedder != nil else { throw LookoutError("no text encoder") }
        let editor = LineEditor(historyPath: LineEditor.defaultHistoryPath())
        defer { editor?.finish() }
        // Features computed in bf16 or int8 (by calibration and weight width) are not fp32's: their own entries
        // in the disk cache.
        let arithmetic = engine.network.arithmetic
        let store = FeatureStore(
            modelKey: arithmetic == "fp32" ? detectorFingerprint : detectorFingerprint + "|" + arithmetic,
            memoryLimit: featureMemory << 20, directory: featureCache)
        let slicing = try slicingOptions.options()
        let options = thresholds.options(for: engine.network)
        slicingOptions.explain(slicing, confidence: options.confidence)
        let session = QuerySession(
            engine: engine, store: store, imageSize: thresholds.imgsz, options: options, slicing: slicing)
        session.imageConfidence = imagePromptOptions.imageQueryConf
        let (failures, backbone) = session.add(images)
        for failure in failures { printError("lookout: \(failure.error)") }
        guard !session.photos.isEmpty else { throw LookoutError("none of the images could be read") }
        if let editor {
            editor.write(
                "\(session.photos.count) image\(session.photos.count == 1 ? "" : "s") ready (\(ms(backbone)) ms). "
                    + "Type what to look for, comma-separated; :help lists commands.\r\n")
            InterruptGuard.install()
        }
        var boxes: [VisualPrompt] = []
        var boxPhotos: [Int] = []
        while true {
            InterruptGuard.reset()
            let line: String
            if let editor {
                guard case .line(let typed) = editor.readLine(prompt: "query> ") else { break }
                line = typed
            } else {
                guard let read = readLine(strippingNewline: true) else { break }
                line = read
            }
            let text = line.trimmingCharacters(in: " \t\r")
            if text.isEmpty { continue }
            if text.hasPrefix(":box") {
                let argument = text.dropFirst(4).trimmingCharacters(in: " \t")
                do {
                    // Kept only once the session took them (a bad box or photo number leaves the others).
                    var newBoxes = boxes
                    var newPhotos = boxPhotos
                    if argument == "clear" {
                        newBoxes = []
                        newPhotos = []
                    } else {
                        // `:box N x1,y1,x2,y2[:label]`: on photo N (from 1), else on the first.
                        let parts = argument.split(separator: " ", maxSplits: 1).map(String.init)
                        if parts.count == 2, let number = Int(parts[0]) {
                            newBoxes += try DetectCommand.visualPrompts([parts[1].trimmingCharacters(in: " \t")])
                            newPhotos.append(number - 1)
                        } else {
                            newBoxes += try DetectCommand.visualPrompts([argument])
                            newPhotos.append(0)
                        }
                    }
                    let reply = try session.setVisualPrompts(newBoxes, photos: newPhotos)
                    (boxes, boxPhotos) = (newBoxes, newPhotos)
                    if let reply {
                        answer(reply.results, note: "\(boxes.count) example box\(boxes.count == 1 ? "" : "es")")
                    }
                } catch let error as VisualPromptError {
                    printError("lookout: \(error.description)")
                } catch {
                    printError("lookout: \(error)")
                }
                continue
            }
            if text.hasPrefix(":") {
                var options = session.options
                var imageConfidence = session.imageConfidence
                switch command(text, options: &options, imageConfidence: &imageConfidence) {
                case .quit: return
                case .changed:
                    session.imageConfidence = imageConfidence
                    if let results = session.rethreshold(options) {
                        answer(results, note: "re-threshold", reranNetwork: false)
                    }
                case .none: break
                }
                continue
            }
            // Each part in typed order: @path/to/crop.jpg (an unescaped @ first) is a photo as the query (its
            // own threshold as @crop.jpg@0.3); the others are text queries in Lookout's syntax.
            var parts: [(query: Query, photo: Bool)] = []
            var empty = 0
            var unreadable = false
            for raw in QuerySyntax.split(text) {
                do {
                    guard let query = try QuerySyntax.parse(raw) else {
                        empty += 1
                        continue
                    }
                    let photo = raw.trimmingCharacters(in: " \t").hasPrefix("@")
                    if !parts.contains(where: { $0.query == query && $0.photo == photo }) {
                        parts.append((query, photo))
                    }
                } catch {
                    printError("lookout: \(error.message)")
                    unreadable = true
                    break
                }
            }
            if unreadable { continue }
            if empty > 0 { printError("lookout: ignoring \(empty) empty quer\(empty == 1 ? "y" : "ies")") }
            guard !parts.isEmpty else {
                printError("lookout: no queries in that line")
                continue
            }
            guard parts.count <= QuerySyntax.maximumQueries else {
                printError("lookout: \(parts.count) queries: at most \(QuerySyntax.maximumQueries) at once")
                continue
            }
            guard parts.contains(where: { $0.photo || !$0.query.negative }) else {
                printError("lookout: only negative queries: name something to find too")
                continue
            }
            let photoPaths = parts.filter(\.photo).map { String($0.query.label.dropFirst()) }
            var photos: [(label: String, embedding: [Float])]
            do {
                photos = try imagePromptOptions.embed(photoPaths, model: modelOptions, engine: engine)
            } catch {
                printError("lookout: \(error)")
                continue
            }
            var plan = QueryPlan()
            for part in parts {
                if part.photo {
                    let photo = photos.removeFirst()
                    plan.append(label: photo.label, embedding: photo.embedding, threshold: part.query.threshold)
                } else {
                    plan.append(part.query)
                }
            }
            warnAboutLongQueries(
                plan.texts.indices.filter { plan.embedded[$0] == nil }.map { plan.texts[$0] }, engine: engine)
            let reply = session.ask(plan)
            for path in reply.unreadable { printError("lookout: \(path) can no longer be read") }
            answer(
                reply.results,
                note:
                    "text \(ms(reply.textSeconds)) ms (\(reply.cachedEmbeddings) of \(plan.texts.count - photos.count) cached)"
            )
        }
    }

    private enum Outcome { case none, changed, quit }

    private func command(_ text: String, options: inout SuppressionOptions, imageConfidence: inout Float) -> Outcome {
        let parts = text.dropFirst().split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        let name = parts.first ?? ""
        let value = parts.count > 1 ? parts[1] : nil
        switch name {
        case "quit", "q", "exit": return .quit
        case "help", "h", "?":
            printError(
                ":conf X  :iou X  :max-det N  :agnostic on|off  :image-conf X  :box x1,y1,x2,y2[:label] | clear  :quit  (@crop.jpg: a photo as query; sofa|couch, dog@0.4, -person)"
            )
            if isatty(0) == 1 {
                printError("keys: ← → Home End move, ↑ ↓ history, Ctrl-C clears the line, Ctrl-D or :quit leaves")
            }
            return .none
        case "conf":
            guard let value, let number = Float(value), number >= 0, number < 1 else {
                printError("lookout: :conf takes a number in [0, 1)")
                return .none
            }
            options.confidence = number
        case "image-conf":
            guard let value, let number = Float(value), number >= 0, number < 1 else {
                printError("lookout: :image-conf takes a number in [0, 1)")
                return .none
            }
            imageConfidence = number
        case "iou":
            guard let value, let number = Double(value), number > 0, number <= 1 else {
                printError("lookout: :iou takes a number in (0, 1]")
                return .none
            }
            options.iou = number
        case "max-det":
            guard let value, let number = Int(value), number > 0 else {
                printError("lookout: :max-det takes a positive whole number")
                return .none
            }
            options.maximumDetections = number
        case "agnostic":
            guard let value, value == "on" || value == "off" else {
                printError("lookout: :agnostic takes on or off")
                return .none
            }
            options.agnostic = value == "on"
        default:
            printError("lookout: unknown command :\(name) (:help lists them)")
            return .none
        }
        printError(
            "conf \(options.confidence), image-conf \(imageConfidence), iou \(options.iou), max-det \(options.maximumDetections), agnostic \(options.agnostic ? "on" : "off")"
        )
        return .changed
    }

    private func answer(_ results: [ImageDetections], note: String, reranNetwork: Bool = true) {
        var out = ""
        for result in results {
            out += json ? Report.json(result) : Report.table(result)
        }
        if !json {
            let neck = results.reduce(0) { $0 + $1.timings.neckAndHead }
            let nms = results.reduce(0) { $0 + $1.timings.suppression }
            out += "  (\(note); " + (reranNetwork ? "neck + head \(ms(neck)) ms; " : "") + "nms \(ms(nms)) ms)\n"
        }
        print(out, terminator: "")
        fflush(nil)
    }
}
