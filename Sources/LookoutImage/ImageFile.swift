import CLookoutCodecs
import LookoutSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A photo that cannot be read or written, with the file, the reason in a sentence, and its ``kind`` for
/// callers that handle them apart.
public struct ImageError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Sendable, Equatable {
        /// The file cannot be opened or read.
        case unreadable
        /// Not a JPEG or PNG.
        case unsupportedFormat
        /// A JPEG or PNG that cannot be decoded (truncated, corrupt).
        case damaged
        /// Over the pixel limit.
        case tooLarge
        /// The image could not be encoded or written.
        case notWritten
    }

    public let path: String
    public let kind: Kind
    public let problem: String
    public var description: String { "\(path): \(problem)" }

    public init(path: String, kind: Kind, problem: String) {
        self.path = path
        self.kind = kind
        self.problem = problem
    }

    /// The kind of a decoder's message.
    static func decodingKind(_ message: String) -> Kind {
        if message.contains("not a JPEG or PNG") { return .unsupportedFormat }
        if message.contains("-pixel limit") { return .tooLarge }
        return .damaged
    }
}

/// Reading photos as ultralytics does (`cv2.imdecode(…, IMREAD_COLOR)`): JPEG and PNG to BGR, grayscale
/// replicated, alpha dropped, 16-bit samples reduced to their high byte, CMYK JPEGs converted, and a JPEG's
/// EXIF orientation applied.
public enum ImageFile {
    /// Images larger than this many pixels are refused (a 40-megapixel photo decodes to 120 MB).
    public static let defaultPixelLimit = 100_000_000

    public static func read(_ path: String, pixelLimit: Int = defaultPixelLimit) throws(ImageError) -> Image {
        let bytes: [UInt8]
        do {
            bytes = try readFile(path)
        } catch {
            throw ImageError(path: path, kind: .unreadable, problem: error.problem)
        }
        return try decode(bytes, name: path, pixelLimit: pixelLimit)
    }

    public static func decode(
        _ bytes: [UInt8], name: String, pixelLimit: Int = defaultPixelLimit
    ) throws(ImageError) -> Image {
        var result = lookout_decoded()
        bytes.withUnsafeBufferPointer { buffer in
            lookout_image_decode(buffer.baseAddress, buffer.count, Int64(pixelLimit), &result)
        }
        defer { lookout_codecs_free(result.pixels) }
        let message = withUnsafeBytes(of: result.error) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        guard message.isEmpty, let pixels = result.pixels, result.width > 0, result.height > 0 else {
            let kind = message.isEmpty ? .damaged : ImageError.decodingKind(message)
            if kind == .unsupportedFormat, let format = Self.otherFormat(bytes) {
                throw ImageError(
                    path: name, kind: kind,
                    problem:
                        "a \(format) image: Lookout reads JPEG and PNG (convert it first, e.g. `convert IN OUT.png`)")
            }
            throw ImageError(path: name, kind: kind, problem: message.isEmpty ? "cannot decode the image" : message)
        }
        let image = Image(
            width: Int(result.width), height: Int(result.height), channels: 3,
            pixels: Array(UnsafeBufferPointer(start: pixels, count: Int(result.width) * Int(result.height) * 3)))
        return image.oriented(ExifOrientation.read(bytes))
    }

    /// The name of an image format Lookout does not read, from the file's first bytes.
    static func otherFormat(_ bytes: [UInt8]) -> String? {
        func starts(_ prefix: [UInt8], at offset: Int = 0) -> Bool {
            bytes.count >= offset + prefix.count && Array(bytes[offset..<(offset + prefix.count)]) == prefix
        }
        if starts(Array("RIFF".utf8)) && starts(Array("WEBP".utf8), at: 8) { return "WebP" }
        if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A]) { return "TIFF" }
        if starts(Array("GIF8".utf8)) { return "GIF" }
        if starts(Array("BM".utf8)) { return "BMP" }
        if starts(Array("ftyp".utf8), at: 4) {
            let brand = bytes.count >= 12 ? String(decoding: bytes[8..<12], as: UTF8.self) : ""
            if ["heic", "heix", "hevc", "heim", "heis", "mif1", "msf1"].contains(brand) { return "HEIC/HEIF" }
            if ["avif", "avis"].contains(brand) { return "AVIF" }
            return "ISO media (\(brand))"
        }
        return nil
    }

    struct ReadProblem: Error {
        let problem: String
    }

    static func readFile(_ path: String) throws(ReadProblem) -> [UInt8] {
        // O_NONBLOCK: opening a named pipe must not wait for a writer (it is then refused as not a regular file).
        let descriptor = FileSystem.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { throw ReadProblem(problem: String(cString: strerror(errno))) }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw ReadProblem(problem: "not a regular file")
        }
        let size = Int(info.st_size)
        guard size > 0 else { throw ReadProblem(problem: "empty file") }
        guard size < 1 << 31 else { throw ReadProblem(problem: "file of \(size) bytes is too large for an image") }
        var bytes = [UInt8](repeating: 0, count: size)
        var filled = 0
        while filled < size {
            let count = bytes.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress! + filled, size - filled) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                throw ReadProblem(
                    problem: count == 0 ? "file shrank while being read" : String(cString: strerror(errno)))
            }
            filled += count
        }
        return bytes
    }
}

/// The EXIF orientation of a JPEG (tag 0x0112 in IFD0 of the APP1 `Exif` segment), 1 when absent.
enum ExifOrientation {
    static func read(_ bytes: [UInt8]) -> Int {
        guard bytes.count > 4, bytes[0] == 0xFF, bytes[1] == 0xD8 else { return 1 }
        var position = 2
        while position + 4 <= bytes.count, bytes[position] == 0xFF {
            let marker = bytes[position + 1]
            if marker == 0xD9 || marker == 0xDA { break }
            let length = Int(bytes[position + 2]) << 8 | Int(bytes[position + 3])
            guard length >= 2, position + 2 + length <= bytes.count else { break }
            let segment = (position + 4)..<(position + 2 + length)
            if marker == 0xE1, segment.count > 14,
                Array(bytes[segment.lowerBound..<(segment.lowerBound + 6)]) == Array("Exif\0\0".utf8)
            {
                return orientation(tiff: Array(bytes[(segment.lowerBound + 6)..<segment.upperBound]))
            }
            position += 2 + length
        }
        return 1
    }

    static func orientation(tiff: [UInt8]) -> Int {
        guard tiff.count >= 8 else { return 1 }
        let little = tiff[0] == 0x49 && tiff[1] == 0x49
        guard little || (tiff[0] == 0x4D && tiff[1] == 0x4D) else { return 1 }
        func u16(_ at: Int) -> Int? {
            guard at >= 0, at + 2 <= tiff.count else { return nil }
            return little ? Int(tiff[at]) | Int(tiff[at + 1]) << 8 : Int(tiff[at]) << 8 | Int(tiff[at + 1])
        }
        func u32(_ at: Int) -> Int? {
            guard let a = u16(at), let b = u16(at + 2) else { return nil }
            return little ? a | b << 16 : a << 16 | b
        }
        guard let ifd = u32(4), let count = u16(ifd) else { return 1 }
        for entry in 0..<min(count, 512) {
            let at = ifd + 2 + entry * 12
            guard let tag = u16(at) else { return 1 }
            if tag == 0x0112, let value = u16(at + 8), (1...8).contains(value) { return value }
        }
        return 1
    }
}

extension Image {
    /// Applies an EXIF orientation (1–8) so that the image is upright, as OpenCV's `ExifTransform` does.
    func oriented(_ orientation: Int) -> Image {
        switch orientation {
        case 2: return mapped(width: width, height: height) { x, y in (width - 1 - x, y) }
        case 3: return mapped(width: width, height: height) { x, y in (width - 1 - x, height - 1 - y) }
        case 4: return mapped(width: width, height: height) { x, y in (x, height - 1 - y) }
        case 5: return mapped(width: height, height: width) { x, y in (y, x) }
        case 6: return mapped(width: height, height: width) { x, y in (y, height - 1 - x) }
        case 7: return mapped(width: height, height: width) { x, y in (width - 1 - y, height - 1 - x) }
        case 8: return mapped(width: height, height: width) { x, y in (width - 1 - y, x) }
        default: return self
        }
    }

    /// A new image where pixel (x, y) comes from `source(x, y)` of this one.
    private func mapped(width newWidth: Int, height newHeight: Int, _ source: (Int, Int) -> (Int, Int)) -> Image {
        var out = Image(width: newWidth, height: newHeight, channels: channels, filledWith: 0)
        for y in 0..<newHeight {
            for x in 0..<newWidth {
                let (sx, sy) = source(x, y)
                let from = (sy * width + sx) * channels
                let to = (y * newWidth + x) * channels
                for c in 0..<channels { out.pixels[to + c] = pixels[from + c] }
            }
        }
        return out
    }
}
