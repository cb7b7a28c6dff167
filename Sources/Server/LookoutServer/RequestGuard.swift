import Foundation
import Hummingbird
import HummingbirdCore
import LookoutSupport
import NIOCore

#if canImport(Glibc)
    import Glibc
#endif

/// What keeps a web page in the user's browser out of the server, on every request before routing:
/// - a `Host` header that names neither this server (its `--host`, an `--allowed-host` name, localhost, the
///   loopback addresses, and when it listens on every interface, this machine's addresses and name) is
///   answered 421, so that a page whose name was rebound to this machine's address (DNS rebinding) reads nothing;
/// - a POST whose body is not of a type the API documents (the photo and video endpoints: `image/*`, `video/*`,
///   `application/octet-stream`; re-query: `application/json`) is answered 415: the types a page may send
///   across origins without asking first (`text/plain`, form data, none at all) never reach the engine;
/// - every answer carries a strict Content-Security-Policy (the page's own script and style by their hashes,
///   nothing from elsewhere), `X-Content-Type-Options: nosniff`, no framing, and no referrer.
struct RequestGuard<Context: RequestContext>: RouterMiddleware {
    let hosts: HostAllowList

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var response: Response
        if let refusal = refusal(request) {
            response = LookoutServer.failure(refusal)
        } else {
            do {
                response = try await next(request, context)
            } catch let error as any HTTPResponseError {
                response = try error.response(from: request, context: context)
            }
        }
        Self.secure(&response)
        return response
    }

    func refusal(_ request: Request) -> ServiceError? {
        if let host = request.head.authority, !hosts.admits(hostHeader: host) {
            return ServiceError(
                421,
                "this server does not answer to the name \(HostAllowList.name(ofHostHeader: host).prefix(100)); "
                    + "start it with --allowed-host NAME to add a name it is reached by")
        }
        guard request.method == .post else { return nil }
        let given = request.headers[.contentType] ?? ""
        let type = given.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        let path = request.uri.path
        if path.hasPrefix("/api/v1/images/") {
            guard type == "application/json" else {
                return ServiceError(
                    415, "send the body as Content-Type: application/json (given: \(Self.shown(given)))")
            }
        } else if path == "/api/v1/detect" || path == "/api/v1/videos/detect" {
            guard type == "application/octet-stream" || type.hasPrefix("image/") || type.hasPrefix("video/") else {
                return ServiceError(
                    415,
                    "send the bytes as Content-Type: image/jpeg, image/png, video/mp4 or application/octet-stream (given: \(Self.shown(given)))"
                )
            }
        }
        return nil
    }

    static func shown(_ type: String) -> String { type.isEmpty ? "none" : String(type.prefix(80)) }

    /// On every answer: the page runs only its own script and style (by their SHA-256), talks only to this
    /// server, shows only this server's and its own (blob:, data:) pictures, and cannot be framed.
    static func secure(_ response: inout Response) {
        response.headers[.contentSecurityPolicy] = WebPage.contentSecurityPolicy
        response.headers[.xContentTypeOptions] = "nosniff"
        response.headers[.init("X-Frame-Options")!] = "DENY"
        response.headers[.init("Referrer-Policy")!] = "no-referrer"
        response.headers[.init("Cross-Origin-Resource-Policy")!] = "same-origin"
    }
}

/// The names a `Host` header may give: localhost and the loopback addresses, the address the server was
/// started on, names given with `--allowed-host`, and, when it listens on every interface (0.0.0.0 or ::),
/// the machine's own addresses and host name.
struct HostAllowList: Sendable {
    let names: Set<String>

    init(host: String, allowed: [String]) {
        var names: Set<String> = ["localhost", "127.0.0.1", "::1", Self.normalised(host)]
        for name in allowed { names.insert(Self.normalised(name)) }
        if host == "0.0.0.0" || host == "::" {
            names.formUnion(Self.machineAddresses())
            var buffer = [CChar](repeating: 0, count: 256)
            if gethostname(&buffer, buffer.count) == 0 {
                let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if !name.isEmpty { names.insert(Self.normalised(name)) }
            }
        }
        self.names = names
    }

    func admits(hostHeader: String) -> Bool { names.contains(Self.name(ofHostHeader: hostHeader)) }

    /// The name of a `Host` header without its port, lower-cased, brackets and a trailing dot removed.
    static func name(ofHostHeader header: String) -> String {
        var text = Substring(header.trimmingCharacters(in: .whitespaces))
        if text.hasPrefix("[") {
            text = text.dropFirst().prefix { $0 != "]" }
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            text = text[..<colon]
        }
        return normalised(String(text))
    }

    static func normalised(_ name: String) -> String {
        var name = name.lowercased()
        if name.hasPrefix("[") && name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        while name.hasSuffix(".") { name.removeLast() }
        return name
    }

    /// Every IPv4 and IPv6 address of this machine's interfaces, as text.
    static func machineAddresses() -> Set<String> {
        var found: Set<String> = []
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return found }
        defer { freeifaddrs(list) }
        var entry = list
        while let current = entry {
            defer { entry = current.pointee.ifa_next }
            guard let address = current.pointee.ifa_addr else { continue }
            let family = Int32(address.pointee.sa_family)
            guard family == AF_INET || family == AF_INET6 else { continue }
            var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            let size = socklen_t(family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
            if getnameinfo(address, size, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 {
                var name = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if let percent = name.firstIndex(of: "%") { name = String(name[..<percent]) }  // fe80::1%eth0
                found.insert(name.lowercased())
            }
        }
        return found
    }
}

/// Whether a request's work should stop: its time limit has passed, its client has gone, or the server is
/// stopping. Work checks it at its boundaries (each frame of a video) and ends there.
public final class Cancellation: @unchecked Sendable {
    private let lock = NSLock()
    private var cancelled = false
    private let clientGone: @Sendable () -> Bool

    public init(clientGone: @escaping @Sendable () -> Bool = { false }) { self.clientGone = clientGone }

    public var isCancelled: Bool { lock.withLock { cancelled } || clientGone() }

    public func cancel() { lock.withLock { cancelled = true } }
}

/// Watches a connection for its client leaving: the input closed (the client shut its side or went away) or
/// the channel gone. Read from any thread.
final class ClientWatch: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    // Parts are passed on as they come (never unwrapped here), whatever their type.
    typealias InboundIn = NIOAny
    typealias InboundOut = NIOAny

    private let lock = NSLock()
    private var closed = false

    var isGone: Bool { lock.withLock { closed } }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) { context.fireChannelRead(data) }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed { lock.withLock { closed = true } }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        lock.withLock { closed = true }
        context.fireChannelInactive()
    }
}

/// The request context of `lookout serve`: Hummingbird's, and the connection the request came on (to tell
/// whether its client is still there).
public struct ServerRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }

    /// A check of whether this request's client has left (its connection's input closed or the connection gone).
    func clientGone() async -> @Sendable () -> Bool {
        let channel = self.channel
        guard let watch = try? await channel.pipeline.handler(type: ClientWatch.self).get() else {
            return { !channel.isActive }
        }
        return { watch.isGone || !channel.isActive }
    }
}
