import LookoutImage
import LookoutJSON
import LookoutTensor
import LookoutWeights
import Testing

/// Letterboxing and resizing against ultralytics `LetterBox` and `cv2.resize` (INTER_LINEAR), byte for byte
/// (reference from `scripts/reference/make_image_fixtures.py`).
@Suite struct LetterboxTests {
    static let file = try! WeightFile.open(NetworkParityTests.root + "/Tests/Fixtures/image/letterbox.safetensors")

    static func image(_ name: String) -> Image {
        let view = file.tensors[name]!
        return Image(
            width: view.shape[1], height: view.shape[0], channels: view.shape[2],
            pixels: view.integers().map { UInt8($0) })
    }

    @Test func everyCaseIsByteExact() throws {
        guard case .array(let cases) = try JSONValue(parsing: Self.file.metadata["cases"]!) else {
            throw CancellationError()
        }
        #expect(cases.count >= 30)
        var failures: [String] = []
        var letterboxes = 0
        var resizes = 0
        var networkInputs = 0
        // Each case with the vector code (AVX2, AVX-512) and with the portable C.
        defer { Image.portableResizeOnly = false }
        for (portable, (number, item)) in [false, true].flatMap({ p in cases.enumerated().map { (p, $0) } }) {
            Image.portableResizeOnly = portable
            let path = portable ? "portable C" : "vector code"
            guard case .object(let members) = item else {
                failures.append("case \(number) is not an object")
                continue
            }
            let fields = Dictionary(uniqueKeysWithValues: members)
            guard case .string(let input) = fields["image"], case .string(let output) = fields["output"] else {
                failures.append("case \(number) has no image or output")
                continue
            }
            let source = Self.image(input)
            let expected = Self.image(output)
            let actual: Image
            if case .int(let size) = fields["size"], case .bool(let auto) = fields["auto"] {
                let box = Letterbox(width: source.width, height: source.height, size: Int(size), auto: auto)
                actual = box.apply(to: source)
                letterboxes += 1
                // The network input in one pass per row (as the engine makes it, in bands across two threads, and
                // in one band) is the planes of the reference's letterboxed image.
                if source.channels >= 3 && expected.width == box.width && expected.height == box.height {
                    let planes = Letterbox.tensor(expected)
                    let pool = ComputePool.shared
                    let banded = box.tensor(of: source) { count, body in pool.parallelFor(count, chunk: 1, body) }
                    if box.tensor(of: source) != planes || banded != planes {
                        failures.append(
                            "\(output), \(path): the one-pass network input differs from the letterboxed image's")
                    }
                    networkInputs += 1
                }
            } else if case .int(let width) = fields["width"], case .int(let height) = fields["height"] {
                actual = source.resizedBilinear(width: Int(width), height: Int(height))
                resizes += 1
            } else {
                failures.append("case \(number) (\(output)) is neither a letterbox nor a resize")
                continue
            }
            if actual != expected {
                let differing = zip(actual.pixels, expected.pixels).filter { $0 != $1 }.count
                failures.append(
                    "\(output), \(path): \(actual.width)×\(actual.height) vs \(expected.width)×\(expected.height), \(differing) bytes differ"
                )
            }
        }
        #expect(letterboxes + resizes == 2 * cases.count, "every case compared both ways")
        #expect(letterboxes >= 60 && resizes >= 8, "\(letterboxes) letterboxes, \(resizes) resizes")
        #expect(networkInputs >= 60, "\(networkInputs) network inputs compared")
        #expect(failures.isEmpty, "\(failures)")
    }

    @Test func geometryOfPublishedExamples() {
        // Verified with ultralytics' LetterBox: input h×w → padded h×w, padding.
        let box = Letterbox(width: 1280, height: 720, size: 640)
        #expect(box.height == 384 && box.width == 640 && box.top == 12 && box.bottom == 12)
        let odd = Letterbox(width: 517, height: 333, size: 640)
        #expect(
            odd.resizedHeight == 412 && odd.resizedWidth == 640 && odd.height == 416 && odd.top == 2 && odd.bottom == 2)
        let uneven = Letterbox(width: 640, height: 427, size: 640)
        #expect(uneven.height == 448 && uneven.top == 10 && uneven.bottom == 11)
        let tall = Letterbox(width: 37, height: 100, size: 640)
        #expect(tall.resizedWidth == 237 && tall.width == 256 && tall.left == 9 && tall.right == 10)
        let square = Letterbox(width: 1280, height: 720, size: 640, auto: false)
        #expect(square.height == 640 && square.top == 140 && square.bottom == 140)
    }
}
