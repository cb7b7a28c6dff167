import LookoutImage
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

    @Test func pixelLimit() {
        #expect {
            try ImageFile.read(Self.directory + "/color.jpg", pixelLimit: 1000)
        } throws: { error in
            "\(error)".contains("over the 1000-pixel limit") && (error as? ImageError)?.kind == .tooLarge
        }
    }
}
