// Built with the Network trait (on by default); without it, a command that says how to get it.
#if Network
    import ArgumentParser
    import Dispatch
    import LookoutIndexPostgres
    import LookoutServer
    import LookoutSupport

    #if canImport(Glibc)
        import Glibc
    #endif

    struct ServeCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "serve",
            abstract: "An HTTP API and a web page: detect, re-query as you type, search the index.",
            discussion: """
                Loads the model once and serves, until Ctrl-C or SIGTERM (requests in flight finish first):
                  /                       the web page: open or drop a photo, type queries, move the sliders;
                                          search the index and browse the results
                  /api/v1/detect          POST a photo's bytes with ?q=dog,red%20car → detections and an image_id
                  /api/v1/images/ID/detect  POST {"queries": [...], "conf": …} → new detections, no backbone
                  /api/v1/videos/detect   POST a video's bytes with ?q=…[&track=true] → every frame's detections
                                      (track ids with track=true) and when each query was found
                  /api/v1/search?q=…      the index's best photos (ids, never paths)
                  /api/v1/openapi.json    the whole API; /api/v1/health; /metrics (Prometheus)

                What each mode exposes:
                  127.0.0.1 (the default)   this machine only. A page open in a browser here cannot use the \
                server through another name (a Host header naming anything but localhost, 127.0.0.1 or ::1 gets \
                421) nor send it a photo as a form or as text (415).
                  --host ADDRESS --token S  every machine that reaches ADDRESS (0.0.0.0: every interface) may send \
                requests; each needs `Authorization: Bearer S` (the page reads it from the address: /#token=S). \
                Without TLS the token, the photos and the answers cross the network in clear: add --tls-cert and \
                --tls-key, or put an HTTPS proxy in front (and name it with --allowed-host).
                  --tls-cert C --tls-key K  HTTPS with that certificate (PEM) and private key (PEM).
                Only the indexed folders' regular files are ever served, by ids search gives; a body must arrive \
                within --body-timeout s before its request waits for inference; a request's work stops at the next \
                frame when its --timeout passes or its client leaves; idle connections close after --idle-timeout s.

                Examples:
                  lookout serve                       the demo model on http://127.0.0.1:8080/
                                                      (search: the default index, if any)
                  lookout serve --model yolov8s-worldv2 --db ~/Pictures/.lookout.sqlite
                  lookout serve --host 0.0.0.0 --port 9000 --token "$(openssl rand -hex 16)"
                """
        )

        @OptionGroup var modelOptions: ModelOptions

        @Option(help: "Address to bind (127.0.0.1: this machine only; others need --token).")
        var host = "127.0.0.1"

        @Option(help: "Port (0: any free one; the URL printed says which).")
        var port = 8080

        @Option(help: "Secret that requests must send as Authorization: Bearer TOKEN (required off 127.0.0.1).")
        var token: String?

        @Option(
            name: .customLong("allowed-host"),
            help: ArgumentHelp(
                "Another name the server is reached by (a proxy's, a DNS name); repeat for several. Requests whose Host header names none of these, --host or localhost get 421.",
                valueName: "name"))
        var allowedHosts: [String] = []

        @Option(
            name: .customLong("tls-cert"),
            help: ArgumentHelp("Serve HTTPS with this certificate (PEM; with --tls-key).", valueName: "file"))
        var tlsCertificate: String?

        @Option(
            name: .customLong("tls-key"), help: ArgumentHelp("The certificate's private key (PEM).", valueName: "file"))
        var tlsKey: String?

        @Option(
            help: ArgumentHelp(
                "An index made by lookout index (an SQLite file or a postgresql:// URL), for /api/v1/search (default: the one lookout search uses — $LOOKOUT_DB or ~/.local/share/lookout/index.sqlite — when it exists).",
                valueName: "path|url"))
        var db: String?

        @Option(help: "Network input size (multiple of 32).")
        var imgsz = 640

        @Option(help: "Memory for kept image features (re-query), in MiB; the least recently used go first.")
        var featureMemory = 512

        @Option(help: "Requests that may wait for inference; more get 503 with Retry-After.")
        var queue = 16

        @Option(help: "Seconds a request may take, waiting included; later it gets 503 with Retry-After.")
        var timeout: Double = 30

        @Option(
            help: ArgumentHelp(
                "The longest video /api/v1/videos/detect takes, in seconds of video (and at most 64 MB).",
                valueName: "s"))
        var maxVideoSeconds: Double = 120

        @Option(
            help: ArgumentHelp(
                "The most frames a video upload may hold (decoded, processed or not; default: 30 a second of --max-video-seconds).",
                valueName: "n"))
        var maxVideoFrames: Int?

        @Option(help: ArgumentHelp("Seconds a request's body may take to arrive (408 after).", valueName: "s"))
        var bodyTimeout: Double = 60

        @Option(help: ArgumentHelp("Seconds a connection may stay open with no request.", valueName: "s"))
        var idleTimeout: Double = 60

        @Option(
            help:
                "Connections to a PostgreSQL index kept open for searches (a pool every request shares), and how many searches run at once."
        )
        var dbConnections = PostgresIndexStore.defaultConnections

        func validate() throws {
            guard imgsz >= 32 && imgsz % 32 == 0 && imgsz <= 4096 else {
                throw ValidationError("--imgsz must be a multiple of 32 between 32 and 4096.")
            }
            guard (0...65535).contains(port) else { throw ValidationError("--port must be from 0 to 65535.") }
            guard featureMemory >= 0 && featureMemory <= 1 << 20 else {
                throw ValidationError("--feature-memory is in MiB, from 0 to 1048576.")
            }
            guard (1...10_000).contains(queue) else { throw ValidationError("--queue must be from 1 to 10000.") }
            guard (1...1_000).contains(dbConnections) else {
                throw ValidationError("--db-connections must be from 1 to 1000.")
            }
            guard timeout >= 0.1 && timeout <= 3600 else {
                throw ValidationError("--timeout is in seconds, from 0.1 to 3600.")
            }
            var info = stat()
            if let db, !IndexLocation.isPostgres(db), FileSystem.stat(db, &info) != 0 {
                throw ValidationError("--db \(db): no such index (make one with lookout index FOLDER --db \(db)).")
            }
        }

        func run() throws {
            var settings = LookoutServer.Configuration()
            settings.host = host
            settings.port = port
            settings.token = token
            settings.queueLimit = queue
            settings.requestTimeout = timeout
            guard maxVideoSeconds.isFinite && maxVideoSeconds > 0 && maxVideoSeconds <= 3600 else {
                throw ValidationError("--max-video-seconds must be above 0 and at most 3600.")
            }
            settings.maximumVideoSeconds = maxVideoSeconds
            settings.maximumVideoFrames = maxVideoFrames
            guard bodyTimeout > 0 && bodyTimeout <= 3600 && idleTimeout > 0 && idleTimeout <= 86400 else {
                throw ValidationError(
                    "--body-timeout must be above 0 and at most 3600 s, --idle-timeout at most 86400 s.")
            }
            settings.bodyTimeout = bodyTimeout
            settings.idleTimeout = idleTimeout
            settings.allowedHosts = allowedHosts
            settings.tlsCertificate = tlsCertificate
            settings.tlsKey = tlsKey
            do {
                settings = try settings.validated()
            } catch {
                throw ValidationError(error.message)
            }
            let index = try servedIndex()
            let (engine, fingerprint) = try modelOptions.load()
            let service = LookoutService(
                engine: engine, detectorFingerprint: fingerprint,
                indexPath: index.flatMap { IndexLocation.isPostgres($0) ? $0 : FileSystem.realpath($0) },
                imageSize: imgsz, featureMemory: featureMemory << 20, databaseConnections: dbConnections)
            if let note = service.indexNote() { printError("lookout serve: \(note)") }
            let server = try LookoutServer(service: service, configuration: settings)
            let finished = DispatchSemaphore(value: 0)
            let outcome = ServeOutcome()
            Task {
                do {
                    try await server.run { url in
                        print("lookout serve: listening on \(url)")
                        fflush(nil)
                    }
                } catch {
                    outcome.failure = "\(error)"
                }
                finished.signal()
            }
            finished.wait()
            if let failure = outcome.failure { throw LookoutError("cannot serve on \(host):\(port): \(failure)") }
        }
    }

    extension ServeCommand {
        /// `--db`, else the index `lookout search` uses when it exists; says on standard error which one is
        /// served (or that none is, and how to make one).
        func servedIndex() throws -> String? {
            if let db {
                printError("lookout serve: searching \(IndexLocation.shown(db))")
                return db
            }
            let path: String?
            do {
                path = try IndexDatabaseOption.defaultPath()
            } catch let error as ValidationError {
                throw error  // a $LOOKOUT_DB that names no index Lookout could use
            } catch {
                path = nil  // no home folder: no default index
            }
            var info = stat()
            if let path, IndexLocation.isPostgres(path) || FileSystem.stat(path, &info) == 0 {
                printError(
                    "lookout serve: searching \(IndexLocation.shown(path)) (the default index; --db names another)")
                return path
            }
            printError(
                "lookout serve: no index to search\(path.map { " (none at \($0))" } ?? ""); "
                    + "`lookout index FOLDER` makes one, or --db names one")
            return nil
        }
    }

    private final class ServeOutcome: @unchecked Sendable {
        var failure: String?
    }

#else

    import ArgumentParser

    /// `serve` in a build without the network modules: says how to get them.
    struct ServeCommand: LeftOutCommand {
        static let configuration = LeftOut.configuration("serve", "An HTTP API and a web page")
        @Argument(parsing: .allUnrecognized) var arguments: [String] = []
        func run() throws { throw LeftOut.error("lookout serve") }
    }

#endif
