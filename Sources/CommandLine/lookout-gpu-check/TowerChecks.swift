import LookoutCUDA
import LookoutImage
import LookoutSupport
import LookoutTensor
import LookoutTextEncoder
import LookoutWeights

/// The demo model's CLIP image tower on the GPU against the CPU: the ten example scenes in one batch, each
/// embedding within 1e-5 of the CPU's (largest difference of a coordinate; the embeddings are unit vectors), and
/// the time of the batch on each.
struct TowerChecks {
    let tower: String
    let photos: [String]

    func run(on gpu: CUDABackend) -> (lines: [String], passed: Bool) {
        let encoder: CLIPImageEncoder
        var inputs: [[Float]] = []
        do {
            encoder = try CLIPImageEncoder(weights: WeightFile.open(tower))
            for photo in photos {
                inputs.append(
                    try CLIPPreprocessing.input(
                        FileContents.read(photo), name: photo, size: encoder.configuration.inputResolution))
            }
        } catch {
            return (["  FAILED loading \(tower): \(error)"], false)
        }
        var want: [[Float]] = [], got: [[Float]] = []
        let cpuTime = DetectionChecks.milliseconds { want = encoder.encode(inputs, backend: CPUBackend.shared) }
        _ = encoder.encode(inputs, backend: gpu)
        let gpuTime = DetectionChecks.milliseconds { got = encoder.encode(inputs, backend: gpu) }
        var largest: Float = 0
        for (a, b) in zip(want, got) {
            for (x, y) in zip(a, b) where !(abs(x - y) <= largest) {
                largest = abs(x - y).isNaN ? .infinity : abs(x - y)
            }
        }
        let passed = want.count == got.count && largest <= 1e-5
        func format(_ value: Double) -> String { String((value * 100).rounded() / 100) }
        return (
            [
                "\(tower), \(photos.count) photos in one batch on \(gpu.name) against \(CPUBackend.shared.name):",
                "  \(passed ? "passed" : "FAILED") largest difference of an embedding's coordinate \(largest) (bound 1e-5); CPU \(format(cpuTime)) ms, GPU \(format(gpuTime)) ms",
            ], passed
        )
    }
}
