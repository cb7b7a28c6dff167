import LookoutIndex
import NIOConcurrencyHelpers

/// Opens the index a `--db` value names: a PostgreSQL URL (`postgresql://…` or `postgres://…`), or the
/// path of an SQLite file.
public enum IndexLocation {
    /// Whether `location` names a PostgreSQL database.
    public static func isPostgres(_ location: String) -> Bool { PostgresAddress.isAddress(location) }

    /// Opens the index at `location`. For PostgreSQL, `connections` bounds the connections it opens; with
    /// `sharedConnections`, every index opened for the same URL in this process shares one pool of them (a
    /// server opens the index for each request, on connections kept open between requests).
    public static func open(
        _ location: String, readOnly: Bool = false, connections: Int = PostgresIndexStore.defaultConnections,
        sharedConnections: Bool = false
    ) throws(IndexError) -> PhotoIndex {
        if isPostgres(location) {
            let address = try PostgresAddress(url: location)
            guard sharedConnections else {
                return PhotoIndex(
                    store: try PostgresIndexStore(address: address, readOnly: readOnly, connections: connections))
            }
            let link = try sharedLink(location, address: address, connections: connections)
            return PhotoIndex(store: try PostgresIndexStore(link: link, readOnly: readOnly))
        }
        return try PhotoIndex(path: location, readOnly: readOnly)
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
