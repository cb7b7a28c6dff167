extension Image {
    /// `cv2.resize(…, INTER_LINEAR)` on 8-bit images, reproduced bit for bit (OpenCV `resize.cpp`, from OpenCV's
    /// `resize.cpp`): 11-bit fixed-point weights from float32 source positions, an int32 horizontal pass,
    /// and the vertical pass in the form of OpenCV's SIMD code,
    /// `((H0 >> 4)·b0 >> 16) + ((H1 >> 4)·b1 >> 16) + 2 >> 2`.
    public func resizedBilinear(width targetWidth: Int, height targetHeight: Int) -> Image {
        let scaleX = 1.0 / (Double(targetWidth) / Double(width))
        let scaleY = 1.0 / (Double(targetHeight) / Double(height))
        let one: Float = 2048

        // Columns: source index (in channels) and weights; columns from xmax on use the border rule.
        var sourceX = [Int](repeating: 0, count: targetWidth)
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
            sourceX[dx] = sx
            alpha0[dx] = Int32(((1 - fx) * one).rounded(.toNearestOrEven))
            alpha1[dx] = Int32((fx * one).rounded(.toNearestOrEven))
        }

        // Horizontal pass of one source row into int32.
        let rowCount = targetWidth * channels
        var out = Image(width: targetWidth, height: targetHeight, channels: channels, filledWith: 0)
        let rows = UnsafeMutablePointer<Int32>.allocate(capacity: 2 * rowCount)
        defer { rows.deallocate() }
        var row0 = rows, row1 = rows + rowCount
        let channels = channels, width = width, height = height
        pixels.withUnsafeBufferPointer { source in
            sourceX.withUnsafeBufferPointer { sourceX in
                alpha0.withUnsafeBufferPointer { alpha0 in
                    alpha1.withUnsafeBufferPointer { alpha1 in
                        out.pixels.withUnsafeMutableBufferPointer { target in
                            func horizontal(_ row: Int, into buffer: UnsafeMutablePointer<Int32>) {
                                let line = source.baseAddress! + row * width * channels
                                for dx in 0..<targetWidth {
                                    let s = line + sourceX[dx] * channels
                                    let o = buffer + dx * channels
                                    if dx < xmax {
                                        let (a0, a1) = (alpha0[dx], alpha1[dx])
                                        for c in 0..<channels { o[c] = Int32(s[c]) * a0 + Int32(s[channels + c]) * a1 }
                                    } else {
                                        for c in 0..<channels { o[c] = Int32(s[c]) * 2048 }
                                    }
                                }
                            }
                            var cached0 = -1
                            var cached1 = -1
                            for dy in 0..<targetHeight {
                                var fy = Float((Double(dy) + 0.5) * scaleY - 0.5)
                                let sy = Int(fy.rounded(.down))
                                fy -= Float(sy)
                                let top = min(max(sy, 0), height - 1)
                                let bottom = min(max(sy + 1, 0), height - 1)
                                let beta0 = Int32(((1 - fy) * one).rounded(.toNearestOrEven))
                                let beta1 = Int32((fy * one).rounded(.toNearestOrEven))
                                if cached0 != top {
                                    if cached1 == top {
                                        swap(&row0, &row1)
                                        cached1 = -1
                                    } else {
                                        horizontal(top, into: row0)
                                    }
                                    cached0 = top
                                }
                                if cached1 != bottom || cached1 == -1 {
                                    horizontal(bottom, into: row1)
                                    cached1 = bottom
                                }
                                let line = target.baseAddress! + dy * rowCount
                                for index in 0..<rowCount {
                                    let value =
                                        (((row0[index] >> 4) &* beta0) >> 16) &+ (((row1[index] >> 4) &* beta1) >> 16)
                                        &+ 2
                                    line[index] = UInt8(clamping: value >> 2)
                                }
                            }
                        }
                    }
                }
            }
        }
        return out
    }
}
