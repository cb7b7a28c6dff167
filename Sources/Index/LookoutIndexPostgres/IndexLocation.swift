import LookoutStore
import NIOConcurrencyHelpers

/// Opens the store a `--db` value names, through ``IndexStores`` (the registry keyed by the URL's scheme): this
/// module registers PostgreSQL's schemes (`postgresql://…`, `postgres://…`); a path is an SQLite file.
public enum IndexLocation {
    /// Whether `location` names a PostgreSQL database.
    public static func isPostgres(_ location: String) -> Bool { PostgresAddress.isAddress(location) }

    /// PostgreSQL's schemes in the registry (once; ``open(_:readOnly:connections:sharedConnections:)`` does it).
    public static func register() { _ = registered }

    private static let registered: Void = {
        IndexStores.register(["postgresql", "postgres"]) { location, options throws(IndexError) in
            let address = try PostgresAddress(url: location)
            let connections = options.connections ?? PostgresIndexStore.defaultConnections
            guard options.sharedConnections else {
                return try PostgresIndexStore(address: address, readOnly: options.readOnly, connections: connections)
            }
            let link = try sharedLink(location, address: address, connections: connections)
            return try PostgresIndexStore(link: link, readOnly: options.readOnly)
        }
    }()

    /// Opens the store at `location`. For PostgreSQL, `connections` bounds the connections it opens; with
    /// `sharedConnections`, every index opened for the same URL in this process shares one pool of them (a
    /// server opens the index for each request, on connections kept open between requests).
    public static func open(
        _ location: String, readOnly: Bool = false, connections: Int = PostgresIndexStore.defaultConnections,
        sharedConnections: Bool = false
    ) throws(IndexError) -> any IndexStore {
        register()
        return try IndexStores.open(
            location,
            options: IndexStores.Options(
                readOnly: readOnly, connections: connections, sharedConnections: sharedConnections))
    }

    /// The pool of connections for `location`, made on first use (a failure to connect is not kept: the
    /// next call tries again).
    private static func sharedLink(
        _ location: String, address: PostgresAddress, connections: Int
    )
        throws(IndexError) -> PostgresLink
    {
        if let link = links.withLockedValue({ $0[location] }) { return link }
        let link = try PostgresLink(address: address, maximumConnections: connections)
        return links.withLockedValue { links in
            if let earlier = links[location] { return earlier }
            links[location] = link
            return link
        }
    }

    private static let links = NIOLockedValueBox<[String: PostgresLink]>([:])

    /// `location` fit for messages (a URL's password hidden).
    public static func shown(_ location: String) -> String { IndexAddress.shown(location) }
}
