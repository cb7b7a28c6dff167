import LookoutSupport
import Synchronization

/// Which kernel each convolution runs where a precision has several (issue 54): measured once per CPU model, layer
/// shape, input size and thread count, at the layer's first use, and kept in the user's cache
/// (`layer-choices.txt`, one `key<TAB>kernel` line each), so that later runs compute the same bits.
public final class LayerChoices: Sendable {
    /// The choices every ``TunedConvolution`` reads and records.
    public static let shared = LayerChoices()

    private struct State {
        var file: String?
        var cpu = "cpu"
        var choices: [String: String] = [:]
        var loaded = false
    }

    private let state = Mutex(State())

    /// A store of its own (``shared`` is the one the engine's detectors use).
    public init() {}

    /// Where the choices are kept (nil: in memory only) and the CPU they are measured on (part of each key). The
    /// file is read now; `notice` is told of damaged lines, which are ignored (their layers are measured again).
    public func configure(file: String?, cpu: String, notice: (String) -> Void = { _ in }) {
        let damaged: Int = state.withLock { state in
            guard state.file != file || state.cpu != cpu else { return 0 }
            state = State(file: file, cpu: cpu)
            guard let file else { return 0 }
            let (choices, damaged) = Self.read(file)
            state.choices = choices
            state.loaded = true
            return damaged
        }
        if damaged > 0, let file {
            notice(
                "\(file): \(damaged) damaged line\(damaged == 1 ? "" : "s") ignored; those layers are measured again")
        }
    }

    /// The kernel recorded for `layer`, or nil where it was not measured on this CPU.
    func choice(_ layer: String) -> String? {
        state.withLock { state in
            if !state.loaded {
                state.loaded = true
                if let file = state.file { state.choices = Self.read(file).choices }
            }
            return state.choices[state.cpu + " | " + layer]
        }
    }

    /// Records a measured choice and writes the file whole, under the lock (so that two layers measured at once
    /// cannot interleave their writes). A file that cannot be written only costs the next run a measurement.
    func record(_ layer: String, kernel: String) {
        state.withLock { state in
            state.choices[state.cpu + " | " + layer] = kernel
            guard let file = state.file else { return }
            let text = state.choices.sorted { $0.key < $1.key }.map { "\($0.key)\t\($0.value)\n" }.joined()
            try? FileContents.writeAtomically(Array(text.utf8), to: file)
        }
    }

    /// Every choice recorded so far (key → kernel), for `lookout devices` and the tests.
    public var recorded: [String: String] {
        _ = choice("")
        return state.withLock { $0.choices }
    }

    /// The file's choices, and how many lines were damaged (ignored: measured again). A missing file has none.
    private static func read(_ file: String) -> (choices: [String: String], damaged: Int) {
        guard let bytes = try? FileContents.read(file) else { return ([:], 0) }
        var choices: [String: String] = [:]
        var damaged = 0
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: "\t", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty, line.utf8.allSatisfy({ $0 >= 0x09 }) else {
                damaged += 1
                continue
            }
            choices[String(parts[0])] = String(parts[1])
        }
        return (choices, damaged)
    }
}

/// A convolution that runs, per layer and input size, the faster of its candidates (a precision's own kernel
/// first, then fp32's): on its first use it times each on the real input (three runs each after one) and keeps
/// the precision's own kernel unless another is at least `switchMargin` faster (5 %; 20 % for AMX against fp32); the choice is kept in ``LayerChoices``. Each
/// candidate's weights are prepared once at load. Where a precision's instructions do not pay for a layer (bf16
/// on Xeons without AMX for most of s's layers), the layer runs fp32 — closer to fp32's results, never slower.
public final class TunedConvolution: ConvolutionKernel, @unchecked Sendable {
    public let candidates: [(name: String, kernel: any ConvolutionKernel)]
    private let names: String
    private let store: LayerChoices
    // Written once by prepare (at load, before any use), read after.
    private var variants: [ConvolutionWeights] = []

    /// How much faster (a fraction) another candidate must measure to be taken over the first.
    public let switchMargin: Double

    public init(
        _ candidates: [(name: String, kernel: any ConvolutionKernel)], store: LayerChoices = .shared,
        switchMargin: Double = 0.05
    ) {
        precondition(!candidates.isEmpty && switchMargin >= 0 && switchMargin < 1)
        self.switchMargin = switchMargin
        self.candidates = candidates
        names = candidates.map(\.name).joined(separator: ",")
        self.store = store
    }

    public func prepare(_ weights: ConvolutionWeights) -> ConvolutionWeights {
        variants = candidates.map { $0.kernel.prepare(weights) }
        return variants[0]
    }

    public func convolve(_ x: FeatureMap, _ weights: ConvolutionWeights, pool: ComputePool) -> FeatureMap {
        convolve(StackedMaps(x), weights, pool: pool)
    }

    public func convolve(_ x: StackedMaps, _ weights: ConvolutionWeights, pool: ComputePool) -> FeatureMap {
        precondition(variants.count == candidates.count, "a tuned convolution used before it was prepared")
        let w = variants[0]
        // The algorithm (Winograd or lowered) and the candidates are part of the key: a choice timed with one is
        // not the other's, nor one made before a candidate was added.
        let layer =
            "\(w.inputs)->\(w.outputs) k\(w.kernel) s\(w.stride) \(x.height)x\(x.width) threads \(pool.threadCount) \(type(of: candidates[0].kernel)) of \(names)"
        if let name = store.choice(layer), let index = candidates.firstIndex(where: { $0.name == name }) {
            return candidates[index].kernel.convolve(x, variants[index], pool: pool)
        }
        // Measure: one run of each to warm up, then three, the fastest of each.
        var best = [Double](repeating: .infinity, count: candidates.count)
        var result: FeatureMap?
        for round in 0..<4 {
            for (index, candidate) in candidates.enumerated() {
                var clock = Stopwatch()
                let out = candidate.kernel.convolve(x, variants[index], pool: pool)
                let seconds = clock.lap()
                if index == 0 { result = out }
                guard round > 0 else { continue }
                best[index] = min(best[index], seconds)
            }
        }
        var chosen = 0
        for index in 1..<candidates.count where best[index] < (1 - switchMargin) * best[chosen] { chosen = index }
        store.record(layer, kernel: candidates[chosen].name)
        return chosen == 0 ? result! : candidates[chosen].kernel.convolve(x, variants[chosen], pool: pool)
    }
}
