import Foundation
import LookoutImage
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Writing images (TurboJPEG, libpng) and drawing boxes and labels.
@Suite struct AnnotationTests {
    static func gradient(width: Int, height: Int) -> Image {
        var pixels: [UInt8] = []
        for y in 0..<height {
            for x in 0..<width {
                pixels += [
                    UInt8((x * 255) / max(1, width - 1)), UInt8((y * 255) / max(1, height - 1)), UInt8((x + y) % 256),
                ]
            }
        }
        return Image(width: width, height: height, pixels: pixels)
    }

    static func temporaryPath(_ name: String) -> String {
        NSTemporaryDirectory() + "lookout-annotation-\(getpid())-\(UInt32.random(in: 0...UInt32.max))-\(name)"
    }

    /// A mask keeps its object's colour: a green square under the first palette colour (red) stays green
    /// inside, and its outline is the palette colour (issue 49: at 50 % the tint turned a green star brown).
    @Test func maskTintKeepsTheObjectsColour() {
        let green: [UInt8] = [0, 200, 0]  // BGR
        let image = Image(width: 12, height: 12, pixels: Array((0..<144).map { _ in green }.joined()))
        let mask = MaskAnnotation(
            left: 2, top: 2, width: 8, height: 8, pixels: [UInt8](repeating: 1, count: 64), colorIndex: 0)
        let tinted = image.tinted(with: [mask])
        func pixel(_ x: Int, _ y: Int) -> [UInt8] { Array(tinted.pixels[(y * 12 + x) * 3..<(y * 12 + x) * 3 + 3]) }
        let inside = pixel(5, 5)
        #expect(inside[1] > 2 * inside[2] && inside[1] > 2 * inside[0], "inside reads green: \(inside)")
        #expect(inside != green, "inside is tinted")
        #expect(pixel(2, 5) == [56, 56, 255] && pixel(9, 9) == [56, 56, 255], "the outline is the palette colour")
        #expect(pixel(0, 0) == green && pixel(11, 5) == green, "outside is untouched")
    }

    @Test func pngRoundTripIsExact() throws {
        let image = Self.gradient(width: 67, height: 41)
        let path = Self.temporaryPath("a.png")
        defer { unlink(path) }
        try ImageFile.write(image, to: path)
        #expect(try ImageFile.read(path) == image)
    }

    @Test func jpegRoundTripIsClose() throws {
        let image = Self.gradient(width: 64, height: 48)
        let path = Self.temporaryPath("a.jpg")
        defer { unlink(path) }
        try ImageFile.write(image, to: path)
        let back = try ImageFile.read(path)
        #expect(back.width == 64 && back.height == 48)
        let error = zip(back.pixels, image.pixels).reduce(0) { $0 + abs(Int($1.0) - Int($1.1)) }
        #expect(
            Double(error) / Double(image.pixels.count) < 4, "mean |error| \(Double(error) / Double(image.pixels.count))"
        )
    }

    @Test func unsupportedOrUnwritableOutputIsAnError() {
        let image = Self.gradient(width: 8, height: 8)
        #expect(throws: ImageError.self) { try ImageFile.write(image, to: Self.temporaryPath("a.bmp")) }
        #expect(throws: ImageError.self) { try ImageFile.write(image, to: "/nonexistent-folder/a.png") }
    }

    @Test func boxesAndLabelsChangeOnlyTheirSurroundings() {
        let image = Image(width: 200, height: 150, filledWith: 40)
        let annotated = image.annotated(with: [
            BoxAnnotation(box: [50, 60, 120, 130], label: "red star 0.91", colorIndex: 0)
        ])
        var changed = 0
        for y in 0..<150 {
            for x in 0..<200 {
                let offset = (y * 200 + x) * 3
                guard annotated.pixels[offset..<offset + 3] != image.pixels[offset..<offset + 3] else { continue }
                changed += 1
                // Within the outline (±2 px) or the label band above the box (20 px high).
                let nearBox = x >= 48 && x <= 123 && y >= 58 && y <= 133
                let inLabel = y >= 40 && y < 60 && x >= 50
                #expect(nearBox || inLabel, "pixel (\(x), \(y)) changed")
            }
        }
        #expect(changed > 500)
        // The outline is drawn in the first palette colour; the interior is untouched.
        let corner = (60 * 200 + 80) * 3
        #expect(Array(annotated.pixels[corner..<corner + 3]) == [56, 56, 255])
        let inside = (100 * 200 + 80) * 3
        #expect(Array(annotated.pixels[inside..<inside + 3]) == [40, 40, 40])
    }

    @Test func boxesOutsideTheImageAreClampedNotFatal() {
        let image = Image(width: 30, height: 20, filledWith: 0)
        let annotated = image.annotated(with: [
            BoxAnnotation(
                box: [-50, -50, 500, 500], label: "huge ✓ label that is longer than the image", colorIndex: 7),
            BoxAnnotation(box: [.nan, 0, 1, 1], label: "nan", colorIndex: -3),
        ])
        #expect(annotated.width == 30 && annotated.pixels != image.pixels)
    }
}
