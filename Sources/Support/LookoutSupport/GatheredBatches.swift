import Foundation

/// Work that threads ask for one item at a time, computed in batches: each caller hands in its item and waits;
/// a waiting caller that finds fewer than `runners` batches computing takes every item waiting (up to `limit`)
/// and computes them together with `compute`, then hands each caller its result. While one batch computes, the
/// next one gathers, so batches grow as large as the callers keep them busy: no timer, no thread of its own.
/// What a GPU needs from lanes that decode photos side by side (``compute`` sees many photos at once).
public final class GatheredBatches<Input, Output>: @unchecked Sendable {
    public let limit: Int
    public let runners: Int
    private let compute: ([Input]) -> [Output]
    private let condition = NSCondition()
    private var waiting: [(id: Int, input: Input)] = []
    private var done: [Int: Output] = [:]
    private var running = 0
    private var next = 0
    private var items = 0
    private var batches = 0

    /// `compute` gives one output per input, in their order; it runs on the callers' threads, at most `runners`
    /// at once.
    public init(limit: Int, runners: Int = 2, compute: @escaping ([Input]) -> [Output]) {
        self.limit = max(1, limit)
        self.runners = max(1, runners)
        self.compute = compute
    }

    /// The output for `input`, computed in a batch with those of other callers waiting now.
    public func callAsFunction(_ input: Input) -> Output {
        condition.lock()
        defer { condition.unlock() }
        let id = next
        next += 1
        waiting.append((id, input))
        while true {
            if let output = done.removeValue(forKey: id) { return output }
            if running < runners && !waiting.isEmpty {
                running += 1
                let batch = Array(waiting.prefix(limit))
                waiting.removeFirst(batch.count)
                condition.unlock()
                let outputs = compute(batch.map(\.input))
                condition.lock()
                precondition(outputs.count == batch.count, "a batch of \(batch.count) gave \(outputs.count) outputs")
                running -= 1
                items += batch.count
                batches += 1
                for (item, output) in zip(batch, outputs) { done[item.id] = output }
                condition.broadcast()
                continue
            }
            condition.wait()
        }
    }

    /// Items computed and the batches they took (their mean size says how full the callers kept them).
    public var computed: (items: Int, batches: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (items, batches)
    }
}
