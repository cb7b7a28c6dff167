import Foundation
import LookoutJSON
import LookoutSupport
import LookoutWeights
import Testing

/// `lookout models …` run as a process.
@Suite struct ModelsCommandTests {
    static let weights = CLI.root + "/Tests/Fixtures/weights"

    @Test func inspectSaysWhatEachFileIs() throws {
        let detector = try CLI.run(["models", "inspect", Self.weights + "/yolov8n-worldv2-random.pt"])
        #expect(detector.status == 0, "\(detector.stderr)")
        #expect(detector.stdout.contains("YOLO-World v2 detector, scale n, text embedding 512, 80 built-in classes"))
        #expect(detector.stdout.contains("tensors: 412 (F16 ×348, I64 ×64)"))
        let clip = try CLI.run(["models", "inspect", Self.weights + "/clip-tiny-openai.pt"])
        #expect(clip.stdout.contains("CLIP text encoder (openai names): width 64, 2 layers"))
        let evil = try CLI.run(["models", "inspect", Self.weights + "/evil-reduce.pt"])
        #expect(evil.status != 0)
        #expect(evil.stderr.contains("evil-reduce.pt: no tensors found in the checkpoint"), "\(evil.stderr)")
    }

    @Test func convertThenInspect() throws {
        let output = NSTemporaryDirectory() + "lookout-convert-\(UUID().uuidString).safetensors"
        defer { try? FileManager.default.removeItem(atPath: output) }
        let convert = try CLI.run(
            ["models", "convert", Self.weights + "/yolov8n-worldv2-random.pt", "-o", output])
        #expect(convert.status == 0, "\(convert.stderr)")
        let inspect = try CLI.run(["models", "inspect", output])
        #expect(inspect.stdout.contains("file format: safetensors"))
        #expect(inspect.stdout.contains("scale n"))
        #expect(inspect.stdout.contains("F32 ×"))
    }

    /// `models calibrate`: a copy of the detector with the same tensors and each convolution's input range,
    /// which then runs in int8; what it cannot calibrate on is a clear error.
    @Test func calibrateWritesACalibratedCopy() throws {
        let folder = try CLI.scratch("calibrate")
        defer { CLI.remove(folder) }
        let detector = Self.weights + "/yolov8n-worldv2-random.pt"
        let text = CLI.root + "/Models/demo/text-encoder.safetensors"
        let photos = ["scene-0001.jpg", "scene-0002.jpg"].map { CLI.root + "/examples/scenes/" + $0 }
        let output = folder + "/n-int8.safetensors"
        let run = try CLI.run(
            [
                "models", "calibrate", "--detector", detector, "--text-model", text, "-q", "star, red circle", "-o",
                output,
            ]
                + photos)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("64 convolution input ranges from 2 photos and 2 queries"), "\(run.stdout)")
        let inspect = try CLI.run(["models", "inspect", output])
        #expect(inspect.stdout.contains("int8 calibration: input ranges of 64 convolutions from 2 photos"))
        // The tensors are the source's, bit for bit (F16 kept).
        let source = try WeightFile.open(detector), copy = try WeightFile.open(output)
        #expect(copy.fingerprint() == source.fingerprint())
        let ranges = try #require(
            copy.metadata[ActivationRanges.metadataKey].flatMap(ActivationRanges.init(serialized:)))
        #expect(ranges.images == 2 && ranges.ranges["model.0"] != nil && ranges.ranges["model.22.cv2.2.2"] != nil)
        // The stem sees the letterboxed photo in [0, 1].
        #expect(ranges.ranges["model.0"]!.lowerBound >= 0 && ranges.ranges["model.0"]!.upperBound <= 1)
        let detect = try CLI.run(
            ["detect", photos[0], "-q", "star", "--precision", "int8", "--detector", output, "--text-model", text])
        #expect(detect.status == 0, "\(detect.stderr)")

        let empty = folder + "/empty"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        let none = try CLI.run(["models", "calibrate", empty, "-o", folder + "/x.safetensors"])
        #expect(none.status == 1 && none.stderr.contains("no photos"), "\(none.stderr)")
        let missing = try CLI.run(["models", "calibrate", folder + "/nothing", "-o", folder + "/x.safetensors"])
        #expect(missing.status == 1 && missing.stderr.contains("No such file"), "\(missing.stderr)")
        let bf16 = try CLI.run([
            "models", "calibrate", photos[0], "--precision", "bf16", "-o", folder + "/x.safetensors",
        ])
        #expect(bf16.status == 64 && bf16.stderr.contains("calibration runs the detector in fp32"), "\(bf16.stderr)")
        let notPhoto = try CLI.run(["models", "calibrate", detector, "-o", folder + "/x.safetensors"])
        #expect(
            notPhoto.status == 1 && notPhoto.stderr.contains("none of the photos could be read"), "\(notPhoto.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/x.safetensors"))
    }

    /// `models tune` measures bf16's or int8's per-layer choices of the demo model (calibrated) for three photo
    /// shapes and keeps them in the cache; a second run reads them (measures none); a precision the CPU lacks, fp32
    /// and a GPU are refused.
    @Test func tuneMeasuresOnceAndKeeps() throws {
        let devices = try CLI.run(["devices"]).stdout
        for (precision, lacks) in [("bf16", "AVX-512 BF16"), ("int8", "AVX2")] {
            let cache = try CLI.scratch("tune-cache")
            defer { CLI.remove(cache) }
            let environment = ["LOOKOUT_CACHE_DIR": cache]
            let tune = ["models", "tune", "--precision", precision]
            let first = try CLI.run(tune, environment: environment)
            guard devices.contains("\(precision) yes") else {
                #expect(first.status == 1 && first.stderr.contains("no \(lacks)"), "\(first.stderr)")
                continue
            }
            #expect(first.status == 0, "\(first.stderr)")
            let words = first.stdout.split(separator: " ")
            let shapes = Int(words.first ?? "") ?? 0
            #expect(shapes > 20 && first.stdout.contains("(\(shapes) measured now, 0 read from"), "\(first.stdout)")
            #expect(first.stdout.contains(" run \(precision), "), "\(first.stdout)")
            let file = try String(contentsOfFile: cache + "/layer-choices.txt", encoding: .utf8)
            let lines = file.split(separator: "\n")
            #expect(lines.count == shapes, "\(file)")
            #expect(lines.allSatisfy { $0.contains(" of \(precision)") }, "\(file)")
            let second = try CLI.run(tune, environment: environment)
            #expect(second.stdout.contains("(0 measured now, \(shapes) read from"), "\(second.stdout)")
            // A damaged line is reported and ignored; its layer is measured again.
            try (lines.dropFirst().joined(separator: "\n") + "\n\(lines[0].prefix(20))\n").write(
                toFile: cache + "/layer-choices.txt", atomically: true, encoding: .utf8)
            let damaged = try CLI.run(tune, environment: environment)
            #expect(
                damaged.stderr.contains("1 damaged line ignored; those layers are measured again"), "\(damaged.stderr)")
            #expect(damaged.stdout.contains("(1 measured now, \(shapes - 1) read from"), "\(damaged.stdout)")
        }
        let fp32 = try CLI.run(["models", "tune", "--precision", "fp32"])
        #expect(fp32.status == 64 && fp32.stderr.contains("fp32 has one"), "\(fp32.stderr)")
        let gpu = try CLI.run(["models", "tune", "--device", "cuda"])
        #expect(gpu.status == 64 && gpu.stderr.contains("the layer choices are the CPU's"), "\(gpu.stderr)")
    }

    @Test func verifyChecksDigests() throws {
        let directory = NSTemporaryDirectory() + "lookout-model-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func manifest(_ sha: String) throws {
            let text = """
                {"name": "tiny", "detector": {"file": "\(Self.weights)/yolov8n-worldv2-random.pt", "sha256": "\(sha)"},
                 "text_encoder": {"file": "\(Self.weights)/clip-tiny-openai.pt"}}
                """
            try text.write(toFile: directory + "/lookout-model.json", atomically: true, encoding: .utf8)
        }
        try manifest(String(repeating: "0", count: 64))
        let wrong = try CLI.run(["models", "verify", directory])
        #expect(wrong.status != 0)
        #expect(wrong.stdout.contains("DOES NOT MATCH"))
        // The digest Lookout computed, checked against the system's sha256sum.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
        process.arguments = [Self.weights + "/yolov8n-worldv2-random.pt"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        process.waitUntilExit()
        let sha = String(String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).prefix(64))
        try manifest(sha)
        let right = try CLI.run(["models", "verify", directory])
        #expect(right.status == 0, "\(right.stdout) \(right.stderr)")
        #expect(right.stdout.contains("matches the manifest"))
        // A scene tower (a folder) that is not one: named, and the check fails.
        let text = """
            {"name": "tiny", "detector": {"file": "\(Self.weights)/yolov8n-worldv2-random.pt"},
             "text_encoder": {"file": "\(Self.weights)/clip-tiny-openai.pt"}, "scene_tower": {"file": "no-tower"}}
            """
        try text.write(toFile: directory + "/lookout-model.json", atomically: true, encoding: .utf8)
        let noTower = try CLI.run(["models", "verify", directory])
        #expect(noTower.status != 0 && noTower.stdout.contains("scene tower: "), "\(noTower.stdout)")
        #expect(noTower.stdout.contains("NOT READABLE"), "\(noTower.stdout)")
        let missing = try CLI.run(["models", "verify", directory + "/nowhere"])
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("lookout-model.json"))
    }

    /// CRC-32 (IEEE, as Python's zlib.crc32) of the little-endian bytes of `values` as F32.
    static func crc32(_ values: [Float]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for value in values {
            var bits = value.bitPattern.littleEndian
            for _ in 0..<4 {
                crc ^= bits & 0xFF
                for _ in 0..<8 { crc = (crc >> 1) ^ (0xEDB8_8320 & (0 &- (crc & 1))) }
                bits >>= 8
            }
        }
        return ~crc
    }

    /// Every state-dict tensor of `converted` against the reference's description of it (shape, CRC-32 of its
    /// values as F32, computed by torch from the source checkpoint), and no tensor more or fewer.
    static func expectTensors(_ converted: WeightFile, equal reference: JSONNode, _ name: String) {
        var expectedNames: [String] = []
        var failures: [String] = []
        reference.forEachMember { keyBytes, entry in
            let key = String(decoding: keyBytes, as: UTF8.self)
            expectedNames.append(key)
            guard let view = converted.tensors[key] else { return failures.append("\(key) missing") }
            let shape = (0..<entry["shape"]!.count).map { Int(entry["shape"]![$0].int!) }
            if view.shape != shape { failures.append("\(key): shape \(view.shape) vs \(shape)") }
            let crc = view.dtype.isFloatingPoint ? Self.crc32(view.floats()) : Self.crc32Integers(view.integers())
            if Int64(crc) != entry["crc32_f32"]!.int! { failures.append("\(key): values differ") }
        }
        #expect(failures.isEmpty, "\(name): \(failures.prefix(10))")
        #expect(Set(converted.names) == Set(expectedNames), "\(name): names differ")
        #expect(expectedNames.count >= 20)
    }

    /// CRC-32 of the little-endian bytes of `values` as I64 (how the reference describes integer tensors).
    static func crc32Integers(_ values: [Int64]) -> UInt32 {
        crc32Bytes(
            values.flatMap { v in (0..<8).map { UInt8(truncatingIfNeeded: UInt64(bitPattern: v) >> (8 * UInt64($0))) } }
        )
    }

    static func crc32Bytes(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = (crc >> 1) ^ (0xEDB8_8320 & (0 &- (crc & 1))) }
        }
        return ~crc
    }

    /// `models convert` against the reference's own reading of each checkpoint: the random n detector and the
    /// tiny CLIP (F32, weights_expected.json), and the demo detector's ultralytics checkpoint with --keep-half,
    /// which must give back the shipped Models/demo/detector.safetensors tensor for tensor, bit for bit.
    @Test func convertMatchesTheReferenceTensors() throws {
        let folder = try CLI.scratch("convert")
        defer { CLI.remove(folder) }
        let expected = try JSONDocument(bytes: FileContents.read(Self.weights + "/weights_expected.json")).root
        for file in ["yolov8n-worldv2-random.pt", "clip-tiny-openai.pt"] {
            let output = folder + "/" + file + ".safetensors"
            let convert = try CLI.run(["models", "convert", Self.weights + "/" + file, "-o", output])
            #expect(convert.status == 0, "\(convert.stderr)")
            let converted = try WeightFile.open(output)
            #expect(converted.format == .safetensors)
            #expect(
                converted.names.allSatisfy {
                    converted.tensors[$0]!.dtype == .float32 || converted.tensors[$0]!.dtype == .int64
                })
            Self.expectTensors(converted, equal: expected[file]!["tensors"]!, file)
        }
        let demo = try JSONDocument(bytes: FileContents.read(CLI.root + "/Tests/Fixtures/demo/expected.json")).root[
            "checkpoint"]!
        let output = folder + "/demo.safetensors"
        let convert = try CLI.run(
            ["models", "convert", CLI.root + "/Tests/Fixtures/demo/demo-detector.pt", "-o", output, "--keep-half"])
        #expect(convert.status == 0, "\(convert.stderr)")
        let converted = try WeightFile.open(output)
        Self.expectTensors(converted, equal: demo["tensors"]!, "demo-detector.pt")
        let txt = try #require(converted.attributes["txt_feats"])
        #expect(Int64(Self.crc32(txt.floats())) == demo["txt_feats"]!["crc32_f32"]!.int!)
        let shipped = try WeightFile.open(CLI.root + "/Models/demo/detector.safetensors")
        #expect(shipped.names == converted.names)
        var differing: [String] = []
        for name in shipped.names {
            let a = shipped.tensors[name]!, b = converted.tensors[name]!
            if a.dtype != b.dtype || a.shape != b.shape || (a.halfBits() ?? []) != (b.halfBits() ?? [])
                || (a.halfBits() == nil && a.floats() != b.floats() && a.integers() != b.integers())
            {
                differing.append(name)
            }
        }
        #expect(differing.isEmpty, "\(differing.prefix(10))")
        #expect(shipped.metadata["names"] == converted.metadata["names"])
        #expect(shipped.metadata["lookout.batchnorm_eps"] == converted.metadata["lookout.batchnorm_eps"])
    }
}
