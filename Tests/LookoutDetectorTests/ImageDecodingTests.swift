import LookoutImage
import LookoutSupport
import LookoutWeights
import Testing

/// Decoding against `cv2.imread(path, IMREAD_COLOR)` (reference from OpenCV 5.0), byte for byte, and clear
/// errors for files that cannot be decoded.
@Suite struct ImageDecodingTests {
    static let directory = NetworkParityTests.root + "/Tests/Fixtures/image/files"
    static let expected = try! WeightFile.open(NetworkParityTests.root + "/Tests/Fixtures/image/decoded.safetensors")

    @Test(arguments: [
        "color.jpg", "progressive.jpg", "gray.jpg", "cmyk.jpg", "color.png", "gray.png", "rgba.png", "sixteen.png",
        "palette.png", "orient1.jpg", "orient2.jpg", "orient3.jpg", "orient4.jpg", "orient5.jpg", "orient6.jpg",
        "orient7.jpg", "orient8.jpg",
    ])
    func matchesOpenCV(name: String) throws {
        let image = try ImageFile.read(Self.directory + "/" + name)
        let view = try #require(Self.expected.tensors[name])
        #expect([image.height, image.width, image.channels] == view.shape)
        let reference = view.integers().map { UInt8($0) }
        let differing = zip(image.pixels, reference).filter { $0 != $1 }.count
        let largest = zip(image.pixels, reference).map { abs(Int($0) - Int($1)) }.max() ?? 0
        #expect(differing == 0, "\(name): \(differing) bytes differ, by at most \(largest)")
    }

    @Test(arguments: [
        ("truncated.jpg", ImageError.Kind.damaged), ("truncated.png", .damaged),
        ("not-an-image.jpg", .unsupportedFormat),
        ("missing.jpg", .unreadable),
    ])
    func unreadableFilesAreErrorsNamingTheFile(name: String, kind: ImageError.Kind) {
        #expect {
            try ImageFile.read(Self.directory + "/" + name)
        } throws: { error in
            "\(error)".contains(name) && (error as? ImageError)?.kind == kind
        }
    }

    /// `lookout index --fast-decode`: a large JPEG decodes at the smallest of 1/8, 1/4, 1/2 that keeps the sides
    /// asked for, its pixels close to the whole decode's resized, with the photo's own size beside them; small
    /// photos and PNGs decode whole, exactly as ``ImageFile/decode(_:name:pixelLimit:)``; EXIF-turned photos report
    /// their upright size.
    @Test func reducedDecodeKeepsTheSidesAskedFor() throws {
        let photo = try ImageFile.read(NetworkParityTests.root + "/examples/photos/astronaut.jpg")
        let bytes = try ImageFile.encode(
            photo.resizedBilinear(width: 2048, height: 1536), format: .jpeg(quality: 90), name: "big.jpg")
        let (image, width, height) = try ImageFile.decodeReduced(bytes, name: "big.jpg", longSide: 500, shortSide: 224)
        #expect(width == 2048 && height == 1536)
        #expect(image.width == 512 && image.height == 384, "1/4: 1/8 would be 256 wide, under 500")
        let half = try ImageFile.decodeReduced(bytes, name: "big.jpg", longSide: 640, shortSide: 224).image
        #expect(half.width == 1024 && half.height == 768, "1/2: 1/4 would be 512 wide, under 640")
        let whole = try ImageFile.decode(bytes, name: "big.jpg").resizedBilinear(width: 512, height: 384)
        let difference = zip(image.pixels, whole.pixels).map { abs(Double($0) - Double($1)) }.reduce(0, +)
        #expect(
            difference / Double(whole.pixels.count) < 3, "mean difference \(difference / Double(whole.pixels.count))")
        for name in ["color.jpg", "color.png", "orient6.jpg", "orient7.jpg", "orient3.jpg"] {
            let file = try FileContents.read(Self.directory + "/" + name)
            let decoded = try ImageFile.decode(file, name: name)
            let reduced = try ImageFile.decodeReduced(file, name: name, longSide: 640, shortSide: 224)
            #expect(reduced.image == decoded, "\(name)")
            #expect(reduced.width == decoded.width && reduced.height == decoded.height, "\(name)")
        }
    }

    @Test func pixelLimit() {
        #expect {
            try ImageFile.read(Self.directory + "/color.jpg", pixelLimit: 1000)
        } throws: { error in
            "\(error)".contains("over the 1000-pixel limit") && (error as? ImageError)?.kind == .tooLarge
        }
    }
}
