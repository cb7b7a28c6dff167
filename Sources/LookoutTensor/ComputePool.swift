import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A persistent pool of worker threads for data-parallel loops.
///
/// Workers sleep on a condition variable between jobs (they never spin), and a job's iterations are
/// handed out in chunks from a shared atomic counter, so a worker that is descheduled — the second
/// vCPU of these machines sometimes is, for minutes — simply takes fewer chunks. The calling thread
/// works too. One job runs at a time; `parallelFor` may be called from any thread.
public final class ComputePool: @unchecked Sendable {
    /// The pool for the whole process, one thread per available CPU.
    public static let shared = ComputePool(threads: ComputePool.availableCPUs())

    public let threadCount: Int

    private let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let wake = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private let done = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private let submit = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var generation = 0
    private var job: Job?
    private var activeWorkers = 0

    private final class Job: @unchecked Sendable {
        let count: Int
        let chunk: Int
        let body: (Range<Int>) -> Void
        let next = Atomic<Int>(0)

        init(count: Int, chunk: Int, body: @escaping (Range<Int>) -> Void) {
            self.count = count
            self.chunk = chunk
            self.body = body
        }

        func work() {
            while true {
                let start = next.add(chunk, ordering: .relaxed).oldValue
                guard start < count else { return }
                body(start..<min(count, start + chunk))
            }
        }
    }

    public init(threads: Int) {
        threadCount = max(1, threads)
        // Work is split here; OpenBLAS threads on top of the pool's would oversubscribe the CPUs.
        BLAS.setThreadCount(1)
        pthread_mutex_init(lock, nil)
        pthread_mutex_init(submit, nil)
        pthread_cond_init(wake, nil)
        pthread_cond_init(done, nil)
        for _ in 1..<threadCount {
            let box = Unmanaged.passRetained(self)
            var thread = pthread_t()
            pthread_create(
                &thread, nil,
                { argument in
                    let pool = Unmanaged<ComputePool>.fromOpaque(argument!).takeRetainedValue()
                    pool.workerLoop()
                    return nil
                }, box.toOpaque())
            pthread_detach(thread)
        }
    }

    /// Runs `body` over `0..<count` in chunks of `chunk` iterations, in parallel; returns when all are done.
    public func parallelFor(_ count: Int, chunk: Int = 1, _ body: @escaping (Range<Int>) -> Void) {
        guard count > 0 else { return }
        let chunk = max(1, chunk)
        if threadCount == 1 || count <= chunk {
            body(0..<count)
            return
        }
        pthread_mutex_lock(submit)
        defer { pthread_mutex_unlock(submit) }
        let job = Job(count: count, chunk: chunk, body: body)
        pthread_mutex_lock(lock)
        self.job = job
        generation += 1
        activeWorkers = threadCount - 1
        pthread_cond_broadcast(wake)
        pthread_mutex_unlock(lock)
        job.work()
        pthread_mutex_lock(lock)
        while activeWorkers > 0 { pthread_cond_wait(done, lock) }
        self.job = nil
        pthread_mutex_unlock(lock)
    }

    private func workerLoop() {
        var seen = 0
        while true {
            pthread_mutex_lock(lock)
            while generation == seen { pthread_cond_wait(wake, lock) }
            seen = generation
            let current = job
            pthread_mutex_unlock(lock)
            current?.work()
            pthread_mutex_lock(lock)
            activeWorkers -= 1
            if activeWorkers == 0 { pthread_cond_signal(done) }
            pthread_mutex_unlock(lock)
        }
    }

    /// Online CPUs, or `$LOOKOUT_THREADS` when set.
    public static func availableCPUs() -> Int {
        if let text = getenv("LOOKOUT_THREADS").map({ String(cString: $0) }), let value = Int(text), value > 0 {
            return value
        }
        return max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }
}
