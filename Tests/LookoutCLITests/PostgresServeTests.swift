import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `lookout serve --db postgresql://…` under concurrent searches: the connections it opens stay within its
/// pool (`--db-connections`), as the server itself counts them (pg_stat_activity), and a PostgreSQL restart
/// in the middle of the load is survived (every request answered 200, the same answer as before).
@Suite(.serialized) struct PostgresServeTests {
    /// A value several threads read and change under its lock.
    final class Shared<Value>: @unchecked Sendable {
        private let lock = NSLock()
        private var value: Value
        init(_ value: Value) { self.value = value }
        func with<T>(_ body: (inout Value) -> T) -> T { lock.withLock { body(&value) } }
    }

    /// Runs `statement` through psql connected to the database `postgres` (so that asking adds no session
    /// to `photos`); its one number.
    static func number(_ server: TestPostgres, _ statement: String) -> Int {
        let url = String(server.url.dropLast("photos".count)) + "postgres"
        guard let (status, out, _) = try? TestPostgres.shell([server.bin + "/psql", url, "-qAtX", "-c", statement]),
            status == 0
        else { return -1 }
        return Int(out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    /// Lookout's connections to the server now, by the server's count.
    static func lookoutConnections(_ server: TestPostgres) -> Int {
        number(server, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'lookout'")
    }

    /// Sessions ever established to the database `photos` (pg_stat_database; after the stats are flushed).
    static func sessions(_ server: TestPostgres) -> Int {
        number(
            server, "SELECT pg_stat_force_next_flush(); SELECT sessions FROM pg_stat_database WHERE datname = 'photos'")
    }

    /// `count` search requests from `clients` threads at once; the statuses and bodies.
    static func load(_ url: String, clients: Int, each: Int) -> [(Int, [UInt8])] {
        let replies = Shared<[(Int, [UInt8])]>([])
        DispatchQueue.concurrentPerform(iterations: clients) { client in
            for k in 0..<each {
                let query = ["green%20circle", "green%20star"][(client + k) % 2]
                let reply = try? ServeCommandTests.request("GET", url + "api/v1/search?q=\(query)&conf=0.01")
                replies.with { $0.append((reply?.status ?? -1, reply?.body ?? [])) }
            }
        }
        return replies.with { $0 }
    }

    @Test func aPoolOfTwoUnderLoadAndARestart() throws {
        let server = try TestPostgres()
        let photos = try CLI.scratch("pool-photos")
        defer { CLI.remove(photos) }
        for k in 0..<4 {
            let name = String(format: "scene-%04d.jpg", k)
            try FileManager.default.copyItem(atPath: CLI.root + "/examples/scenes/" + name, toPath: photos + "/" + name)
        }
        let indexed = try CLI.run(["index", photos, "--db", server.url, "--imgsz", "320", "--plain"])
        #expect(indexed.status == 0, "\(indexed.stderr)")
        #expect(Self.lookoutConnections(server) == 0, "the indexer's connections are closed")

        let sessionsBefore = Self.sessions(server)
        let serve = try ServeCommandTests.Server(["--db", server.url, "--db-connections", "2", "--imgsz", "320"])
        var expected: [String: [UInt8]] = [:]
        for query in ["green%20circle", "green%20star"] {
            let reply = try ServeCommandTests.request("GET", serve.url + "api/v1/search?q=\(query)&conf=0.01")
            #expect(
                reply.status == 200 && reply.json["results"]!.count > 0,
                "\(String(decoding: reply.body, as: UTF8.self))")
            expected[query] = reply.body
        }
        let bodies = Set(expected.values)

        // 8 clients at once, 48 searches; the server's count of Lookout's connections sampled meanwhile.
        let seen = Shared((most: 0, samples: 0, done: false))
        let sampler = Thread { [server] in
            while !seen.with({ $0.done }) {
                let now = Self.lookoutConnections(server)
                seen.with {
                    $0.most = max($0.most, now)
                    $0.samples += 1
                }
            }
        }
        sampler.start()
        let replies = Self.load(serve.url, clients: 8, each: 6)
        seen.with { $0.done = true }
        while !sampler.isFinished { usleep(10_000) }
        let (most, samples, _) = seen.with { $0 }
        #expect(replies.count == 48 && replies.allSatisfy { $0.0 == 200 }, "\(replies.map(\.0))")
        #expect(replies.allSatisfy { bodies.contains($0.1) }, "every answer as the first")
        #expect(most >= 1 && most <= 2, "at most 2 connections (seen \(most) over \(samples) samples)")
        // Kept open between requests: 50 searches on at most 2 sessions ever opened (a connection per request
        // would be 50).
        let opened = Self.sessions(server) - sessionsBefore
        #expect(sessionsBefore > 0 && opened >= 1 && opened <= 2, "\(opened) sessions opened by serve")
        #expect(Self.lookoutConnections(server) <= 2, "the pool stays within 2 after the load")

        // The server restarted in the middle of a load: every request still answered, the same.
        let restartFailure = Shared<String?>(nil)
        let restarter = Thread { [server] in
            usleep(300_000)
            do { try server.restart() } catch { restartFailure.with { $0 = "\(error)" } }
        }
        restarter.start()
        let during = Self.load(serve.url, clients: 4, each: 8)
        while !restarter.isFinished { usleep(10_000) }
        let restartError = restartFailure.with { $0 }
        #expect(restartError == nil, "\(restartError ?? "")")
        #expect(during.allSatisfy { $0.0 == 200 }, "\(during.map(\.0))")
        #expect(during.allSatisfy { bodies.contains($0.1) }, "every answer as before the restart")
        let after = try ServeCommandTests.request("GET", serve.url + "api/v1/search?q=green%20circle&conf=0.01")
        #expect(after.status == 200 && after.body == expected["green%20circle"])
        #expect(Self.lookoutConnections(server) <= 2)
        #expect(serve.stop().status == 0)
    }
}

extension TestPostgres: @unchecked Sendable {}
