import CSQLite

/// Why the index could not be opened, updated or searched: the file (database or folder), the reason in a
/// sentence, and its ``kind`` for callers that handle them apart.
public struct IndexError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Sendable, Equatable {
        /// No index at that place (nothing indexed yet).
        case noIndex
        /// The folder to index cannot be opened or read, or is not a folder.
        case folder
        /// The index was written by another schema version.
        case schemaVersion
        /// An update with other settings than the index's would drop other folders' photos.
        case settingsChanged
        /// The storage engine failed (SQLite's message).
        case storage
        /// A class list (`--classes`) cannot be read or holds no names.
        case classes
    }

    public let path: String
    public let kind: Kind
    public let problem: String
    public var description: String { "\(path): \(problem)" }

    public init(path: String, kind: Kind = .storage, problem: String) {
        self.path = path
        self.kind = kind
        self.problem = problem
    }
}

extension String {
    /// The path with `%`, `?` and `#` escaped for an SQLite file URI.
    func replacingPercentEscapes() -> String {
        var out = ""
        for character in self {
            switch character {
            case "%": out += "%25"
            case "?": out += "%3f"
            case "#": out += "%23"
            default: out.append(character)
            }
        }
        return out
    }
}

private let transientDestructor = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// A thin wrapper over the SQLite C API: one connection, prepared statements, transactions.
final class Database {
    let path: String
    private var handle: OpaquePointer?

    /// `immutable`: open read-only without locks or WAL files (for a file this process may not write).
    init(path: String, readOnly: Bool = false, immutable: Bool = false) throws(IndexError) {
        self.path = path
        var flags = readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
        var name = path
        if immutable {
            flags |= SQLITE_OPEN_URI
            let escaped = path.replacingPercentEscapes()
            name = "file:\(escaped)?immutable=1"
        }
        let status = sqlite3_open_v2(name, &handle, flags | SQLITE_OPEN_NOMUTEX, nil)
        guard status == SQLITE_OK else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close(handle)
            handle = nil
            throw IndexError(path: path, problem: "cannot open the index database: \(message)")
        }
        sqlite3_busy_timeout(handle, 5000)
        sqlite3_extended_result_codes(handle, 1)
    }

    deinit { sqlite3_close_v2(handle) }

    func execute(_ sql: String) throws(IndexError) {
        var error: UnsafeMutablePointer<CChar>?
        if sqlite3_exec(handle, sql, nil, nil, &error) != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? lastError
            sqlite3_free(error)
            throw IndexError(path: path, problem: message)
        }
    }

    var lastError: String { String(cString: sqlite3_errmsg(handle)) }

    func prepare(_ sql: String) throws(IndexError) -> Statement {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw IndexError(path: path, problem: lastError)
        }
        return Statement(database: self, handle: statement)
    }

    /// Runs `body` inside BEGIN IMMEDIATE … COMMIT, rolling back when it throws.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    var changes: Int { Int(sqlite3_changes(handle)) }
}

/// A prepared statement. Parameters are 1-based, columns 0-based, as in SQLite.
final class Statement {
    let database: Database
    private let handle: OpaquePointer

    init(database: Database, handle: OpaquePointer) {
        self.database = database
        self.handle = handle
    }

    deinit { sqlite3_finalize(handle) }

    enum Value {
        case integer(Int64)
        case real(Double)
        case text(String)
        case blob([UInt8])
        case null
    }

    @discardableResult
    func bind(_ values: [Value]) -> Statement {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            switch value {
            case .integer(let v): sqlite3_bind_int64(handle, index, v)
            case .real(let v): sqlite3_bind_double(handle, index, v)
            case .text(let v): sqlite3_bind_text(handle, index, v, -1, transientDestructor)
            case .blob(let v):
                v.withUnsafeBytes { raw in
                    _ = sqlite3_bind_blob64(
                        handle, index, raw.baseAddress, sqlite3_uint64(raw.count), transientDestructor)
                }
            case .null: sqlite3_bind_null(handle, index)
            }
        }
        return self
    }

    /// Steps once: true while a row is available.
    func step() throws(IndexError) -> Bool {
        let status = sqlite3_step(handle)
        if status == SQLITE_ROW { return true }
        if status == SQLITE_DONE { return false }
        throw IndexError(path: database.path, problem: database.lastError)
    }

    /// Runs a statement that returns no rows.
    func run(_ values: [Value] = []) throws(IndexError) {
        bind(values)
        while try step() {}
    }

    func integer(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    func real(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }
    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }
    func text(_ column: Int32) -> String {
        guard let pointer = sqlite3_column_text(handle, column) else { return "" }
        return String(cString: pointer)
    }

    /// Calls `body` with the column's bytes, valid only during the call.
    /// Ends the statement's current run (a reused SELECT left on a row would keep its read snapshot open).
    func reset() { sqlite3_reset(handle) }

    func withBlob<R>(_ column: Int32, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let count = Int(sqlite3_column_bytes(handle, column))
        let pointer = sqlite3_column_blob(handle, column)
        return try body(UnsafeRawBufferPointer(start: pointer, count: pointer == nil ? 0 : count))
    }
}
