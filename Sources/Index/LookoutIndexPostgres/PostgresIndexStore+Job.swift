import Dispatch
import LookoutStore
import NIOConcurrencyHelpers
import PostgresNIO

#if canImport(Glibc)
    import Glibc
#endif

/// The shared job: `lookout.work` holds the photos waiting to be indexed. A worker claims one with
/// `FOR UPDATE SKIP LOCKED` (two workers never wait for, or take, the same row), which sets its name and a
/// lease on the row; ``LeaseKeeper`` renews the lease while the photo is computed, and recording the photo
/// deletes the row in the same statement. A worker killed mid-photo leaves its row with a lease that runs
/// out, and the next claim by any worker takes it.
extension PostgresIndexStore: SharedJobStore {
    public func enqueue(_ photos: [FoundPhoto], model key: String) throws(IndexError) {
        for start in stride(from: 0, to: photos.count, by: 5_000) {
            let part = photos[start..<min(start + 5_000, photos.count)]
            var binds = PostgresBindings()
            binds.append(part.map(\.path))
            binds.append(part.map(\.size))
            binds.append(part.map(\.mtime))
            binds.append(key)
            try link.query(
                """
                INSERT INTO lookout.work AS w (path, size, mtime_ns, model)
                SELECT p, s, m, $4 FROM unnest($1::text[], $2::int8[], $3::int8[]) AS t(p, s, m)
                ON CONFLICT (path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns, model = excluded.model
                WHERE (w.size, w.mtime_ns, w.model) IS DISTINCT FROM (excluded.size, excluded.mtime_ns, excluded.model)
                """, binds)
        }
    }

    public func claimNext(
        under prefix: String, model key: String, worker: IndexWorker, lease: Double
    )
        throws(IndexError) -> FoundPhoto?
    {
        let name = LeaseKeeper.name(worker)
        while true {
            var binds = PostgresBindings()
            binds.append(name)
            binds.append(lease)
            binds.append(prefix)
            binds.append(key)
            // A row this worker holds already comes first: a claim whose answer was lost with the connection.
            guard
                let row = try link.query(
                    """
                    UPDATE lookout.work w SET worker = $1, expires = now() + make_interval(secs => $2),
                      claims = w.claims + 1
                    WHERE w.path = (
                        SELECT path FROM lookout.work
                        WHERE starts_with(path, $3) AND model = $4
                          AND (worker IS NULL OR expires < now() OR worker = $1)
                        ORDER BY worker IS DISTINCT FROM $1, path
                        LIMIT 1 FOR UPDATE SKIP LOCKED)
                    RETURNING w.path, w.size, w.mtime_ns, EXISTS (
                        SELECT 1 FROM lookout.files f
                        WHERE f.path = w.path AND f.size = w.size AND f.mtime_ns = w.mtime_ns AND f.model = w.model
                          AND (f.status = 'failed' OR EXISTS (
                            SELECT 1 FROM lookout.images i WHERE i.hash = f.hash AND i.model = f.model)))
                    """, binds
                ).first
            else { return nil }
            let photo = FoundPhoto(
                path: try row.value(0, as: String.self), size: try row.value(1, as: Int64.self),
                mtime: try row.value(2, as: Int64.self))
            if try row.value(3, as: Bool.self) {
                // Recorded by another worker after this one was queued: nothing left to do.
                var done = PostgresBindings()
                done.append(photo.path)
                done.append(name)
                try link.query("DELETE FROM lookout.work WHERE path = $1 AND worker = $2", done)
                continue
            }
            leases.hold(photo.path, worker: name, lease: lease)
            return photo
        }
    }

    public func jobStatus() throws(IndexError) -> JobStatus {
        guard
            let counts = try link.query(
                """
                SELECT (SELECT count(*) FROM lookout.work WHERE worker IS NULL OR expires < now()),
                       (SELECT count(*) FROM lookout.files WHERE status = 'ok'),
                       (SELECT count(*) FROM lookout.files WHERE status = 'failed'),
                       (SELECT count(*) FROM lookout.files WHERE recorded > now() - interval '1 minute')
                """
            ).first
        else { throw IndexError(path: location, problem: "no answer to the status query") }
        let claims = try link.query(
            """
            SELECT path, worker, extract(epoch FROM expires - now())::float8 FROM lookout.work
            WHERE worker IS NOT NULL AND expires >= now() ORDER BY worker, path
            """
        ).map { row throws(IndexError) in
            JobStatus.Claim(
                path: try row.value(0, as: String.self), worker: try row.value(1, as: String.self),
                leaseLeft: try row.value(2, as: Double.self))
        }
        let workers = try link.query(
            """
            SELECT worker FROM lookout.files WHERE recorded > now() - interval '1 minute' AND worker IS NOT NULL
            UNION SELECT worker FROM lookout.work WHERE worker IS NOT NULL AND expires >= now() ORDER BY 1
            """
        ).map { row throws(IndexError) in try row.value(0, as: String.self) }
        return JobStatus(
            waiting: Int(try counts.value(0, as: Int64.self)), inProgress: claims,
            indexedFiles: Int(try counts.value(1, as: Int64.self)),
            failedFiles: Int(try counts.value(2, as: Int64.self)),
            lastMinute: Int(try counts.value(3, as: Int64.self)), activeWorkers: workers)
    }
}

/// Keeps the leases of the photos a worker holds from running out while it computes them: a thread renews
/// each every third of its lease, until the photo is recorded or released. (A lease renewed in vain — the
/// row was taken over after a long stall — changes nothing: the update matches only the holder's row.)
final class LeaseKeeper: @unchecked Sendable {
    private let link: PostgresLink
    private let lock = NIOLock()
    private var held: [String: (worker: String, lease: Double, renewed: Double)] = [:]
    private var running = false
    private(set) var workerName = ""

    init(link: PostgresLink) { self.link = link }

    static func name(_ worker: IndexWorker) -> String { "\(worker.host):\(worker.pid):\(worker.run)" }

    func hold(_ path: String, worker: String, lease: Double) {
        let start = lock.withLock { () -> Bool in
            held[path] = (worker, lease, Self.now())
            workerName = worker
            defer { running = true }
            return !running
        }
        if start {
            DispatchQueue.global().async { [weak self] in
                while let keeper = self, keeper.renewDue() { usleep(50_000) }
            }
        }
    }

    func drop(_ path: String) { lock.withLock { _ = held.removeValue(forKey: path) } }

    /// Renews the leases that are a third through; false once nothing is held (the thread then ends).
    private func renewDue() -> Bool {
        let now = Self.now()
        let due = lock.withLock { () -> [(String, String, Double)] in
            if held.isEmpty {
                running = false
                return []
            }
            return held.filter { now - $0.value.renewed >= $0.value.lease / 3 }.map {
                ($0.key, $0.value.worker, $0.value.lease)
            }
        }
        for (path, worker, lease) in due {
            var binds = PostgresBindings()
            binds.append(path)
            binds.append(worker)
            binds.append(lease)
            _ = try? link.query(
                "UPDATE lookout.work SET expires = now() + make_interval(secs => $3) WHERE path = $1 AND worker = $2",
                binds)
            lock.withLock {
                if held[path] != nil { held[path]?.renewed = now }
            }
        }
        return lock.withLock { running }
    }

    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) * 1e-9
    }
}
