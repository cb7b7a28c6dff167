import CLookoutCodecs

/// A photo as PIL's `Image.open` sees it: RGBA pixels and the mode PIL opens it in, which decides how CLIP's
/// preprocessing resizes it.
public struct PILImage: Sendable {
    public enum Mode: Int32, Sendable {
        case rgb = 0, grayscale = 1, rgba = 2, grayscaleAlpha = 3, palette = 4, bilevel = 5, cmyk = 6, gray16 = 7

        /// PIL's name.
        public var name: String {
            ["RGB", "L", "RGBA", "LA", "P", "1", "CMYK", "I;16"][Int(rawValue)]
        }
    }

    /// RGBA, 8 bits per channel (`width × height × 4`); EXIF orientation applied (see ``CLIPPreprocessing``).
    public var image: Image
    public var mode: Mode
}

/// CLIP's image preprocessing, exactly as OpenAI's `clip._transform(n_px)` computes it on a PIL image:
/// torchvision's `Resize(n_px, BICUBIC)` (PIL's `Image.resize`), `CenterCrop(n_px)`, `convert("RGB")`,
/// `ToTensor`, `Normalize(mean, std)`.
///
/// - Resize: the short side becomes `n_px`, the long one `int(n_px · long / short)`; PIL's two-pass
///   separable convolution with the bicubic kernel (a = −0.5, support 2, widened by the scale when
///   shrinking), coefficients in 22-bit fixed point, passes ordered as Pillow 13 orders them, an 8-bit
///   image between the passes. RGBA and LA images are resized premultiplied
///   by alpha and divided back (PIL's `RGBa`); palette and bilevel images are resized nearest-neighbour,
///   as PIL does for modes P and 1.
/// - CenterCrop: `top = round((h − n)/2)`, `left = round((w − n)/2)` with Python's `round` (halves to even).
/// - `convert("RGB")` drops alpha without compositing; gray and palette images are expanded.
///
/// One difference, by design: Lookout applies a JPEG's EXIF orientation (as it does everywhere); PIL's
/// `Image.open` does not. CMYK JPEGs are converted as OpenCV does and 16-bit grayscale PNGs reduced to their
/// high byte; PIL converts those two otherwise, so their parity is not claimed.
public enum CLIPPreprocessing {
    public static let mean: [Float] = [0.48145466, 0.4578275, 0.40821073]
    public static let std: [Float] = [0.26862954, 0.26130258, 0.27577711]

    /// An image tower's preprocessing as open_clip's `image_transform` (eval) builds it from a model's
    /// `preprocess_cfg`: the resize (`shortest`: the short side to `size` then a centre crop, as OpenAI's;
    /// `squash`: both sides to `size`, no crop), bicubic, `convert("RGB")`, `ToTensor`, `Normalize(mean, std)`.
    public struct Transform: Sendable, Equatable {
        public enum Resize: String, Sendable, CaseIterable {
            case shortest
            case squash
        }

        /// PIL's resampling filter: bicubic (CLIP's, open_clip's, SigLIP's) or bilinear (SigLIP 2's).
        public enum Filter: String, Sendable, CaseIterable {
            case bicubic
            case bilinear
        }

        public var size: Int
        public var mean: [Float]
        public var std: [Float]
        public var resize: Resize
        public var filter: Filter
        /// transformers' `convert_to_rgb` before the resize (`do_convert_rgb`), not `convert("RGB")` after it
        /// (torchvision's pipelines): transparency composited onto white (PIL's `alpha_composite`), palette and
        /// bilevel pixels expanded, so every photo is resized with `filter` as an RGB image.
        public var convertFirst: Bool

        public init(
            size: Int, mean: [Float], std: [Float], resize: Resize, filter: Filter = .bicubic,
            convertFirst: Bool = false
        ) {
            precondition(size > 0 && mean.count == 3 && std.count == 3)
            (self.size, self.mean, self.std, self.resize) = (size, mean, std, resize)
            (self.filter, self.convertFirst) = (filter, convertFirst)
        }

        /// OpenAI's `clip._transform(size)`.
        public static func openAI(size: Int) -> Transform {
            Transform(size: size, mean: CLIPPreprocessing.mean, std: CLIPPreprocessing.std, resize: .shortest)
        }
    }

    /// A photo file's bytes as a tower with `transform` takes them.
    public static func input(_ bytes: [UInt8], name: String, transform: Transform) throws(ImageError) -> [Float] {
        tensor(resized(try decode(bytes, name: name), transform: transform), mean: transform.mean, std: transform.std)
    }

    /// The 8-bit RGB image (`size × size × 3`) that `ToTensor` receives under `transform`.
    public static func resized(_ photo: PILImage, transform: Transform) -> Image {
        var photo = photo
        if transform.convertFirst { photo = onWhite(photo) }
        switch transform.resize {
        case .shortest: return resizedAndCropped(photo, size: transform.size, filter: transform.filter)
        case .squash:
            return cropped(
                resampled(photo, width: transform.size, height: transform.size, filter: transform.filter),
                size: transform.size)
        }
    }

    /// Decodes a JPEG or PNG as PIL opens it.
    public static func decode(
        _ bytes: [UInt8], name: String, pixelLimit: Int = ImageFile.defaultPixelLimit
    ) throws(ImageError) -> PILImage {
        var result = lookout_decoded()
        var mode: Int32 = 0
        bytes.withUnsafeBufferPointer { buffer in
            lookout_image_decode_pil(buffer.baseAddress, buffer.count, Int64(pixelLimit), &result, &mode)
        }
        defer { lookout_codecs_free(result.pixels) }
        return PILImage(
            image: try ImageFile.image(from: result, channels: 4, bytes: bytes, name: name),
            mode: PILImage.Mode(rawValue: mode) ?? .rgb)
    }

    /// The photo ``decode(_:name:pixelLimit:)`` gives for a JPEG's `bytes`, made from `image`, the detector's
    /// decode of the same bytes (``ImageFile/decode(_:name:pixelLimit:)``): both make the same decoder call and
    /// apply the same orientation, so the pixels are the same, reordered to RGBA. A 12-megapixel photo is then
    /// decoded once, not twice. nil for other bytes (a PNG's alpha, which the detector's decode drops, is PIL's).
    public static func pilImage(jpeg bytes: [UInt8], decoded image: Image) -> PILImage? {
        guard image.channels == 3 else { return nil }
        let code = bytes.withUnsafeBufferPointer { lookout_jpeg_pil_mode($0.baseAddress, $0.count) }
        guard code >= 0, let mode = PILImage.Mode(rawValue: code) else { return nil }
        let count = image.width * image.height
        let rgba = [UInt8](unsafeUninitializedCapacity: count * 4) { buffer, initialized in
            image.pixels.withUnsafeBufferPointer { lookout_bgr_to_rgba($0.baseAddress, count, buffer.baseAddress) }
            initialized = count * 4
        }
        return PILImage(image: Image(width: image.width, height: image.height, channels: 4, pixels: rgba), mode: mode)
    }

    /// A photo file's bytes as the image tower takes them: decoded as PIL opens it, resized and cropped to
    /// `size`, normalised (`clip._transform(size)(Image.open(file))`).
    public static func input(_ bytes: [UInt8], name: String, size: Int) throws(ImageError) -> [Float] {
        try input(bytes, name: name, transform: .openAI(size: size))
    }

    /// The 8-bit RGB image (`n × n × 3`) that `ToTensor` receives.
    public static func resizedAndCropped(
        _ photo: PILImage, size n: Int, filter: Transform.Filter = .bicubic
    ) -> Image {
        let width = photo.image.width, height = photo.image.height
        let short = min(width, height), long = max(width, height)
        let newLong = Int(Double(n * long) / Double(short))
        let (newWidth, newHeight) = width <= height ? (n, newLong) : (newLong, n)
        return cropped(resampled(photo, width: newWidth, height: newHeight, filter: filter), size: n)
    }

    /// PIL's `Image.resize((width, height), filter)` of the photo in its mode (RGBA pixels out).
    static func resampled(
        _ photo: PILImage, width newWidth: Int, height newHeight: Int, filter: Transform.Filter = .bicubic
    ) -> Image {
        if newWidth == photo.image.width && newHeight == photo.image.height { return photo.image }
        switch photo.mode {
        case .palette, .bilevel:
            return nearest(photo.image, width: newWidth, height: newHeight)
        case .rgba, .grayscaleAlpha:
            return unpremultiplied(
                convolved(premultiplied(photo.image), width: newWidth, height: newHeight, filter: filter))
        default:
            return convolved(photo.image, width: newWidth, height: newHeight, filter: filter)
        }
    }

    /// `CenterCrop(n)` then `convert("RGB")` of RGBA pixels at least `n` on each side.
    static func cropped(_ resized: Image, size n: Int) -> Image {
        let top = Int((Double(resized.height - n) / 2).rounded(.toNearestOrEven))
        let left = Int((Double(resized.width - n) / 2).rounded(.toNearestOrEven))
        var rgb = [UInt8](repeating: 0, count: n * n * 3)
        for y in 0..<n {
            for x in 0..<n {
                let from = ((y + top) * resized.width + (x + left)) * 4
                let to = (y * n + x) * 3
                rgb[to] = resized.pixels[from]
                rgb[to + 1] = resized.pixels[from + 1]
                rgb[to + 2] = resized.pixels[from + 2]
            }
        }
        return Image(width: n, height: n, channels: 3, pixels: rgb)
    }

    /// `ToTensor` then `Normalize`: channels first, `(v / 255 − mean) / std` in Float32.
    public static func tensor(_ rgb: Image) -> [Float] { tensor(rgb, mean: mean, std: std) }

    /// ``tensor(_:)`` with another mean and standard deviation.
    public static func tensor(_ rgb: Image, mean: [Float], std: [Float]) -> [Float] {
        let count = rgb.width * rgb.height
        var out = [Float](repeating: 0, count: 3 * count)
        for c in 0..<3 {
            for p in 0..<count { out[c * count + p] = (Float(rgb.pixels[p * 3 + c]) / 255 - mean[c]) / std[c] }
        }
        return out
    }

    // MARK: Resampling

    static let precisionBits = 22

    /// PIL's `bicubic_filter`.
    static func bicubicKernel(_ x: Double) -> Double {
        let a = -0.5
        let x = abs(x)
        if x < 1 { return ((a + 2) * x - (a + 3)) * x * x + 1 }
        if x < 2 { return (((x - 5) * x + 8) * x - 4) * a }
        return 0
    }

    /// PIL's `bilinear_filter` (support 1).
    static func bilinearKernel(_ x: Double) -> Double {
        let x = abs(x)
        return x < 1 ? 1 - x : 0
    }

    /// PIL's `precompute_coeffs` then `normalize_coeffs_8bpc`: for each output position, the first input
    /// position and the fixed-point weights.
    static func coefficients(
        inSize: Int, outSize: Int, filter: Transform.Filter = .bicubic
    ) -> (bounds: [(start: Int, count: Int)], weights: [[Int32]]) {
        let kernel = filter == .bicubic ? bicubicKernel : bilinearKernel
        let scale = Double(Float(inSize)) / Double(outSize)
        let filterScale = max(scale, 1)
        let support = (filter == .bicubic ? 2 : 1) * filterScale
        var bounds: [(Int, Int)] = []
        var weights: [[Int32]] = []
        bounds.reserveCapacity(outSize)
        weights.reserveCapacity(outSize)
        for xx in 0..<outSize {
            let center = (Double(xx) + 0.5) * scale
            let inverse = 1 / filterScale
            let xmin = max(Int(center - support + 0.5), 0)
            let xmax = min(Int(center + support + 0.5), inSize) - xmin
            var k = (0..<max(0, xmax)).map { kernel((Double($0 + xmin) - center + 0.5) * inverse) }
            let total = k.reduce(0, +)
            if total != 0 { k = k.map { $0 / total } }
            let unit = Double(1 << precisionBits)
            weights.append(k.map { Int32($0 < 0 ? (-0.5 + $0 * unit) : (0.5 + $0 * unit)) })
            bounds.append((xmin, max(0, xmax)))
        }
        return (bounds, weights)
    }

    /// PIL's `ImagingResampleInner` with `filter`, on 4-channel 8-bit pixels. The horizontal pass
    /// runs first (over only the rows the vertical pass reads) unless the height shrinks by more than twice
    /// as many pixels as the width does (Pillow 13's rule); an 8-bit image lies between the passes.
    static func convolved(_ image: Image, width: Int, height: Int, filter: Transform.Filter = .bicubic) -> Image {
        precondition(image.channels == 4)
        let needHorizontal = width != image.width
        let needVertical = height != image.height
        let shrink = image.height - height
        let horizontalFirst = !(shrink > 0 && shrink > (image.width - width) * 2)
        var current = image
        if horizontalFirst {
            if needHorizontal {
                var rows = 0..<image.height
                if needVertical {
                    let vertical = coefficients(inSize: image.height, outSize: height, filter: filter)
                    rows =
                        vertical.bounds[0]
                        .start..<(vertical.bounds[height - 1].start + vertical.bounds[height - 1].count)
                }
                current = horizontalPass(current, rows: rows, width: width, filter: filter)
                if needVertical {
                    current = verticalPass(
                        current, rowOffset: rows.lowerBound, from: image.height, height: height, filter: filter)
                }
            } else if needVertical {
                current = verticalPass(current, rowOffset: 0, from: image.height, height: height, filter: filter)
            }
        } else {
            if needVertical {
                current = verticalPass(current, rowOffset: 0, from: image.height, height: height, filter: filter)
            }
            if needHorizontal { current = horizontalPass(current, rows: 0..<height, width: width, filter: filter) }
        }
        return current
    }

    /// A pass's coefficients as the C passes take them: first input positions, counts, and the weights in rows
    /// of `stride` (the most any position reads), zero beyond each count.
    static func flattened(
        _ coefficients: (bounds: [(start: Int, count: Int)], weights: [[Int32]]), offset: Int = 0
    ) -> (start: [Int32], count: [Int32], weights: [Int32], stride: Int) {
        let stride = max(1, coefficients.bounds.map(\.count).max() ?? 1)
        var weights = [Int32](repeating: 0, count: coefficients.bounds.count * stride)
        for (position, row) in coefficients.weights.enumerated() {
            for (i, weight) in row.enumerated() { weights[position * stride + i] = weight }
        }
        return (
            coefficients.bounds.map { Int32($0.start - offset) }, coefficients.bounds.map { Int32($0.count) }, weights,
            stride
        )
    }

    /// `ImagingResampleHorizontal_8bpc` over `rows` of the input (in C, vectorised where the CPU can: the same
    /// bytes, ``Image/portableResizeOnly``).
    static func horizontalPass(
        _ image: Image, rows: Range<Int>, width: Int, filter: Transform.Filter = .bicubic
    ) -> Image {
        let pass = flattened(coefficients(inSize: image.width, outSize: width, filter: filter))
        let output = [UInt8](unsafeUninitializedCapacity: width * rows.count * 4) { buffer, initialized in
            image.pixels.withUnsafeBufferPointer { input in
                lookout_pil_resample_horizontal(
                    input.baseAddress! + rows.lowerBound * image.width * 4, Int32(image.width), Int32(rows.count),
                    Int32(width), pass.start, pass.count, pass.weights, Int32(pass.stride), buffer.baseAddress)
            }
            initialized = width * rows.count * 4
        }
        return Image(width: width, height: rows.count, channels: 4, pixels: output)
    }

    /// `ImagingResampleVertical_8bpc`: coefficients for `from` input rows, the first of which is the
    /// image's row `rowOffset` (the rows a horizontal pass kept).
    static func verticalPass(
        _ image: Image, rowOffset: Int, from inputHeight: Int, height: Int, filter: Transform.Filter = .bicubic
    ) -> Image {
        let pass = flattened(coefficients(inSize: inputHeight, outSize: height, filter: filter), offset: rowOffset)
        let width = image.width
        let output = [UInt8](unsafeUninitializedCapacity: width * height * 4) { buffer, initialized in
            image.pixels.withUnsafeBufferPointer { input in
                lookout_pil_resample_vertical(
                    input.baseAddress, Int32(width), Int32(height), pass.start, pass.count, pass.weights,
                    Int32(pass.stride), buffer.baseAddress)
            }
            initialized = width * height * 4
        }
        return Image(width: width, height: height, channels: 4, pixels: output)
    }

    /// PIL's nearest-neighbour resize (`ImagingScaleAffine`): input column of output x is the integer part
    /// of `scale · 0.5 + x · scale`, accumulated step by step in double precision as PIL does.
    static func nearest(_ image: Image, width: Int, height: Int) -> Image {
        func table(inSize: Int, outSize: Int) -> [Int] {
            let step = Double(Float(inSize)) / Double(outSize)
            var position = step * 0.5
            var out: [Int] = []
            for _ in 0..<outSize {
                out.append(position < 0 ? -1 : min(Int(position), inSize - 1))
                position += step
            }
            return out
        }
        let columns = table(inSize: image.width, outSize: width)
        let rows = table(inSize: image.height, outSize: height)
        var output = [UInt8](repeating: 0, count: width * height * 4)
        for y in 0..<height {
            for x in 0..<width {
                let from = (rows[y] * image.width + columns[x]) * 4
                let to = (y * width + x) * 4
                for c in 0..<4 { output[to + c] = image.pixels[from + c] }
            }
        }
        return Image(width: width, height: height, channels: 4, pixels: output)
    }

    /// transformers' `convert_to_rgb`: a photo with transparency composited onto opaque white as PIL's
    /// `alpha_composite` rounds it (7 fractional bits, divisions by 255 as shifts), then an RGB image.
    static func onWhite(_ photo: PILImage) -> PILImage {
        var out = PILImage(image: photo.image, mode: .rgb)
        for p in stride(from: 0, to: out.image.pixels.count, by: 4) {
            let alpha = UInt32(out.image.pixels[p + 3])
            guard alpha != 255 else { continue }
            out.image.pixels[p + 3] = 255
            guard alpha != 0 else {
                for c in 0..<3 { out.image.pixels[p + c] = 255 }
                continue
            }
            // The background is opaque white: blend = 255·(255 − α), and the result's alpha 255.
            let total = alpha * 255 + 255 * (255 - alpha)
            let source = alpha * 255 * 255 * 128 / total
            let background = 255 * 128 - source
            for c in 0..<3 {
                let x = UInt32(out.image.pixels[p + c]) * source + 255 * background + (0x80 << 7)
                out.image.pixels[p + c] = UInt8(((((x >> 8) + x) >> 8) >> 7))
            }
        }
        return out
    }

    /// PIL's `RGBA → RGBa`: each colour times alpha / 255, rounded as `MULDIV255`.
    static func premultiplied(_ image: Image) -> Image {
        var out = image
        for p in stride(from: 0, to: out.pixels.count, by: 4) {
            let alpha = UInt32(out.pixels[p + 3])
            for c in 0..<3 {
                let t = UInt32(out.pixels[p + c]) * alpha + 128
                out.pixels[p + c] = UInt8(((t >> 8) + t) >> 8)
            }
        }
        return out
    }

    /// PIL's `RGBa → RGBA`: each colour times 255 / alpha (integer division, clipped), unchanged where alpha
    /// is 0 or 255.
    static func unpremultiplied(_ image: Image) -> Image {
        var out = image
        for p in stride(from: 0, to: out.pixels.count, by: 4) {
            let alpha = UInt32(out.pixels[p + 3])
            guard alpha != 0 && alpha != 255 else { continue }
            for c in 0..<3 { out.pixels[p + c] = UInt8(min(255, 255 * UInt32(out.pixels[p + c]) / alpha)) }
        }
        return out
    }
}
