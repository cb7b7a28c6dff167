import CLookoutCodecs

/// An 8-bit image with interleaved channels, rows top to bottom. Lookout keeps decoded photos in
/// OpenCV's order, BGR, so that every step before the network matches ultralytics' `cv2` pipeline.
public struct Image: Sendable, Equatable {
    public let width: Int
    public let height: Int
    public let channels: Int
    public var pixels: [UInt8]

    public init(width: Int, height: Int, channels: Int = 3, pixels: [UInt8]) {
        precondition(width > 0 && height > 0 && channels > 0, "empty image")
        precondition(
            pixels.count == width * height * channels, "pixel count does not match \(width)×\(height)×\(channels)")
        self.width = width
        self.height = height
        self.channels = channels
        self.pixels = pixels
    }

    public init(width: Int, height: Int, channels: Int = 3, filledWith value: UInt8) {
        self.init(
            width: width, height: height, channels: channels,
            pixels: [UInt8](repeating: value, count: width * height * channels))
    }
}

/// A pointer handed to the bands of work ``Letterbox/tensor(of:padding:bands:)`` shares out; each writes its own
/// rows.
struct UnsafeSendableBuffer<Element>: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<Element>
    init(_ pointer: UnsafeMutablePointer<Element>) { self.pointer = pointer }
}

/// Where a letterboxed image sits in the network input (ultralytics `data/augment.py` `LetterBox`).
public struct Letterbox: Sendable, Equatable {
    public let sourceWidth: Int
    public let sourceHeight: Int
    /// Size of the resized image before padding.
    public let resizedWidth: Int
    public let resizedHeight: Int
    public let top: Int, bottom: Int, left: Int, right: Int

    public var width: Int { resizedWidth + left + right }
    public var height: Int { resizedHeight + top + bottom }

    /// `LetterBox(new_shape=(size, size), auto, stride, scaleup=True, center=True)`: scale by
    /// `min(size/h, size/w)`, round each side (half to even, at least 1), pad the remainder (only to a
    /// multiple of `stride` when `auto`), split as `round(d − 0.1)` before and `round(d + 0.1)` after.
    public init(width: Int, height: Int, size: Int, auto: Bool = true, stride: Int = 32) {
        sourceWidth = width
        sourceHeight = height
        let ratio = min(Double(size) / Double(height), Double(size) / Double(width))
        resizedWidth = max(Int((Double(width) * ratio).rounded(.toNearestOrEven)), 1)
        resizedHeight = max(Int((Double(height) * ratio).rounded(.toNearestOrEven)), 1)
        var padWidth = Double(size - resizedWidth)
        var padHeight = Double(size - resizedHeight)
        if auto {
            padWidth = Double((size - resizedWidth) % stride)
            padHeight = Double((size - resizedHeight) % stride)
        }
        padWidth /= 2
        padHeight /= 2
        top = Int((padHeight - 0.1).rounded(.toNearestOrEven))
        bottom = Int((padHeight + 0.1).rounded(.toNearestOrEven))
        left = Int((padWidth - 0.1).rounded(.toNearestOrEven))
        right = Int((padWidth + 0.1).rounded(.toNearestOrEven))
    }

    /// Resizes (when the size changes) and pads with 114, as ultralytics does with `cv2`.
    public func apply(to image: Image, padding: UInt8 = 114) -> Image {
        precondition(
            image.width == sourceWidth && image.height == sourceHeight, "letterbox made for another image size")
        let resized =
            resizedWidth == image.width && resizedHeight == image.height
            ? image : image.resizedBilinear(width: resizedWidth, height: resizedHeight)
        var out = Image(width: width, height: height, channels: image.channels, filledWith: padding)
        let rowBytes = resizedWidth * image.channels
        let (channels, width, top, left) = (image.channels, width, top, left)
        resized.pixels.withUnsafeBufferPointer { source in
            out.pixels.withUnsafeMutableBufferPointer { target in
                for y in 0..<resizedHeight {
                    (target.baseAddress! + ((y + top) * width + left) * channels).update(
                        from: source.baseAddress! + y * rowBytes, count: rowBytes)
                }
            }
        }
        return out
    }

    /// The network input: channels reversed (BGR → RGB), planar, each value divided by 255.
    public static func tensor(_ image: Image) -> [Float] {
        let plane = image.width * image.height
        let channels = image.channels
        return [Float](unsafeUninitializedCapacity: 3 * plane) { out, count in
            image.pixels.withUnsafeBufferPointer { pixels in
                scaled.withUnsafeBufferPointer { scaled in
                    for c in 0..<3 {
                        let target = out.baseAddress! + c * plane
                        var source = pixels.baseAddress! + (2 - c)
                        for p in 0..<plane {
                            target[p] = scaled[Int(source.pointee)]
                            source += channels
                        }
                    }
                }
            }
            count = 3 * plane
        }
    }

    /// ``tensor(_:)`` of ``apply(to:padding:)`` in one pass per row (resize, padding, planes; no letterboxed image
    /// is made): the same floats. `bands`: runs `count` bands of rows, possibly at once (a compute pool's
    /// `parallelFor`); nil runs them in turn. Images of 3 or more channels (the first three BGR).
    public func tensor(
        of image: Image, padding: UInt8 = 114,
        bands: ((_ count: Int, _ body: @escaping @Sendable (Range<Int>) -> Void) -> Void)? = nil
    ) -> [Float] {
        precondition(
            image.width == sourceWidth && image.height == sourceHeight, "letterbox made for another image size")
        precondition(image.channels >= 3, "the network input needs three channels")
        let resize = resizedWidth != image.width || resizedHeight != image.height
        // Without a resize the tables are empty: the C reads the image's rows as they are.
        let tables = BilinearTables(
            from: (image.width, image.height), to: resize ? (resizedWidth, resizedHeight) : (0, 0))
        let (width, height) = (self.width, self.height)
        let count = 3 * width * height
        let filled = [Float](unsafeUninitializedCapacity: count) { out, initialized in
            let target = UnsafeSendableBuffer(out.baseAddress!)
            image.pixels.withUnsafeBufferPointer { pixels in
                let source = UnsafeSendableBuffer(UnsafeMutablePointer(mutating: pixels.baseAddress!))
                let shape = self
                let rows = { @Sendable (range: Range<Int>) in
                    let done = lookout_letterbox_rows(
                        source.pointer, Int32(image.width), Int32(image.height), Int32(image.channels), resize ? 1 : 0,
                        Int32(shape.resizedWidth), Int32(shape.resizedHeight), tables.sourceX, tables.alpha0,
                        tables.alpha1, Int32(tables.xmax), tables.top, tables.bottom, tables.beta0, tables.beta1,
                        Int32(shape.top), Int32(shape.left), Int32(width), Int32(height), padding,
                        Int32(range.lowerBound), Int32(range.upperBound), target.pointer)
                    precondition(done == 1, "out of memory letterboxing an image")
                }
                if let bands {
                    let pieces = min(height, 8)
                    bands(pieces) { range in
                        for band in range { rows((band * height / pieces)..<((band + 1) * height / pieces)) }
                    }
                } else {
                    rows(0..<height)
                }
            }
            initialized = count
        }
        return filled
    }

    /// The resize tables ``tensor(of:padding:bands:)`` uses for `image` (nil where the letterbox keeps its size),
    /// for a backend that letterboxes elsewhere with the same arithmetic.
    public func resizeTables(for image: Image) -> BilinearTables? {
        guard resizedWidth != image.width || resizedHeight != image.height else { return nil }
        return BilinearTables(from: (image.width, image.height), to: (resizedWidth, resizedHeight))
    }

    /// `Float(v) / 255` for every byte value.
    static let scaled: [Float] = (0...255).map { Float($0) / 255 }
}
