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

    /// `Float(v) / 255` for every byte value.
    static let scaled: [Float] = (0...255).map { Float($0) / 255 }
}
