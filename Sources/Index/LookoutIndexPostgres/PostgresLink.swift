import Dispatch
import Logging
import LookoutStore
import LookoutSupport
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO

#if canImport(Glibc)
    import Glibc
#endif

/// Where a PostgreSQL index lives: `postgresql://user[:password]@host[:port]/database` (or `postgres://`).
/// The password may also come from `$PGPASSWORD`, the user from `$PGUSER` or `$USER`. The options
/// `?sslmode=…&sslrootcert=…&sslcert=…&sslkey=…` choose the encryption as libpq's do (``PostgresSecurity``;
/// default `prefer`).
public struct PostgresAddress: Sendable, Equatable {
    public var user: String
    public var password: String?
    public var host: String
    public var port: Int
    public var database: String
    public var security: PostgresSecurity

    public init(
        user: String, password: String?, host: String, port: Int, database: String,
        security: PostgresSecurity = PostgresSecurity()
    ) {
        self.user = user
        self.password = password
        self.host = host
        self.port = port
        self.database = database
        self.security = security
    }

    /// Whether `text` names a PostgreSQL database (by its scheme).
    public static func isAddress(_ text: String) -> Bool { IndexAddress.isPostgres(text) }

    /// Reads a URL; the error says which part is wrong.
    public init(
        url text: String, environment: (String) -> String? = { getenv($0).map { String(cString: $0) } },
        fileExists: (String) -> Bool = { access($0, F_OK) == 0 }
    )
        throws(IndexError)
    {
        func fail(_ problem: String) -> IndexError {
            IndexError(
                path: Self.redacted(text), kind: .noIndex,
                problem: "\(problem) (expected postgresql://user[:password]@host[:port]/database)")
        }
        guard let schemeEnd = text.range(of: "://"), Self.isAddress(text) else {
            throw fail("not a postgresql:// URL")
        }
        var rest = Substring(text[schemeEnd.upperBound...])
        var options = Substring("")
        if let question = rest.firstIndex(of: "?") {
            options = rest[rest.index(after: question)...]
            rest = rest[..<question]
        }
        guard let slash = rest.firstIndex(of: "/") else { throw fail("no database name") }
        let database = try Self.decoded(rest[rest.index(after: slash)...], fail)
        guard !database.isEmpty else { throw fail("no database name") }
        var authority = rest[..<slash]
        var user: String?
        var password: String?
        if let at = authority.lastIndex(of: "@") {
            let credentials = authority[..<at]
            authority = authority[authority.index(after: at)...]
            if let colon = credentials.firstIndex(of: ":") {
                user = try Self.decoded(credentials[..<colon], fail)
                password = try Self.decoded(credentials[credentials.index(after: colon)...], fail)
            } else {
                user = try Self.decoded(credentials, fail)
            }
        }
        var host = String(authority)
        var port = 5432
        if authority.hasPrefix("[") {  // [IPv6]:port
            guard let close = authority.firstIndex(of: "]") else { throw fail("an unclosed [ in the host") }
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") {
                guard let number = Int(after.dropFirst()), (1...65535).contains(number) else {
                    throw fail("the port is not a number from 1 to 65535")
                }
                port = number
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            guard let number = Int(authority[authority.index(after: colon)...]), (1...65535).contains(number) else {
                throw fail("the port is not a number from 1 to 65535")
            }
            port = number
        }
        guard !host.isEmpty else { throw fail("no host") }
        var settings: [String: String] = [:]
        for option in options.split(separator: "&") {
            let pair = option.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, PostgresSecurity.optionNames.contains(String(pair[0])) else {
                throw fail(
                    "unknown option \"\(option)\" (the options taken are "
                        + PostgresSecurity.optionNames.map { $0 + "=" }.joined(separator: ", ") + ")")
            }
            settings[String(pair[0])] = try Self.decoded(pair[1], fail)
        }
        guard let name = user ?? environment("PGUSER") ?? environment("USER"), !name.isEmpty else {
            throw fail("no user name (in the URL, or $PGUSER)")
        }
        let security = try PostgresSecurity(
            options: settings, environment: environment, fileExists: fileExists,
            fail: { IndexError(path: Self.redacted(text), kind: .noIndex, problem: $0) })
        self.init(
            user: name, password: password ?? environment("PGPASSWORD"), host: host, port: port, database: database,
            security: security)
    }

    private static func decoded(_ part: Substring, _ fail: (String) -> IndexError) throws(IndexError) -> String {
        var bytes: [UInt8] = []
        var index = part.utf8.startIndex
        let utf8 = part.utf8
        while index < utf8.endIndex {
            let byte = utf8[index]
            if byte == UInt8(ascii: "%") {
                let first = utf8.index(after: index)
                guard first < utf8.endIndex, utf8.index(after: first) < utf8.endIndex,
                    let value = UInt8(String(part[first..<utf8.index(first, offsetBy: 2)]), radix: 16)
                else { throw fail("a broken %-escape") }
                bytes.append(value)
                index = utf8.index(first, offsetBy: 2)
            } else {
                bytes.append(byte)
                index = utf8.index(after: index)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The URL with its password replaced by `***`, for messages.
    public static func redacted(_ text: String) -> String { URLText.redacted(text) }

    /// The address as a URL without the password, for messages.
    public var description: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "postgresql://\(user)@\(shownHost):\(port)/\(database)"
    }
}

/// Connections to the server, used synchronously: every call blocks until the server answers. A bounded pool:
/// a call takes an idle connection, or opens one while fewer than ``maximumConnections`` are open, or waits
/// for one, so no more than that many are ever open however many threads call (the server's threads for
/// `serve`, the lease keeper beside a worker). When a connection is lost (the server restarted, the backend
/// was terminated, the network dropped), a call reconnects and runs its statement again, for up to
/// ``reconnectFor`` seconds; the statements Lookout sends are single statements (atomic on the server) whose
/// repetition does no harm, and what needs one session (a session-level setting, an advisory lock) runs in
/// ``withSession(_:)``, repeated whole.
final class PostgresLink: @unchecked Sendable {
    let address: PostgresAddress
    /// How long a call keeps trying to reconnect before it gives up (seconds).
    var reconnectFor: Double = 120
    /// The most connections open at once.
    let maximumConnections: Int
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let logger: Logger
    private let lock = NIOLock()
    /// Open connections no call is using.
    private var idle: [PostgresConnection] = []
    /// One permit per connection that may be open: taken while a call uses a connection.
    private let permits: DispatchSemaphore
    /// The connection each thread inside ``withSession(_:)`` holds (by `pthread_self`), and the error of its
    /// last failed statement (what decides whether the session is repeated).
    private final class Session {
        let connection: PostgresConnection
        var failure: (any Error)?
        init(_ connection: PostgresConnection) { self.connection = connection }
    }
    private var sessions: [UInt: Session] = [:]
    private var connectionCount = 0
    private let tlsContext: NIOSSLContext?
    /// The TLS version and cipher of the last connection made, nil while it is not encrypted.
    private(set) var encryption: (version: String, cipher: String)?

    /// Connects now: a server that cannot be reached, a refused login or a missing database is an error at
    /// once, not after ``reconnectFor``.
    init(address: PostgresAddress, maximumConnections: Int) throws(IndexError) {
        self.address = address
        self.maximumConnections = max(maximumConnections, 1)
        permits = DispatchSemaphore(value: self.maximumConnections)
        var logger = Logger(label: "lookout.postgres")
        logger.logLevel = .critical
        self.logger = logger
        do {
            tlsContext = try address.security.context(host: address.host)
        } catch {
            try? group.syncShutdownGracefully()
            throw IndexError(path: address.description, kind: .noIndex, problem: error.problem)
        }
        do {
            let connection = try acquire()
            release(connection)
        } catch {
            try? group.syncShutdownGracefully()
            throw IndexError(
                path: address.description, kind: .noIndex, problem: "cannot connect: \(describeConnectFailure(error))")
        }
    }

    /// What a failed connection means: TLS (a certificate that did not verify, a server without TLS), a
    /// server that wants TLS where `sslmode=disable` forbids it, or the server's own words.
    func describeConnectFailure(_ error: any Error) -> String {
        let security = address.security
        if let sentence = PostgresSecurity.explain(Self.describe(error), host: address.host, security: security) {
            return sentence
        }
        if Self.refusesPlainConnections(error) && security.mode == .disable {
            return Self.describe(error)
                + ": the server accepts only encrypted connections, and sslmode=disable forbids them "
                + "(use sslmode=prefer, the default, or require)"
        }
        return Self.describe(error)
    }

    /// Whether the server refused a connection because it was not encrypted (pg_hba.conf has only
    /// `hostssl` lines for it: "no pg_hba.conf entry for host …, no encryption").
    static func refusesPlainConnections(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError, let info = error.serverInfo else { return false }
        return info[.sqlState] == "28000" && (info[.message] ?? "").contains("no encryption")
    }

    deinit {
        let open = lock.withLock { idle }
        for connection in open { _ = try? connection.close().wait() }
        try? group.syncShutdownGracefully()
    }

    /// A connection for one call: an idle one, or a new one while fewer than the maximum are open (else it
    /// waits for one to come back).
    private func acquire() throws -> PostgresConnection {
        permits.wait()
        while let connection = lock.withLock({ idle.popLast() }) {
            if !connection.isClosed { return connection }
        }
        do {
            return try connect()
        } catch {
            permits.signal()
            throw error
        }
    }

    /// Gives a connection back: kept for the next call, or closed when it failed.
    private func release(_ connection: PostgresConnection, failed: Bool = false) {
        if failed || connection.isClosed {
            _ = try? connection.close().wait()
        } else {
            lock.withLock { idle.append(connection) }
        }
        permits.signal()
    }

    private func connect() throws -> PostgresConnection {
        let fresh: PostgresConnection
        switch (address.security.mode, tlsContext) {
        case (.allow, let context?):
            // libpq's `allow`: plain first, encrypted only when the server refuses plain connections.
            do {
                fresh = try open(tls: .disable)
            } catch  where Self.refusesPlainConnections(error) {
                fresh = try open(tls: .require(context))
            }
        case (.prefer, let context?): fresh = try open(tls: .prefer(context))
        case (_, let context?): fresh = try open(tls: .require(context))
        case (_, nil): fresh = try open(tls: .disable)
        }
        do {
            _ = try fresh.query("SET application_name = 'lookout'", logger: logger).wait()
            // The server's own view of the connection's encryption (pg_stat_ssl), for `index --status`.
            let rows = try fresh.query(
                "SELECT ssl, coalesce(version, ''), coalesce(cipher, '') FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                logger: logger
            ).wait()
            var seen: (String, String)?
            for row in rows {
                let (ssl, version, cipher) = try row.decode((Bool, String, String).self)
                if ssl { seen = (version, cipher) }
            }
            lock.withLock { self.encryption = seen }
        } catch {
            _ = try? fresh.close().wait()
            throw error
        }
        return fresh
    }

    private func open(tls: PostgresConnection.Configuration.TLS) throws -> PostgresConnection {
        var configuration = PostgresConnection.Configuration(
            host: address.host, port: address.port, username: address.user, password: address.password,
            database: address.database, tls: tls)
        configuration.options.connectTimeout = .seconds(10)
        let id = lock.withLock { () -> Int in
            connectionCount += 1
            return connectionCount
        }
        return try PostgresConnection.connect(on: group.next(), configuration: configuration, id: id, logger: logger)
            .wait()
    }

    /// The connection's encryption in words: the mode asked for and what the server reports.
    var securityDescription: String {
        let security = address.security
        let checked =
            security.verifiesHost
            ? ", the certificate verified for host \(address.host)"
            : security.verifiesCertificate ? ", the certificate verified (not the host name)" : ""
        guard let (version, cipher) = lock.withLock({ encryption }) else {
            return "sslmode=\(security.mode.rawValue): not encrypted"
        }
        return "sslmode=\(security.mode.rawValue): encrypted (\(version), \(cipher))\(checked)"
    }

    /// Runs one statement and collects its rows, reconnecting and repeating it when the connection is lost.
    /// Inside ``withSession(_:)`` it runs on the session's connection (and a lost connection repeats the
    /// whole session).
    @discardableResult
    func query(_ sql: String, _ binds: PostgresBindings = PostgresBindings()) throws(IndexError) -> [PostgresRow] {
        func run(_ connection: PostgresConnection) throws -> [PostgresRow] {
            Array(try connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger).wait())
        }
        if let session = lock.withLock({ sessions[UInt(pthread_self())] }) {
            do {
                return try run(session.connection)
            } catch {
                session.failure = error
                throw IndexError(path: address.description, problem: Self.describe(error))
            }
        }
        return try withConnection(run)
    }

    /// Runs `body` with every ``query(_:_:)`` it makes on this thread on one connection (one server
    /// session: session settings and advisory locks hold across its statements). A lost connection repeats
    /// `body` on a new one, as a lost statement is repeated.
    func withSession<T>(_ body: () throws(IndexError) -> T) throws(IndexError) -> T {
        let me = UInt(pthread_self())
        if lock.withLock({ sessions[me] }) != nil { return try body() }  // already in one
        return try withConnection { connection in
            let session = Session(connection)
            lock.withLock { sessions[me] = session }
            defer { _ = lock.withLock { sessions.removeValue(forKey: me) } }
            do {
                return try body()
            } catch {
                // The statement's own error when one failed (a lost connection repeats the session).
                if let failure = session.failure, Self.isTransient(failure) { throw failure }
                throw error
            }
        }
    }

    /// Runs `body` on a pooled connection; when the connection is lost, on a new one after a pause, for up to
    /// ``reconnectFor`` seconds.
    private func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws(IndexError) -> T {
        var waited = 0.0
        var pause = 0.1
        while true {
            var connection: PostgresConnection?
            do {
                connection = try acquire()
                let result = try body(connection!)
                release(connection!)
                return result
            } catch {
                if let connection { release(connection, failed: Self.isTransient(error)) }
                guard Self.isTransient(error), waited < reconnectFor else {
                    if let error = error as? IndexError { throw error }
                    throw IndexError(path: address.description, problem: Self.describe(error))
                }
                usleep(UInt32(pause * 1_000_000))
                waited += pause
                pause = min(pause * 2, 2)
            }
        }
    }

    /// Whether `error` is the connection's (lost, refused, the server shutting down or starting) rather than
    /// the statement's: then the statement is worth repeating on a new connection.
    static func isTransient(_ error: any Error) -> Bool {
        if let error = error as? PSQLError {
            if let state = error.serverInfo?[.sqlState] {
                // 08: connection exceptions; 57P01–57P03: admin shutdown, crash shutdown, cannot connect now;
                // 40001/40P01: serialization failure, deadlock (the statement may simply run again).
                return state.hasPrefix("08") || ["57P01", "57P02", "57P03", "40001", "40P01"].contains(state)
            }
            return [.serverClosedConnection, .clientClosedConnection, .connectionError, .uncleanShutdown]
                .contains(error.code)
        }
        // Socket-level failures (connection refused while the server restarts, resets).
        return error is IOError || error is ChannelError || "\(type(of: error))".contains("Connection")
    }

    /// The server's message (and SQL state) for a failed statement, or the connection problem.
    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let info = error.serverInfo, let message = info[.message] {
                let state = info[.sqlState].map { " (SQLSTATE \($0))" } ?? ""
                return message + state
            }
            if let underlying = error.underlying { return "\(error.code): \(describe(underlying))" }
            return "\(error.code)"
        }
        return "\(error)"
    }
}

extension PostgresRow {
    /// The cell at `column` as `T` (NULL as nil for optional `T`).
    func value<T: PostgresDecodable>(_ column: Int, as type: T.Type = T.self) throws(IndexError) -> T {
        do {
            return try makeRandomAccess()[column].decode(T.self)
        } catch {
            throw IndexError(path: "postgresql", problem: "unexpected value in column \(column): \(error)")
        }
    }
}
