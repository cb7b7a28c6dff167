import CLookoutCUDA
import Dispatch
import LookoutSupport
import LookoutTensor
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Floats in the GPU's memory: a map's values while a ``CUDABackend`` computes with it. Freed (in stream order,
/// after the work already issued) when the last map holding it goes.
final class DeviceBuffer: DeviceStorage, @unchecked Sendable {
    let address: UInt64
    let count: Int
    /// The same values rounded to 16 bits (``GPUArithmetic/code``), where the kernel that made them wrote them
    /// that way too for a linear layer that multiplies them next: set once, as the buffer is made.
    var sixteen: (buffer: DeviceBuffer, code: Int32)?
    /// Its rows LayerNormed and rounded to 16 bits (the next sublayer's first operand), where the kernel that made
    /// them wrote that too: the norm's key (``CUDABackend/normKey(_:)``) and the arrays it names, kept alive.
    var normed: (key: [UInt], sources: [[Float]], buffer: DeviceBuffer)?
    /// Where a failed copy back is recorded.
    private let backend: CUDABackend
    /// The recording (a CUDA graph) it was made in, which owns its memory.
    private let recording: Recording?

    init(count: Int, backend: CUDABackend) throws(CUDAError) {
        recording = backend.recordingHere()
        if let recording {
            address = try recording.allocate(bytes: max(1, count) * 4)
        } else {
            address = try backend.allocate(bytes: max(1, count) * 4)
        }
        self.count = count
        self.backend = backend
    }

    deinit {
        if let recording {
            recording.release(address, bytes: max(1, count) * 4)
        } else {
            backend.recycle(address, bytes: max(1, count) * 4)
        }
    }

    func download(into buffer: UnsafeMutableBufferPointer<Float>) {
        precondition(buffer.count >= count)
        backend.recordingHere()?.note("reading a map of \(count) values back")
        backend.timed("a map read back") {
            if let error = CUDABackend.check({ lookout_cuda_download(buffer.baseAddress, address, count * 4, $0, $1) })
            {
                backend.fail(error)
                buffer.update(repeating: .nan)
            }
        }
    }
}

/// The CUDA backend: the ``ComputeBackend`` operations on an NVIDIA GPU. A map a GPU operation makes stays in the
/// GPU's memory (``FeatureMap/device``) for the next, so a photo's features cross to the GPU once (its letterboxed
/// pixels) and come back as the head's few outputs; the features ``Engine`` keeps for re-query stay there.
///
/// Its own kernels (``CUDAKernels``) are compiled by NVRTC for the GPU's architecture at first use and kept as a
/// cubin in the cache folder; the GEMMs (the convolutions lowered, the dense layers, the head's logits) go
/// through cuBLAS in fp32 (no TF32), or through a kernel of its own where cuBLAS is absent. Each thread's launches,
/// copies and products are on its own stream, in the order it issued them: threads detecting side by side (the
/// lanes of ``Engine/sharingWeights(pool:)``) share the GPU without waiting for each other.
///
/// The detector's weights are fp32; the convolutions' products run in ``arithmetic`` (fp32, or fp16 or bf16 on the
/// tensor cores: weights rounded once, inputs rounded as they are lowered). The CLIP towers' activations stay on the
/// GPU from the photos' pixels to the embeddings' last product; in 16-bit arithmetic their sublayers keep 16-bit
/// intermediates (``residualAttention(_:norm:qkv:output:lengths:starts:heads:causal:)``). YOLOE's visual-prompt
/// pooling and bf16 tower layers (packed for the CPU) are computed by the CPU backend. An operation that
/// fails (the GPU out of memory) records ``failure`` and gives NaN, which ``checkFailure()`` turns into an error.
public final class CUDABackend: ComputeBackend, @unchecked Sendable {
    public let gpu: GPU
    /// Where cuBLAS was found, or nil (the GEMMs then use Lookout's kernel).
    public let cublasPath: String?
    /// Whether the kernels came from the cache rather than from NVRTC this time.
    public let kernelsFromCache: Bool
    /// The CPU backend for the operations not yet on the GPU.
    public let host: CPUBackend
    /// The convolutions' operands.
    public let arithmetic: GPUArithmetic

    private let functions: [String: UnsafeMutableRawPointer]
    private let state = Mutex(State())
    /// CUDA graphs (``replay(_:_:_:)``): per thread and key, and the threads recording now.
    let recordings = Mutex(Recordings())
    let recordingThreads = Atomic<Int>(0)

    private struct State {
        var failure: CUDAError?
        /// With ``profiling``: milliseconds and calls per kernel (each waited for).
        var profile: [String: (milliseconds: Double, calls: Int)] = [:]
        /// With ``profilingHost``: when the last call ended, and what it was (the host's time between two calls
        /// is counted as a gap after the first).
        var lastCall: (end: Double, name: String)?
        /// Weights copied to the GPU, by the address of the host array they came from (the array is kept with
        /// them, so the address names them while they are cached).
        var weights: [WeightKey: CachedWeights] = [:]
    }

    struct WeightKey: Hashable {
        let addresses: [UInt]
    }

    final class CachedWeights: @unchecked Sendable {
        let sources: [Any]
        let buffers: [DeviceBuffer]
        init(sources: [Any], buffers: [DeviceBuffer]) {
            self.sources = sources
            self.buffers = buffers
        }
    }

    /// Called with the first failure of an operation (a program that cannot go on without the GPU stops there
    /// with the message); nil: failures are only recorded for ``checkFailure()``.
    public let onFailure: (@Sendable (CUDAError) -> Void)?

    /// Opens GPU `index`, compiles (or reads from `cacheDirectory`) the kernels and opens cuBLAS when
    /// `useCUBLAS` (off: the GEMMs run on Lookout's own kernel, as where cuBLAS is absent); `lowering`: how 16-bit
    /// convolutions are lowered (nil: `LOOKOUT_CUDA_IMPLICIT`, see ``Lowering``).
    public init(
        gpu index: Int = 0, cacheDirectory: String?, useCUBLAS: Bool = true, arithmetic: GPUArithmetic = .fp32,
        lowering: Lowering? = nil, host: CPUBackend = .shared,
        onFailure: (@Sendable (CUDAError) -> Void)? = nil
    ) throws(CUDAError) {
        self.onFailure = onFailure
        self.arithmetic = arithmetic
        let driver = try CUDA.driver()
        guard index >= 0 && index < driver.gpus.count else {
            throw CUDAError(
                driver.gpus.isEmpty
                    ? "the NVIDIA driver reports no GPU on this machine"
                    : "there is no GPU \(index): this machine has \(driver.gpus.count) (cuda:0 to cuda:\(driver.gpus.count - 1))"
            )
        }
        gpu = driver.gpus[index]
        let plane = getenv("LOOKOUT_CUDA_IMPLICIT_PLANE").flatMap { Int(String(cString: $0)) } ?? .max
        let chosen: Lowering =
            switch getenv("LOOKOUT_CUDA_IMPLICIT").map({ String(cString: $0) }) {
            case "1": .asMultiplied(wide: false, upToPlane: plane)
            case "2": .asMultiplied(wide: true, upToPlane: plane)
            default: .inMemory
            }
        // mma.sync's 16-bit shapes need compute capability 8.0.
        self.lowering = gpu.major >= 8 ? lowering ?? chosen : .inMemory
        self.host = host
        try Self.call { lookout_cuda_use(Int32(index), $0, $1) }
        let (image, cached) = try Self.kernelImage(for: gpu, cacheDirectory: cacheDirectory)
        kernelsFromCache = cached
        var module: UnsafeMutableRawPointer?
        if let error = image.withUnsafeBytes({ bytes in
            Self.check { lookout_cuda_load(bytes.baseAddress, &module, $0, $1) }
        }) {
            throw error
        }
        var functions: [String: UnsafeMutableRawPointer] = [:]
        for name in CUDAKernels.names {
            var function: UnsafeMutableRawPointer?
            try Self.call { lookout_cuda_function(module, name, &function, $0, $1) }
            functions[name] = function
        }
        self.functions = functions
        if useCUBLAS {
            var path = [CChar](repeating: 0, count: 4096)
            var message = [CChar](repeating: 0, count: 1024)
            cublasPath =
                lookout_cublas_open(&path, path.count, &message, message.count) == 0
                ? path.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } : nil
        } else {
            cublasPath = nil
        }
    }

    public var name: String {
        "cuda:\(gpu.index) (\(gpu.name))" + (arithmetic == .fp32 ? "" : ", \(arithmetic.rawValue) products")
    }

    /// `LOOKOUT_CUDA_JOIN=1`: stacked parts joined into one buffer before a convolution (for comparisons).
    let joinsParts = getenv("LOOKOUT_CUDA_JOIN").map { String(cString: $0) == "1" } ?? false

    /// How a 16-bit convolution's input is lowered (the rows its product multiplies).
    public enum Lowering: Sendable, Equatable {
        /// Into memory (`lk_im2col_16`, or rounded where a 1×1 convolution needs no lowering), multiplied (cuBLAS
        /// or `lk_gemm_16`), then bias and SiLU (`lk_bias_act`): the default, and the faster on an H200 today.
        case inMemory
        /// As it is multiplied on the tensor cores, bias and SiLU in the same kernel: `lk_conv_16` (tiles of 64
        /// outputs) or, `wide`, `lk_conv_16_wide` (128, where a convolution has more than 64). Compute capability
        /// 8.0 and later; up to four stacked parts read where they lie (more: into memory); outputs of up to
        /// `upToPlane` pixels (larger: into memory). `LOOKOUT_CUDA_IMPLICIT=1` or `2`, and
        /// `LOOKOUT_CUDA_IMPLICIT_PLANE`. Fewer kernels and no lowered input in memory, but slower on an H200 than
        /// cuBLAS's products (BENCHMARKS.md).
        case asMultiplied(wide: Bool, upToPlane: Int = .max)
    }
    public let lowering: Lowering

    /// `LOOKOUT_CUDA_PROFILE=1`: every kernel and product waited for and timed (``profile()``); slower. `2`: each
    /// convolution timed by its shape as well (all its kernels together).
    public let profiling = getenv("LOOKOUT_CUDA_PROFILE").map { ["1", "2"].contains(String(cString: $0)) } ?? false
    let profilesShapes = getenv("LOOKOUT_CUDA_PROFILE").map { String(cString: $0) == "2" } ?? false
    /// `LOOKOUT_CUDA_PROFILE=3`: the host's own time in each call (launch, product, copy, allocation), nothing
    /// waited for: where the host, not the GPU, spends a batch's time (``profile()``).
    public let profilingHost = getenv("LOOKOUT_CUDA_PROFILE").map { String(cString: $0) == "3" } ?? false

    /// Time per kernel since the last call, longest first (with ``profiling``), one line each.
    public func profile() -> [String] {
        let entries = state.withLock { state in
            defer { state.profile = [:] }
            return state.profile
        }
        let total = entries.values.reduce(0) { $0 + $1.milliseconds }
        return entries.sorted { $0.value.milliseconds > $1.value.milliseconds }.map {
            "\($0.key): \((($0.value.milliseconds * 1000).rounded() / 1000)) ms in \($0.value.calls) calls (\(Int(($0.value.milliseconds / max(total, 1e-9) * 100).rounded()))%)"
        }
    }

    func timed(_ name: String, _ body: () -> Void) {
        guard profiling || profilingHost else { return body() }
        if profiling { _ = lookout_cuda_synchronize(nil, 0) }
        let start = Stopwatch.now()
        body()
        if profiling { _ = lookout_cuda_synchronize(nil, 0) }
        let end = Stopwatch.now()
        state.withLock {
            let entry = $0.profile[name] ?? (0, 0)
            $0.profile[name] = (entry.milliseconds + (end - start) * 1e3, entry.calls + 1)
            // The host's own time between two calls, after the first (more than 0.1 ms of it).
            if profilingHost, let last = $0.lastCall, start - last.end > 1e-4 {
                let gap = "host after \(last.name)"
                let entry = $0.profile[gap] ?? (0, 0)
                $0.profile[gap] = (entry.milliseconds + (start - last.end) * 1e3, entry.calls + 1)
            }
            $0.lastCall = (end, name)
        }
    }

    /// A C call of the shim, its message turned into an error.
    static func call(_ body: (UnsafeMutablePointer<CChar>, Int) -> Int32) throws(CUDAError) {
        if let error = check(body) { throw error }
    }

    /// A C call of the shim: nil, or its message as an error.
    static func check(_ body: (UnsafeMutablePointer<CChar>, Int) -> Int32) -> CUDAError? {
        // On the stack: every launch and copy passes through here (no allocation per call).
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 1024) { message in
            message[0] = 0
            message[message.count - 1] = 0
            guard body(message.baseAddress!, message.count - 1) != 0 else { return nil }
            return CUDAError(String(cString: message.baseAddress!))
        }
    }

    /// `values` copied to the GPU at `target`; a failure recorded. While this thread records, from pinned memory
    /// that the recording keeps (the copy is replayed from there: values a recording's key names).
    func upload<T>(_ values: [T], to target: UInt64) -> Bool {
        var error: CUDAError?
        timed("copy to the GPU") {
            error = values.withUnsafeBytes { bytes in
                if let recording = recordingHere() {
                    do throws(CUDAError) {
                        let pinned = try recording.pinned(bytes.count)
                        if let source = bytes.baseAddress { pinned.copyMemory(from: source, byteCount: bytes.count) }
                        return Self.check { lookout_cuda_upload(target, pinned, bytes.count, $0, $1) }
                    } catch {
                        return error
                    }
                }
                return Self.check { lookout_cuda_upload(target, bytes.baseAddress, bytes.count, $0, $1) }
            }
        }
        if let error {
            fail(error)
            return false
        }
        return true
    }

    // MARK: Kernels: compiled once per architecture

    /// The cubin of ``CUDAKernels/source`` for `gpu`: from the cache when an earlier run compiled it with the same
    /// source and NVRTC, else compiled now (and written there).
    static func kernelImage(for gpu: GPU, cacheDirectory: String?) throws(CUDAError) -> (image: [UInt8], cached: Bool) {
        let nvrtc = try CUDA.nvrtc()
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in (CUDAKernels.source + nvrtc.version).utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        let file = cacheDirectory.map {
            "\($0)/cuda/kernels-\(gpu.realArchitecture)-\(String(hash, radix: 16)).cubin"
        }
        if let file, let image = try? FileContents.read(file), !image.isEmpty { return (image, true) }
        let image = try CUDA.compile(CUDAKernels.source, name: "lookout_kernels.cu", architecture: gpu.realArchitecture)
        // A cache that cannot be written only costs the next run a compilation.
        if let file { try? FileContents.writeAtomically(image, to: file) }
        return (image, false)
    }

    // MARK: Failures

    func fail(_ error: CUDAError) {
        // While this thread records, the recording fails (and the work is then run as it comes).
        if let recording = recordingHere() {
            recording.fail(error)
            return
        }
        let first = state.withLock { state in
            defer { if state.failure == nil { state.failure = error } }
            return state.failure == nil
        }
        if first { onFailure?(error) }
    }

    /// The first failure since the last check (then cleared), as an error.
    public func checkFailure() throws(CUDAError) {
        let failure = state.withLock { state in
            defer { state.failure = nil }
            return state.failure
        }
        if let failure { throw failure }
    }

    /// Waits for the GPU to finish what was issued (for timing).
    public func synchronize() throws(CUDAError) {
        try Self.call { lookout_cuda_synchronize($0, $1) }
    }

    /// Free and total bytes of the GPU's memory.
    public func memory() -> (free: Int, total: Int) {
        var (free, total) = (0, 0)
        _ = lookout_cuda_memory(&free, &total)
        return (free, total)
    }

    // MARK: Buffers

    /// Freed buffers by the thread that let them go and their size in bytes, taken again by that thread's next
    /// map of that size (a photo's maps repeat the last photo's sizes). Each thread issues its work on its own
    /// stream, in order, so a buffer it takes again is written only after its own work that read it; a map another
    /// thread made comes back only after that thread waited for its work (its results copied back). At most
    /// ``poolLimit`` bytes are kept in all; the rest are freed.
    private let pool = Mutex(BufferPool())
    private struct BufferPool {
        var free: [PoolKey: [UInt64]] = [:]
        var bytes = 0
    }
    private struct PoolKey: Hashable {
        let thread: UInt
        let bytes: Int
        init(_ bytes: Int) {
            thread = CUDABackend.thread
            self.bytes = bytes
        }
    }
    /// An eighth of the GPU's memory, at most 4 GiB (`LOOKOUT_CUDA_POOL_MIB`: another bound, for comparisons).
    private var poolLimit: Int { Self.poolMiB.map { $0 << 20 } ?? min(4 << 30, gpu.memoryBytes / 8) }
    /// `LOOKOUT_CUDA_POOL_MIB`, read once (``poolLimit`` is asked at every buffer's release).
    private static let poolMiB = getenv("LOOKOUT_CUDA_POOL_MIB").flatMap { Int(String(cString: $0)) }

    /// `bytes` of the GPU's memory: a kept buffer of that size, else a new one (after giving the kept ones back
    /// where the GPU has no room).
    func allocate(bytes: Int) throws(CUDAError) -> UInt64 {
        let key = PoolKey(bytes)
        let kept = pool.withLock { pool -> UInt64? in
            guard let address = pool.free[key]?.popLast() else { return nil }
            pool.bytes -= bytes
            return address
        }
        if let kept { return kept }
        var address: UInt64 = 0
        if Self.check({ lookout_cuda_alloc(&address, bytes, $0, $1) }) != nil {
            releaseKeptBuffers()
            try Self.call { lookout_cuda_alloc(&address, bytes, $0, $1) }
        }
        return address
    }

    /// A buffer no map holds any more: kept for reuse, or freed (in stream order) past the pool's limit (never
    /// while this thread records: a free would be recorded).
    func recycle(_ address: UInt64, bytes: Int) {
        let (limit, key, recording) = (poolLimit, PoolKey(bytes), recordingHere() != nil)
        let kept = pool.withLock { pool -> Bool in
            guard pool.bytes + bytes <= limit || recording else { return false }
            pool.free[key, default: []].append(address)
            pool.bytes += bytes
            return true
        }
        if !kept { timed("free") { lookout_cuda_free(address) } }
    }

    /// Frees every kept buffer.
    public func releaseKeptBuffers() {
        let addresses = pool.withLock { pool in
            defer { pool = BufferPool() }
            return pool.free.values.flatMap { $0 }
        }
        for address in addresses { lookout_cuda_free(address) }
    }

    deinit {
        releaseKeptBuffers()
        staging.withLock { area in
            if let pointer = area.pointer { lookout_cuda_host_free(pointer) }
        }
        pinnedAreas.withLock { areas in
            for area in areas { lookout_cuda_host_free(UnsafeMutableRawPointer(bitPattern: area.address)) }
        }
    }

    /// Pinned host memory for a photo's bytes (``pinnedUpload(_:to:)``), by address: areas free for the next
    /// caller, each taken by one thread at a time, so that threads uploading side by side do not wait for each
    /// other.
    private let pinnedAreas = Mutex<[(address: UInt, bytes: Int)]>([])

    /// `bytes` copied to `target` through pinned memory (a copy from pageable memory runs at a fraction of the
    /// bus's rate: 25 MB of photos took 12 ms on an H200's host), waited for before the area is free again; nil
    /// where a recording is on or pinned memory could not be had (the caller copies from where the bytes lie).
    func pinnedUpload(_ bytes: UnsafeRawBufferPointer, to target: UInt64) -> Bool? {
        guard recordingHere() == nil, let source = bytes.baseAddress else { return nil }
        let count = bytes.count
        var area = pinnedAreas.withLock { areas -> (address: UInt, bytes: Int)? in
            guard let index = areas.firstIndex(where: { $0.bytes >= count }) ?? areas.indices.last else { return nil }
            return areas.remove(at: index)
        }
        if let taken = area, taken.bytes < count {
            lookout_cuda_host_free(UnsafeMutableRawPointer(bitPattern: taken.address))
            area = nil
        }
        if area == nil {
            var pointer: UnsafeMutableRawPointer?
            guard lookout_cuda_host_alloc(&pointer, count, nil, 0) == 0, let pointer else { return nil }
            area = (UInt(bitPattern: pointer), count)
        }
        guard let area, let pointer = UnsafeMutableRawPointer(bitPattern: area.address) else { return nil }
        pointer.copyMemory(from: source, byteCount: count)
        var failure: CUDAError?
        timed("copy to the GPU") {
            failure =
                Self.check { lookout_cuda_upload(target, pointer, count, $0, $1) }
                ?? Self.check { lookout_cuda_wait($0, $1) }
        }
        pinnedAreas.withLock { $0.append(area) }
        if let failure { fail(failure) }
        return failure == nil
    }

    /// Pinned host memory through which a batch of photos' pixels crosses in one copy (``patchRows(pixels:side:
    /// patch:mean:std:)``), grown as needed: one caller at a time, each waiting for its copy before the next.
    private let staging = Mutex<(pointer: UnsafeMutableRawPointer?, bytes: Int)>((nil, 0))

    /// `parts` (each `size` bytes) copied side by side into the staging memory by several threads, then over to
    /// `target` in one copy, waited for (this thread's stream: a batch is handed over before its work is issued);
    /// nil where a recording is on, there is one part (the caller copies it from where it lies), or pinned memory
    /// could not be had; else whether the copy succeeded (a failure recorded).
    func stagedUpload(_ parts: [[UInt8]], size: Int, to target: UInt64) -> Bool? {
        guard recordingHere() == nil, parts.count > 1 else { return nil }
        let total = parts.count * size
        return staging.withLock { area -> Bool? in
            if area.bytes < total {
                if let pointer = area.pointer { lookout_cuda_host_free(pointer) }
                area = (nil, 0)
                var pointer: UnsafeMutableRawPointer?
                guard lookout_cuda_host_alloc(&pointer, total, nil, 0) == 0, let pointer else { return nil }
                area = (pointer, total)
            }
            let base = UnsafeSendable(area.pointer!.assumingMemoryBound(to: UInt8.self))
            DispatchQueue.concurrentPerform(iterations: min(parts.count, 16)) { lane in
                for n in stride(from: lane, to: parts.count, by: 16) {
                    parts[n].withUnsafeBufferPointer {
                        (base.pointer + n * size).update(from: $0.baseAddress!, count: size)
                    }
                }
            }
            var failure: CUDAError?
            timed("copy to the GPU") {
                failure =
                    Self.check { lookout_cuda_upload(target, base.pointer, total, $0, $1) }
                    ?? Self.check { lookout_cuda_wait($0, $1) }
            }
            if let failure { fail(failure) }
            return failure == nil
        }
    }

    /// A buffer of `count` floats; a zero-length stand-in after a failure (recorded).
    func buffer(_ count: Int) -> DeviceBuffer? {
        var made: DeviceBuffer?
        timed("allocate") {
            do throws(CUDAError) {
                made = try DeviceBuffer(count: count, backend: self)
            } catch {
                fail(error)
            }
        }
        return made
    }

    /// Floats (or 32-bit integers) copied into a new buffer.
    func upload<T>(_ values: [T]) -> DeviceBuffer? {
        precondition(MemoryLayout<T>.stride == 4)
        guard let buffer = buffer(values.count), upload(values, to: buffer.address) else { return nil }
        return buffer
    }

    func download(_ buffer: DeviceBuffer, count: Int? = nil) -> [Float] {
        let count = count ?? buffer.count
        recordingHere()?.note("reading \(count) values back")
        var values: [Float] = []
        timed("copy from the GPU") {
            values = [Float](unsafeUninitializedCapacity: count) { out, initialized in
                if let error = Self.check({ lookout_cuda_download(out.baseAddress, buffer.address, count * 4, $0, $1) })
                {
                    fail(error)
                    out.update(repeating: .nan)
                }
                initialized = count
            }
        }
        return values
    }

    func copy(_ target: UInt64, _ source: UInt64, floats: Int) {
        timed("copy on the GPU") {
            if let error = Self.check({ lookout_cuda_copy(target, source, floats * 4, $0, $1) }) { fail(error) }
        }
    }

    /// The map's values on the GPU: its own buffer, or its host values copied over.
    func onDevice(_ x: FeatureMap) -> DeviceBuffer? {
        if let buffer = x.device as? DeviceBuffer { return buffer }
        return upload(x.data)
    }

    /// The stacked maps as one contiguous buffer (the map itself when it is one whole map).
    func onDevice(_ x: StackedMaps) -> DeviceBuffer? {
        if x.isWholeMap { return onDevice(x.parts[0].map) }
        guard let out = buffer(x.channels * x.plane) else { return nil }
        for (index, part) in x.parts.enumerated() {
            let target = out.address + UInt64(x.starts[index] * x.plane * 4)
            let count = part.channels.count * x.plane
            if let buffer = part.map.device as? DeviceBuffer {
                copy(target, buffer.address + UInt64(part.channels.lowerBound * x.plane * 4), floats: count)
            } else {
                let values = Array(
                    part.map.data[(part.channels.lowerBound * x.plane)..<(part.channels.upperBound * x.plane)])
                _ = upload(values, to: target)
            }
        }
        return out
    }

    /// Weights the layers keep for their lifetime, copied to the GPU once: keyed by the host arrays' addresses
    /// (kept alive with the copies, so an address cannot come back naming other values).
    func cached(_ arrays: [[Float]], make: () -> [[Float]]) -> [DeviceBuffer]? {
        cached(key: Self.addresses(arrays), sources: arrays, make: make)
    }

    static func addresses(_ arrays: [[Float]]) -> [UInt] {
        arrays.map { $0.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } }
    }

    /// The same, named by `key` and kept alive by `sources`.
    func cached(key addresses: [UInt], sources arrays: [Any], make: () -> [[Float]]) -> [DeviceBuffer]? {
        let key = WeightKey(addresses: addresses)
        if let hit = state.withLock({ $0.weights[key] }) {
            recordingHere()?.keep(hit)  // the graph reads them at every replay
            return hit.buffers
        }
        // Weights are copied for real, never recorded: a recording that meets new weights fails (and the work
        // runs as it comes, copying them).
        if let recording = recordingHere() {
            recording.fail(CUDAError("weights met for the first time while recording"))
            return nil
        }
        var buffers: [DeviceBuffer] = []
        for values in make() {
            guard let buffer = upload(values) else { return nil }
            buffers.append(buffer)
        }
        keep(buffers, as: key, sources: arrays)
        return buffers
    }

    /// Weights made on this thread's stream, waited for (other threads' streams read them next) and kept.
    private func keep(_ buffers: [DeviceBuffer], as key: WeightKey, sources: [Any]) {
        settle()
        state.withLock { state in
            // Layers hold their weights for their lifetime; a bound keeps weights made afresh per call (none today)
            // from piling up.
            if state.weights.count >= 4096 { state.weights.removeAll() }
            state.weights[key] = CachedWeights(sources: sources, buffers: buffers)
        }
    }

    /// Room for `count` 16-bit values.
    func buffer16(_ count: Int) -> DeviceBuffer? { buffer((count + 1) / 2) }

    /// `count` floats from `source` (at float `offset`) rounded to ``arithmetic``'s 16 bits into `target` (at
    /// 16-bit offset `targetOffset`).
    func round16(
        _ source: DeviceBuffer, offset: Int = 0, into target: DeviceBuffer, at targetOffset: Int = 0, count: Int
    ) {
        launch("lk_to_16", count: count) {
            $0.pointer(source, offset: offset)
            $0.pointer16(target, offset: targetOffset)
            $0.long(count)
            $0.int(Int(arithmetic.code))
        }
    }

    /// A layer's weights (`arrays`, already on the GPU as `full`, `count` floats) rounded to ``arithmetic``'s 16
    /// bits, once: keyed as ``cached(_:make:)`` and the type.
    func cached16(_ arrays: [[Float]], from full: DeviceBuffer, count: Int) -> DeviceBuffer? {
        cached16(key: Self.addresses(arrays), sources: arrays, from: full, count: count)
    }

    /// The same, named by `key` and kept alive by `sources` (as ``cached(key:sources:make:)``).
    func cached16(key addresses: [UInt], sources: [Any], from full: DeviceBuffer, count: Int) -> DeviceBuffer? {
        let key = WeightKey(addresses: addresses + [UInt(arithmetic.code)])
        if let hit = state.withLock({ $0.weights[key] }) {
            recordingHere()?.keep(hit)
            return hit.buffers[0]
        }
        if let recording = recordingHere() {
            recording.fail(CUDAError("weights met for the first time while recording"))
            return nil
        }
        guard let rounded = buffer16(count) else { return nil }
        round16(full, into: rounded, count: count)
        keep([rounded], as: key, sources: sources)
        return rounded
    }

    func map(_ buffer: DeviceBuffer?, channels: Int, height: Int, width: Int) -> FeatureMap {
        guard let buffer, buffer.count == channels * height * width else {
            return FeatureMap(
                channels: channels, height: height, width: width,
                data: [Float](repeating: .nan, count: channels * height * width))
        }
        return FeatureMap(channels: channels, height: height, width: width, device: buffer)
    }

    // MARK: Launching

    /// A kernel's parameters packed as they lie in its parameter buffer (each at its own alignment).
    struct Arguments {
        var bytes: [UInt8] = []

        mutating func align(_ alignment: Int) {
            while bytes.count % alignment != 0 { bytes.append(0) }
        }

        mutating func append<T>(_ value: T, alignment: Int) {
            align(alignment)
            withUnsafeBytes(of: value) { bytes += $0 }
        }

        mutating func pointer(_ buffer: DeviceBuffer?, offset: Int = 0) {
            append((buffer?.address ?? 0) + UInt64(offset * 4), alignment: 8)
        }
        /// A 16-bit buffer's address, `offset` counting 16-bit values.
        mutating func pointer16(_ buffer: DeviceBuffer?, offset: Int = 0) {
            append((buffer?.address ?? 0) + UInt64(offset * 2), alignment: 8)
        }
        mutating func int(_ value: Int) { append(Int32(value), alignment: 4) }
        mutating func long(_ value: Int) { append(Int64(value), alignment: 8) }
        mutating func float(_ value: Float) { append(value, alignment: 4) }
    }

    /// Launches `name` over `count` elements (blocks of 256 threads, the kernels striding over the rest).
    func launch(_ name: String, count: Int, _ fill: (inout Arguments) -> Void) {
        let blocks = UInt32(max(1, min((count + 255) / 256, 65_535)))
        launch(name, grid: (blocks, 1), block: (256, 1), fill)
    }

    /// Launches `name` a warp a row (eight rows a block of 256 threads, the kernel striding over the rest).
    func launch(_ name: String, warpRows rows: Int, _ fill: (inout Arguments) -> Void) {
        launch(name, grid: (UInt32(max(1, min((rows + 7) / 8, 65_535))), 1), block: (256, 1), fill)
    }

    /// Launches `name` over `rows` rows of `plane` values (``CUDAKernels``' `LK_ROWS`: rows on the grid's y).
    func launch(_ name: String, rows: Int, plane: Int, _ fill: (inout Arguments) -> Void) {
        let columns = UInt32(max(1, min((plane + 255) / 256, 65_535)))
        launch(name, grid: (columns, UInt32(max(1, min(rows, 65_535)))), block: (256, 1), fill)
    }

    func launch(
        _ name: String, grid: (UInt32, UInt32), depth: UInt32 = 1, block: (UInt32, UInt32), shared: UInt32 = 0,
        _ fill: (inout Arguments) -> Void
    ) {
        var arguments = Arguments()
        fill(&arguments)  // exactly the parameters' size: the driver refuses a buffer padded past the last one
        let function = functions[name]!
        recordingHere()?.note(name)
        timed(name) {
            let error = arguments.bytes.withUnsafeMutableBytes { bytes in
                Self.check {
                    lookout_cuda_launch(
                        function, grid.0, grid.1, depth, block.0, block.1, 1, shared, bytes.baseAddress, bytes.count,
                        $0,
                        $1)
                }
            }
            if let error { fail(error) }
        }
    }

    /// `C[i, j] = Σ_k A(i, k)·B(k, j)` (+ `beta`·C), row-major `m × n` with row stride `ldc`, where
    /// `A(i, k) = a[i·aRow + k·aColumn]` and `B(k, j) = b[k·bRow + j·bColumn]`; one of each pair of strides is 1.
    /// A and B are fp32, or with `operands` fp16 or bf16 (summed in fp32 on the tensor cores); C is fp32, or with
    /// `c16` (16-bit operands, through cuBLAS only: ``fusesSublayers``) of the operands' type.
    /// cuBLAS where it opened (and not `ownKernel`), else ``CUDAKernels``' `lk_gemm` or `lk_gemm_16`. Offsets count values.
    func gemm(
        m: Int, n: Int, k: Int, a: DeviceBuffer?, aOffset: Int = 0, aRow: Int, aColumn: Int, b: DeviceBuffer?,
        bOffset: Int = 0, bRow: Int, bColumn: Int, c: DeviceBuffer?, cOffset: Int = 0, ldc: Int, beta: Float = 0,
        operands: GPUArithmetic = .fp32, ownKernel: Bool = false, c16: Bool = false
    ) {
        guard m > 0 && n > 0, let a, let b, let c else { return }
        guard k > 0 else { return }
        precondition(!c16 || (operands != .fp32 && cublasPath != nil && !ownKernel))
        recordingHere()?.note("a \(m)×\(n)×\(k) product")
        let width = UInt64(operands == .fp32 ? 4 : 2)
        let (left, right) = (a.address + UInt64(aOffset) * width, b.address + UInt64(bOffset) * width)
        let out = c.address + UInt64(cOffset * (c16 ? 2 : 4))
        if cublasPath != nil && !ownKernel {
            // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: cuBLAS's first operand is B, its second A.
            // An operand is stored transposed when its column stride is not 1; its leading dimension is then
            // that stride, else its row stride (at least the row's length, as cuBLAS requires).
            let bTransposed: Int32 = bColumn != 1 ? 1 : 0
            let aTransposed: Int32 = aColumn != 1 ? 1 : 0
            let ldb = Int32(bTransposed == 1 ? bColumn : max(bRow, n))
            let lda = Int32(aTransposed == 1 ? aColumn : max(aRow, k))
            timed(operands == .fp32 ? "cuBLAS sgemm" : "cuBLAS \(operands.rawValue) GEMM") {
                if let error = Self.check({
                    operands == .fp32
                        ? lookout_cublas_sgemm(
                            bTransposed, aTransposed, Int32(n), Int32(m), Int32(k), right, ldb, left, lda, beta, out,
                            Int32(ldc), $0, $1)
                        : lookout_cublas_gemm_16(
                            operands.code, bTransposed, aTransposed, Int32(n), Int32(m), Int32(k), right, ldb, left,
                            lda, beta, out, Int32(ldc), c16 ? 1 : 0, $0, $1)
                }) {
                    fail(error)
                }
            }
            return
        }
        let grid = (UInt32((n + 15) / 16), UInt32((m + 15) / 16))
        launch(operands == .fp32 ? "lk_gemm" : "lk_gemm_16", grid: grid, block: (16, 16)) {
            $0.int(m)
            $0.int(n)
            $0.int(k)
            $0.append(left, alignment: 8)
            $0.long(aRow)
            $0.long(aColumn)
            $0.append(right, alignment: 8)
            $0.long(bRow)
            $0.long(bColumn)
            $0.append(out, alignment: 8)
            $0.long(ldc)
            $0.float(beta)
            if operands != .fp32 { $0.int(Int(operands.code)) }
        }
    }

    // MARK: ComputeBackend

    public func beginImage() {}

    /// Waits for this thread's stream.
    public func settle() {
        if let error = Self.check({ lookout_cuda_wait($0, $1) }) { fail(error) }
    }

    /// One after another: the GPU runs each task's operations across all of itself.
    public func tasks(_ count: Int, _ body: @escaping @Sendable (Int) -> FeatureMap) -> [FeatureMap] {
        (0..<count).map(body)
    }

    public func floats(_ x: FeatureMap) -> [Float] { x.data }

    // MARK: Batches

    /// The images of this thread's maps (``batched(_:_:)``), kept per thread as each thread's stream is.
    private static let imagesKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// How many images this thread's maps hold now (1 outside ``batched(_:_:)``).
    var images: Int { max(1, Int(bitPattern: pthread_getspecific(Self.imagesKey))) }

    /// Sized from the GPU's free memory: 256 MiB an image (s at 640 in fp16 with its recorded graph takes less),
    /// 1,024 at most.
    public var batchLimit: Int { max(1, min(1024, memory().free / (256 << 20))) }

    public func batched<T>(_ images: Int, _ body: () -> T) -> T {
        precondition(images >= 1, "a batch of \(images) images")
        let before = self.images
        pthread_setspecific(Self.imagesKey, UnsafeRawPointer(bitPattern: images))
        defer { pthread_setspecific(Self.imagesKey, UnsafeRawPointer(bitPattern: before)) }
        return body()
    }

    /// `lk_restack` once per image.
    public func stack(_ maps: [FeatureMap]) -> FeatureMap {
        precondition(!maps.isEmpty && maps.allSatisfy { $0.channels == maps[0].channels && $0.plane == maps[0].plane })
        guard maps.count > 1 else { return maps[0] }
        let (channels, plane, count) = (maps[0].channels, maps[0].plane, maps.count)
        let shape = (channels: channels, height: count * maps[0].height, width: maps[0].width)
        guard let out = buffer(count * channels * plane) else {
            return map(nil, channels: shape.channels, height: shape.height, width: shape.width)
        }
        for (index, source) in maps.enumerated() {
            guard let input = onDevice(source) else {
                return map(nil, channels: shape.channels, height: shape.height, width: shape.width)
            }
            launch("lk_restack", count: channels * plane) {
                $0.pointer(input)
                $0.pointer(out)
                $0.int(channels)
                $0.long(plane)
                $0.int(count)
                $0.int(index)
                $0.int(1)
            }
        }
        return map(out, channels: shape.channels, height: shape.height, width: shape.width)
    }

    public func unstack(_ x: FeatureMap, images count: Int) -> [FeatureMap] {
        precondition(count > 0 && x.height % count == 0, "a map of \(x.height) rows is not \(count) images")
        guard count > 1 else { return [x] }
        let (height, plane) = (x.height / count, x.plane / count)
        guard let input = onDevice(x) else {
            return (0..<count).map { _ in map(nil, channels: x.channels, height: height, width: x.width) }
        }
        return (0..<count).map { index in
            guard let out = buffer(x.channels * plane) else {
                return map(nil, channels: x.channels, height: height, width: x.width)
            }
            launch("lk_restack", count: x.channels * plane) {
                $0.pointer(input)
                $0.pointer(out)
                $0.int(x.channels)
                $0.long(plane)
                $0.int(count)
                $0.int(index)
                $0.int(0)
            }
            return map(out, channels: x.channels, height: height, width: x.width)
        }
    }

    /// Stacked parts are read where they lie, never joined: a 1×1 convolution sums one product per part (its
    /// weights' columns against its channels), a larger one lowers each part into its rows of the lowered input.
    public func convolve(_ x: StackedMaps, _ weights: ConvolutionWeights, kernel: any ConvolutionKernel) -> FeatureMap {
        guard profilesShapes else { return convolveHere(x, weights) }
        let (outHeight, outWidth) = weights.outputSize(height: x.height, width: x.width)
        var made: FeatureMap?
        let k = weights.kernel
        timed(
            "convolution \(k)×\(k)/\(weights.stride) \(weights.inputs)→\(weights.outputs) at \(outHeight)×\(outWidth)"
                + " (\(x.parts.count) part\(x.parts.count == 1 ? "" : "s"))"
        ) { made = convolveHere(x, weights) }
        return made!
    }

    private func convolveHere(_ x: StackedMaps, _ weights: ConvolutionWeights) -> FeatureMap {
        precondition(x.channels == weights.inputs, "a convolution of \(weights.inputs) inputs given \(x.channels)")
        // Of a batch, each image's output rows in turn (a stride-2 convolution of an odd height is not half the
        // stack's).
        let images = self.images
        let perImage = weights.outputSize(height: x.height / images, width: x.width)
        let (outHeight, outWidth) = (images * perImage.height, perImage.width)
        let (plane, outPlane, k) = (x.plane, outHeight * outWidth, weights.kernel)
        let depth = weights.inputs * k * k
        // Made only where something failed: its NaNs fill the host's memory (420 MB for a batch of 32's first
        // layer, which took the host longer than the GPU's whole batch where it was made every call).
        func failed() -> FeatureMap { map(nil, channels: weights.outputs, height: outHeight, width: outWidth) }
        let source = [weights.weight, weights.packed, weights.transformed, weights.bias]
        guard let parameters = cached(source, make: { [weights.denseWeight, weights.bias] }),
            let out = buffer(weights.outputs * outPlane)
        else { return failed() }
        // Each part: its map's buffer (a host map copied over), where its channels start there, how many, and where
        // they start among the stack's.
        var parts: [(buffer: DeviceBuffer, offset: Int, channels: Int, start: Int)] = []
        if joinsParts {
            guard let joined = onDevice(x) else { return failed() }
            parts.append((joined, 0, x.channels, 0))
        }
        for (index, part) in x.parts.enumerated() where !joinsParts {
            guard let buffer = onDevice(part.map) else { return failed() }
            parts.append((buffer, part.channels.lowerBound * plane, part.channels.count, x.starts[index]))
        }
        if arithmetic != .fp32, images == 1, case .asMultiplied(let wideTiles, let upToPlane) = lowering,
            outPlane <= upToPlane,
            case let present = parts.filter({ $0.channels > 0 }), (1...4).contains(present.count)
        {
            guard let weight16 = cached16(source, from: parameters[0], count: weights.outputs * depth) else {
                return failed()
            }
            // Rows split among blocks (summed after by lk_split_sum, in a fixed order) where the tiles alone are
            // too few to fill the GPU: at least four row tiles a block.
            let wide = wideTiles && weights.outputs > 64
            let rows = wide ? 128 : 64
            let grid = (UInt32((outPlane + 63) / 64), UInt32((weights.outputs + rows - 1) / rows))
            let (tiles, blocks) = ((depth + 31) / 32, Int(grid.0 * grid.1))
            let wanted = blocks >= 2 * gpu.multiprocessors ? 1 : (2 * gpu.multiprocessors + blocks - 1) / blocks
            let perSplit = (tiles + max(1, min(wanted, tiles / 4)) - 1) / max(1, min(wanted, tiles / 4))
            let splits = (tiles + perSplit - 1) / perSplit
            let partial = splits > 1 ? buffer(splits * weights.outputs * outPlane) : nil
            guard splits == 1 || partial != nil else { return failed() }
            launch(
                wide ? "lk_conv_16_wide" : "lk_conv_16", grid: grid, depth: UInt32(splits), block: (UInt32(2 * rows), 1)
            ) {
                $0.pointer16(weight16)
                $0.int(weights.outputs)
                $0.int(depth)
                for index in 0..<4 {
                    let part = present[min(index, present.count - 1)]
                    $0.pointer(part.buffer, offset: part.offset)
                }
                for index in 1..<4 { $0.int(index < present.count ? present[index].start : Int(Int32.max)) }
                $0.int(x.height)
                $0.int(x.width)
                $0.int(k)
                $0.int(weights.stride)
                $0.int(outHeight)
                $0.int(outWidth)
                $0.pointer(parameters[1])
                $0.int(weights.activation ? 1 : 0)
                $0.pointer(out)
                $0.int(Int(arithmetic.code))
                $0.int(perSplit)
                $0.pointer(partial)
            }
            if let partial {
                launch("lk_split_sum", rows: weights.outputs, plane: outPlane) {
                    $0.pointer(partial)
                    $0.int(splits)
                    $0.int(weights.outputs)
                    $0.int(outPlane)
                    $0.pointer(parameters[1])
                    $0.int(weights.activation ? 1 : 0)
                    $0.pointer(out)
                }
            }
            return map(out, channels: weights.outputs, height: outHeight, width: outWidth)
        }
        if arithmetic != .fp32 {
            // The lowered input in 16 bits (a 1×1 convolution's parts rounded into their rows), one product.
            guard let weight16 = cached16(source, from: parameters[0], count: weights.outputs * depth),
                let columns = buffer16(depth * outPlane)
            else { return failed() }
            for part in parts where part.channels > 0 {
                if k == 1 && weights.stride == 1 {
                    round16(
                        part.buffer, offset: part.offset, into: columns, at: part.start * plane,
                        count: part.channels * plane)
                    continue
                }
                lower(part, of: x, weights, into: columns, sixteen: true)
            }
            gemm(
                m: weights.outputs, n: outPlane, k: depth, a: weight16, aRow: depth, aColumn: 1, b: columns,
                bRow: outPlane, bColumn: 1, c: out, ldc: outPlane, operands: arithmetic)
        } else if k == 1 && weights.stride == 1 {
            // Empty parts left out: the first product writes, the others add.
            for (index, part) in parts.filter({ $0.channels > 0 }).enumerated() {
                gemm(
                    m: weights.outputs, n: plane, k: part.channels, a: parameters[0], aOffset: part.start, aRow: depth,
                    aColumn: 1, b: part.buffer, bOffset: part.offset, bRow: plane, bColumn: 1, c: out, ldc: plane,
                    beta: index == 0 ? 0 : 1)
            }
        } else {
            guard let columns = buffer(depth * outPlane) else { return failed() }
            for part in parts { lower(part, of: x, weights, into: columns, sixteen: false) }
            gemm(
                m: weights.outputs, n: outPlane, k: depth, a: parameters[0], aRow: depth, aColumn: 1, b: columns,
                bRow: outPlane, bColumn: 1, c: out, ldc: outPlane)
        }
        launch("lk_bias_act", rows: weights.outputs, plane: outPlane) {
            $0.pointer(out)
            $0.pointer(parameters[1])
            $0.int(outPlane)
            $0.int(weights.outputs)
            $0.int(weights.activation ? 1 : 0)
        }
        return map(out, channels: weights.outputs, height: outHeight, width: outWidth)
    }

    /// A part's rows of a convolution's lowered input (`lk_im2col`, or `lk_im2col_16` rounding to ``arithmetic``).
    private func lower(
        _ part: (buffer: DeviceBuffer, offset: Int, channels: Int, start: Int), of x: StackedMaps,
        _ weights: ConvolutionWeights, into columns: DeviceBuffer, sixteen: Bool
    ) {
        // Of a batch, each image's rows (the stack's are the images' one after another).
        let images = self.images
        let height = x.height / images
        let (outHeight, outWidth) = weights.outputSize(height: height, width: x.width)
        let k = weights.kernel
        let outPlane = images * outHeight * outWidth
        let at = part.start * k * k * outPlane
        launch(sixteen ? "lk_im2col_16" : "lk_im2col", rows: part.channels * k * k, plane: (outPlane + 3) / 4) {
            $0.pointer(part.buffer, offset: part.offset)
            if sixteen { $0.pointer16(columns, offset: at) } else { $0.pointer(columns, offset: at) }
            $0.int(part.channels)
            $0.int(height)
            $0.int(x.width)
            $0.int(k)
            $0.int(weights.stride)
            $0.int(outHeight)
            $0.int(outWidth)
            $0.int(images)
            if sixteen { $0.int(Int(arithmetic.code)) }
        }
    }

    public func convolve(_ x: FeatureMap, _ weights: ConvolutionWeights, kernel: any ConvolutionKernel) -> FeatureMap {
        convolve(StackedMaps(x), weights, kernel: kernel)
    }

    public func depthwiseConvolution(
        _ x: FeatureMap, weight: [Float], bias: [Float], kernel: Int, activation: Bool
    ) -> FeatureMap {
        precondition(weight.count == x.channels * kernel * kernel && bias.count == x.channels)
        guard let input = onDevice(x), let parameters = cached([weight, bias], make: { [weight, bias] }),
            let out = buffer(x.channels * x.plane)
        else { return map(nil, channels: x.channels, height: x.height, width: x.width) }
        let images = self.images
        launch("lk_depthwise", count: x.channels * x.plane) {
            $0.pointer(input)
            $0.pointer(parameters[0])
            $0.pointer(parameters[1])
            $0.pointer(out)
            $0.int(x.channels)
            $0.int(x.height / images)
            $0.int(x.width)
            $0.int(kernel)
            $0.int(activation ? 1 : 0)
            $0.int(images)
        }
        return map(out, channels: x.channels, height: x.height, width: x.width)
    }

    public func transposedConvolution2x2(_ x: FeatureMap, taps: [[Float]], bias: [Float]) -> FeatureMap {
        let (inputs, outputs) = (x.channels, bias.count)
        precondition(taps.count == 4 && taps.allSatisfy { $0.count == outputs * inputs })
        guard let input = onDevice(x),
            let parameters = cached(taps + [bias], make: { [taps.flatMap { $0 }, bias] }),
            let out = buffer(outputs * 4 * x.plane)
        else { return map(nil, channels: outputs, height: 2 * x.height, width: 2 * x.width) }
        launch("lk_transposed2x2", count: outputs * 4 * x.plane) {
            $0.pointer(input)
            $0.pointer(parameters[0])
            $0.pointer(parameters[1])
            $0.pointer(out)
            $0.int(inputs)
            $0.int(outputs)
            $0.int(x.height)
            $0.int(x.width)
        }
        return map(out, channels: outputs, height: 2 * x.height, width: 2 * x.width)
    }

    public func maxPool(_ x: FeatureMap, size: Int) -> FeatureMap {
        guard let input = onDevice(x), let out = buffer(x.channels * x.plane) else {
            return map(nil, channels: x.channels, height: x.height, width: x.width)
        }
        let images = self.images
        launch("lk_max_pool", count: x.channels * x.plane) {
            $0.pointer(input)
            $0.pointer(out)
            $0.int(x.channels * images)
            $0.int(x.height / images)
            $0.int(x.width)
            $0.int(size / 2)
        }
        return map(out, channels: x.channels, height: x.height, width: x.width)
    }

    public func upsample(_ x: FeatureMap) -> FeatureMap {
        guard let input = onDevice(x), let out = buffer(x.channels * 4 * x.plane) else {
            return map(nil, channels: x.channels, height: 2 * x.height, width: 2 * x.width)
        }
        launch("lk_upsample2", count: x.channels * 4 * x.plane) {
            $0.pointer(input)
            $0.pointer(out)
            $0.int(x.channels)
            $0.int(x.height)
            $0.int(x.width)
        }
        return map(out, channels: x.channels, height: 2 * x.height, width: 2 * x.width)
    }

    public func concatenate(_ maps: [FeatureMap]) -> FeatureMap {
        precondition(
            maps.allSatisfy { $0.height == maps[0].height && $0.width == maps[0].width },
            "concatenating maps of different sizes")
        let channels = maps.reduce(0) { $0 + $1.channels }
        let out = onDevice(StackedMaps(maps))
        return map(out, channels: channels, height: maps[0].height, width: maps[0].width)
    }

    public func slice(_ x: FeatureMap, channels range: Range<Int>) -> FeatureMap {
        guard let input = onDevice(x), let out = buffer(range.count * x.plane) else {
            return map(nil, channels: range.count, height: x.height, width: x.width)
        }
        copy(out.address, input.address + UInt64(range.lowerBound * x.plane * 4), floats: range.count * x.plane)
        return map(out, channels: range.count, height: x.height, width: x.width)
    }

    public func add(_ x: inout FeatureMap, _ y: StackedMaps) {
        precondition(x.channels == y.channels && x.plane == y.plane, "adding maps of different sizes")
        // A copy of x of its own (x's buffer may be another map's too), then y added into it.
        guard let source = onDevice(x), let other = onDevice(y), let out = buffer(source.count) else {
            x = map(nil, channels: x.channels, height: x.height, width: x.width)
            return
        }
        copy(out.address, source.address, floats: source.count)
        launch("lk_add", count: out.count) {
            $0.pointer(out)
            $0.pointer(other)
            $0.long(out.count)
        }
        x = map(out, channels: x.channels, height: x.height, width: x.width)
    }

    public func channelAffine(_ x: inout FeatureMap, scale: [Float], shift: [Float]) {
        precondition(scale.count == x.channels && shift.count == x.channels)
        guard let source = onDevice(x), let parameters = cached([scale, shift], make: { [scale, shift] }),
            let out = buffer(source.count)
        else {
            x = map(nil, channels: x.channels, height: x.height, width: x.width)
            return
        }
        copy(out.address, source.address, floats: source.count)
        launch("lk_affine", count: out.count) {
            $0.pointer(out)
            $0.pointer(parameters[0])
            $0.pointer(parameters[1])
            $0.int(x.plane)
            $0.long(out.count)
        }
        x = map(out, channels: x.channels, height: x.height, width: x.width)
    }

    public func gather(_ x: FeatureMap, columns: [Int]) -> [Float] {
        let count = x.channels * columns.count
        guard count > 0 else { return [] }
        guard let input = onDevice(x), let indices = upload(columns.map { Int32($0) }), let out = buffer(count) else {
            return [Float](repeating: .nan, count: count)
        }
        launch("lk_gather", count: count) {
            $0.pointer(input)
            $0.pointer(indices)
            $0.pointer(out)
            $0.int(x.channels)
            $0.int(x.plane)
            $0.int(columns.count)
        }
        return download(out)
    }

    public func weightedChannelSum(_ x: FeatureMap, weights: [Float]) -> [Float] {
        precondition(weights.count == x.channels)
        guard let input = onDevice(x), let w = upload(weights), let out = buffer(x.plane) else {
            return [Float](repeating: .nan, count: x.plane)
        }
        launch("lk_weighted_sum", count: x.plane) {
            $0.pointer(input)
            $0.pointer(w)
            $0.pointer(out)
            $0.int(x.channels)
            $0.int(x.plane)
        }
        return download(out)
    }

    // MARK: Dense

    /// Products of host arrays of at most this many multiply-adds (the text side's: the neck's guide projections,
    /// the head's folded text) are the host backend's: their result is wanted on the host, and a round trip
    /// would wait for the GPU's queue.
    static let hostProducts = 1 << 20

    public func linear(_ x: [Float], rows: Int, inputs: Int, weight: [Float], bias: [Float]?, outputs: Int) -> [Float] {
        precondition(
            x.count == rows * inputs && weight.count == outputs * inputs && (bias?.count ?? outputs) == outputs)
        guard rows > 0 else { return [] }
        if rows * inputs * outputs <= Self.hostProducts {
            return host.linear(x, rows: rows, inputs: inputs, weight: weight, bias: bias, outputs: outputs)
        }
        // The weight is a layer's (the neck's guide projections): copied once.
        guard let input = upload(x), let parameters = cached([weight, bias ?? []], make: { [weight, bias ?? [0]] }),
            let out = buffer(rows * outputs)
        else { return [Float](repeating: .nan, count: rows * outputs) }
        let w = parameters[0]
        // y[r, o] = Σ_i x[r, i]·W[o, i]: B(i, o) = W[o·inputs + i].
        gemm(
            m: rows, n: outputs, k: inputs, a: input, aRow: inputs, aColumn: 1, b: w, bRow: 1, bColumn: inputs,
            c: out, ldc: outputs)
        if bias != nil {
            launch("lk_add_rows", count: rows * outputs) {
                $0.pointer(out)
                $0.pointer(parameters[1])
                $0.int(outputs)
                $0.long(rows * outputs)
            }
        }
        return download(out)
    }

    public func matmul(_ a: [Float], _ b: [Float], m: Int, n: Int, k: Int) -> [Float] {
        precondition(a.count == m * k && b.count == k * n)
        guard m > 0 && n > 0 else { return [Float](repeating: 0, count: m * n) }
        guard k > 0 else { return [Float](repeating: 0, count: m * n) }
        if m * n * k <= Self.hostProducts { return host.matmul(a, b, m: m, n: n, k: k) }
        guard let left = upload(a), let right = upload(b), let out = buffer(m * n) else {
            return [Float](repeating: .nan, count: m * n)
        }
        gemm(m: m, n: n, k: k, a: left, aRow: k, aColumn: 1, b: right, bRow: n, bColumn: 1, c: out, ldc: n)
        return download(out)
    }

    // MARK: Attention

    public func maxSigmoidAttention(
        _ x: StackedMaps, guide g: [Float], classes: Int, heads: Int, bias: [Float]
    ) -> FeatureMap {
        let (channels, plane) = (x.channels, x.plane)
        precondition(g.count == classes * channels && bias.count == heads)
        // The bias is the layer's (copied once); the guide is the queries'.
        guard let input = onDevice(x), let guide = upload(g), let b = cached([bias], make: { [bias] })?.first,
            let out = buffer(heads * plane)
        else { return map(nil, channels: heads, height: x.height, width: x.width) }
        let divisor = Float(Double(channels / heads).squareRoot())
        launch("lk_max_sigmoid", count: heads * plane) {
            $0.pointer(input)
            $0.pointer(guide)
            $0.pointer(b)
            $0.pointer(out)
            $0.int(channels)
            $0.int(classes)
            $0.int(heads)
            $0.int(plane)
            $0.float(divisor)
        }
        return map(out, channels: heads, height: x.height, width: x.width)
    }

    public func scaleHeads(_ x: StackedMaps, by weights: FeatureMap, heads: Int) -> FeatureMap {
        let (channels, plane) = (x.channels, x.plane)
        precondition(weights.channels == heads && weights.plane == plane)
        guard let input = onDevice(x), let w = onDevice(weights), let out = buffer(channels * plane) else {
            return map(nil, channels: channels, height: x.height, width: x.width)
        }
        launch("lk_scale_heads", count: channels * plane) {
            $0.pointer(input)
            $0.pointer(w)
            $0.pointer(out)
            $0.int(channels)
            $0.int(channels / heads)
            $0.int(plane)
        }
        return map(out, channels: channels, height: x.height, width: x.width)
    }

    public func spatialAttention(
        _ t: FeatureMap, heads: Int, keySize: Int, headSize: Int
    ) -> (values: FeatureMap, attended: FeatureMap) {
        precondition(images == 1, "attention over a map's pixels takes one image at a time")
        let n = t.plane
        let group = 2 * keySize + headSize
        precondition(t.channels == heads * group, "a qkv map of \(heads) heads")
        guard let input = onDevice(t), let values = buffer(heads * headSize * n),
            let attended = buffer(heads * headSize * n), let query = buffer(keySize * n), let scores = buffer(n * n)
        else {
            return (
                map(nil, channels: heads * headSize, height: t.height, width: t.width),
                map(nil, channels: heads * headSize, height: t.height, width: t.width)
            )
        }
        let scale = Float(1 / Double(keySize).squareRoot())
        for h in 0..<heads {
            let base = h * group * n
            launch("lk_scale", count: keySize * n) {
                $0.pointer(input, offset: base)
                $0.pointer(query)
                $0.float(scale)
                $0.long(keySize * n)
            }
            copy(
                values.address + UInt64(h * headSize * n * 4), input.address + UInt64((base + 2 * keySize * n) * 4),
                floats: headSize * n)
            // scores[i, j] = Σ_d q[d, i]·k[d, j]; softmax over j; out[c, i] = Σ_j v[c, j]·scores[i, j].
            gemm(
                m: n, n: n, k: keySize, a: query, aRow: 1, aColumn: n, b: input, bOffset: base + keySize * n, bRow: n,
                bColumn: 1, c: scores, ldc: n)
            launch("lk_softmax_rows", count: n) {
                $0.pointer(scores)
                $0.int(n)
                $0.int(n)
            }
            gemm(
                m: headSize, n: n, k: n, a: input, aOffset: base + 2 * keySize * n, aRow: n, aColumn: 1, b: scores,
                bRow: 1, bColumn: n, c: attended, cOffset: h * headSize * n, ldc: n)
        }
        return (
            map(values, channels: heads * headSize, height: t.height, width: t.width),
            map(attended, channels: heads * headSize, height: t.height, width: t.width)
        )
    }

    /// On the CPU (visual prompts: once per reference photo).
    public func maskedSoftmaxPool(_ x: FeatureMap, scores: FeatureMap, mask: [UInt8], groups: Int) -> [Float] {
        precondition(images == 1, "visual-prompt pooling takes one image at a time")
        // Each map copied back once (the CPU's loop reads them value by value).
        func onHost(_ map: FeatureMap) -> FeatureMap {
            FeatureMap(channels: map.channels, height: map.height, width: map.width, data: map.data)
        }
        return host.maskedSoftmaxPool(onHost(x), scores: onHost(scores), mask: mask, groups: groups)
    }

    // MARK: Sequences (the towers): row matrices kept on the GPU from one operation to the next

    func matrix(_ buffer: DeviceBuffer?, rows: Int, columns: Int) -> RowMatrix {
        RowMatrix(map(buffer, channels: 1, height: rows, width: columns))
    }

    /// One warp a row (`lk_layer_norm`).
    public func layerNorm(_ x: RowMatrix, gamma: [Float], beta: [Float], epsilon: Float) -> RowMatrix {
        let (rows, width) = (x.rows, x.columns)
        precondition(gamma.count == width && beta.count == width)
        guard rows > 0 else { return x }
        guard let input = onDevice(x.map), let out = buffer(rows * width) else {
            return matrix(nil, rows: rows, columns: width)
        }
        let norm = SequenceNorm(gamma: gamma, beta: beta, epsilon: epsilon)
        guard layerNorm(input, rows: rows, norm, into: out, half: twin(of: out)) else {
            return matrix(nil, rows: rows, columns: width)
        }
        return matrix(out, rows: rows, columns: width)
    }

    /// `lk_layer_norm` of `rows` rows of `input` into `out` (fp32, nil: none) and `half` (16-bit, nil: none);
    /// false where its parameters could not be put on the GPU (recorded).
    func layerNorm(
        _ input: DeviceBuffer, rows: Int, _ norm: SequenceNorm, into out: DeviceBuffer?, half: DeviceBuffer?
    ) -> Bool {
        guard let parameters = cached([norm.gamma, norm.beta], make: { [norm.gamma, norm.beta] }) else {
            return false
        }
        launch("lk_layer_norm", warpRows: rows) {
            $0.pointer(input)
            $0.pointer(parameters[0])
            $0.pointer(parameters[1])
            $0.pointer(out)
            $0.int(rows)
            $0.int(norm.gamma.count)
            $0.float(norm.epsilon)
            $0.pointer16(half)
            $0.int(Int(arithmetic.code))
        }
        return true
    }

    /// With 16-bit ``arithmetic``, room for `out`'s values rounded (``DeviceBuffer/sixteen``), which the kernel
    /// making `out` writes as well; nil in fp32.
    func twin(of out: DeviceBuffer) -> DeviceBuffer? {
        guard arithmetic != .fp32, let half = buffer16(out.count) else { return nil }
        out.sixteen = (half, arithmetic.code)
        return half
    }

    /// `x·Wᵀ` into a new buffer: fp32 and fp16 weights on the GPU (unpacked once); in fp16 or bf16 ``arithmetic``
    /// the input (its 16-bit values where the kernel that made it wrote them) and the weights rounded to 16 bits
    /// and multiplied on the tensor cores (fp32 sums). nil where a buffer could not be made (recorded).
    private func product(_ x: RowMatrix, _ layer: PackedLinear) -> (out: DeviceBuffer, bias: DeviceBuffer)? {
        let rows = x.rows
        guard let input = onDevice(x.map), let parameters = onDevice(layer), let out = buffer(rows * layer.outputs)
        else { return nil }
        if arithmetic == .fp32 {
            gemm(
                m: rows, n: layer.outputs, k: layer.inputs, a: input, aRow: layer.inputs, aColumn: 1,
                b: parameters.weight, bRow: 1, bColumn: layer.inputs, c: out, ldc: layer.outputs)
            return (out, parameters.bias)
        }
        guard let weights = onDevice16(layer)?.weight else { return nil }
        let rounded: DeviceBuffer
        if let made = input.sixteen, made.code == arithmetic.code {
            rounded = made.buffer
        } else {
            guard let buffer = buffer16(rows * layer.inputs) else { return nil }
            round16(input, into: buffer, count: rows * layer.inputs)
            rounded = buffer
        }
        gemm(
            m: rows, n: layer.outputs, k: layer.inputs, a: rounded, aRow: layer.inputs, aColumn: 1, b: weights,
            bRow: 1, bColumn: layer.inputs, c: out, ldc: layer.outputs, operands: arithmetic)
        return (out, parameters.bias)
    }

    /// A linear layer's weight (fp32, `outputs × inputs`) and bias (`[0]` where it has none) on the GPU, once.
    func onDevice(_ layer: PackedLinear) -> (weight: DeviceBuffer, bias: DeviceBuffer)? {
        guard
            let parameters = cached(
                key: [layer.storageAddress], sources: [layer],
                make: { [layer.denseWeight ?? [], layer.denseBias ?? [0]] })
        else { return nil }
        return (parameters[0], parameters[1])
    }

    /// The same with the weight rounded to ``arithmetic``'s 16 bits (once); the bias fp32.
    func onDevice16(_ layer: PackedLinear) -> (weight: DeviceBuffer, bias: DeviceBuffer)? {
        guard let parameters = onDevice(layer),
            let weight = cached16(
                key: [layer.storageAddress], sources: [layer], from: parameters.weight, count: parameters.weight.count)
        else { return nil }
        return (weight, parameters.bias)
    }

    /// The product (``product(_:_:)``), then bias and activation in one pass (`lk_bias_rows`), which also writes
    /// the 16-bit operand of the layer after it; a bf16 layer (packed for the CPU) on the CPU.
    public func linear(_ x: RowMatrix, layer: PackedLinear, activation: SequenceActivation?) -> RowMatrix {
        precondition(x.columns == layer.inputs)
        let rows = x.rows
        guard !layer.isBF16, rows > 0 else {
            return host.linear(
                RowMatrix(rows: rows, columns: x.columns, data: x.data), layer: layer, activation: activation)
        }
        guard let (out, bias) = product(x, layer) else { return matrix(nil, rows: rows, columns: layer.outputs) }
        guard layer.denseBias != nil || activation != nil else {
            return matrix(out, rows: rows, columns: layer.outputs)
        }
        let half = activation == nil ? nil : twin(of: out)
        // Four values a thread where the rows allow (every buffer starts 256-byte aligned).
        let quarters = layer.outputs % 4 == 0
        launch(quarters ? "lk_bias_rows_4" : "lk_bias_rows", rows: rows, plane: layer.outputs / (quarters ? 4 : 1)) {
            $0.pointer(out)
            $0.pointer(layer.denseBias == nil ? nil : bias)
            $0.pointer16(half)
            $0.int(rows)
            $0.int(layer.outputs / (quarters ? 4 : 1))
            $0.int(Self.code(activation))
            $0.int(Int(arithmetic.code))
        }
        return matrix(out, rows: rows, columns: layer.outputs)
    }

    /// The kernels' activation codes (`lk_activation`).
    static func code(_ activation: SequenceActivation?) -> Int {
        switch activation {
        case nil: 0
        case .quickGELU: 1
        case .gelu: 2
        case .geluTanh: 3
        }
    }

    /// The product, then `x + (product + b)` in one pass (`lk_bias_residual`) into a new buffer.
    public func addLinear(_ x: inout RowMatrix, _ y: RowMatrix, layer: PackedLinear) {
        precondition(y.columns == layer.inputs && x.columns == layer.outputs && x.rows == y.rows)
        let rows = x.rows
        guard !layer.isBF16, layer.denseBias != nil, rows > 0 else {
            add(&x, linear(y, layer: layer, activation: nil))
            return
        }
        guard let residual = onDevice(x.map), let (product, bias) = product(y, layer),
            let out = buffer(rows * layer.outputs)
        else {
            x = matrix(nil, rows: rows, columns: layer.outputs)
            return
        }
        addBiased(residual, product, bias, into: out, rows: rows, outputs: layer.outputs)
        x = matrix(out, rows: rows, columns: layer.outputs)
    }

    /// `out = residual + (product + bias)`, by rows (`lk_bias_residual`, four values a thread where it can).
    func addBiased(
        _ residual: DeviceBuffer, _ product: DeviceBuffer, _ bias: DeviceBuffer, into out: DeviceBuffer, rows: Int,
        outputs: Int
    ) {
        let quarters = outputs % 4 == 0
        launch(quarters ? "lk_bias_residual_4" : "lk_bias_residual", rows: rows, plane: outputs / (quarters ? 4 : 1)) {
            $0.pointer(residual)
            $0.pointer(product)
            $0.pointer(bias)
            $0.pointer(out)
            $0.int(rows)
            $0.int(outputs / (quarters ? 4 : 1))
        }
    }

    /// `lk_attention_block` (a block per sequence and head, its keys and values in shared memory; `lk_attention_64`
    /// for heads of 64) where they fit in a block's shared memory (``GPU/sharedMemoryPerBlock``: 227 KB on an
    /// H100 or H200, so ViT-L/14's 257 tokens too), else `lk_sequence_attention` (a thread per row).
    public func sequenceAttention(
        _ qkv: RowMatrix, lengths: [Int], starts: [Int], heads: Int, causal: Bool
    ) -> RowMatrix {
        let (total, width) = (qkv.rows, qkv.columns / 3)
        let longest = lengths.max() ?? 0
        let size = width / heads
        guard size <= 256, total > 0 else {
            return host.sequenceAttention(
                RowMatrix(rows: total, columns: qkv.columns, data: qkv.data), lengths: lengths, starts: starts,
                heads: heads, causal: causal)
        }
        guard let input = onDevice(qkv.map), let first = upload(starts.map { Int32($0) }),
            let counts = upload(lengths.map { Int32($0) }), let out = buffer(total * width)
        else { return matrix(nil, rows: total, columns: width) }
        // Rows no sequence covers stay zero, as the CPU leaves them; sequences that tile the rows leave none.
        let tiled = Self.tile(total, lengths: lengths, starts: starts)
        if !tiled {
            launch("lk_fill", count: total * width) {
                $0.pointer(out)
                $0.float(0)
                $0.long(total * width)
            }
        }
        // Both kernels' parameters up to the output.
        func sequences(_ arguments: inout Arguments) {
            arguments.pointer(input)
            arguments.pointer(first)
            arguments.pointer(counts)
            arguments.int(lengths.count)
            arguments.int(longest)
            arguments.int(width)
            arguments.int(heads)
            arguments.int(causal ? 1 : 0)
            arguments.float(1 / Float(size).squareRoot())
            arguments.pointer(out)
        }
        let warps = 8
        let sixtyFour = size == 64 && width % 4 == 0
        let shared =
            sixtyFour
            ? 4 * (longest * 132 + warps * (64 + (longest + 3) / 4 * 4))
            : 4 * (longest * (size + 1) + longest * size + warps * (size + longest))
        // Every row covered: the 16-bit operand of the output projection written as well.
        if shared <= gpu.sharedMemoryPerBlock {
            let half = tiled ? twin(of: out) : nil
            let items = lengths.count * heads
            launch(
                sixtyFour ? "lk_attention_64" : "lk_attention_block", grid: (UInt32(min(items, 65_535)), 1),
                block: (UInt32(32 * warps), 1), shared: UInt32(shared)
            ) {
                sequences(&$0)
                $0.pointer16(half)
                $0.int(Int(arithmetic.code))
            }
            return matrix(out, rows: total, columns: width)
        }
        launch("lk_sequence_attention", count: lengths.count * heads * longest) { sequences(&$0) }
        return matrix(out, rows: total, columns: width)
    }

    /// Whether the sequences cover `rows` rows exactly, one after another from the first.
    static func tile(_ rows: Int, lengths: [Int], starts: [Int]) -> Bool {
        guard lengths.count == starts.count else { return false }
        var next = 0
        for (start, length) in zip(starts, lengths) {
            guard start == next else { return false }
            next += length
        }
        return next == rows
    }

    /// Into a new buffer (x's may be another matrix's too).
    public func activate(_ x: inout RowMatrix, _ activation: SequenceActivation) {
        let count = x.rows * x.columns
        guard count > 0 else { return }
        guard let values = onDevice(x.map), let out = buffer(count) else {
            x = matrix(nil, rows: x.rows, columns: x.columns)
            return
        }
        launch("lk_activate", count: count) {
            $0.pointer(values)
            $0.pointer(out)
            $0.long(count)
            $0.int(Self.code(activation))
        }
        x = matrix(out, rows: x.rows, columns: x.columns)
    }

    public func add(_ x: inout RowMatrix, _ y: RowMatrix) {
        precondition(x.rows == y.rows && x.columns == y.columns)
        let count = x.rows * x.columns
        guard count > 0 else { return }
        guard let values = onDevice(x.map), let other = onDevice(y.map), let out = buffer(count) else {
            x = matrix(nil, rows: x.rows, columns: x.columns)
            return
        }
        launch("lk_sum", count: count) {
            $0.pointer(values)
            $0.pointer(other)
            $0.pointer(out)
            $0.long(count)
        }
        x = matrix(out, rows: x.rows, columns: x.columns)
    }

    public func addRepeating(_ x: inout RowMatrix, _ table: [Float]) {
        let count = x.rows * x.columns
        precondition(x.columns > 0 && !table.isEmpty && table.count % x.columns == 0)
        guard count > 0 else { return }
        guard let values = onDevice(x.map), let rows = cached([table], make: { [table] }), let out = buffer(count)
        else {
            x = matrix(nil, rows: x.rows, columns: x.columns)
            return
        }
        launch("lk_add_repeating", count: count) {
            $0.pointer(values)
            $0.pointer(rows[0])
            $0.pointer(out)
            $0.long(table.count)
            $0.long(count)
        }
        x = matrix(out, rows: x.rows, columns: x.columns)
    }

    /// Lookout's own GEMM (`lk_gemm`), even where cuBLAS opened: each output is one thread's sum in a fixed order,
    /// whatever the number of rows (cuBLAS may choose its kernel, and so its order, by the shape). The towers'
    /// layers before it go through cuBLAS, which may: on a GPU a photo's embedding can differ in its last bits
    /// with the batch beside it (within the op-by-op suite's bounds); on the CPU it cannot.
    public func rowProducts(_ x: RowMatrix, _ b: [Float], columns: Int) -> [Float] {
        let (rows, width) = (x.rows, x.columns)
        precondition(b.count == width * columns)
        guard rows > 0 else { return [] }
        guard let input = onDevice(x.map), let weights = cached([b], make: { [b] }), let out = buffer(rows * columns)
        else { return [Float](repeating: .nan, count: rows * columns) }
        gemm(
            m: rows, n: columns, k: width, a: input, aRow: width, aColumn: 1, b: weights[0], bRow: columns, bColumn: 1,
            c: out, ldc: columns, ownKernel: true)
        return download(out)
    }

    /// The images copied over into one buffer, cut on the GPU (`lk_patches`).
    public func patchRows(_ images: [[Float]], channels: Int, side: Int, patch: Int) -> RowMatrix {
        let grid = side / patch
        let (inputs, tokens) = (channels * patch * patch, grid * grid + 1)
        let size = channels * side * side
        precondition(images.allSatisfy { $0.count == size }, "images must be \(channels) × \(side)²")
        let count = images.count * tokens * inputs
        guard count > 0 else { return RowMatrix(rows: 0, columns: inputs, data: []) }
        guard let all = buffer(images.count * size), let out = buffer(count) else {
            return matrix(nil, rows: images.count * tokens, columns: inputs)
        }
        for (n, image) in images.enumerated() where !upload(image, to: all.address + UInt64(n * size * 4)) {
            return matrix(nil, rows: images.count * tokens, columns: inputs)
        }
        launch("lk_patches", count: count) {
            $0.pointer(all)
            $0.pointer(out)
            $0.int(channels)
            $0.int(side)
            $0.int(patch)
            $0.int(grid)
            $0.long(count)
        }
        return matrix(out, rows: images.count * tokens, columns: inputs)
    }

    /// The images' bytes copied over into one buffer, normalised and cut on the GPU (`lk_patches_8`), with the
    /// CPU's arithmetic (a division, a subtraction and a division, each rounded: the same floats).
    public func patchRows(pixels: [[UInt8]], side: Int, patch: Int, mean: [Float], std: [Float]) -> RowMatrix {
        precondition(mean.count == 3 && std.count == 3)
        let grid = side / patch
        let (inputs, tokens) = (3 * patch * patch, grid * grid + 1)
        let size = 3 * side * side
        precondition(pixels.allSatisfy { $0.count == size }, "images must be \(side) × \(side) × 3")
        let count = pixels.count * tokens * inputs
        guard count > 0 else { return RowMatrix(rows: 0, columns: inputs, data: []) }
        guard let all = buffer((pixels.count * size + 3) / 4), let out = buffer(count) else {
            return matrix(nil, rows: pixels.count * tokens, columns: inputs)
        }
        switch stagedUpload(pixels, size: size, to: all.address) {
        case true?: break
        case false?: return matrix(nil, rows: pixels.count * tokens, columns: inputs)
        case nil:
            for (n, image) in pixels.enumerated() where !upload(image, to: all.address + UInt64(n * size)) {
                return matrix(nil, rows: pixels.count * tokens, columns: inputs)
            }
        }
        launch("lk_patches_8", count: count) {
            $0.pointer(all)
            $0.pointer(out)
            for value in mean + std { $0.float(value) }
            $0.int(side)
            $0.int(patch)
            $0.int(grid)
            $0.long(count)
        }
        return matrix(out, rows: pixels.count * tokens, columns: inputs)
    }

    public func rows(_ x: RowMatrix, at indices: [Int]) -> RowMatrix {
        precondition(indices.allSatisfy { $0 >= 0 && $0 < x.rows })
        let width = x.columns
        guard !indices.isEmpty else { return RowMatrix(rows: 0, columns: width, data: []) }
        guard let values = onDevice(x.map), let chosen = upload(indices.map { Int32($0) }),
            let out = buffer(indices.count * width)
        else { return matrix(nil, rows: indices.count, columns: width) }
        launch("lk_gather_rows", count: indices.count * width) {
            $0.pointer(values)
            $0.pointer(chosen)
            $0.pointer(out)
            $0.int(width)
            $0.long(indices.count * width)
        }
        return matrix(out, rows: indices.count, columns: width)
    }

    // MARK: The head

    /// The level's `(4 + classes) × plane` block computed on the GPU into rows of `out` (`ld` values apart, the
    /// level's anchors from `offset`).
    func decodeLevel(
        box: FeatureMap, logits: DeviceBuffer?, constants: [Float], scale: Float, bias: Float,
        geometry g: AnchorGeometry, into out: DeviceBuffer, ld: Int, offset: Int
    ) {
        guard let boxes = onDevice(box), let constantsOnDevice = upload(constants.isEmpty ? [0] : constants) else {
            return
        }
        launch("lk_head_decode", count: g.plane) {
            $0.pointer(boxes)
            $0.pointer(logits ?? boxes)
            $0.pointer(constantsOnDevice)
            $0.float(scale)
            $0.float(bias)
            $0.int(g.plane)
            $0.int(g.width)
            $0.int(g.plane / g.width / images)
            $0.int(g.bins)
            $0.int(g.classes)
            $0.float(g.stride)
            $0.pointer(out)
            $0.long(ld)
            $0.long(offset)
        }
    }

    /// Writes the level into `output` where it lies on the GPU (a host map is copied over first, once per
    /// output): a photo's levels come back in one copy, when the output is read.
    public func contrastiveDecode(
        box: FeatureMap, weights: [Float], depth: Int, source: FeatureMap, constants: [Float], scale: Float,
        bias: Float, geometry g: AnchorGeometry, into output: inout FeatureMap
    ) {
        precondition(source.channels == depth && source.plane == g.plane && weights.count == g.classes * depth)
        precondition(output.channels == 4 + g.classes && output.plane == g.anchors)
        if !(output.device is DeviceBuffer) {
            output = map(upload(output.data), channels: output.channels, height: output.height, width: output.width)
        }
        guard let out = output.device as? DeviceBuffer else { return }
        let logits = g.classes > 0 ? buffer(g.classes * g.plane) : nil
        if g.classes > 0, let w = upload(weights), let e = onDevice(source) {
            gemm(
                m: g.classes, n: g.plane, k: depth, a: w, aRow: depth, aColumn: 1, b: e, bRow: g.plane, bColumn: 1,
                c: logits, ldc: g.plane)
        }
        decodeLevel(
            box: box, logits: logits, constants: constants, scale: scale, bias: bias, geometry: g, into: out,
            ld: g.anchors, offset: g.offset)
    }

    /// The overlaps' mask left on the GPU (`2·count·words` floats' room: `count·words` 64-bit words).
    /// `lk_nms_mask` over `count` boxes and their areas on the GPU, into `mask` (`count · ⌈count/64⌉` words).
    func overlapMask(_ boxes: DeviceBuffer, areas: DeviceBuffer, count: Int, threshold: Double, into mask: DeviceBuffer)
    {
        let words = (count + 63) / 64
        launch("lk_nms_mask", grid: (UInt32(words), UInt32(words)), block: (64, 1)) {
            $0.pointer(boxes)
            $0.pointer(areas)
            $0.int(count)
            $0.int(words)
            $0.append(threshold, alignment: 8)
            $0.pointer(mask)
        }
    }

    public func overlaps(_ boxes: [Float], areas: [Float], count: Int, threshold: Double) -> [UInt64]? {
        let words = (count + 63) / 64
        guard count > 0, let b = upload(boxes), let a = upload(areas), let out = buffer(2 * count * words) else {
            return nil
        }
        overlapMask(b, areas: a, count: count, threshold: threshold, into: out)
        return values(out, count: count * words, of: UInt64.self)
    }

    /// `count` values of type `T` copied back from `buffer` (nil, the failure recorded, where the copy failed).
    func values<T: FixedWidthInteger>(_ buffer: DeviceBuffer, count: Int, of type: T.Type) -> [T]? {
        var values = [T](repeating: 0, count: count)
        let error = values.withUnsafeMutableBytes { bytes in
            Self.check { lookout_cuda_download(bytes.baseAddress, buffer.address, bytes.count, $0, $1) }
        }
        if let error {
            fail(error)
            return nil
        }
        return values
    }

    /// The photo's bytes copied over once, then letterboxed by `lk_letterbox` (the host's arithmetic, so the
    /// same floats): a 512×512 photo crosses as 0.8 MB rather than its 640×640 input's 4.9 MB of floats.
    public func letterbox(
        _ pixels: [UInt8], width: Int, height: Int, channels: Int, plan: LetterboxPlan
    ) -> FeatureMap? {
        precondition(pixels.count == width * height * channels && channels >= 3)
        let (rw, rh) = (plan.resizedWidth, plan.resizedHeight)
        let tables =
            plan.resizes
            ? plan.sourceX + plan.alpha0 + plan.alpha1 + plan.rowTop + plan.rowBottom
                + plan.beta0 + plan.beta1 : [0]
        precondition(!plan.resizes || tables.count == 3 * rw + 4 * rh, "letterbox tables of another size")
        // A photo's bytes through pinned memory where they are many (a 12-megapixel photo is 36 MB).
        guard let bytes = buffer((pixels.count + 3) / 4),
            (pixels.count >= 1 << 18
                ? pixels.withUnsafeBytes { pinnedUpload($0, to: bytes.address) } : nil)
                ?? upload(pixels, to: bytes.address),
            let table = upload(tables), let out = buffer(3 * plan.width * plan.height)
        else { return nil }
        launch("lk_letterbox", count: plan.width * plan.height) {
            $0.pointer(bytes)
            $0.int(width)
            $0.int(channels)
            $0.int(plan.resizes ? 1 : 0)
            $0.int(rw)
            $0.int(rh)
            $0.pointer(table)
            $0.int(plan.xmax)
            $0.int(plan.top)
            $0.int(plan.left)
            $0.int(plan.width)
            $0.int(plan.height)
            $0.float(Float(plan.padding) / 255)
            $0.pointer(out)
        }
        return map(out, channels: 3, height: plan.height, width: plan.width)
    }

    /// NMS past its thresholds on the GPU: the candidates (their corners, scores and offsets) cross once, are
    /// ranked by score (`lk_nms_rank`), arranged (`lk_nms_arrange`), their overlaps computed (`lk_nms_mask`) and
    /// the greedy pass made (`lk_nms_keep`, one block); only the kept candidates come back, not the mask (8 MB for
    /// 8,000 candidates). The host's sort where candidates are past 65,536 (the ranking counts every pair).
    public func suppress(
        corners: [Float], scores: [Float], offsets: [Float], count: Int, candidates: Int, threshold: Double,
        maximum: Int
    ) -> [Int]? {
        let ranked = min(count, max(candidates, 0))
        let words = (ranked + 63) / 64
        let room = min(max(maximum, 0), ranked)
        // The kernel's shared words: 32,768 boxes (NMS takes 30,000).
        guard count > 0, count <= 65_536, words <= 512, corners.count >= 4 * count, scores.count >= count,
            offsets.count >= count
        else { return nil }
        // One copy over: the corners, then the scores, then the offsets.
        guard let given = upload(Array(corners.prefix(4 * count)) + scores.prefix(count) + offsets.prefix(count)),
            let order = buffer(ranked),
            let boxes = buffer(4 * ranked), let areas = buffer(ranked), let mask = buffer(2 * ranked * words),
            let out = buffer(1 + room)
        else { return nil }
        launch("lk_nms_rank", grid: (UInt32((count + 255) / 256), 1), block: (256, 1)) {
            $0.pointer(given, offset: 4 * count)
            $0.int(count)
            $0.int(ranked)
            $0.pointer(order)
        }
        launch("lk_nms_arrange", count: ranked) {
            $0.pointer(given)
            $0.pointer(given, offset: 5 * count)
            $0.pointer(order)
            $0.int(ranked)
            $0.pointer(boxes)
            $0.pointer(areas)
        }
        overlapMask(boxes, areas: areas, count: ranked, threshold: threshold, into: mask)
        launch("lk_nms_keep", grid: (1, 1), block: (256, 1)) {
            $0.pointer(mask)
            $0.int(ranked)
            $0.int(words)
            $0.int(room)
            $0.pointer(order)
            $0.pointer(out)
        }
        guard let kept = values(out, count: 1 + room, of: Int32.self) else { return nil }
        let total = Int(kept[0])
        guard total >= 0 && total <= room else { return nil }
        return kept[1..<(1 + total)].map { Int($0) }
    }

    public func decodeBoxes(_ box: FeatureMap, anchors: [Int], geometry g: AnchorGeometry) -> [Float] {
        precondition(images == 1, "listed anchors are decoded one image at a time")
        let level = AnchorGeometry(
            plane: g.plane, width: g.width, anchors: g.plane, offset: 0, stride: g.stride, bins: g.bins, classes: 0)
        guard let out = buffer(4 * g.plane) else { return [Float](repeating: .nan, count: 4 * anchors.count) }
        decodeLevel(
            box: box, logits: nil, constants: [], scale: 1, bias: 0, geometry: level, into: out, ld: g.plane, offset: 0)
        let block = download(out)
        var boxes = [Float](repeating: 0, count: 4 * anchors.count)
        for (j, p) in anchors.enumerated() {
            for side in 0..<4 { boxes[side * anchors.count + j] = block[side * g.plane + p] }
        }
        return boxes
    }
}
