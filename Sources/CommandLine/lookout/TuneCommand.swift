import ArgumentParser
import LookoutEngine
import LookoutImage
import LookoutTensor

extension ModelsCommand {
    struct Tune: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Measure now which kernel each of a detector's convolutions runs in bf16 or int8 on this CPU.",
            discussion: """
                With --precision bf16 or int8 each convolution runs in that precision or in fp32, whichever this CPU \
                computes faster: \
                measured the first time a layer shape meets an input size (on the real input, the best of three \
                runs of each after one) and kept in the cache (layer-choices.txt, per CPU model, layer shape, input \
                size and thread count), so that later runs compute the same bits without measuring. This measures \
                them ahead, for photos of the usual shapes (square, 4:3 and 3:4 at --imgsz), and says what it chose:

                  lookout models tune --model yolov8s-worldv2
                  lookout models tune --detector s-int8.safetensors --precision int8

                Layers measured before on this CPU are read, not measured again (delete layer-choices.txt in the \
                cache folder to measure afresh). --precision: bf16 where this CPU has AVX-512 BF16, int8 (a \
                detector `lookout models calibrate` made) where it has AVX2; by default bf16 where it runs, else \
                int8.
                """)

        @OptionGroup var modelOptions: ModelOptions

        @Option(help: ArgumentHelp("Input size, as for detect.", valueName: "pixels"))
        var imgsz = 640

        /// The precision whose layers are measured: the one asked for, or bf16 where the CPU runs it, else int8.
        var tuned: Precision {
            modelOptions.precision.flatMap(Precision.init(rawValue:)) ?? (Precision.bf16.isNative ? .bf16 : .int8)
        }

        func validate() throws {
            guard tuned != .fp32, modelOptions.precision.map({ Precision(rawValue: $0) != nil }) ?? true else {
                throw ValidationError("--precision: bf16 or int8 choose their kernels per layer; fp32 has one.")
            }
            guard modelOptions.chosenDevice == .cpu else {
                throw ValidationError("the layer choices are the CPU's; leave out --device.")
            }
            guard imgsz >= 32 && imgsz <= 4096 else { throw ValidationError("--imgsz is from 32 to 4096.") }
        }

        func run() throws {
            let precision = tuned
            guard precision.isNative else {
                let lacks = precision == .bf16 ? "AVX-512 BF16" : "AVX2"
                throw LookoutError(
                    "this CPU has no \(lacks): --precision \(precision.rawValue) runs fp32 here, and there is nothing "
                        + "to choose")
            }
            var configuration = modelOptions.configuration
            configuration.precision = precision
            let cpu = AutomaticPrecision.cpuModel()
            let (engine, _) = try Engine.load(configuration, notice: { printError("lookout: \($0)") })
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
            // The layers of this precision's candidates ("… of bf16,fp32", "… of int8,fp32"); a name other than fp32
            // is the precision's own kernel (bf16-amx: bf16 on AMX's tiles).
            let ofThis = mine.filter { $0.key.contains(" of \(precision.rawValue)") }
            let own = ofThis.values.filter { $0 != "fp32" }.count
            let file = configuration.resolvedCacheDirectory.map { $0 + "/layer-choices.txt" } ?? "memory"
            print(
                "\(ofThis.count) layer shapes and input sizes on \(cpu): \(own) run \(precision.rawValue), "
                    + "\(ofThis.count - own) run fp32 (\(measured) measured now, \(mine.count - measured) read from \(file))"
            )
        }
    }
}
