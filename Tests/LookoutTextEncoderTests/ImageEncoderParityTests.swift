import Foundation
import LookoutImage
import LookoutJSON
import LookoutSupport
import LookoutTextEncoder
import LookoutWeights
import Testing

/// The CLIP image tower and its preprocessing against OpenAI CLIP (`scripts/reference/make_image_encoder_fixtures.py`):
/// photos in every mode PIL treats apart (RGB, L, RGBA, LA, P, 1), sizes that upscale, very wide and tall
/// ones, a half-pixel centre crop; the 8-bit image `clip._transform` hands to `ToTensor`, pixel for pixel,
/// at 224 and 32; and the tiny random tower's `encode_image` in OpenAI's TorchScript format.
@Suite struct ImageEncoderParityTests {
    static let folder = TextEncoderParityTests.root + "/Tests/Fixtures/clip-image/"
    static let preprocessed = try! WeightFile.open(folder + "preprocessed.safetensors")
    static let expected = try! WeightFile.open(folder + "tiny-expected.safetensors")
    static let photos: [String] = {
        let list = try! JSONDocument(bytes: Array(expected.metadata["photos"]!.utf8)).root
        return (0..<list.count).map { list[$0].string! }
    }()
    static let modes: [String: String] = {
        let object = try! JSONDocument(bytes: Array(expected.metadata["modes"]!.utf8)).root
        return Dictionary(uniqueKeysWithValues: photos.map { ($0, object[$0]!.string!) })
    }()

    static func path(_ name: String) -> String {
        FileManager.default.fileExists(atPath: folder + name)
            ? folder + name : TextEncoderParityTests.root + "/examples/photos/" + name
    }

    static func load(_ name: String) throws -> PILImage {
        try CLIPPreprocessing.decode(try FileContents.read(path(name)), name: name)
    }

    @Test func photosCoverEveryModeAndShape() {
        #expect(Set(Self.modes.values) == ["RGB", "L", "RGBA", "LA", "P", "1"])
        #expect(Self.photos.count >= 14)
    }

    /// The decoder names the mode PIL opens each photo in.
    @Test func decodedModesArePILs() throws {
        for name in Self.photos {
            #expect(try Self.load(name).mode.name == Self.modes[name], "\(name)")
        }
    }

    /// A JPEG decoded once for the detector serves the tower: the photo made from the detector's decode equals the
    /// tower's own decode (pixels and mode), for every JPEG here (colour, progressive, gray, CMYK, the eight EXIF
    /// orientations, the reference photos); other formats are decoded again (nil).
    @Test func detectorsDecodeServesTheTower() throws {
        let files = TextEncoderParityTests.root + "/Tests/Fixtures/image/files/"
        let names = try FileManager.default.contentsOfDirectory(atPath: files).sorted()
        let paths =
            names.filter { !$0.hasPrefix("not-") && !$0.hasPrefix("truncated") }.map { files + $0 }
            + Self.photos.map(Self.path)
        var jpegs = 0
        for path in paths {
            let bytes = try FileContents.read(path)
            let decoded = try ImageFile.decode(bytes, name: path)
            let own = try CLIPPreprocessing.decode(bytes, name: path)
            guard let made = CLIPPreprocessing.pilImage(jpeg: bytes, decoded: decoded) else {
                #expect(!path.hasSuffix(".jpg"), "\(path): a JPEG not served")
                continue
            }
            jpegs += 1
            #expect(made.image == own.image, "\(path)")
            #expect(made.mode == own.mode, "\(path)")
        }
        #expect(jpegs >= 12)
    }

    /// Resize (bicubic, premultiplied, nearest), centre crop and RGB conversion equal PIL's bit for bit, with the
    /// CPU's vector passes and with the portable C (``Image/portableResizeOnly``; process-wide, as the letterbox
    /// test sets it: both give the same bytes, so a test beside it cannot be disturbed).
    @Test(arguments: [224, 32], [false, true])
    func preprocessingEqualsPILPixelForPixel(size: Int, portable: Bool) throws {
        Image.portableResizeOnly = portable
        defer { Image.portableResizeOnly = false }
        var compared = 0
        for name in Self.photos {
            let reference = try Self.preprocessed.view("\(name)@\(size)")
            #expect(reference.shape == [size, size, 3])
            let expected = reference.floats().map { UInt8($0) }
            let actual = CLIPPreprocessing.resizedAndCropped(try Self.load(name), size: size).pixels
            let differing = zip(actual, expected).filter { $0 != $1 }.count
            #expect(differing == 0, "\(name) at \(size): \(differing) of \(expected.count) values differ")
            compared += 1
        }
        #expect(compared == Self.photos.count)
    }

    /// `encode_image` of the tiny random tower: max abs error within ten times the reference's own float32
    /// error (and 1e-4), cosine ≥ 0.9999, for every photo.
    @Test func tinyTowerEqualsEncodeImage() throws {
        let encoder = try CLIPImageEncoder(
            contentsOf: TextEncoderParityTests.root + "/Tests/Fixtures/weights/clip-tiny-openai.pt")
        #expect(encoder.configuration.inputResolution == 32 && encoder.configuration.width == 64)
        let referenceError = Float(Self.expected.metadata["reference_error"]!)!
        let tolerance = min(1e-4, max(10 * referenceError, 1e-6))
        let inputs = try Self.photos.map {
            CLIPPreprocessing.tensor(CLIPPreprocessing.resizedAndCropped(try Self.load($0), size: 32))
        }
        let embeddings = encoder.encode(inputs)
        for (name, embedding) in zip(Self.photos, embeddings) {
            let reference = try Self.expected.view(name).floats()
            let error = zip(embedding, reference).map { abs($0 - $1) }.max()!
            let cosine = zip(embedding, reference).reduce(0) { $0 + $1.0 * $1.1 }
            #expect(error <= tolerance && cosine >= 0.9999, "\(name): max error \(error), cosine \(cosine)")
        }
        // One photo at a time gives the batch's answer.
        let single = encoder.encode([inputs[3]])[0]
        #expect(zip(single, embeddings[3]).allSatisfy { abs($0 - $1) <= 1e-6 })
        // The photos' 8-bit pixels, normalised by the backend: the same embeddings, bit for bit.
        let pixels = try Self.photos.map { try CLIPPreprocessing.resizedAndCropped(try Self.load($0), size: 32).pixels }
        #expect(
            encoder.encode(pixels: pixels, mean: CLIPPreprocessing.mean, std: CLIPPreprocessing.std) == embeddings)
    }

    /// The demo model's image tower (Models/demo) against OpenAI's `VisionTransformer` class holding the same
    /// weights: max abs error ≤ 1e-4 (and ten times the reference's float32 error), cosine ≥ 0.9999, on
    /// every fixture photo and four example scenes.
    @Test func demoTowerEqualsOpenAIVisionTransformer() throws {
        let root = TextEncoderParityTests.root
        let expected = try WeightFile.open(Self.folder + "demo-expected.safetensors")
        let encoder = try CLIPImageEncoder(contentsOf: root + "/Models/demo/image-encoder.safetensors")
        let referenceError = Float(expected.metadata["reference_error"]!)!
        let tolerance = min(1e-4, max(10 * referenceError, 1e-6))
        let names = expected.names.sorted()
        #expect(names.count == Self.photos.count + 4)
        let inputs = try names.map { name in
            let path =
                name.hasPrefix("scene-") ? root + "/examples/scenes/" + name : Self.path(name)
            return try CLIPPreprocessing.input(FileContents.read(path), name: name, size: 224)
        }
        for (name, embedding) in zip(names, encoder.encode(inputs)) {
            let reference = try expected.view(name).floats()
            let error = zip(embedding, reference).map { abs($0 - $1) }.max()!
            let cosine = zip(embedding, reference).reduce(0) { $0 + $1.0 * $1.1 }
            #expect(error <= tolerance && cosine >= 0.9999, "\(name): max error \(error), cosine \(cosine)")
        }
        // Its calibration is in the file: a scene-score centre and slope, and a duplicate threshold.
        #expect(encoder.sceneCenter != nil && encoder.sceneSlope != nil && encoder.duplicateThreshold == 0.9)
    }
}
