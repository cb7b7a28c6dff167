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
    /// The backend ``device`` names for a network of `precision` (nil: the CPU's, which the engine makes on its
    /// pool). `cuda` where no GPU, driver or library is found throws the one line saying what is missing; `auto`
    /// then falls back to the CPU and says why through `notice`.
    public func makeBackend(
        precision: Precision, notice: (String) -> Void = { _ in },
        onFailure: (@Sendable (CUDAError) -> Void)? = nil
    ) throws(DeviceError) -> (any ComputeBackend)? {
        let index: Int
        switch device {
        case .cpu: return nil
        case .cuda(let gpu): index = gpu
        case .auto: index = 0
        }
        guard precision == .fp32 else {
            let problem =
                "--precision \(precision.rawValue) does not run on the GPU yet (its kernels are fp32); use --precision fp32 there"
            if device == .auto {
                notice("--device auto: \(problem); computing on the CPU")
                return nil
            }
            throw DeviceError("--device \(device): \(problem)")
        }
        do {
            return try CUDABackend(gpu: index, cacheDirectory: resolvedCacheDirectory, onFailure: onFailure)
        } catch {
            if device == .auto {
                notice("--device auto: no GPU to compute on (\(error.description)); computing on the CPU")
                return nil
            }
            throw DeviceError("--device \(device): \(error.description)")
        }
    }
}
