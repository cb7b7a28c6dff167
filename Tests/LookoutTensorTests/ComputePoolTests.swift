import Foundation
import LookoutTensor
import Testing

/// The compute pool: every iteration runs exactly once, loops nested inside loops run (inline), several
/// threads can submit loops at once, and a released pool stops its threads.
@Suite(.serialized) struct ComputePoolTests {
    /// Integers updated from many threads.
    final class Counters: @unchecked Sendable {
        private let lock = NSLock()
        private var values: [Int]
        init(_ count: Int) { values = [Int](repeating: 0, count: count) }
        func add(_ index: Int, _ amount: Int) { lock.withLock { values[index] += amount } }
        var all: [Int] { lock.withLock { values } }
    }

    /// The threads that ran a loop's chunks.
    final class ThreadIdentifiers: @unchecked Sendable {
        private let lock = NSLock()
        private var values = Set<UInt>()
        func insert(_ id: UInt) { lock.withLock { _ = values.insert(id) } }
        var count: Int { lock.withLock { values.count } }
    }

    /// A body gets the same ranges whatever the pool's thread count (one thread walks the chunks the threads
    /// would take): a GEMM over a range then sums the same way on a one-thread lane as on the shared pool. On an
    /// AVX2-only CPU, OpenBLAS rounded a 6,400-column product otherwise than the same columns in chunks of 256.
    @Test func theRangesDoNotDependOnTheThreads() {
        for (count, chunk) in [(6400, 256), (10, 3), (5, 1), (7, 7), (3, 10)] {
            var seen: [[Range<Int>]] = []
            for threads in [1, 2, 3] {
                let pool = ComputePool(threads: threads)
                let lock = NSLock()
                var ranges: [Range<Int>] = []
                pool.parallelFor(count, chunk: chunk) { range in
                    lock.lock()
                    ranges.append(range)
                    lock.unlock()
                }
                seen.append(ranges.sorted { $0.lowerBound < $1.lowerBound })
            }
            #expect(seen[0] == seen[1] && seen[1] == seen[2], "\(count) by \(chunk): \(seen)")
            #expect(seen[0].count == (count + chunk - 1) / chunk)
        }
    }

    @Test func everyIterationRunsOnce() {
        let pool = ComputePool(threads: 4)
        let counts = Counters(1000)
        pool.parallelFor(1000, chunk: 7) { range in
            for i in range { counts.add(i, 1) }
        }
        #expect(counts.all == [Int](repeating: 1, count: 1000))
    }

    @Test func nestedLoopsRunInline() {
        let pool = ComputePool(threads: 3)
        let total = Counters(1)
        pool.parallelFor(8) { outer in
            for _ in outer {
                pool.parallelFor(100, chunk: 3) { inner in total.add(0, inner.count) }
            }
        }
        #expect(total.all == [800])
    }

    @Test func severalThreadsShareOnePool() {
        let pool = ComputePool(threads: 2)
        let sums = Counters(6)
        DispatchQueue.concurrentPerform(iterations: 6) { caller in
            for _ in 0..<20 {
                pool.parallelFor(500, chunk: 11) { range in sums.add(caller, range.reduce(0, +)) }
            }
        }
        let expected = 20 * (499 * 500 / 2)
        #expect(sums.all == [Int](repeating: expected, count: 6))
    }

    /// Workers poll for the next loop for a while, then sleep: loops submitted back to back (workers polling)
    /// and after a pause longer than the poll (workers asleep, woken by the caller) both run every iteration, and
    /// sleeping workers do wake up: a loop of slow chunks is shared by more than the calling thread.
    @Test func loopsRunWhetherWorkersPollOrSleep() {
        let pool = ComputePool(threads: 3)
        let counts = Counters(300)
        for round in 0..<6 {
            if round % 2 == 1 { usleep(useconds_t(2 * ComputePool.spinNanoseconds / 1000 + 2000)) }
            for _ in 0..<50 {
                pool.parallelFor(300, chunk: 5) { range in
                    for i in range { counts.add(i, 1) }
                }
            }
        }
        #expect(counts.all == [Int](repeating: 300, count: 300))

        let threads = Counters(1)
        var shared = false
        for _ in 0..<3 where !shared {
            usleep(useconds_t(2 * ComputePool.spinNanoseconds / 1000 + 2000))
            let ids = ThreadIdentifiers()
            pool.parallelFor(64) { _ in
                ids.insert(UInt(pthread_self()))
                usleep(200)
            }
            shared = ids.count > 1
            threads.add(0, 1)
        }
        #expect(shared, "64 chunks of 0.2 ms each ran on the calling thread alone in \(threads.all[0]) tries")
    }

    @Test func aReleasedPoolStopsItsThreads() {
        _ = ComputePool.shared.threadCount  // created now, not during the count below
        let before = ComputePool.workersInProcess
        do {
            let pools = (0..<3).map { _ in ComputePool(threads: 4) }
            #expect(pools.allSatisfy { $0.runningWorkers == 3 })
            #expect(ComputePool.workersInProcess == before + 9)
            pools[0].parallelFor(10) { _ in }
        }
        // The pools are gone: releasing a pool waits for its workers to leave their loops.
        var after = ComputePool.workersInProcess
        for _ in 0..<100 where after > before {
            Thread.sleep(forTimeInterval: 0.01)
            after = ComputePool.workersInProcess
        }
        #expect(after == before, "\(before) workers before, \(after) after")
    }
}
