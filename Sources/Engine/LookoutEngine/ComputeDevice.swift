import LookoutCUDA
import LookoutDetector
import LookoutTensor

/// Where an engine computes: `cpu` (the default), `cuda` / `cuda:N` (an NVIDIA GPU, through ``CUDABackend``), or
/// `auto` (the first GPU where one works, else the CPU).
public enum ComputeDevice: Sendable, Equatable, CustomStringConvertible {
    case cpu
    case cuda(Int)
    case auto

    /// `cpu`, `cuda`, `cuda:N` or `auto`; nil for anything else.
    public init?(_ text: String) {
        switch text {
        case "cpu": self = .cpu
        case "cuda": self = .cuda(0)
        case "auto": self = .auto
        default:
            guard text.hasPrefix("cuda:"), let index = Int(text.dropFirst(5)), index >= 0 else { return nil }
            self = .cuda(index)
        }
    }

    public var description: String {
        switch self {
        case .cpu: "cpu"
        case .cuda(let index): "cuda:\(index)"
        case .auto: "auto"
        }
    }

    /// The words `--device` takes, for help and completion.
    public static let choices = ["cpu", "cuda", "cuda:N", "auto"]
}

/// Why an engine cannot compute on the device asked for, in one sentence.
public struct DeviceError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension EngineConfiguration {
    /// The backend ``device`` names (nil: the CPU's, which the engine makes on its pool) and the precision the
    /// detector is then opened in. On a GPU the detector's weights stay fp32 and its products run in
    /// ``gpuArithmetic`` (bf16 also for a ``precision`` of bf16); int8 has no GPU form. `cuda` where no GPU, driver
    /// or library is found throws the one line saying what is missing; `auto` then falls back to the CPU and says
    /// why through `notice`.
    public func makeBackend(
        notice: (String) -> Void = { _ in }, onFailure: (@Sendable (CUDAError) -> Void)? = nil
    ) throws(DeviceError) -> (backend: (any ComputeBackend)?, networkPrecision: Precision) {
        let index: Int
        switch device {
        case .cpu: return (nil, precision)
        case .cuda(let gpu): index = gpu
        case .auto: index = 0
        }
        guard precision != .int8 else {
            let problem = "--precision int8 does not run on the GPU (use fp16 or bf16 there, on its tensor cores)"
            if device == .auto {
                notice("--device auto: \(problem); computing on the CPU")
                return (nil, precision)
            }
            throw DeviceError("--device \(device): \(problem)")
        }
        let arithmetic = precision == .bf16 ? .bf16 : gpuArithmetic
        do {
            let backend = try CUDABackend(
                gpu: index, cacheDirectory: resolvedCacheDirectory, arithmetic: arithmetic, onFailure: onFailure)
            return (backend, .fp32)
        } catch {
            if device == .auto {
                let precisionNote = arithmetic == .fp16 ? ", in fp32 (fp16 runs on a GPU only)" : ""
                notice(
                    "--device auto: no GPU to compute on (\(error.description)); computing on the CPU\(precisionNote)")
                return (nil, precision)
            }
            throw DeviceError("--device \(device): \(error.description)")
        }
    }
}
