import AsyncHTTPClient
import Dispatch
import LookoutJSON
import LookoutSupport
import LookoutWeights
import NIOCore
import NIOHTTP1
import NIOSSL

#if canImport(Glibc)
    import Glibc
#endif

/// Downloads models of a ``ModelCatalogue`` over HTTPS into a folder per model, as `lookout models fetch`
/// does: a file goes to `NAME.part` first, a partial one is resumed (an HTTP range request), its SHA-256 is
/// checked against the catalogue (or the digest recorded at its first download) before it takes its final
/// name — a file that does not match is removed — and each model gets a `lookout-model.json` so that
/// `--model FOLDER` (or its name) works. A proxy comes from `$HTTPS_PROXY` (`$NO_PROXY` honoured).
public final class ModelFetcher: @unchecked Sendable {
    public struct Progress: Sendable {
        public var file: String
        public var received: Int64
        /// The file's whole size when the server says it.
        public var total: Int64?
        /// Bytes already there from an earlier, interrupted download.
        public var resumedFrom: Int64
    }

    /// What happened to one file.
    public enum Outcome: Sendable, Equatable {
        case downloaded(bytes: Int64)
        case resumed(from: Int64, bytes: Int64)
        case present
    }

    public struct Report: Sendable {
        public var model: String
        public var folder: String
        public var files: [(name: String, outcome: Outcome, sha256: String, pinned: Bool)]
    }

    public let catalogue: ModelCatalogue
    public let directory: String
    /// Certificate authorities to trust instead of the system's (a PEM file), for a private mirror.
    public let caFile: String?
    /// A base URL every file is fetched from instead of its own URL (`BASE/FILE`).
    public let mirror: String?
    /// Whether `http://` sources are taken (`--allow-http`): by default only HTTPS, and a redirect never goes
    /// from HTTPS to HTTP either way.
    public let allowHTTP: Bool
    /// The most bytes a file whose catalogue entry states no size may have (`--max-bytes`).
    public let maximumBytes: Int64
    private let environment: (String) -> String?

    public static let defaultMaximumBytes: Int64 = 2 << 30

    public init(
        catalogue: ModelCatalogue = .builtIn, directory: String, caFile: String? = nil, mirror: String? = nil,
        allowHTTP: Bool = false, maximumBytes: Int64 = defaultMaximumBytes,
        environment: @escaping (String) -> String? = { getenv($0).map { String(cString: $0) } }
    ) {
        self.catalogue = catalogue
        self.directory = directory
        self.caFile = caFile
        self.mirror = mirror
        self.allowHTTP = allowHTTP
        self.maximumBytes = maximumBytes
        self.environment = environment
    }

    /// Fetches `name` and what it requires; one report per model, in order.
    public func fetch(
        _ name: String, progress: @escaping @Sendable (Progress) -> Void = { _ in }
    ) throws(FetchError)
        -> [Report]
    {
        let models = try catalogue.withRequirements(name)
        let client = try makeClient()
        defer { try? client.syncShutdown() }
        var reports: [Report] = []
        var digests: [String: String] = [:]  // absolute path → SHA-256
        for model in models {
            let folder = directory + "/" + model.name
            do {
                try FileContents.makeDirectories(folder)
            } catch {
                throw FetchError("\(error.path): cannot make the folder (\(error.reason))")
            }
            let recorded = Self.recordedDigests(folder)
            var report = Report(model: model.name, folder: folder, files: [])
            for file in model.files {
                let expected = file.sha256 ?? recorded[file.name]
                let (outcome, digest) = try fetchFile(
                    file, into: folder, expected: expected, client: client, progress: progress)
                digests[folder + "/" + file.name] = digest
                report.files.append((file.name, outcome, digest, file.sha256 != nil))
            }
            if !model.manifest.isEmpty { try writeManifest(model, folder: folder, digests: &digests) }
            reports.append(report)
        }
        return reports
    }

    // MARK: - One file

    private func fetchFile(
        _ file: ModelCatalogue.File, into folder: String, expected: String?, client: HTTPClient,
        progress: @escaping @Sendable (Progress) -> Void
    ) throws(FetchError) -> (Outcome, String) {
        let target = folder + "/" + file.name
        let part = target + ".part"
        if Self.size(target) != nil {
            let digest = try Self.digest(target)
            if expected == nil || digest == expected { return (.present, digest) }
            // A damaged or replaced file: fetched again.
            unlink(target)
        }
        let url = mirror.map { $0.hasSuffix("/") ? $0 + file.name : $0 + "/" + file.name } ?? file.url
        try checkScheme(url, for: file.name)
        let limit = file.maximumBytes ?? maximumBytes
        if let kept = Self.size(part), kept > limit { unlink(part) }
        let resumedFrom = Self.size(part) ?? 0
        let received = try Self.runAsync { () async throws(FetchError) -> (startedAt: Int64, total: Int64) in
            try await self.download(
                url, to: part, from: resumedFrom, name: file.name, limit: limit, client: client, progress: progress)
        }
        let digest = try Self.digest(part)
        if let expected, digest != expected {
            unlink(part)
            throw FetchError(
                "\(file.name) from \(url) has SHA-256 \(digest), not \(expected) as \(file.sha256 != nil ? "the catalogue says" : "recorded at its first download"): the download was removed (run again to download it afresh; a mirror or proxy may be serving another file)"
            )
        }
        guard rename(part, target) == 0 else {
            throw FetchError("\(target): cannot rename the download into place (\(String(cString: strerror(errno))))")
        }
        let outcome: Outcome =
            received.startedAt > 0
            ? .resumed(from: received.startedAt, bytes: received.total) : .downloaded(bytes: received.total)
        return (outcome, digest)
    }

    /// Refuses a source that is not HTTPS, unless `--allow-http`.
    private func checkScheme(_ url: String, for name: String) throws(FetchError) {
        let scheme = URLText.scheme(url)
        if scheme == "https" || (scheme == "http" && allowHTTP) { return }
        throw FetchError(
            scheme == "http"
                ? "\(name): \(URLText.redacted(url)) is plain HTTP, which anyone on the way can change: use an https:// source, or --allow-http for a mirror you trust on a network you trust"
                : "\(name): \(URLText.redacted(url)) is not an https:// address")
    }

    /// Where a redirect from `url` to `location` leads (an absolute URL), or an error when it would go from
    /// HTTPS to plain HTTP or to another scheme.
    func redirect(from url: String, to location: String, name: String) throws(FetchError) -> String {
        var target = location
        if URLText.scheme(location) == nil {
            guard let schemeEnd = url.firstRange(of: "://") else {
                throw FetchError("\(name): a redirect to \(location) from \(url) cannot be followed")
            }
            let authorityEnd = url[schemeEnd.upperBound...].firstIndex(of: "/") ?? url.endIndex
            if location.hasPrefix("//") {
                target = String(url[..<schemeEnd.lowerBound]) + ":" + location
            } else if location.hasPrefix("/") {
                target = String(url[..<authorityEnd]) + location
            } else {
                let base = url[..<(url.lastIndex(of: "/").map { max($0, authorityEnd) } ?? url.endIndex)]
                target = String(base) + (base.hasSuffix("/") ? "" : "/") + location
            }
        }
        if URLText.scheme(url) == "https" && URLText.scheme(target) != "https" {
            throw FetchError(
                "\(name): \(URLText.redacted(url)) redirects to \(URLText.redacted(target)), away from HTTPS: refused")
        }
        try checkScheme(target, for: name)
        return target
    }

    /// Downloads `url` into `part`, resuming from `offset` when the server takes range requests; the offset
    /// the download really started from and the file's size at the end. Redirects are followed (at most 10)
    /// only from HTTPS to HTTPS; a file over `limit` bytes is stopped and its part removed.
    private func download(
        _ firstURL: String, to part: String, from offset: Int64, name: String, limit: Int64, client: HTTPClient,
        progress: @escaping @Sendable (Progress) -> Void
    ) async throws(FetchError) -> (startedAt: Int64, total: Int64) {
        var url = firstURL
        var response: HTTPClientResponse
        var redirects = 0
        while true {
            var request = HTTPClientRequest(url: url)
            request.headers.add(name: "User-Agent", value: "lookout-models-fetch")
            if offset > 0 { request.headers.add(name: "Range", value: "bytes=\(offset)-") }
            do {
                response = try await client.execute(request, timeout: .hours(12))
            } catch {
                throw FetchError("cannot download \(URLText.redacted(url)): \(Self.describe(error))")
            }
            guard [301, 302, 303, 307, 308].contains(response.status.code) else { break }
            guard let location = response.headers.first(name: "Location"), redirects < 10 else {
                throw FetchError(
                    "cannot download \(URLText.redacted(firstURL)): too many redirects, or one without a Location")
            }
            url = try redirect(from: url, to: location, name: name)
            redirects += 1
        }
        var start = offset
        switch response.status.code {
        case 206:
            let range = response.headers.first(name: "Content-Range") ?? ""
            if !range.hasPrefix("bytes \(offset)-") { start = 0 }
        case 200: start = 0
        case 416 where offset > 0:
            // The part is no shorter than the file: start again rather than trust it.
            unlink(part)
            return try await download(
                firstURL, to: part, from: 0, name: name, limit: limit, client: client, progress: progress)
        default:
            throw FetchError("cannot download \(url): HTTP \(response.status.code) \(response.status.reasonPhrase)")
        }
        if start == 0 && response.status.code == 206 {
            throw FetchError("cannot download \(url): the server answered a range that was not asked for")
        }
        let length = response.headers.first(name: "Content-Length").flatMap { Int64($0) }
        let total = length.map { $0 + start }
        if let total, total > limit {
            if start > 0 { unlink(part) }
            throw FetchError(
                "\(name): the server says it has \(Self.megabytes(total)), more than the \(Self.megabytes(limit)) it may have: refused (a catalogue's max_bytes, or --max-bytes, sets the limit)"
            )
        }
        let descriptor = open(part, O_WRONLY | O_CREAT | (start == 0 ? O_TRUNC : O_APPEND), 0o644)
        guard descriptor >= 0 else {
            throw FetchError("\(part): cannot write (\(String(cString: strerror(errno))))")
        }
        defer { close(descriptor) }
        var received = start
        progress(Progress(file: name, received: received, total: total, resumedFrom: start))
        do {
            for try await chunk in response.body {
                let written = chunk.withUnsafeReadableBytes { bytes -> Int in
                    var done = 0
                    while done < bytes.count {
                        let n = write(descriptor, bytes.baseAddress! + done, bytes.count - done)
                        if n <= 0 { return -1 }
                        done += n
                    }
                    return done
                }
                guard written >= 0 else {
                    throw FetchError("\(part): cannot write (\(String(cString: strerror(errno))))")
                }
                received += Int64(written)
                if received > limit {
                    unlink(part)
                    throw FetchError(
                        "\(name): the download went past \(Self.megabytes(limit)), more than the file may have: stopped and removed (a catalogue's max_bytes, or --max-bytes, sets the limit)"
                    )
                }
                progress(Progress(file: name, received: received, total: total, resumedFrom: start))
            }
        } catch let error as FetchError {
            throw error
        } catch {
            throw FetchError(
                "the download of \(url) stopped at \(Self.megabytes(received))\(total.map { " of \(Self.megabytes($0))" } ?? "") (\(Self.describe(error))): run the same command again to resume it"
            )
        }
        if let total, received != total {
            throw FetchError(
                "the download of \(url) stopped at \(Self.megabytes(received)) of \(Self.megabytes(total)): run the same command again to resume it"
            )
        }
        return (start, received)
    }

    // MARK: - Manifest

    /// `lookout-model.json` for a model: its roles' files with their digests (and URLs, so that `lookout
    /// models verify` can say where a file came from).
    private func writeManifest(
        _ model: ModelCatalogue.Model, folder: String, digests: inout [String: String]
    )
        throws(FetchError)
    {
        var members: [(String, JSONValue)] = [
            ("name", .string(model.name)), ("description", .string(model.description + " (lookout models fetch)")),
        ]
        let allowed = Set((try? catalogue.withRequirements(model.name))?.map(\.name) ?? [model.name])
        for (role, path) in model.manifest {
            let absolute = Self.normalised(folder + "/" + path)
            let base = Self.normalised(directory)
            // The model's own folder, or the folder of a model it requires: nothing else goes into its manifest.
            guard
                allowed.contains(where: { absolute.hasPrefix(base + "/" + $0 + "/") })
            else {
                throw FetchError(
                    "\(model.name): its \(role) \(path) lies outside its folder and those of the models it requires: refused"
                )
            }
            guard Self.size(absolute) != nil else {
                throw FetchError("\(model.name): its \(role) \(absolute) is not there after the fetch")
            }
            let digest: String
            if let known = digests[absolute] {
                digest = known
            } else {
                digest = try Self.digest(absolute)
                digests[absolute] = digest
            }
            var entry: [(String, JSONValue)] = [("file", .string(path)), ("sha256", .string(digest))]
            let fileName = String(path.split(separator: "/").last ?? "")
            if let url = catalogue.models.lazy.flatMap(\.files).first(where: { $0.name == fileName })?.url {
                entry.append(("url", .string(url)))
            }
            members.append((role, .object(entry)))
        }
        let text = JSONValue.object(members).serialized + "\n"
        do {
            try FileContents.writeAtomically(Array(text.utf8), to: folder + "/" + ModelManifest.fileName)
        } catch {
            throw FetchError("\(error.path): cannot write the manifest (\(error.reason))")
        }
    }

    /// The digests an earlier fetch recorded in the folder's manifest, by file name.
    static func recordedDigests(_ folder: String) -> [String: String] {
        guard let manifest = try? ModelManifest(directory: folder) else { return [:] }
        var digests: [String: String] = [:]
        for entry in [manifest.detector, manifest.textEncoder] + (manifest.imageEncoder.map { [$0] } ?? []) {
            if let sha = entry.sha256, let name = entry.path.split(separator: "/").last {
                digests[String(name)] = sha
            }
        }
        return digests
    }

    // MARK: - The client

    private func makeClient() throws(FetchError) -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile {
            do {
                tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(caFile))
            } catch {
                throw FetchError("--ca-file \(caFile): no PEM certificate could be read from it")
            }
        }
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(20), read: .seconds(60)), proxy: try proxy())
        configuration.httpVersion = .http1Only
        // The first failure to connect (refused, a certificate that does not verify) is the answer: the
        // client would otherwise retry until the request's deadline, hours away for a large file.
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// `$HTTPS_PROXY` (or `$https_proxy`) as `http://[user:password@]host:port`, unless every file's host is
    /// in `$NO_PROXY`.
    private func proxy() throws(FetchError) -> HTTPClient.Configuration.Proxy? {
        guard let value = environment("HTTPS_PROXY") ?? environment("https_proxy"), !value.isEmpty else { return nil }
        let exempt = (environment("NO_PROXY") ?? environment("no_proxy") ?? "").split(separator: ",").map {
            String($0).trimmingCharacters(in: " \t").lowercased()
        }
        let hosts = (mirror.map { [$0] } ?? catalogue.models.flatMap { $0.files.map(\.url) }).compactMap(Self.host)
        if !hosts.isEmpty
            && hosts.allSatisfy({ host in
                exempt.contains { $0 == "*" || host == $0 || host.hasSuffix($0.hasPrefix(".") ? $0 : "." + $0) }
            })
        {
            return nil
        }
        var rest = Substring(value)
        if let scheme = rest.firstRange(of: "://") { rest = rest[scheme.upperBound...] }
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        var authorization: HTTPClient.Authorization?
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at].split(separator: ":", maxSplits: 1).map(String.init)
            authorization = .basic(username: credentials[0], password: credentials.count > 1 ? credentials[1] : "")
            rest = rest[rest.index(after: at)...]
        }
        guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]) else {
            throw FetchError("$HTTPS_PROXY \(value): expected http://host:port")
        }
        return .server(host: String(rest[..<colon]), port: port, authorization: authorization)
    }

    static func host(_ url: String) -> String? {
        guard let scheme = url.firstRange(of: "://") else { return nil }
        var rest = url[scheme.upperBound...]
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        if let colon = rest.lastIndex(of: ":") { rest = rest[..<colon] }
        return rest.lowercased()
    }

    // MARK: - Helpers

    /// Runs async work to its end from synchronous code (the command line).
    static func runAsync<T: Sendable>(
        _ work: @escaping @Sendable () async throws(FetchError) -> T
    ) throws(FetchError)
        -> T
    {
        let box = AsyncResult<T>()
        let done = DispatchSemaphore(value: 0)
        Task {
            do {
                box.result = .success(try await work())
            } catch let error as FetchError {
                box.result = .failure(error)
            } catch {
                box.result = .failure(FetchError("\(error)"))
            }
            done.signal()
        }
        done.wait()
        return try box.result!.get()
    }

    static func describe(_ error: any Error) -> String {
        let text = String(describing: error)
        if text.contains("CERTIFICATE_VERIFY_FAILED") {
            return "the server's certificate did not verify (a private mirror's authority goes in --ca-file)"
        }
        if text.contains("connectTimeout") { return "no answer within 20 s (offline? a proxy in $HTTPS_PROXY?)" }
        if text.contains("connectionRefused") || text.contains("Connection refused") { return "connection refused" }
        return text
    }

    static func digest(_ path: String) throws(FetchError) -> String {
        do {
            return try SHA256.hex(ofFile: path)
        } catch {
            throw FetchError("\(path): cannot be read (\(error))")
        }
    }

    static func size(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(info.st_size)
    }

    /// `bytes` in megabytes for messages: one decimal below 10 MB.
    public static func megabytes(_ bytes: Int64) -> String {
        let value = Double(bytes) / 1_000_000
        return value < 10 ? "\((value * 10).rounded() / 10) MB" : "\(Int(value.rounded())) MB"
    }

    /// `a/b/../c` → `a/c` (the manifest's shared files, for messages and digests).
    static func normalised(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            if part == ".." && !parts.isEmpty && parts.last != ".." {
                parts.removeLast()
            } else if part != "." {
                parts.append(part)
            }
        }
        return (path.hasPrefix("/") ? "/" : "") + parts.joined(separator: "/")
    }
}

/// The result of async work, handed to the synchronous caller waiting for it.
private final class AsyncResult<T: Sendable>: @unchecked Sendable {
    var result: Result<T, FetchError>?
}
