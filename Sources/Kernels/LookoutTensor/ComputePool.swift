import CLookoutKernels
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A pool of worker threads for data-parallel loops.
///
/// A job's iterations are handed out in chunks from an atomic counter, so a worker that is descheduled — the
/// second vCPU of these machines sometimes is, for minutes — simply takes fewer chunks. The calling thread works
/// too. Between jobs a worker polls for the next one for a short while (``spinNanoseconds``: a network's layers
/// follow each other within microseconds), then sleeps on a condition variable; a caller wakes sleeping workers
/// only (waking costs a system call, and a woken thread starts tens of microseconds later). A caller waits for
/// its job's last chunks the same way.
///
/// Several threads may submit loops at once (several engines or requests sharing the cores): each loop is
/// a job in a queue, idle workers join the oldest job with chunks left, and each caller returns when its
/// own job is done; no lock is held while a loop runs. A loop started from inside a loop of the same pool
/// runs inline on the calling thread (it would otherwise wait for workers that are busy with its parent).
/// Releasing the last reference to a pool stops its threads.
public final class ComputePool: @unchecked Sendable {
    /// A process-wide pool, one thread per available CPU: the default where no pool is passed.
    public static let shared = ComputePool(threads: ComputePool.availableCPUs())

    public let threadCount: Int
    private let state: State

    /// Feature maps and the kernels' scratch (megabytes per layer) are allocated and freed layer after layer.
    /// With glibc's defaults, freed blocks above its thresholds go back to the kernel (unmapped, or trimmed
    /// off the heap's top) and the next layer faults them in again, zeroed: about 9,000 page faults per
    /// detection of s at 640. Keeping freed memory for reuse (no mmap below 256 MB, no trimming below 1 GB,
    /// the heap grown 64 MB at a time) removes them; the process keeps its peak instead of shrinking after
    /// each photo. `LOOKOUT_KEEP_FREED_MEMORY=0` leaves glibc's defaults (BENCHMARKS.md has both).
    /// Networks call it when they first run, after loading: loading (arrays grown while files are read) is
    /// faster with glibc's defaults, where large blocks are mapped and grow by remapping.
    /// Once per process; ``KernelSettings/keepFreedMemory`` off (`LOOKOUT_KEEP_FREED_MEMORY=0`): never called.
    public static func keepFreedMemory() { _ = keepingFreedMemory }
    private static let keepingFreedMemory: Void = { _ = lookout_keep_freed_memory() }()

    /// What the workers share with the pool; it outlives the pool object until the workers have stopped.
    private final class State: @unchecked Sendable {
        let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        let wake = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        let done = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        var jobs: [Job] = []
        var stopping = false
        var running = 0
        /// Workers waiting on `wake` (changed under the lock).
        var sleepers = 0
        /// Bumped (under the lock) whenever a job is queued or the pool stops: what polling workers watch.
        let generation = Atomic<Int>(0)

        init() {
            pthread_mutex_init(lock, nil)
            pthread_cond_init(wake, nil)
            pthread_cond_init(done, nil)
        }

        deinit {
            pthread_mutex_destroy(lock)
            pthread_cond_destroy(wake)
            pthread_cond_destroy(done)
            lock.deallocate()
            wake.deallocate()
            done.deallocate()
        }
    }

    private final class Job: @unchecked Sendable {
        let count: Int
        let chunk: Int
        let body: (Range<Int>) -> Void
        let next = Atomic<Int>(0)
        /// Workers inside `work()` (changed under the state's lock; read without it by a polling caller).
        let participants = Atomic<Int>(0)

        init(count: Int, chunk: Int, body: @escaping (Range<Int>) -> Void) {
            self.count = count
            self.chunk = chunk
            self.body = body
        }

        var hasChunksLeft: Bool { next.load(ordering: .relaxed) < count }

        func work(in state: State) {
            let outer = ComputePool.currentState()
            ComputePool.setCurrentState(state)
            defer { ComputePool.setCurrentState(outer) }
            while true {
                let start = next.add(chunk, ordering: .relaxed).oldValue
                guard start < count else { return }
                body(start..<min(count, start + chunk))
            }
        }
    }

    public init(threads: Int) {
        threadCount = max(1, threads)
        state = State()
        for _ in 1..<threadCount {
            let box = Unmanaged.passRetained(state)
            var thread = pthread_t()
            pthread_create(
                &thread, nil,
                { argument in
                    let state = Unmanaged<State>.fromOpaque(argument!).takeRetainedValue()
                    ComputePool.workerLoop(state)
                    return nil
                }, box.toOpaque())
            pthread_detach(thread)
        }
        pthread_mutex_lock(state.lock)
        while state.running < threadCount - 1 { pthread_cond_wait(state.done, state.lock) }
        pthread_mutex_unlock(state.lock)
    }

    deinit {
        pthread_mutex_lock(state.lock)
        state.stopping = true
        state.generation.add(1, ordering: .releasing)
        pthread_cond_broadcast(state.wake)
        while state.running > 0 { pthread_cond_wait(state.done, state.lock) }
        pthread_mutex_unlock(state.lock)
    }

    /// Worker threads of all pools running now in this process.
    public static var workersInProcess: Int { liveWorkers.load(ordering: .acquiring) }
    private static let liveWorkers = Atomic<Int>(0)

    /// This pool's worker threads running now.
    public var runningWorkers: Int {
        pthread_mutex_lock(state.lock)
        defer { pthread_mutex_unlock(state.lock) }
        return state.running
    }

    /// Wall time spent in loops that ran across threads, summed over all pools (nanoseconds): the rest of a
    /// caller's time ran on its thread alone (benchmarks report the share).
    public static let parallelNanoseconds = Atomic<Int>(0)

    static func monotonicNanoseconds() -> Int {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int(time.tv_sec) * 1_000_000_000 + Int(time.tv_nsec)
    }

    /// Runs `body` over `0..<count` in chunks of `chunk` iterations, in parallel; returns when all are done.
    public func parallelFor(_ count: Int, chunk: Int = 1, _ body: @escaping (Range<Int>) -> Void) {
        guard count > 0 else { return }
        let chunk = max(1, chunk)
        if threadCount == 1 || count <= chunk || Self.currentState() === state {
            // The same ranges as the threads would take: a body whose arithmetic depends on its range's size
            // (a GEMM over it) then gives the same bits on one thread as on several.
            for start in stride(from: 0, to: count, by: chunk) { body(start..<min(count, start + chunk)) }
            return
        }
        let started = Self.monotonicNanoseconds()
        defer { Self.parallelNanoseconds.add(Self.monotonicNanoseconds() - started, ordering: .relaxed) }
        let job = Job(count: count, chunk: chunk, body: body)
        pthread_mutex_lock(state.lock)
        state.jobs.append(job)
        state.generation.add(1, ordering: .releasing)
        if state.sleepers > 0 { pthread_cond_broadcast(state.wake) }
        pthread_mutex_unlock(state.lock)
        job.work(in: state)
        // Every chunk is taken, so no worker joins from now on: wait for those inside to finish theirs.
        Self.poll { job.participants.load(ordering: .acquiring) == 0 }
        pthread_mutex_lock(state.lock)
        while job.participants.load(ordering: .acquiring) > 0 { pthread_cond_wait(state.done, state.lock) }
        state.jobs.removeAll { $0 === job }
        pthread_mutex_unlock(state.lock)
    }

    /// How long a worker polls for the next job before it sleeps, and a caller for its job's last chunks before
    /// it waits on the condition variable: `$LOOKOUT_SPIN_MICROSECONDS` (0: never poll), 100 µs by default.
    public static let spinNanoseconds: Int = {
        if let text = getenv("LOOKOUT_SPIN_MICROSECONDS").map({ String(cString: $0) }), let value = Int(text),
            value >= 0
        {
            return value * 1000
        }
        return 100_000
    }()

    /// Polls `condition` until it holds or ``spinNanoseconds`` have passed (the caller checks again under the lock).
    private static func poll(_ condition: () -> Bool) {
        let deadline = monotonicNanoseconds() + spinNanoseconds
        while !condition() && monotonicNanoseconds() < deadline {
            for _ in 0..<16 { lookout_spin_pause() }
        }
    }

    private static func workerLoop(_ state: State) {
        liveWorkers.add(1, ordering: .releasing)
        pthread_mutex_lock(state.lock)
        state.running += 1
        pthread_cond_broadcast(state.done)
        while true {
            var job = state.jobs.first { $0.hasChunksLeft }
            if job == nil && !state.stopping {
                // Poll (the lock released) for the next job before sleeping.
                let seen = state.generation.load(ordering: .acquiring)
                pthread_mutex_unlock(state.lock)
                poll { state.generation.load(ordering: .acquiring) != seen }
                pthread_mutex_lock(state.lock)
                job = state.jobs.first { $0.hasChunksLeft }
            }
            while job == nil && !state.stopping {
                state.sleepers += 1
                pthread_cond_wait(state.wake, state.lock)
                state.sleepers -= 1
                job = state.jobs.first { $0.hasChunksLeft }
            }
            guard let current = job else { break }
            current.participants.add(1, ordering: .releasing)
            pthread_mutex_unlock(state.lock)
            current.work(in: state)
            pthread_mutex_lock(state.lock)
            if current.participants.subtract(1, ordering: .releasing).newValue == 0 {
                pthread_cond_broadcast(state.done)
            }
        }
        // Counted out before the pool's release (which waits for `running` to reach 0) can return.
        liveWorkers.subtract(1, ordering: .releasing)
        state.running -= 1
        pthread_cond_broadcast(state.done)
        pthread_mutex_unlock(state.lock)
    }

    // The pool whose loop the current thread is running, if any (to run nested loops inline).
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    private static func currentState() -> State? {
        guard let pointer = pthread_getspecific(key) else { return nil }
        return Unmanaged<State>.fromOpaque(pointer).takeUnretainedValue()
    }

    private static func setCurrentState(_ state: State?) {
        pthread_setspecific(key, state.map { Unmanaged.passUnretained($0).toOpaque() })
    }

    /// Online CPUs, or ``KernelSettings/threads`` of the environment (`$LOOKOUT_THREADS`) when set.
    public static func availableCPUs() -> Int {
        KernelSettings.environment.threads ?? max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }
}
