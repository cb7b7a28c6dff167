import Foundation

/// Items `0 ..< count` computed side by side, one per lane: each lane is a thread with its own state (made by
/// `makeLane` on the calling thread, e.g. an engine with one thread of its own), taking the next item in
/// order. `result(i)` waits for item `i`; taken in order, results come out in order while the lanes run
/// ahead by at most `window` items (results held are bounded by it). Dropping the pipeline stops the lanes
/// after their current item.
public final class LanePipeline<Output: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private let count: Int
    private let window: Int
    private var next = 0
    private var taken = 0
    private var results: [Int: Output] = [:]
    private var stopped = false

    public init(
        count: Int, lanes: Int, window: Int? = nil, makeLane: () throws -> (Int) -> Output
    ) rethrows {
        self.count = count
        self.window = max(window ?? 2 * lanes, lanes)
        for _ in 0..<lanes {
            let compute = UncheckedLane(body: try makeLane())
            let thread = Thread { [self] in run(compute.body) }
            thread.stackSize = 8 << 20
            thread.start()
        }
    }

    deinit { stop() }

    /// Stops handing out items (lanes finish the one in hand).
    public func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }

    /// Item `index`'s output, waiting for it. Each item is taken once.
    public func result(_ index: Int) -> Output {
        precondition(index >= 0 && index < count, "item \(index) of \(count)")
        condition.lock()
        defer { condition.unlock() }
        while results[index] == nil { condition.wait() }
        taken = max(taken, index + 1)
        condition.broadcast()
        return results.removeValue(forKey: index)!
    }

    private func run(_ compute: (Int) -> Output) {
        while true {
            condition.lock()
            while !stopped && next < count && next >= taken + window { condition.wait() }
            if stopped || next >= count {
                condition.unlock()
                return
            }
            let index = next
            next += 1
            condition.unlock()
            let output = compute(index)
            condition.lock()
            results[index] = output
            condition.broadcast()
            condition.unlock()
        }
    }
}

/// A lane's closure, handed to the one thread that calls it.
private struct UncheckedLane<Output>: @unchecked Sendable {
    let body: (Int) -> Output
}
