import CLookoutCodecs
import LookoutSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The bitmap font that labels boxes: anti-aliased coverage for printable ASCII (Generated/LabelFont.swift).
/// Other characters are drawn as `?`.
enum LabelFont {
    static let atlas: [UInt8] = Base64.decode(atlasBase64.filter { !$0.isWhitespace })

    static let offsets: [Int] = {
        var result: [Int] = []
        var x = 0
        for width in advances {
            result.append(x)
            x += width
        }
        return result
    }()

    static func glyph(_ scalar: Unicode.Scalar) -> Int {
        let value = Int(scalar.value)
        return (32...126).contains(value) ? value - 32 : Int(("?" as Unicode.Scalar).value) - 32
    }

    static func width(of text: String, scale: Int) -> Int {
        text.unicodeScalars.reduce(0) { $0 + advances[glyph($1)] } * scale
    }
}

enum Base64 {
    static func decode(_ text: String) -> [UInt8] {
        var table = [UInt8](repeating: 255, count: 256)
        for (index, byte) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8.enumerated() {
            table[Int(byte)] = UInt8(index)
        }
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        for byte in text.utf8 where table[Int(byte)] != 255 {
            buffer = (buffer << 6) | UInt32(table[Int(byte)])
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8((buffer >> UInt32(bits)) & 0xFF))
            }
        }
        return out
    }
}

/// A box to draw: corners in the image's pixels, a label, and a colour slot (the query index).
public struct BoxAnnotation: Sendable {
    public var box: [Float]
    public var label: String
    public var colorIndex: Int

    public init(box: [Float], label: String, colorIndex: Int) {
        self.box = box
        self.label = label
        self.colorIndex = colorIndex
    }
}

/// A region to tint: a window of the image (`left`, `top`, `width × height`, row-major 0/1 bytes) and the
/// palette entry of its colour.
public struct MaskAnnotation: Sendable {
    public var left: Int
    public var top: Int
    public var width: Int
    public var height: Int
    public var pixels: [UInt8]
    public var colorIndex: Int

    public init(left: Int, top: Int, width: Int, height: Int, pixels: [UInt8], colorIndex: Int) {
        precondition(pixels.count == width * height)
        (self.left, self.top, self.width, self.height) = (left, top, width, height)
        (self.pixels, self.colorIndex) = (pixels, colorIndex)
    }
}

extension Image {
    /// The image with each mask outlined in its colour and its inside blended 30 % towards it. (ultralytics'
    /// `plot` tints at 50 %, which hides the object's own colour: a green star under a red tint reads brown.)
    public func tinted(with masks: [MaskAnnotation]) -> Image {
        precondition(channels == 3)
        var out = self
        for mask in masks {
            let color = Self.palette[((mask.colorIndex % Self.palette.count) + Self.palette.count) % Self.palette.count]
            let tint = [Int(color.0), Int(color.1), Int(color.2)]
            func inside(_ row: Int, _ column: Int) -> Bool {
                row >= 0 && row < mask.height && column >= 0 && column < mask.width
                    && mask.pixels[row * mask.width + column] != 0
            }
            for row in 0..<mask.height {
                let y = mask.top + row
                guard y >= 0 && y < height else { continue }
                for column in 0..<mask.width where mask.pixels[row * mask.width + column] != 0 {
                    let x = mask.left + column
                    guard x >= 0 && x < width else { continue }
                    let base = (y * width + x) * 3
                    let edge =
                        !inside(row - 1, column) || !inside(row + 1, column) || !inside(row, column - 1)
                        || !inside(row, column + 1)
                    for channel in 0..<3 {
                        // The outline in the colour itself; inside, 30 % of it, so that the object keeps its own
                        // colour (at 50 % a red tint turned a green star brown).
                        out.pixels[base + channel] =
                            edge
                            ? UInt8(tint[channel])
                            : UInt8((7 * Int(out.pixels[base + channel]) + 3 * tint[channel] + 5) / 10)
                    }
                }
            }
        }
        return out
    }

    /// Twenty BGR colours that stay apart from each other (the query index picks one, cycling).
    static let palette: [(UInt8, UInt8, UInt8)] = [
        (56, 56, 255), (151, 157, 255), (31, 112, 255), (29, 178, 255), (49, 210, 207), (10, 249, 72),
        (23, 204, 146), (134, 219, 61), (52, 147, 26), (187, 212, 0), (168, 153, 44), (255, 194, 0),
        (147, 69, 52), (255, 115, 100), (236, 24, 0), (255, 56, 132), (133, 0, 82), (255, 56, 203),
        (200, 149, 255), (199, 55, 255),
    ]

    /// The image with each box outlined and labelled. Line width and text size grow with the image so that
    /// labels stay legible on large photos; a label sits above its box, or inside it at the top edge.
    public func annotated(with annotations: [BoxAnnotation]) -> Image {
        precondition(channels == 3)
        var out = self
        let shortSide = min(width, height)
        let thickness = max(2, Int((Double(shortSide) / 320).rounded()))
        let scale = max(1, Int((Double(shortSide) / 720).rounded(.up)))
        for annotation in annotations {
            guard annotation.box.count == 4, annotation.box.allSatisfy(\.isFinite) else { continue }
            let color = Self.palette[
                ((annotation.colorIndex % Self.palette.count) + Self.palette.count) % Self.palette.count]
            let x1 = clampX(annotation.box[0]), y1 = clampY(annotation.box[1])
            let x2 = clampX(annotation.box[2]), y2 = clampY(annotation.box[3])
            out.strokeRectangle(x1: x1, y1: y1, x2: x2, y2: y2, thickness: thickness, color: color)
            let textWidth = LabelFont.width(of: annotation.label, scale: scale) + 4 * scale
            let textHeight = LabelFont.lineHeight * scale
            let top = y1 - textHeight >= 0 ? y1 - textHeight : y1
            out.fillRectangle(x1: x1, y1: top, x2: x1 + textWidth, y2: top + textHeight, color: color)
            let luminance = 0.114 * Double(color.0) + 0.587 * Double(color.1) + 0.299 * Double(color.2)
            let ink: UInt8 = luminance > 150 ? 0 : 255
            out.drawText(annotation.label, x: x1 + 2 * scale, y: top, scale: scale, ink: (ink, ink, ink))
        }
        return out
    }

    private func clampX(_ value: Float) -> Int { Int(max(0, min(Float(width - 1), value.rounded()))) }
    private func clampY(_ value: Float) -> Int { Int(max(0, min(Float(height - 1), value.rounded()))) }

    mutating func fillRectangle(x1: Int, y1: Int, x2: Int, y2: Int, color: (UInt8, UInt8, UInt8)) {
        let left = max(0, x1), right = min(width, x2)
        let top = max(0, y1), bottom = min(height, y2)
        guard left < right, top < bottom else { return }
        for y in top..<bottom {
            var offset = (y * width + left) * 3
            for _ in left..<right {
                pixels[offset] = color.0
                pixels[offset + 1] = color.1
                pixels[offset + 2] = color.2
                offset += 3
            }
        }
    }

    mutating func strokeRectangle(x1: Int, y1: Int, x2: Int, y2: Int, thickness: Int, color: (UInt8, UInt8, UInt8)) {
        let half = thickness / 2
        fillRectangle(x1: x1 - half, y1: y1 - half, x2: x2 + thickness - half, y2: y1 + thickness - half, color: color)
        fillRectangle(x1: x1 - half, y1: y2 - half, x2: x2 + thickness - half, y2: y2 + thickness - half, color: color)
        fillRectangle(x1: x1 - half, y1: y1 - half, x2: x1 + thickness - half, y2: y2 + thickness - half, color: color)
        fillRectangle(x1: x2 - half, y1: y1 - half, x2: x2 + thickness - half, y2: y2 + thickness - half, color: color)
    }

    /// Blends the font's coverage over the image, each font pixel a `scale`×`scale` block.
    mutating func drawText(_ text: String, x: Int, y: Int, scale: Int, ink: (UInt8, UInt8, UInt8)) {
        var penX = x
        let atlas = LabelFont.atlas
        for scalar in text.unicodeScalars {
            let glyph = LabelFont.glyph(scalar)
            let advance = LabelFont.advances[glyph]
            let origin = LabelFont.offsets[glyph]
            for row in 0..<LabelFont.lineHeight {
                for column in 0..<advance {
                    let coverage = Int(atlas[row * LabelFont.atlasWidth + origin + column])
                    if coverage == 0 { continue }
                    for dy in 0..<scale {
                        let py = y + row * scale + dy
                        guard py >= 0, py < height else { continue }
                        for dx in 0..<scale {
                            let px = penX + column * scale + dx
                            guard px >= 0, px < width else { continue }
                            let offset = (py * width + px) * 3
                            pixels[offset] = blend(pixels[offset], ink.0, coverage)
                            pixels[offset + 1] = blend(pixels[offset + 1], ink.1, coverage)
                            pixels[offset + 2] = blend(pixels[offset + 2], ink.2, coverage)
                        }
                    }
                }
            }
            penX += advance * scale
            if penX >= width { break }
        }
    }

    private func blend(_ under: UInt8, _ over: UInt8, _ coverage: Int) -> UInt8 {
        UInt8((Int(under) * (255 - coverage) + Int(over) * coverage + 127) / 255)
    }
}

extension ImageFile {
    /// The file formats `write` produces, chosen by the file name's extension.
    public enum OutputFormat: Sendable {
        case jpeg(quality: Int)
        case png

        public init?(path: String) {
            let lower = path.lowercased()
            if lower.hasSuffix(".jpg") || lower.hasSuffix(".jpeg") {
                self = .jpeg(quality: 92)
            } else if lower.hasSuffix(".png") {
                self = .png
            } else {
                return nil
            }
        }
    }

    /// Encodes a BGR image as JPEG or PNG; errors name the image `name`.
    public static func encode(_ image: Image, format: OutputFormat, name: String) throws(ImageError) -> [UInt8] {
        guard image.channels == 3, image.width > 0, image.height > 0 else {
            throw ImageError(path: name, kind: .notWritten, problem: "only 3-channel images can be encoded")
        }
        var result = lookout_encoded()
        image.pixels.withUnsafeBufferPointer { buffer in
            switch format {
            case .jpeg(let quality):
                lookout_jpeg_encode(
                    buffer.baseAddress, Int32(image.width), Int32(image.height), Int32(max(1, min(100, quality))),
                    &result)
            case .png:
                lookout_png_encode(buffer.baseAddress, Int32(image.width), Int32(image.height), &result)
            }
        }
        defer { lookout_codecs_free(result.bytes) }
        let message = withUnsafeBytes(of: result.error) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        guard message.isEmpty, let bytes = result.bytes else {
            throw ImageError(
                path: name, kind: .notWritten, problem: message.isEmpty ? "cannot encode the image" : message)
        }
        return Array(UnsafeBufferPointer(start: bytes, count: result.size))
    }

    /// Encodes a BGR image as JPEG or PNG (by the extension unless `format` is given) and writes it
    /// atomically: to a temporary file in the same folder, then renamed into place.
    public static func write(_ image: Image, to path: String, format: OutputFormat? = nil) throws(ImageError) {
        guard let format = format ?? OutputFormat(path: path) else {
            throw ImageError(
                path: path, kind: .notWritten, problem: "unsupported output format (use .jpg, .jpeg or .png)")
        }
        let bytes = try encode(image, format: format, name: path)
        let temporary = path + ".partial-\(getpid())"
        let descriptor = FileSystem.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw ImageError(path: path, kind: .notWritten, problem: String(cString: strerror(errno)))
        }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes {
                Glibc.write(descriptor, $0.baseAddress! + written, bytes.count - written)
            }
            if count < 0 {
                if errno == EINTR { continue }
                let problem = String(cString: strerror(errno))
                close(descriptor)
                _ = FileSystem.unlink(temporary)
                throw ImageError(path: path, kind: .notWritten, problem: problem)
            }
            written += count
        }
        close(descriptor)
        guard FileSystem.rename(temporary, path) == 0 else {
            let problem = String(cString: strerror(errno))
            _ = FileSystem.unlink(temporary)
            throw ImageError(path: path, kind: .notWritten, problem: problem)
        }
    }
}

/// A path to draw (a track's trail, a counting line or a zone's outline): points in the image's pixels and a
/// colour slot.
public struct PathAnnotation: Sendable {
    public var points: [(x: Float, y: Float)]
    public var colorIndex: Int
    public var closed: Bool

    public init(points: [(x: Float, y: Float)], colorIndex: Int, closed: Bool = false) {
        self.points = points
        self.colorIndex = colorIndex
        self.closed = closed
    }
}

extension Image {
    /// The image with each path drawn as connected segments, as thick as the boxes' outlines.
    public func drawing(_ paths: [PathAnnotation]) -> Image {
        precondition(channels == 3)
        var out = self
        let thickness = max(2, Int((Double(min(width, height)) / 320).rounded()))
        for path in paths where path.points.count >= 2 {
            let color = Self.palette[((path.colorIndex % Self.palette.count) + Self.palette.count) % Self.palette.count]
            var segments = Array(zip(path.points, path.points.dropFirst()))
            if path.closed, let first = path.points.first, let last = path.points.last {
                segments.append((last, first))
            }
            for (a, b) in segments {
                guard a.x.isFinite, a.y.isFinite, b.x.isFinite, b.y.isFinite else { continue }
                let steps = max(1, Int(max(abs(b.x - a.x), abs(b.y - a.y)).rounded(.up)))
                guard steps <= 100_000 else { continue }
                for step in 0...steps {
                    let t = Float(step) / Float(steps)
                    let x = Int((a.x + (b.x - a.x) * t).rounded())
                    let y = Int((a.y + (b.y - a.y) * t).rounded())
                    out.fillRectangle(
                        x1: x - thickness / 2, y1: y - thickness / 2, x2: x - thickness / 2 + thickness,
                        y2: y - thickness / 2 + thickness, color: color)
                }
            }
        }
        return out
    }
}
