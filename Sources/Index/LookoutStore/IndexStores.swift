import LookoutSupport
import Synchronization

/// Opens an index store from where it lives, through a registry keyed by the URL's scheme: a module that
/// provides a store registers the schemes it opens (`PostgresIndexStore` registers `postgresql` and `postgres`);
/// anything that is not a URL is an SQLite file's path. A new store is a module with a type conforming to
/// ``IndexStore`` and one ``register(_:_:)`` call.
public enum IndexStores {
    /// How a store is opened: read-only, and for stores reached over a network how many connections they may
    /// open and whether the indexes opened for one location in this process share them.
    public struct Options: Sendable {
        public var readOnly: Bool
        public var connections: Int?
        public var sharedConnections: Bool

        public init(readOnly: Bool = false, connections: Int? = nil, sharedConnections: Bool = false) {
            (self.readOnly, self.connections, self.sharedConnections) = (readOnly, connections, sharedConnections)
        }
    }

    public typealias Opener = @Sendable (_ location: String, _ options: Options) throws(IndexError) -> any IndexStore

    private static let openers = Mutex<[String: Opener]>([:])

    /// Makes `schemes` (`postgresql`) open through `opener`. Registering a scheme again replaces its opener.
    public static func register(_ schemes: [String], _ opener: @escaping Opener) {
        openers.withLock { table in for scheme in schemes { table[scheme.lowercased()] = opener } }
    }

    /// The scheme of a URL (`postgresql` for `postgresql://…`), nil for a path.
    public static func scheme(of location: String) -> String? {
        let characters = Array(location)
        guard let end = characters.indices.first(where: { characters[$0...].starts(with: "://") }) else {
            return nil
        }
        let scheme = String(characters[..<end])
        guard let first = scheme.first, first.isLetter,
            scheme.allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) })
        else { return nil }
        return scheme.lowercased()
    }

    /// Whether a store is registered for `location`'s scheme.
    public static func opens(_ location: String) -> Bool {
        guard let scheme = scheme(of: location) else { return true }
        return openers.withLock { $0[scheme] } != nil
    }

    /// The store at `location`: the opener registered for its scheme, or an SQLite file.
    public static func open(_ location: String, options: Options = Options()) throws(IndexError) -> any IndexStore {
        guard let scheme = scheme(of: location) else {
            return try SQLiteIndexStore(path: location, readOnly: options.readOnly)
        }
        guard let opener = openers.withLock({ $0[scheme] }) else {
            throw IndexError(
                path: IndexAddress.shown(location),
                problem: "\(scheme):// is not a database Lookout knows; give a file path or a postgresql:// URL")
        }
        return try opener(location, options)
    }
}
