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
        return try image(from: result, channels: 3, bytes: bytes, name: name)
    }

    /// A photo decoded at a reduced scale where that is quick (a JPEG at 1/2, 1/4 or 1/8 of its size, libjpeg's
    /// DCT scaling), never smaller than `longSide` pixels on its long side and `shortSide` on its short one (what a
    /// detector's letterbox and an image tower take in), with the photo's own upright size: a 12-megapixel photo
    /// indexed at 640 decodes at 1/4, several times quicker. The pixels are not those of ``decode(_:name:pixelLimit:)``
    /// resized: a detection on them differs slightly from one on the whole photo. Other formats are decoded whole.
    public static func decodeReduced(
        _ bytes: [UInt8], name: String, longSide: Int, shortSide: Int, pixelLimit: Int = defaultPixelLimit
    ) throws(ImageError) -> (image: Image, width: Int, height: Int) {
        var result = lookout_decoded()
        var (fullWidth, fullHeight): (Int32, Int32) = (0, 0)
        bytes.withUnsafeBufferPointer { buffer in
            lookout_image_decode_reduced(
                buffer.baseAddress, buffer.count, Int64(pixelLimit), Int32(longSide), Int32(shortSide), &result,
                &fullWidth, &fullHeight)
        }
        defer { lookout_codecs_free(result.pixels) }
        let image = try image(from: result, channels: 3, bytes: bytes, name: name)
        let turned = ExifOrientation.read(bytes) >= 5
        return (image, Int(turned ? fullHeight : fullWidth), Int(turned ? fullWidth : fullHeight))
    }

    /// The upright image a codec call produced (`channels` bytes per pixel, EXIF orientation applied), or
    /// its error naming `name` (other image formats named by their first bytes).
    static func image(
        from result: lookout_decoded, channels: Int, bytes: [UInt8], name: String
    ) throws(ImageError) -> Image {
        let message = withUnsafeBytes(of: result.error) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        guard message.isEmpty, let pixels = result.pixels, result.width > 0, result.height > 0 else {
            let kind = message.isEmpty ? .damaged : ImageError.decodingKind(message)
            if kind == .unsupportedFormat, let format = Self.otherFormat(bytes), format.hasPrefix("video") {
                throw ImageError(
                    path: name, kind: kind,
                    problem:
                        "a \(format), not a photo: `lookout detect VIDEO` and `lookout track VIDEO` read videos (the API: POST /api/v1/videos/detect)"
                )
            }
            if kind == .unsupportedFormat, let format = Self.otherFormat(bytes) {
                throw ImageError(
                    path: name, kind: kind,
                    problem:
                        "a \(format) image: Lookout reads JPEG and PNG (convert it first, e.g. `convert IN OUT.png`)")
            }
            throw ImageError(path: name, kind: kind, problem: message.isEmpty ? "cannot decode the image" : message)
        }
        let count = Int(result.width) * Int(result.height) * channels
        let image = Image(
            width: Int(result.width), height: Int(result.height), channels: channels,
            pixels: Array(UnsafeBufferPointer(start: pixels, count: count)))
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
            return "video (MP4/MOV, brand \(brand.filter { $0 != " " }))"
        }
        if starts([0x1A, 0x45, 0xDF, 0xA3]) { return "video (Matroska/WebM)" }
        if starts(Array("RIFF".utf8)) && starts(Array("AVI ".utf8), at: 8) { return "video (AVI)" }
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

/// The EXIF facts Lookout reads from a JPEG's APP1 `Exif` segment: the orientation (tag 0x0112 in IFD0,
/// 1 when absent) and when the photo was taken (DateTimeOriginal, tag 0x9003 in the Exif IFD, else
/// DateTime, 0x0132 in IFD0).
enum ExifOrientation {
    static func read(_ bytes: [UInt8]) -> Int { tiff(bytes).map(orientation(tiff:)) ?? 1 }

    /// The TIFF structure inside the APP1 `Exif` segment, if there is one.
    static func tiff(_ bytes: [UInt8]) -> [UInt8]? {
        guard bytes.count > 4, bytes[0] == 0xFF, bytes[1] == 0xD8 else { return nil }
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
                return Array(bytes[(segment.lowerBound + 6)..<segment.upperBound])
            }
            position += 2 + length
        }
        return nil
    }

    /// Reads IFD entries of a TIFF structure.
    struct Reader {
        let tiff: [UInt8]
        let little: Bool

        init?(_ tiff: [UInt8]) {
            guard tiff.count >= 8 else { return nil }
            little = tiff[0] == 0x49 && tiff[1] == 0x49
            guard little || (tiff[0] == 0x4D && tiff[1] == 0x4D) else { return nil }
            self.tiff = tiff
        }

        func u16(_ at: Int) -> Int? {
            guard at >= 0, at + 2 <= tiff.count else { return nil }
            return little ? Int(tiff[at]) | Int(tiff[at + 1]) << 8 : Int(tiff[at]) << 8 | Int(tiff[at + 1])
        }

        func u32(_ at: Int) -> Int? {
            guard let a = u16(at), let b = u16(at + 2) else { return nil }
            return little ? a | b << 16 : a << 16 | b
        }

        /// The offset of the entry for `tag` in the IFD at `ifd`.
        func entry(_ tag: Int, in ifd: Int) -> Int? {
            guard let count = u16(ifd) else { return nil }
            for index in 0..<min(count, 512) {
                let at = ifd + 2 + index * 12
                guard let found = u16(at) else { return nil }
                if found == tag { return at }
            }
            return nil
        }

        /// An ASCII value's text (`YYYY:MM:DD HH:MM:SS` for dates).
        func ascii(_ entry: Int) -> String? {
            guard let type = u16(entry + 2), type == 2, let count = u32(entry + 4), count > 4, count < 64,
                let offset = u32(entry + 8), offset + count <= tiff.count
            else { return nil }
            return String(decoding: tiff[offset..<(offset + count)].prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    static func orientation(tiff: [UInt8]) -> Int {
        guard let reader = Reader(tiff), let ifd = reader.u32(4), let entry = reader.entry(0x0112, in: ifd),
            let value = reader.u16(entry + 8), (1...8).contains(value)
        else { return 1 }
        return value
    }

    /// When the photo was taken, as written (EXIF has no time zone): seconds since 1970-01-01 00:00 of that
    /// wall-clock time; nil when the file holds no date.
    static func dateTaken(_ bytes: [UInt8]) -> Int64? {
        guard let tiff = tiff(bytes), let reader = Reader(tiff), let ifd = reader.u32(4) else { return nil }
        if let exif = reader.entry(0x8769, in: ifd), let offset = reader.u32(exif + 8),
            let original = reader.entry(0x9003, in: offset), let text = reader.ascii(original),
            let seconds = CalendarTime.seconds(exif: text)
        {
            return seconds
        }
        if let entry = reader.entry(0x0132, in: ifd), let text = reader.ascii(entry) {
            return CalendarTime.seconds(exif: text)
        }
        return nil
    }
}

/// Wall-clock times as seconds since 1970-01-01 00:00 of the same wall clock (no time zone): how photo dates
/// are compared (`lookout search --after 2024-06-01`).
public enum CalendarTime {
    /// Days from 1970-01-01 to a civil date (proleptic Gregorian).
    static func days(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    public static func seconds(
        year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0, second: Int = 0
    )
        -> Int64?
    {
        guard (1...9999).contains(year), (1...12).contains(month), (1...31).contains(day), (0...23).contains(hour),
            (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        return Int64(days(year: year, month: month, day: day)) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
    }

    /// EXIF's `YYYY:MM:DD HH:MM:SS`.
    static func seconds(exif text: String) -> Int64? {
        let parts = text.split(whereSeparator: { $0 == ":" || $0 == " " }).compactMap { Int($0) }
        guard parts.count == 6 else { return nil }
        return seconds(
            year: parts[0], month: parts[1], day: parts[2], hour: parts[3], minute: parts[4], second: parts[5])
    }

    /// A date as people type it: `2024`, `2024-06`, `2024-06-01`, `2024-06-01 14:30` or `2024-06-01T14:30:05`.
    public static func seconds(typed text: String) -> Int64? {
        let parts = text.split(whereSeparator: { "-:T ".contains($0) }).map { Int($0) }
        guard (1...6).contains(parts.count), parts.allSatisfy({ $0 != nil }) else { return nil }
        let v = parts.map { $0! }
        return seconds(
            year: v[0], month: v.count > 1 ? v[1] : 1, day: v.count > 2 ? v[2] : 1, hour: v.count > 3 ? v[3] : 0,
            minute: v.count > 4 ? v[4] : 0, second: v.count > 5 ? v[5] : 0)
    }

    /// A file time (nanoseconds since the epoch) as this machine's local wall clock.
    public static func local(nanoseconds: Int64) -> Int64 {
        var time = time_t(nanoseconds / 1_000_000_000)
        var parts = tm()
        guard localtime_r(&time, &parts) != nil else { return Int64(time) }
        return Int64(time) + Int64(parts.tm_gmtoff)
    }
}

extension ImageFile {
    /// When a photo was taken, from its EXIF date (as written, no time zone); nil without one.
    public static func dateTaken(_ bytes: [UInt8]) -> Int64? { ExifOrientation.dateTaken(bytes) }
}

extension Image {
    /// The image turned clockwise by 90, 180 or 270 degrees (other values leave it as it is).
    public func rotated(clockwise degrees: Int) -> Image {
        switch ((degrees % 360) + 360) % 360 {
        case 90: return oriented(6)
        case 180: return oriented(3)
        case 270: return oriented(8)
        default: return self
        }
    }

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
