import Foundation

/// A first-in first-out queue between one producer thread and one consumer, holding at most `capacity` items.
/// When it is full the producer waits (`.wait`: a file, which must lose nothing) or the oldest item is dropped
/// and counted (`.dropOldest`: a camera, whose consumer should see what is recent). The producer ends it with
/// ``close()``; the consumer leaves early with ``stop()``, after which ``push(_:)`` answers false at once, so a
/// producer never waits for a consumer that is gone.
public final class BoundedQueue<Element>: @unchecked Sendable {
    public enum WhenFull: Sendable {
        case wait
        case dropOldest
    }

    public let capacity: Int
    public let whenFull: WhenFull
    private let condition = NSCondition()
    private var items: [Element] = []
    private var head = 0
    private var closed = false
    private var stopped = false
    private var droppedCount = 0

    public init(capacity: Int, whenFull: WhenFull = .wait) {
        self.capacity = max(1, capacity)
        self.whenFull = whenFull
    }

    /// Items held now.
    private var count: Int { items.count - head }

    /// Adds an item, waiting for room (or dropping the oldest). False when the consumer has stopped or the
    /// queue is closed: the item was not added.
    @discardableResult
    public func push(_ item: Element) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        if whenFull == .dropOldest && count >= capacity && !stopped {
            head += 1
            droppedCount += 1
        }
        while count >= capacity && !stopped { condition.wait() }
        guard !stopped && !closed else { return false }
        if head > capacity {  // keep the storage small: drop the taken items at the front now and then
            items.removeFirst(head)
            head = 0
        }
        items.append(item)
        condition.broadcast()
        return true
    }

    /// The oldest item, waiting for one; nil once the queue is closed and empty, or stopped.
    public func pop() -> Element? {
        condition.lock()
        defer { condition.unlock() }
        while count == 0 && !closed && !stopped { condition.wait() }
        guard !stopped, count > 0 else { return nil }
        let item = items[head]
        head += 1
        condition.broadcast()
        return item
    }

    /// The producer is done: the consumer takes what is left, then gets nil.
    public func close() {
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
    }

    /// The consumer leaves: waiting pushes return false, and later ones too.
    public func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }

    /// Whether ``stop()`` was called.
    public var isStopped: Bool {
        condition.lock()
        defer { condition.unlock() }
        return stopped
    }

    /// Items dropped so far because the queue was full (`.dropOldest` only).
    public var dropped: Int {
        condition.lock()
        defer { condition.unlock() }
        return droppedCount
    }
}
