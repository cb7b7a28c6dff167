import ArgumentParser
import LookoutEngine
import LookoutImage
import LookoutTensor

extension ModelsCommand {
    struct Tune: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Measure now which kernel each of a detector's convolutions runs in bf16 on this CPU.",
            discussion: """
                With --precision bf16 each convolution runs bf16 or fp32, whichever this CPU computes faster: \
                measured the first time a layer shape meets an input size (on the real input, the best of three \
                runs of each after one) and kept in the cache (layer-choices.txt, per CPU model, layer shape, input \
                size and thread count), so that later runs compute the same bits without measuring. This measures \
                them ahead, for photos of the usual shapes (square, 4:3 and 3:4 at --imgsz), and says what it chose:

                  lookout models tune --model yolov8s-worldv2

                Layers measured before on this CPU are read, not measured again (delete layer-choices.txt in the \
                cache folder to measure afresh). Only bf16 chooses per layer for now.
                """)

        @OptionGroup var modelOptions: ModelOptions

        @Option(help: ArgumentHelp("Input size, as for detect.", valueName: "pixels"))
        var imgsz = 640

        func validate() throws {
            guard (modelOptions.precision ?? "bf16") == "bf16" else {
                throw ValidationError("only bf16 chooses its kernels per layer for now; leave out --precision.")
            }
            guard modelOptions.chosenDevice == .cpu else {
                throw ValidationError("the layer choices are the CPU's; leave out --device.")
            }
            guard imgsz >= 32 && imgsz <= 4096 else { throw ValidationError("--imgsz is from 32 to 4096.") }
        }

        func run() throws {
            guard Precision.bf16.isNative else {
                throw LookoutError(
                    "this CPU has no AVX-512 BF16: --precision bf16 runs fp32 here, and there is nothing to choose")
            }
            var configuration = modelOptions.configuration
            configuration.precision = .bf16
            let cpu = AutomaticPrecision.cpuModel()
            let (engine, _) = try Engine.load(configuration)
            let before = Set(LayerChoices.shared.recorded.keys)
            let size = engine.network.embeddingSize
            let text = (0..<size).map { _ in Float(1 / Double(size).squareRoot()) }
            for (width, height) in [(imgsz, imgsz), (imgsz, imgsz * 3 / 4), (imgsz * 3 / 4, imgsz)] {
                let image = Image(
                    width: width, height: height, pixels: [UInt8](repeating: 114, count: width * height * 3))
                _ = engine.detect(
                    engine.prepare(image: image, name: "\(width)x\(height)", size: imgsz), labels: ["object"],
                    text: text)
            }
            let mine = LayerChoices.shared.recorded.filter { $0.key.hasPrefix(cpu + " | ") }
            let measured = mine.keys.filter { !before.contains($0) }.count
            let bf16 = mine.values.filter { $0 == "bf16" }.count
            print(
                "\(mine.count) layer shapes and input sizes on \(cpu): \(bf16) run bf16, \(mine.count - bf16) run fp32 (\(measured) measured now, \(mine.count - measured) read from \(configuration.resolvedCacheDirectory.map { $0 + "/layer-choices.txt" } ?? "memory"))"
            )
        }
    }
}
