// Built with the Network trait (on by default); without it, a command that says how to get it.
#if Network
    import ArgumentParser
    import LookoutEngine
    import LookoutFetch
    import LookoutJSON
    import LookoutSupport
    import LookoutWeights

    #if canImport(Glibc)
        import Glibc
    #endif

    /// A `--model` name with no folder behind it that the catalogue can download: the command that gets it.
    /// Nil for paths, for models that are here, and for names the catalogue does not hold.
    func notFetchedHint(_ given: String) -> String? {
        guard !given.contains("/"), !given.hasPrefix("."), ModelCatalogue.builtIn.model(named: given) != nil else {
            return nil
        }
        let directory = EngineConfiguration.modelDirectory(given)
        guard access(directory + "/" + ModelManifest.fileName, F_OK) != 0 else { return nil }
        return
            "\(given) is not here yet: `lookout models fetch \(given)` downloads it (into \(ResourceLocator.modelsDirectory() ?? "the models folder"))"
    }

    extension ModelsCommand {
        struct Fetch: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Download official models over HTTPS, ready for --model NAME.",
                discussion: """
                    Each model goes into a folder of its name under --dir (default $LOOKOUT_MODELS_DIR, else \
                    $XDG_DATA_HOME/lookout/models, else ~/.local/share/lookout/models) with a lookout-model.json, so \
                    that `lookout detect --model yolov8s-worldv2` (a name) or --model FOLDER finds it. The YOLO-World \
                    detectors share one CLIP ViT-B/32 (clip-vit-b-32); YOLOE-v8 and YOLOE-11 share MobileCLIP-B \
                    (mobileclip-blt), YOLOE-26 MobileCLIP2-B (mobileclip2-b); the -pf (prompt-free) files need no \
                    text tower. A file arrives as NAME.part and takes its name only \
                    once its SHA-256 matches: OpenAI publishes CLIP's; ultralytics publishes none for its release \
                    assets, so a detector's (or MobileCLIP file's) digest is recorded at its first download and checked from then on. An \
                    interrupted download resumes where it stopped when the command runs again. A proxy comes from \
                    $HTTPS_PROXY ($NO_PROXY honoured). Only HTTPS is used (--allow-http for a trusted mirror), a \
                    redirect never leaves HTTPS, and a file larger than its cap (the catalogue's max_bytes, or \
                    --max-bytes) is stopped and removed.

                    Examples:
                      lookout models fetch                      # yolov8s-worldv2 and CLIP
                      lookout models fetch yolov8x-worldv2
                      lookout models fetch yoloe-11s-seg        # YOLOE-11s and its MobileCLIP
                      lookout models fetch all --dir /srv/models
                      lookout models fetch --list
                      lookout models fetch --from https://mirror.example/ --ca-file ca.pem
                    """)

            @Argument(help: "Models to fetch (see --list), or all.")
            var names: [String] = ["yolov8s-worldv2"]

            @Option(help: "Folder that holds the models, one folder each.")
            var dir: String?

            @Option(help: "Certificate authorities to trust instead of the system's (PEM), for a private mirror.")
            var caFile: String?

            @Option(
                name: .customLong("from"),
                help: "Fetch every file from this base URL (BASE/FILE) instead of its official address: a mirror.")
            var mirror: String?

            @Option(help: "A catalogue of models (JSON) instead of the built-in one.")
            var catalogue: String?

            @Flag(
                name: .customLong("allow-http"),
                help:
                    "Take http:// sources too (a mirror you trust on a network you trust): by default only HTTPS, and no redirect from HTTPS to HTTP."
            )
            var allowHTTP = false

            @Option(
                help: ArgumentHelp(
                    "The most bytes a file whose catalogue entry states no size may have (the built-in files have their own caps).",
                    valueName: "bytes"))
            var maxBytes: Int64 = ModelFetcher.defaultMaximumBytes

            @Flag(help: "List the models and their files, and which are fetched.")
            var list = false

            func run() throws {
                let known: ModelCatalogue
                if let catalogue {
                    known = try ModelCatalogue(
                        json: try FileContents.read(catalogue, maximumSize: 1 << 20), source: catalogue)
                } else {
                    known = .builtIn
                }
                guard let folder = dir ?? ResourceLocator.modelsDirectory() else {
                    throw ValidationError("No folder for models: give --dir DIR (or set LOOKOUT_MODELS_DIR).")
                }
                if list {
                    for model in known.models {
                        let fetched =
                            (FileSystem.access(folder + "/" + model.name + "/lookout-model.json", F_OK) == 0)
                            || (model.manifest.isEmpty
                                && model.files.allSatisfy {
                                    (FileSystem.access(folder + "/" + model.name + "/" + $0.name, F_OK) == 0)
                                })
                        print("\(model.name)\(fetched ? "  (fetched)" : "")  \(model.description)")
                        for file in model.files {
                            print("    \(file.name)  \(file.url)  sha256 \(file.sha256 ?? "not published")")
                        }
                    }
                    print("folder: \(folder)")
                    return
                }
                var wanted: [String] = []
                for name in names {
                    for model in name == "all" ? known.models.map(\.name) : [name] where !wanted.contains(model) {
                        wanted.append(model)
                    }
                }
                guard maxBytes > 0 else { throw ValidationError("--max-bytes must be above 0.") }
                let fetcher = ModelFetcher(
                    catalogue: known, directory: folder, caFile: caFile, mirror: mirror, allowHTTP: allowHTTP,
                    maximumBytes: maxBytes)
                let bar = DownloadBar(terminal: isatty(2) == 1)
                var done: Set<String> = []
                for name in wanted {
                    let reports: [ModelFetcher.Report]
                    do {
                        reports = try fetcher.fetch(name) { bar.show($0) }
                    } catch {
                        bar.finish()
                        throw LookoutError("\(error)")
                    }
                    bar.finish()
                    for report in reports where done.insert(report.model).inserted {
                        for file in report.files {
                            let what: String
                            switch file.outcome {
                            case .present: what = "already there"
                            case .downloaded(let bytes): what = "downloaded (\(ModelFetcher.megabytes(bytes)))"
                            case .resumed(let from, let bytes):
                                what = "resumed from \(ModelFetcher.megabytes(from)) (\(ModelFetcher.megabytes(bytes)))"
                            }
                            let check =
                                file.pinned
                                ? "SHA-256 verified" : "SHA-256 \(file.sha256) (recorded; no digest is published)"
                            printError("\(report.model)/\(file.name): \(what), \(check)")
                        }
                        if (FileSystem.access(report.folder + "/lookout-model.json", F_OK) == 0) {
                            print(
                                "\(report.model): ready in \(report.folder) (lookout detect --model \(report.model) …)")
                        }
                    }
                }
            }
        }
    }

    /// A download's progress on standard error: a bar redrawn in place on a terminal, otherwise a line every 5 s.
    final class DownloadBar: @unchecked Sendable {
        let terminal: Bool
        private var file = ""
        private var started = 0.0
        private var lastShown = -10.0
        private var drawn = false

        init(terminal: Bool) { self.terminal = terminal }

        func show(_ progress: ModelFetcher.Progress) {
            let now = Stopwatch.now()
            if progress.file != file {
                finish()
                file = progress.file
                started = now
                lastShown = -10
                if progress.resumedFrom > 0 {
                    printError("\(file): resuming from \(ModelFetcher.megabytes(progress.resumedFrom))")
                }
            }
            let complete = progress.total.map { progress.received >= $0 } ?? false
            guard now - lastShown >= (terminal ? 0.1 : 5) || complete else { return }
            lastShown = now
            let rate = Double(progress.received - progress.resumedFrom) / max(now - started, 1e-3)
            var line = "\(file) \(ModelFetcher.megabytes(progress.received))"
            if let total = progress.total, total > 0 {
                let share = min(Double(progress.received) / Double(total), 1)
                let filled = Int(share * 30)
                line =
                    "\(file) [\(String(repeating: "#", count: filled))\(String(repeating: ".", count: 30 - filled))] "
                    + "\(Int(share * 100))% \(ModelFetcher.megabytes(progress.received))/\(ModelFetcher.megabytes(total))"
                if rate > 0 && !complete {
                    line += " ETA \(Int((Double(total - progress.received) / rate).rounded())) s"
                }
            }
            line += " \(ModelFetcher.megabytes(Int64(rate)))/s"
            if terminal {
                var text = "\r\u{1B}[K" + line
                text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
                drawn = true
            } else {
                printError(line)
            }
        }

        func finish() {
            if terminal && drawn { printError("") }
            drawn = false
            file = ""
        }
    }

#else

    import ArgumentParser

    /// This build cannot download models: nothing to suggest.
    func notFetchedHint(_ given: String) -> String? { nil }

    extension ModelsCommand {
        /// `models fetch` in a build without the network modules: says how to get them.
        struct Fetch: LeftOutCommand {
            static let configuration = LeftOut.configuration("fetch", "Download official models over HTTPS")
            @Argument(parsing: .allUnrecognized) var arguments: [String] = []
            func run() throws { throw LeftOut.error("lookout models fetch") }
        }
    }

#endif
