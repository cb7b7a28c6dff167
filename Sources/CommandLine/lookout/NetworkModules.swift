import ArgumentParser
import LookoutIndex
import LookoutSupport

#if Network
    import LookoutIndexPostgres
#endif

// The modules that talk over a network — `serve` (Hummingbird), PostgreSQL indexes (postgres-nio) and
// `models fetch` (AsyncHTTPClient) — are built with the package trait Network, on by default. The README's
// first command leaves them out (`--disable-default-traits`) so that a newcomer's first detection waits only
// for what `detect` needs; such a build names what it left out and how to get it.

/// Opens the index a `--db` value names through the store registry (``IndexStores``, keyed by the URL's
/// scheme): an SQLite file, or a PostgreSQL database, whose schemes the network modules register.
enum IndexOpening {
    static func open(_ location: String, readOnly: Bool) throws -> PhotoIndex {
        #if Network
            IndexLocation.register()
        #else
            if IndexAddress.isPostgres(location) {
                throw LeftOut.error("a PostgreSQL index (\(URLText.redacted(location)))")
            }
        #endif
        return PhotoIndex(store: try IndexStores.open(location, options: IndexStores.Options(readOnly: readOnly)))
    }

    /// How the index's store is reached, for `index --status`: PostgreSQL's TLS state, else "local".
    static func connection(_ index: PhotoIndex) -> String { index.store.connectionDescription }
}

/// A command whose modules this build left out: it takes any arguments and says how to get it.
protocol LeftOutCommand: ParsableCommand {}

enum LeftOut {
    static func configuration(_ name: String, _ what: String) -> CommandConfiguration {
        CommandConfiguration(
            commandName: name, abstract: "\(what) (not in this build: build with the Network trait, see --help).",
            discussion: """
                This lookout was built with --disable-default-traits (the README's quick start), which leaves out \
                the network modules: serve, PostgreSQL indexes and models fetch. Build the full lookout with \
                `swift build -c release` (or scripts/install), then run .build/release/lookout.
                """)
    }

    static func error(_ what: String) -> LookoutError {
        LookoutError(
            "\(what) needs the network modules, which this build leaves out (it was built with --disable-default-traits, as the README's quick start does). Build the full lookout: swift build -c release (or scripts/install), then run .build/release/lookout."
        )
    }
}
