import Dispatch
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import LookoutEngine
import LookoutJSON
import LookoutTracking
import Metrics
import NIOCore
import NIOSSL
import Prometheus

#if canImport(Glibc)
    import Glibc
#endif

/// `lookout serve`: the HTTP API of ``LookoutService`` and the web page, on Hummingbird.
///
/// Safe by default: it binds 127.0.0.1; any other host needs a token (`Authorization: Bearer`), and with
/// ``Configuration/tlsCertificate`` it speaks HTTPS. A `Host` header naming another server gets 421, a POST body
/// of a type the API does not document 415 (``RequestGuard``). Bodies over ``Configuration/maximumBodyBytes``
/// get 413, and a body must arrive within ``Configuration/bodyTimeout`` seconds (408) before its request takes a
/// place in the queue; photos over the pixel limit 422. Inference runs one request at a time on its own thread
/// (the engine's compute pool parallelises each), with at most ``Configuration/queueLimit`` requests waiting;
/// beyond that 503 with `Retry-After`, and a request that is not answered within
/// ``Configuration/requestTimeout`` seconds gets 503 too: then, or when its client leaves, its work stops at the
/// next frame and its place is given back. Idle connections close after ``Configuration/idleTimeout``
/// seconds. No request names a file: uploads are bytes, indexed photos are named by an id search gives.
public final class LookoutServer: Sendable {
    public struct Configuration: Sendable {
        public var host = "127.0.0.1"
        public var port = 8080
        public var token: String?
        public var maximumBodyBytes = 32 << 20
        /// Videos posted to /api/v1/videos/detect: at most this many bytes and this many seconds of video, and
        /// at most this many frames (decoded, processed or not; nil: 30 a second of the longest video).
        public var maximumVideoBytes = 64 << 20
        public var maximumVideoSeconds = 120.0
        public var maximumVideoFrames: Int?
        public var queueLimit = 16
        public var requestTimeout: Double = 30
        /// Seconds a request's body may take to arrive (it takes no place in the queue meanwhile).
        public var bodyTimeout: Double = 60
        /// Seconds a connection may stay open with no request.
        public var idleTimeout: Double = 60
        /// Names the server is reached by besides its --host and localhost (a `Host` header must name one).
        public var allowedHosts: [String] = []
        /// PEM files of the certificate (chain) and its private key: HTTPS instead of HTTP.
        public var tlsCertificate: String?
        public var tlsKey: String?

        public init() {}

        /// The frame cap of a video upload.
        public var videoFrames: Int { maximumVideoFrames ?? max(1, Int((maximumVideoSeconds * 30).rounded(.up))) }

        /// Refuses what is unsafe or impossible: another host without a token, a port out of range, half a TLS
        /// configuration.
        public func validated() throws(ServiceError) -> Configuration {
            guard (0...65535).contains(port) else { throw ServiceError(400, "--port must be from 0 to 65535") }
            guard (tlsCertificate == nil) == (tlsKey == nil) else {
                throw ServiceError(400, "--tls-cert and --tls-key go together: the certificate and its private key")
            }
            guard bodyTimeout > 0 && idleTimeout > 0 else {
                throw ServiceError(400, "--body-timeout and --idle-timeout must be above 0 seconds")
            }
            if let maximumVideoFrames, maximumVideoFrames < 1 {
                throw ServiceError(400, "--max-video-frames must be at least 1")
            }
            let loopback = ["127.0.0.1", "localhost", "::1"].contains(host)
            guard loopback || !(token ?? "").isEmpty else {
                throw ServiceError(
                    400,
                    "--host \(host) would open the server to other machines: give --token SECRET too (requests then need Authorization: Bearer SECRET)"
                )
            }
            return self
        }
    }

    public let service: LookoutService
    public let configuration: Configuration
    let queue: InferenceQueue
    /// Index searches, after their query is embedded on the inference thread: as many at once as the index
    /// has connections, beside inference.
    let searches: InferenceQueue
    let registry = PrometheusCollectorRegistry()
    let hosts: HostAllowList

    public init(service: LookoutService, configuration: Configuration) throws(ServiceError) {
        self.service = service
        self.configuration = try configuration.validated()
        hosts = HostAllowList(host: configuration.host, allowed: configuration.allowedHosts)
        self.queue = InferenceQueue(limit: configuration.queueLimit, timeout: configuration.requestTimeout)
        self.searches = InferenceQueue(
            limit: configuration.queueLimit, timeout: configuration.requestTimeout,
            workers: service.databaseConnections, label: "lookout.search")
    }

    /// Serves until SIGTERM or SIGINT (requests in flight finish first); `ready` gets the URL once the port
    /// is bound (the real port when 0 was asked for).
    public func run(ready: @escaping @Sendable (String) -> Void) async throws {
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let metrics = ServerMetrics(service: service, queue: queue)
        let router = Router(context: ServerRequestContext.self)
        router.add(middleware: RequestGuard(hosts: hosts))
        router.add(middleware: MetricsMiddleware())
        router.add(middleware: UnroutedRequests())
        routes(router, metrics: metrics)
        // SIGTERM and SIGINT also go to Hummingbird, which then waits for the requests in flight: those still
        // queued are answered 503 at once and the running work stops at its next frame, so the stop waits for
        // one photo's inference at most. Whatever holds it up, the process ends 10 s after the signal.
        let signals = [SIGTERM, SIGINT].map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [queue, searches] in
                queue.stop()
                searches.stop()
                DispatchQueue.global().asyncAfter(deadline: .now() + 10) {
                    FileHandle.standardError.write(
                        Data("lookout serve: stopped 10 s after the signal, with work still running\n".utf8))
                    _exit(128 + number)
                }
            }
            source.resume()
            return source
        }
        defer { signals.forEach { $0.cancel() } }
        var logger = Logger(label: "lookout.serve")
        logger.logLevel = .warning
        let host = configuration.host
        let http = HTTP1Channel.Configuration(
            additionalChannelHandlers: [ClientWatch()],
            idleTimeout: .nanoseconds(Int64(configuration.idleTimeout * 1e9)))
        var server = HTTPServerBuilder.http1(configuration: http)
        let scheme: String
        if let certificate = configuration.tlsCertificate, let key = configuration.tlsKey {
            server = try .tls(server, tlsConfiguration: Self.tls(certificate: certificate, key: key))
            scheme = "https"
        } else {
            scheme = "http"
        }
        let app = Application(
            router: router, server: server,
            configuration: .init(address: .hostname(host, port: configuration.port), serverName: "lookout"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                ready("\(scheme)://\(host.contains(":") ? "[\(host)]" : host):\(port)/")
            },
            logger: logger)
        // The process ends only after the inference threads have: a request answered 503 at its time limit
        // may still be computing (its result dropped), and exiting under it would crash the exit.
        defer {
            queue.waitUntilIdle()
            searches.waitUntilIdle()
        }
        try await app.runService()
    }

    /// The server's TLS settings from PEM files, or a sentence saying which file is wrong.
    static func tls(certificate: String, key: String) throws -> TLSConfiguration {
        let chain: [NIOSSLCertificate]
        let privateKey: NIOSSLPrivateKey
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificate)
        } catch {
            throw ServiceError(400, "--tls-cert \(certificate): not a PEM certificate that can be read (\(error))")
        }
        do {
            privateKey = try NIOSSLPrivateKey(file: key, format: .pem)
        } catch {
            throw ServiceError(400, "--tls-key \(key): not a PEM private key that can be read (\(error))")
        }
        guard !chain.isEmpty else { throw ServiceError(400, "--tls-cert \(certificate) holds no certificate") }
        return TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(privateKey))
    }

    /// Every route, registered by resource: the page and the server's own documents, detection (a photo, and
    /// again on a kept photo), videos, search, and the indexed photos.
    private func routes(_ router: Router<ServerRequestContext>, metrics: ServerMetrics) {
        pageRoutes(router, metrics: metrics)
        let api = router.group("/api/v1")
        if let token = configuration.token, !token.isEmpty { api.add(middleware: BearerToken(token: token)) }
        detectionRoutes(api)
        videoRoutes(api)
        searchRoutes(api)
        photoRoutes(api)
    }

    /// A JSON answer, or the service's error as JSON with its status.
    static func answer(_ work: () async throws -> [UInt8]) async throws -> Response {
        do {
            return json(try await work())
        } catch let error as ServiceError {
            return failure(error)
        }
    }

    static func json(_ bytes: [UInt8], status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    static func failure(_ error: ServiceError) -> Response {
        var response = json(error.body, status: HTTPResponse.Status(code: error.status))
        if error.status == 503 { response.headers[.retryAfter] = "1" }
        return response
    }

    /// The whole body, at most `limit` bytes (413 beyond: by the declared length before reading), arrived
    /// within `seconds` (408 after).
    static func body(_ request: Request, limit: Int, seconds: Double) async throws -> [UInt8] {
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit {
            throw ServiceError(413, "the body has \(length) bytes: at most \(limit)")
        }
        do {
            return try await withThrowingTaskGroup(of: [UInt8].self) { group in
                group.addTask { Array(buffer: try await request.body.collect(upTo: limit)) }
                group.addTask {
                    try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
                    throw ServiceError(408, "the body did not arrive within \(Int(seconds)) s")
                }
                defer { group.cancelAll() }
                return try await group.next()!
            }
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            throw ServiceError(413, "the body is over \(limit) bytes")
        }
    }

    /// A detect request's `q` (queries in Lookout's syntax, read as `lookout detect -q` reads them) and `conf`,
    /// `iou`, `max_det`. When `tracking`, conf defaults to 0.1, as ultralytics' track() asks: ByteTrack's second
    /// association needs the doubtful boxes.
    static func detection(
        _ query: FormQuery, tracking: Bool
    ) throws(ServiceError) -> (
        [Query], LookoutService.Thresholds
    ) {
        let queries = try LookoutService.queries(line: query["q"] ?? "")
        var thresholds = try LookoutService.Thresholds.parse(
            conf: query["conf"], iou: query["iou"], maxDet: query["max_det"])
        if tracking && query["conf"] == nil { thresholds.confidence = 0.1 }
        return (queries, thresholds)
    }

    /// `slice` (WxH, N or auto) and `overlap` (a fraction below 1): sliced inference as `lookout detect --slice`
    /// (sahi's tiles and GREEDYNMM merge); nil without `slice`.
    static func slicing(size: String?, overlap: String?) throws(ServiceError) -> SliceOptions? {
        guard let size else {
            if overlap != nil { throw ServiceError(400, "overlap goes with slice=WxH (sliced inference)") }
            return nil
        }
        var options: SliceOptions
        do throws(SliceError) {
            options = SliceOptions(size: try SliceOptions.parseSize(size))
        } catch {
            throw ServiceError(400, "slice: \(error.description)")
        }
        if let overlap {
            guard options.size != .automatic else {
                throw ServiceError(400, "slice=auto brings its own overlap: leave out overlap")
            }
            guard let value = Double(overlap), value.isFinite else {
                throw ServiceError(400, "overlap must be a number from 0 to below 1, got \(overlap)")
            }
            options.overlapWidth = value
            options.overlapHeight = value
        }
        do throws(SliceError) {
            return try options.validated()
        } catch {
            throw ServiceError(400, "slice: \(error.description)")
        }
    }

    /// A `true`/`false` query parameter.
    static func flag(_ query: FormQuery, _ name: String, default value: Bool) throws(ServiceError) -> Bool {
        switch query[name] {
        case nil: return value
        case "true": return true
        case "false": return false
        case let other?: throw ServiceError(400, "\(name) must be true or false, not \(other)")
        }
    }

    /// `{"q": "sofa|couch, dog@0.4", "prompt_boxes": [{"box": [x1, y1, x2, y2], "label": "dog"}], "conf": …,
    /// "iou": …, "max_det": …}`: `q` is a line of queries as `?q=` and `-q` take it; or `"queries": [...]`, one
    /// query in the syntax per string (commas are text there, as in a queries file). `prompt_boxes`: YOLOE visual
    /// prompts on the photo, optional; then the queries may be left out.
    static func requery(
        _ bytes: [UInt8]
    ) throws(ServiceError) -> RequeryRequest {
        let usage = "the body must be a JSON object: {\"q\": \"dog, red car\", \"conf\": 0.25}"
        guard let document = try? JSONDocument(bytes: bytes) else { throw ServiceError(400, usage) }
        let root = document.root
        var prompts: [VisualPrompt] = []
        var promptPhotos: [String?] = []
        if let boxes = root["prompt_boxes"], boxes.kind != .null {
            let shape =
                "\"prompt_boxes\" must be an array of {\"box\": [x1, y1, x2, y2], \"label\": \"…\", \"image_id\": \"…\"}"
            guard boxes.kind == .array else { throw ServiceError(400, shape) }
            for index in 0..<boxes.count {
                let item = boxes[index]
                guard item.kind == .object, let box = item["box"], box.kind == .array, box.count == 4 else {
                    throw ServiceError(400, shape)
                }
                var values: [Float] = []
                for k in 0..<4 {
                    guard let value = box[k].number, value.isFinite else { throw ServiceError(400, shape) }
                    values.append(Float(value))
                }
                if let label = item["label"], label.kind != .null, label.string == nil {
                    throw ServiceError(400, shape)
                }
                let label = item["label"]?.string?.trimmingCharacters(in: .whitespaces) ?? "object"
                prompts.append(VisualPrompt(box: values, label: label.isEmpty ? "object" : label))
                if let photo = item["image_id"], photo.kind != .null {
                    guard let text = photo.string, !text.isEmpty, text.utf8.count <= 128 else {
                        throw ServiceError(400, shape)
                    }
                    promptPhotos.append(text)
                } else {
                    promptPhotos.append(nil)
                }
            }
        }
        guard root.kind == .object else { throw ServiceError(400, usage) }
        let list = root["queries"], line = root["q"]
        if let line, line.kind != .null, line.string == nil { throw ServiceError(400, "\"q\" must be a string") }
        if line?.string != nil && list != nil && list?.kind != .null {
            throw ServiceError(400, "give \"q\" (a line of queries) or \"queries\" (a list), not both")
        }
        var queries: [Query] = []
        if let text = line?.string {
            queries = try LookoutService.queries(line: text)
        } else {
            guard list?.kind == .array || ((list == nil || list?.kind == .null) && !prompts.isEmpty) else {
                throw ServiceError(400, "\"queries\" must be an array of strings (or give \"q\": \"dog, cat\")")
            }
            var texts: [String] = []
            for index in 0..<(list?.count ?? 0) {
                guard let text = list?[index].string else {
                    throw ServiceError(400, "\"queries\" must be an array of strings")
                }
                texts.append(text)
            }
            queries = try LookoutService.queries(list: texts)
        }
        func number(_ key: String) throws(ServiceError) -> String? {
            guard let node = root[key], node.kind != .null else { return nil }
            if let value = node.int { return String(value) }
            guard node.kind == .double, let value = node.number else {
                throw ServiceError(400, "\"\(key)\" must be a number")
            }
            return String(value)
        }
        let thresholds = try LookoutService.Thresholds.parse(
            conf: try number("conf"), iou: try number("iou"), maxDet: try number("max_det"))
        var size: String? = nil
        if let node = root["slice"], node.kind != .null {
            if let text = node.string {
                size = text
            } else if let value = node.int {
                size = String(value)
            } else {
                throw ServiceError(400, "\"slice\" must be \"WxH\", a number of pixels or \"auto\"")
            }
        }
        let slicing = try slicing(size: size, overlap: try number("overlap"))
        var combination = Examples.Combination.best
        if let node = root["combine_examples"], node.kind != .null {
            guard let text = node.string, let chosen = Examples.Combination(rawValue: text) else {
                throw ServiceError(400, "\"combine_examples\" must be \"best\" or \"mean\"")
            }
            combination = chosen
        }
        return RequeryRequest(
            queries: queries, prompts: prompts, promptPhotos: promptPhotos, thresholds: thresholds, slicing: slicing,
            combination: combination)
    }
}

/// Query parameters as HTML forms send them: `+` is a space, then %XX escapes (Hummingbird's own
/// parameters leave `+` alone, so "red+car" from a form would stay "red+car").
struct FormQuery {
    private var values: [String: String] = [:]
    private var repeated: [String: [String]] = [:]

    init(_ query: String) {
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = Self.decode(parts[0])
            let value = parts.count > 1 ? Self.decode(parts[1]) : ""
            if values[key] == nil { values[key] = value }
            repeated[key, default: []].append(value)
        }
    }

    /// The first value given for `key`.
    subscript(key: String) -> String? { values[key] }

    /// Every value given for `key`, in order (`label=a&label=b`).
    func all(_ key: String) -> [String] { repeated[key] ?? [] }

    static func decode(_ text: Substring) -> String {
        var bytes: [UInt8] = []
        let raw = Array(text.utf8)
        var i = 0
        while i < raw.count {
            if raw[i] == UInt8(ascii: "+") {
                bytes.append(UInt8(ascii: " "))
            } else if raw[i] == UInt8(ascii: "%"), i + 2 < raw.count,
                let value = UInt8(
                    String(decoding: raw[(i + 1)...(i + 2)], as: UTF8.self), radix: 16)
            {
                bytes.append(value)
                i += 2
            } else {
                bytes.append(raw[i])
            }
            i += 1
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// What no route answers: a path the API has with a method it does not take gets 405 with `Allow`; any
/// other path 404. Both as JSON errors.
struct UnroutedRequests<Context: RequestContext>: RouterMiddleware {
    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    )
        async throws -> Response
    {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            let path = request.uri.path
            let allowed = OpenAPIDocument.methods(for: path)
            guard !allowed.isEmpty else { return LookoutServer.failure(ServiceError(404, "no such path: \(path)")) }
            var response = LookoutServer.failure(
                ServiceError(405, "\(path) takes \(allowed.joined(separator: " or ")), not \(request.method)"))
            response.headers[.allow] = allowed.joined(separator: ", ")
            return response
        }
    }
}

/// Requests need `Authorization: Bearer TOKEN` (compared in constant time).
struct BearerToken<Context: RequestContext>: RouterMiddleware {
    let token: String

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    )
        async throws -> Response
    {
        guard Self.accepts(request, token: token) else { return Self.refusal }
        return try await next(request, context)
    }

    /// Whether the request carries the token (compared in constant time).
    static func accepts(_ request: Request, token: String) -> Bool {
        let given = Array((request.headers[.authorization] ?? "").utf8)
        let expected = Array("Bearer \(token)".utf8)
        var difference = given.count ^ expected.count
        for (index, byte) in expected.enumerated() {
            difference |= Int(byte ^ (index < given.count ? given[index] : 0))
        }
        return difference == 0
    }

    static var refusal: Response {
        var response = LookoutServer.failure(
            ServiceError(401, "this server needs Authorization: Bearer TOKEN (the --token it was started with)"))
        response.headers[.wwwAuthenticate] = "Bearer"
        return response
    }
}

/// Inference one request at a time on a thread of its own, a bounded number waiting (503 beyond).
final class InferenceQueue: @unchecked Sendable {
    let limit: Int
    let timeout: Double
    private let lock = NSLock()
    private var waiting = 0
    private var reading = 0
    private let worker: DispatchQueue
    /// How many pieces of work run at once (one for inference).
    private let running: DispatchSemaphore
    /// The cancellations of the requests admitted and not yet answered, to stop their work when the server stops.
    private var active: [ObjectIdentifier: Cancellation] = [:]

    init(limit: Int, timeout: Double, workers: Int = 1, label: String = "lookout.inference") {
        self.limit = limit
        self.timeout = timeout
        worker = DispatchQueue(label: label, attributes: workers > 1 ? .concurrent : [])
        running = DispatchSemaphore(value: max(workers, 1))
    }

    var depth: Int { lock.withLock { waiting } }

    private var stopping = false
    var isStopping: Bool { lock.withLock { stopping } }

    /// From now on: no new request is admitted, those waiting are answered 503 at once, and the work running
    /// stops at its next boundary (a video's next frame), so that a stop waits for one photo's inference at most.
    func stop() {
        let running = lock.withLock {
            stopping = true
            return Array(active.values)
        }
        running.forEach { $0.cancel() }
    }

    /// Waits until the work running or queued now has ended (after ``stop()``, queued work ends at once).
    func waitUntilIdle() { worker.sync(flags: .barrier) {} }

    /// Runs `work` on the inference thread. The answer comes within `timeout` seconds of the call: a request
    /// that could not start by then, or whose work is still running then, gets 503; its place is given back at
    /// once and its work is told to stop (``Cancellation``), as when `clientGone` says its client has left.
    /// `deadline` (default: `timeout` from now) lets a request that passes through two queues keep one limit.
    func run<T: Sendable>(
        until deadline: DispatchTime? = nil, clientGone: @escaping @Sendable () -> Bool = { false },
        _ work: @escaping @Sendable () throws -> T
    )
        async throws -> T
    {
        try await admitted(until: deadline, clientGone: clientGone) { _ in try work() }
    }

    /// ``run(_:)`` for work on a request's input: the input is read first (`reading`: the body, within its own
    /// time limit; at most four times `limit` requests reading at once), then the request takes its place in the queue,
    /// whose time limit (`seconds`, default `timeout`) starts then.
    func run<Input: Sendable, T: Sendable>(
        seconds: Double? = nil, clientGone: @escaping @Sendable () -> Bool = { false },
        reading read: () async throws -> Input, _ work: @escaping @Sendable (Input, Cancellation) throws -> T
    ) async throws -> T {
        let (admitted, stopped) = lock.withLock { () -> (Bool, Bool) in
            guard reading < 4 * limit && !stopping else { return (false, stopping) }
            reading += 1
            return (true, false)
        }
        guard admitted else {
            throw ServiceError(
                503,
                stopped ? "the server is stopping" : "busy: \(4 * limit) requests are sending their bodies; try again")
        }
        let input: Input
        do {
            input = try await read()
            lock.withLock { reading -= 1 }
        } catch {
            lock.withLock { reading -= 1 }
            throw error
        }
        return try await self.admitted(
            until: DispatchTime.now() + (seconds ?? timeout), clientGone: clientGone
        ) { cancellation in try work(input, cancellation) }
    }

    private func admitted<T: Sendable>(
        until givenDeadline: DispatchTime?, clientGone: @escaping @Sendable () -> Bool,
        _ work: @escaping @Sendable (Cancellation) throws -> T
    ) async throws -> T {
        let cancellation = Cancellation(clientGone: clientGone)
        let key = ObjectIdentifier(cancellation)
        let (admitted, stopped) = lock.withLock { () -> (Bool, Bool) in
            guard waiting < limit && !stopping else { return (false, stopping) }
            waiting += 1
            active[key] = cancellation
            return (true, false)
        }
        guard admitted else {
            throw ServiceError(
                503, stopped ? "the server is stopping" : "busy: \(limit) requests are waiting; try again")
        }
        // The place in the queue is given back once: by the answer in time, the time limit, or the client leaving.
        let place = Once { [self] in
            lock.withLock {
                waiting -= 1
                active[key] = nil
            }
        }
        let deadline = givenDeadline ?? DispatchTime.now() + timeout
        let seconds = Int(
            (Double(deadline.uptimeNanoseconds) - Double(DispatchTime.now().uptimeNanoseconds)) / 1e9 + 0.5)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let answer = OneAnswer(continuation)
                worker.async {
                    self.running.wait()
                    defer {
                        self.running.signal()
                        place.run()
                    }
                    guard !self.isStopping else {
                        answer.give(.failure(ServiceError(503, "the server is stopping; try again later")))
                        return
                    }
                    guard DispatchTime.now() < deadline, !answer.given, !cancellation.isCancelled else {
                        answer.give(.failure(ServiceError(503, "busy: the request waited \(seconds) s; try again")))
                        return
                    }
                    answer.give(Result { try work(cancellation) })
                }
                // A client that has left gives its place back within a second, queued or running.
                @Sendable func watch() {
                    DispatchQueue.global().asyncAfter(deadline: .now() + 1) {
                        guard !answer.given else { return }
                        guard cancellation.isCancelled else { return watch() }
                        place.run()
                        answer.give(.failure(ServiceError(503, "the request was given up")))
                    }
                }
                watch()
                DispatchQueue.global().asyncAfter(deadline: deadline) {
                    cancellation.cancel()
                    place.run()
                    answer.give(
                        .failure(
                            ServiceError(503, "the request took longer than its limit of \(seconds) s; try again"))
                    )
                }
            }
        } onCancel: {
            cancellation.cancel()
            place.run()
        }
    }
}

/// A piece of work done once, whoever asks first.
final class Once: @unchecked Sendable {
    private let lock = NSLock()
    private var work: (() -> Void)?

    init(_ work: @escaping () -> Void) { self.work = work }

    func run() {
        let pending = lock.withLock { () -> (() -> Void)? in
            defer { work = nil }
            return work
        }
        pending?()
    }
}

/// A continuation resumed once: by the work's result or by the time limit, whichever comes first.
final class OneAnswer<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<T, any Error>?

    init(_ continuation: CheckedContinuation<T, any Error>) { self.continuation = continuation }

    var given: Bool { lock.withLock { continuation == nil } }

    func give(_ result: Result<T, any Error>) {
        let waiting = lock.withLock { () -> CheckedContinuation<T, any Error>? in
            defer { continuation = nil }
            return continuation
        }
        waiting?.resume(with: result)
    }
}

/// Gauges read when /metrics is asked: the inference queue and the feature store.
final class ServerMetrics: Sendable {
    let service: LookoutService
    let queue: InferenceQueue
    let depth = CoreMetrics.Gauge(label: "lookout_inference_queue_depth")
    let storeBytes = CoreMetrics.Gauge(label: "lookout_feature_store_bytes")
    let storeImages = CoreMetrics.Gauge(label: "lookout_feature_store_images")

    init(service: LookoutService, queue: InferenceQueue) {
        self.service = service
        self.queue = queue
    }

    func update() {
        depth.record(queue.depth)
        storeBytes.record(service.store.memoryBytes)
        storeImages.record(service.store.count)
    }
}

/// A re-query body, read (``LookoutServer/requery(_:)``).
struct RequeryRequest: Sendable {
    var queries: [Query]
    var prompts: [VisualPrompt]
    /// Per prompt box, the photo it is drawn on (nil: the photo asked).
    var promptPhotos: [String?]
    var thresholds: LookoutService.Thresholds
    var slicing: SliceOptions?
    var combination: Examples.Combination
}
