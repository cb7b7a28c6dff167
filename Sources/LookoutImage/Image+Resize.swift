import CLookoutCodecs

extension Image {
    /// `cv2.resize(…, INTER_LINEAR)` on 8-bit images, reproduced bit for bit (OpenCV `resize.cpp`, from OpenCV's
    /// `resize.cpp`): 11-bit fixed-point weights from float32 source positions, an int32 horizontal pass,
    /// and the vertical pass in the form of OpenCV's SIMD code,
    /// `((H0 >> 4)·b0 >> 16) + ((H1 >> 4)·b1 >> 16) + 2 >> 2`.
    public func resizedBilinear(width targetWidth: Int, height targetHeight: Int) -> Image {
        let scaleX = 1.0 / (Double(targetWidth) / Double(width))
        let scaleY = 1.0 / (Double(targetHeight) / Double(height))
        let one: Float = 2048

        // Columns: source column (in pixels) and weights; columns from xmax on use the border rule.
        var sourceX = [Int32](repeating: 0, count: targetWidth)
        var alpha0 = [Int32](repeating: 0, count: targetWidth)
        var alpha1 = [Int32](repeating: 0, count: targetWidth)
        var xmax = targetWidth
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

        // Per target row: its two source rows and their weights.
        var top = [Int32](repeating: 0, count: targetHeight), bottom = top, beta0 = top, beta1 = top
        for dy in 0..<targetHeight {
            var fy = Float((Double(dy) + 0.5) * scaleY - 0.5)
            let sy = Int(fy.rounded(.down))
            fy -= Float(sy)
            top[dy] = Int32(min(max(sy, 0), height - 1))
            bottom[dy] = Int32(min(max(sy + 1, 0), height - 1))
            beta0[dy] = Int32(((1 - fy) * one).rounded(.toNearestOrEven))
            beta1[dy] = Int32((fy * one).rounded(.toNearestOrEven))
        }
        // The loops in C (horizontal sums in int32, then the vertical blend), as cv::resize runs them.
        var out = Image(width: targetWidth, height: targetHeight, channels: channels, filledWith: 0)
        out.pixels.withUnsafeMutableBufferPointer { target in
            lookout_resize_bilinear(
                pixels, Int32(width), Int32(height), Int32(channels), target.baseAddress!, Int32(targetWidth),
                Int32(targetHeight), sourceX, alpha0, alpha1, Int32(xmax), top, bottom, beta0, beta1)
        }
        return out
    }
}
