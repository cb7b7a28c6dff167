import CLookoutCUDA
import LookoutTensor
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A thread's work recorded once as a CUDA graph and replayed (``CUDABackend/replay(_:_:_:)``): the memory its
/// maps used while it was recorded, which each replay uses again, and the pinned host memory its copies to the GPU
/// read from. All of it is freed when the recording goes (its graph and the last map made in it).
final class Recording: @unchecked Sendable {
    private struct State: @unchecked Sendable {
        /// While the thread records: memory freed then, taken again by the recording's next map of that size.
        var recycled: [Int: [UInt64]] = [:]
        var recordingNow = true
        var owned: [UInt64] = []
        var pinned: [UnsafeMutableRawPointer] = []
        var failure: CUDAError?
        /// The last operation recorded (named in a failure).
        var last = "the start"
        /// Memory the recorded work reads that others own (weights), kept while the recording is.
        var kept: [ObjectIdentifier: AnyObject] = [:]
    }
    private let state = Mutex(State())
    var graph: UnsafeMutableRawPointer?
    /// The recorded inputs' and outputs' maps (the inputs are copied in before each replay, the outputs out after).
    var inputs: [FeatureMap] = []
    var outputs: [FeatureMap] = []

    var failure: CUDAError? { state.withLock { $0.failure } }

    func allocate(bytes: Int) throws(CUDAError) -> UInt64 {
        if let address = state.withLock({ $0.recycled[bytes]?.popLast() }) { return address }
        var address: UInt64 = 0
        try CUDABackend.call { lookout_cuda_alloc_now(&address, bytes, $0, $1) }
        state.withLock { $0.owned.append(address) }
        return address
    }

    /// A map made in the recording let go: while recording, its memory serves the next map of its size (in the
    /// recorded order, as on every replay); afterwards the recording keeps it.
    func release(_ address: UInt64, bytes: Int) {
        state.withLock { state in
            if state.recordingNow { state.recycled[bytes, default: []].append(address) }
        }
    }

    func pinned(_ bytes: Int) throws(CUDAError) -> UnsafeMutableRawPointer {
        var pointer: UnsafeMutableRawPointer?
        try CUDABackend.call { lookout_cuda_host_alloc(&pointer, bytes, $0, $1) }
        guard let pointer else { throw CUDAError("no pinned host memory") }
        state.withLock { $0.pinned.append(pointer) }
        return pointer
    }

    func fail(_ error: CUDAError) {
        state.withLock { state in
            if state.failure == nil {
                state.failure = CUDAError("\(error.description) (the last operation: \(state.last))")
            }
        }
    }

    func note(_ operation: String) {
        state.withLock { $0.last = operation }
    }

    func keep(_ object: AnyObject) {
        state.withLock { $0.kept[ObjectIdentifier(object)] = object }
    }

    func finish() {
        state.withLock { $0.recordingNow = false }
    }

    deinit {
        lookout_cuda_forget(graph)
        let (owned, pinned) = state.withLock { ($0.owned, $0.pinned) }
        for address in owned { lookout_cuda_free_now(address) }
        for pointer in pinned { lookout_cuda_host_free(pointer) }
    }
}

extension CUDABackend {
    /// What ``replay(_:_:_:)`` knows of a key on a thread.
    enum Replay: Sendable {
        /// Run once as it came (its weights are then on the GPU).
        case seen
        case recorded(Recording)
        /// Recording failed (the reason), or the thread has recorded its limit: run as it comes.
        case refused(String)
    }

    /// A recording is known by its thread and the caller's key (of one image's work: batches are not recorded).
    struct ReplayKey: Hashable, @unchecked Sendable {
        let thread: UInt
        let key: AnyHashable
    }

    static var thread: UInt { UInt(bitPattern: Int(bitPattern: UInt(pthread_self()))) }

    /// The recording this thread is making, if any.
    func recordingHere() -> Recording? {
        guard recordingThreads.load(ordering: .acquiring) > 0 else { return nil }
        return recordings.withLock { $0.active[Self.thread] }
    }

    /// Recordings kept per thread at most (each holds its maps' memory).
    static let recordingsPerThread = 8
    static let recordingsInAll = 64
    static let keysKept = 1024

    /// `LOOKOUT_CUDA_GRAPHS=0`: every replay runs as it comes (for comparisons).
    public static let graphsWanted = getenv("LOOKOUT_CUDA_GRAPHS").map { String(cString: $0) != "0" } ?? true

    /// Runs `body` on `inputs` as a CUDA graph: the first call for `key` on a thread runs it as it comes (its
    /// weights reach the GPU then), the second records its launches, copies and products once (the inputs copied
    /// into the recording's own maps first) and every call after replays them, so that the host issues one
    /// launch instead of hundreds. The outputs are copied out of the recording's maps into new ones after each
    /// replay. Where recording fails (an operation that reads back, a driver without graphs) the key runs as it
    /// comes from then on; ``replays()`` says so.
    public func replay(
        _ key: AnyHashable, _ inputs: [FeatureMap], _ body: ([FeatureMap]) -> [FeatureMap]
    ) -> [FeatureMap] {
        // One image's work only: a batch's launches are few against its kernels' time (a batch of 8 in fp16 took
        // 11.3 ms as it came and 11.6 ms replayed, on an H200), and every batch size would take a recording of its
        // own, holding that batch's maps.
        guard Self.graphsWanted, !profiling, images == 1 else { return body(inputs) }
        let slot = ReplayKey(thread: Self.thread, key: key)
        let known = recordings.withLock { $0.graphs[slot] }
        switch known {
        case nil:
            recordings.withLock { state in
                // Keys seen once (query sets that came and went) are forgotten past a bound.
                if state.graphs.count >= Self.keysKept {
                    state.graphs = state.graphs.filter { if case .seen = $0.value { false } else { true } }
                }
                state.graphs[slot] = .seen
            }
            return body(inputs)
        case .refused:
            return body(inputs)
        case .recorded(let recording):
            guard let outputs = replay(recording, inputs) else { return body(inputs) }
            return outputs
        case .seen:
            let (mine, all) = recordings.withLock { state in
                (
                    state.graphs.filter { key, value in
                        if case .recorded = value { key.thread == slot.thread } else { false }
                    }.count, state.recorded
                )
            }
            // A recording keeps its maps' memory: none is made where the GPU has less than a quarter free.
            let memory = memory()
            guard memory.free >= memory.total / 4 else {
                recordings.withLock { $0.graphs[slot] = .refused("the GPU has less than a quarter of its memory free") }
                return body(inputs)
            }
            guard mine < Self.recordingsPerThread && all < Self.recordingsInAll else {
                recordings.withLock {
                    $0.graphs[slot] = .refused(
                        "at most \(Self.recordingsPerThread) recordings a thread and \(Self.recordingsInAll) in all")
                }
                return body(inputs)
            }
            switch record(inputs, body) {
            case .success(let recording):
                recordings.withLock {
                    $0.graphs[slot] = .recorded(recording)
                    $0.recorded += 1
                }
                guard let outputs = replay(recording, inputs) else { return body(inputs) }
                return outputs
            case .failure(let error):
                recordings.withLock {
                    $0.graphs[slot] = .refused(error.description)
                    $0.refusals.append(error.description)
                }
                return body(inputs)
            }
        }
    }

    /// Graphs recorded and replayed since the backend opened, and why any recording failed.
    public func replays() -> (recorded: Int, replayed: Int, refused: [String]) {
        recordings.withLock { ($0.recorded, $0.replayed, $0.refusals) }
    }

    private func record(
        _ inputs: [FeatureMap], _ body: ([FeatureMap]) -> [FeatureMap]
    ) -> Result<
        Recording, CUDAError
    > {
        // Work issued before is finished first: a recording cannot wait for it.
        settle()
        let recording = Recording()
        recordings.withLock { $0.active[Self.thread] = recording }
        recordingThreads.add(1, ordering: .releasing)
        func stop() {
            recordingThreads.subtract(1, ordering: .releasing)
            _ = recordings.withLock { $0.active.removeValue(forKey: Self.thread) }
            recording.finish()
        }
        // The recording's input maps (its memory), filled before each replay, outside the graph.
        recording.inputs = inputs.map { input in
            map(
                buffer(input.channels * input.plane), channels: input.channels, height: input.height, width: input.width
            )
        }
        if let failure = recording.failure {
            stop()
            return .failure(failure)
        }
        if let error = Self.check({ lookout_cuda_record_begin($0, $1) }) {
            stop()
            return .failure(error)
        }
        let outputs = body(recording.inputs)
        var graph: UnsafeMutableRawPointer?
        let ended = Self.check { lookout_cuda_record_end(&graph, $0, $1) }
        recording.graph = graph
        stop()
        if let failure = recording.failure ?? ended { return .failure(failure) }
        guard outputs.allSatisfy({ $0.device is DeviceBuffer }) else {
            return .failure(CUDAError("an output of the recorded work is not on the GPU"))
        }
        recording.outputs = outputs
        return .success(recording)
    }

    /// The recording replayed on `inputs` (nil, the failure recorded, where a copy or the launch failed).
    private func replay(_ recording: Recording, _ inputs: [FeatureMap]) -> [FeatureMap]? {
        guard inputs.count == recording.inputs.count,
            zip(inputs, recording.inputs).allSatisfy({
                $0.channels == $1.channels && $0.height == $1.height && $0.width == $1.width
            })
        else { return nil }
        for (input, target) in zip(inputs, recording.inputs) {
            guard let target = target.device as? DeviceBuffer else { return nil }
            if let source = input.device as? DeviceBuffer {
                copy(target.address, source.address, floats: input.channels * input.plane)
            } else if !upload(input.data, to: target.address) {
                return nil
            }
        }
        var failure: CUDAError?
        timed("graph replay") { failure = Self.check { lookout_cuda_replay(recording.graph, $0, $1) } }
        if let failure {
            fail(failure)
            return nil
        }
        recordings.withLock { $0.replayed += 1 }
        return recording.outputs.map { output in
            let out = buffer(output.channels * output.plane)
            if let out, let source = output.device as? DeviceBuffer {
                copy(out.address, source.address, floats: output.channels * output.plane)
            }
            return map(out, channels: output.channels, height: output.height, width: output.width)
        }
    }
}

/// ``CUDABackend``'s recordings: per thread and key, and the thread recording now.
struct Recordings: @unchecked Sendable {
    var graphs: [CUDABackend.ReplayKey: CUDABackend.Replay] = [:]
    var active: [UInt: Recording] = [:]
    var recorded = 0
    var replayed = 0
    var refusals: [String] = []
}
