import Dispatch
import Foundation
import LookoutSupport
import Synchronization
import Testing

/// ``GatheredBatches``: threads asking one item at a time get their own outputs, computed in batches no larger
/// than the limit, at most `runners` at once; items asked for while a batch computes are gathered into the next.
@Suite struct GatheredBatchesTests {
    @Test func eachCallerGetsItsOwnOutputFromBatches() {
        let sizes = Mutex<[Int]>([])
        let running = Mutex((now: 0, most: 0))
        let square = GatheredBatches<Int, Int>(limit: 8, runners: 2) { inputs in
            running.withLock {
                $0.now += 1; $0.most = max($0.most, $0.now)
            }
            sizes.withLock { $0.append(inputs.count) }
            usleep(2_000)  // a batch that takes a while, so that callers gather meanwhile
            running.withLock { $0.now -= 1 }
            return inputs.map { $0 * $0 }
        }
        let wrong = Mutex(0)
        // 64 threads of their own (a dispatch pool would run as many at once as the machine has cores).
        let finished = DispatchGroup()
        for caller in 0..<64 {
            finished.enter()
            Thread {
                for round in 0..<5 {
                    let input = caller * 10 + round
                    if square(input) != input * input { wrong.withLock { $0 += 1 } }
                }
                finished.leave()
            }.start()
        }
        finished.wait()
        #expect(wrong.withLock { $0 } == 0)
        let made = sizes.withLock { $0 }
        #expect(made.reduce(0, +) == 320)
        #expect(made.allSatisfy { (1...8).contains($0) })
        #expect(made.count < 320, "callers waiting while a batch computed were gathered: \(made)")
        #expect(running.withLock { $0.most } <= 2)
        #expect(square.computed.items == 320 && square.computed.batches == made.count)
    }

    @Test func aLoneCallerIsNotKeptWaiting() {
        let double = GatheredBatches<Int, Int>(limit: 32) { $0.map { 2 * $0 } }
        #expect(double(21) == 42)
        #expect(double.computed.items == 1 && double.computed.batches == 1)
    }
}
