import CLookoutCodecs

extension Image {
    /// `cv2.resize(…, INTER_LINEAR)` on 8-bit images, reproduced bit for bit (OpenCV `resize.cpp`, from OpenCV's
    /// `resize.cpp`): 11-bit fixed-point weights from float32 source positions, an int32 horizontal pass,
    /// and the vertical pass in the form of OpenCV's SIMD code,
    /// `((H0 >> 4)·b0 >> 16) + ((H1 >> 4)·b1 >> 16) + 2 >> 2`.
    public func resizedBilinear(width targetWidth: Int, height targetHeight: Int) -> Image {
        let tables = BilinearTables(from: (width, height), to: (targetWidth, targetHeight))
        // The loops in C (horizontal sums in int32, then the vertical blend), as cv::resize runs them.
        var out = Image(width: targetWidth, height: targetHeight, channels: channels, filledWith: 0)
        out.pixels.withUnsafeMutableBufferPointer { target in
            lookout_resize_bilinear(
                pixels, Int32(width), Int32(height), Int32(channels), target.baseAddress!, Int32(targetWidth),
                Int32(targetHeight), tables.sourceX, tables.alpha0, tables.alpha1, Int32(tables.xmax), tables.top,
                tables.bottom, tables.beta0, tables.beta1)
        }
        return out
    }
}

/// `cv2.resize(…, INTER_LINEAR)`'s fixed-point tables for one source and target size: per target column its
/// source column and 11-bit weights (columns from `xmax` on take the border rule), per target row its two source
/// rows and weights.
public struct BilinearTables: Sendable {
    public var sourceX: [Int32], alpha0: [Int32], alpha1: [Int32]
    public var xmax: Int
    public var top: [Int32], bottom: [Int32], beta0: [Int32], beta1: [Int32]

    public init(from source: (width: Int, height: Int), to target: (width: Int, height: Int)) {
        let (width, height) = source
        let (targetWidth, targetHeight) = target
        let scaleX = 1.0 / (Double(targetWidth) / Double(width))
        let scaleY = 1.0 / (Double(targetHeight) / Double(height))
        let one: Float = 2048

        sourceX = [Int32](repeating: 0, count: targetWidth)
        alpha0 = [Int32](repeating: 0, count: targetWidth)
        alpha1 = [Int32](repeating: 0, count: targetWidth)
        xmax = targetWidth
        for dx in 0..<targetWidth {
            var fx = Float((Double(dx) + 0.5) * scaleX - 0.5)
            var sx = Int(fx.rounded(.down))
            fx -= Float(sx)
            if sx < 0 {
                fx = 0
                sx = 0
            }
            if sx + 1 >= width {
                xmax = min(xmax, dx)
                if sx >= width - 1 {
                    fx = 0
                    sx = width - 1
                }
            }
            sourceX[dx] = Int32(sx)
            alpha0[dx] = Int32(((1 - fx) * one).rounded(.toNearestOrEven))
            alpha1[dx] = Int32((fx * one).rounded(.toNearestOrEven))
        }

        top = [Int32](repeating: 0, count: targetHeight)
        (bottom, beta0, beta1) = (top, top, top)
        for dy in 0..<targetHeight {
            var fy = Float((Double(dy) + 0.5) * scaleY - 0.5)
            let sy = Int(fy.rounded(.down))
            fy -= Float(sy)
            top[dy] = Int32(min(max(sy, 0), height - 1))
            bottom[dy] = Int32(min(max(sy + 1, 0), height - 1))
            beta0[dy] = Int32(((1 - fy) * one).rounded(.toNearestOrEven))
            beta1[dy] = Int32((fy * one).rounded(.toNearestOrEven))
        }
    }
}

extension Image {
    /// For tests: the resize and the letterbox in their portable C only (`true`), or with the CPU's vector code
    /// (`false`, the default); both give the same bytes and floats. Process-wide.
    public static var portableResizeOnly: Bool {
        get { lookout_resize_portable_only(-1) != 0 }
        set { _ = lookout_resize_portable_only(newValue ? 1 : 0) }
    }
}
