import LookoutIndex

/// Opens the index a `--db` value names: a PostgreSQL URL (`postgresql://…` or `postgres://…`), or the
/// path of an SQLite file.
public enum IndexLocation {
    /// Whether `location` names a PostgreSQL database.
    public static func isPostgres(_ location: String) -> Bool { PostgresAddress.isAddress(location) }

    public static func open(_ location: String, readOnly: Bool = false) throws(IndexError) -> PhotoIndex {
        if isPostgres(location) {
            return PhotoIndex(
                store: try PostgresIndexStore(address: try PostgresAddress(url: location), readOnly: readOnly))
        }
        return try PhotoIndex(path: location, readOnly: readOnly)
    }

    /// `location` fit for messages (a URL's password hidden).
    public static func shown(_ location: String) -> String {
        isPostgres(location) ? PostgresAddress.redacted(location) : location
    }
}
