import LookoutSupport

/// What a `--db` value names, read without connecting to anything: a PostgreSQL URL or an SQLite file. It lives
/// here, not beside the PostgreSQL store, so that a build without the network modules still knows a URL when
/// it sees one (and says it cannot open it) and never prints its password.
public enum IndexAddress {
    /// Whether `text` names a PostgreSQL database (`postgresql://…` or `postgres://…`).
    public static func isPostgres(_ text: String) -> Bool {
        text.hasPrefix("postgresql://") || text.hasPrefix("postgres://")
    }

    /// `location` fit for messages: a URL's password hidden, a file path as it is.
    public static func shown(_ location: String) -> String {
        isPostgres(location) ? URLText.redacted(location) : location
    }
}
