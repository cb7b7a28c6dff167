#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How the CPU backend computes, as a value an engine is configured with (`EngineConfiguration.kernels`):
/// what used to be read from environment switches inside the kernels. The variables stay as overrides of the
/// defaults (``environment``), for comparisons from the command line.
public struct KernelSettings: Sendable, Equatable {
    /// The algorithm of the stride-1 3×3 convolutions.
    public enum Convolution: String, Sendable, CaseIterable {
        /// Winograd F(4×4, 3×3) where the CPU has AVX2/FMA (the default), the lowered GEMM elsewhere.
        case winograd
        /// Every layer as a lowered GEMM (`LOOKOUT_CONVOLUTION=lowered`).
        case lowered
    }

    public var convolution: Convolution
    /// Keep freed memory for reuse between layers instead of giving it back to the kernel after each photo
    /// (``ComputePool/keepFreedMemory()``; `LOOKOUT_KEEP_FREED_MEMORY=0` turns it off).
    public var keepFreedMemory: Bool
    /// Threads of the engine's pool; nil: one per online CPU (`LOOKOUT_THREADS`).
    public var threads: Int?
    /// For bf16 and int8, run each convolution in that precision or fp32, whichever measured faster on this CPU
    /// (``TunedConvolution``, the choices kept in ``LayerChoices``); off: every convolution in the precision
    /// (`LOOKOUT_LAYER_CHOICE=precision`, what the accuracy tests hold to its bound).
    public var measureLayers: Bool

    public init(
        convolution: Convolution = .winograd, keepFreedMemory: Bool = true, threads: Int? = nil,
        measureLayers: Bool = true
    ) {
        self.convolution = convolution
        self.keepFreedMemory = keepFreedMemory
        self.threads = threads
        self.measureLayers = measureLayers
    }

    /// The defaults, with `LOOKOUT_CONVOLUTION`, `LOOKOUT_KEEP_FREED_MEMORY`, `LOOKOUT_THREADS` and
    /// `LOOKOUT_LAYER_CHOICE` applied.
    /// Diagnostics that stay environment-only: `LOOKOUT_GEMM=openblas` (the convolutions' GEMM through OpenBLAS
    /// instead of Lookout's packed kernel), `LOOKOUT_NO_WINOGRAD_BLOCKS`, `LOOKOUT_SPIN_MICROSECONDS` and
    /// `LOOKOUT_PROFILE`.
    public static let environment: KernelSettings = {
        func value(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
        var settings = KernelSettings()
        if value("LOOKOUT_CONVOLUTION") == "lowered" { settings.convolution = .lowered }
        if value("LOOKOUT_KEEP_FREED_MEMORY") == "0" { settings.keepFreedMemory = false }
        if let text = value("LOOKOUT_THREADS"), let count = Int(text), count > 0 { settings.threads = count }
        if value("LOOKOUT_LAYER_CHOICE") == "precision" { settings.measureLayers = false }
        return settings
    }()
}
