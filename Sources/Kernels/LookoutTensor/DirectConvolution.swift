import CLookoutKernels

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The reference: the convolution's definition as loops, in Double. Slow; for tests.
public struct DirectConvolution: ConvolutionKernel {
    public init() {}

    public func convolve(_ x: FeatureMap, _ w: ConvolutionWeights, pool: ComputePool) -> FeatureMap {
        precondition(x.channels == w.inputs)
        let (outHeight, outWidth) = w.outputSize(height: x.height, width: x.width)
        let padding = w.kernel / 2
        let dense = w.denseWeight
        var out = FeatureMap(channels: w.outputs, height: outHeight, width: outWidth)
        for o in 0..<w.outputs {
            for oy in 0..<outHeight {
                for ox in 0..<outWidth {
                    var sum = Double(w.bias[o])
                    for c in 0..<w.inputs {
                        for ky in 0..<w.kernel {
                            let iy = oy * w.stride - padding + ky
                            guard iy >= 0 && iy < x.height else { continue }
                            for kx in 0..<w.kernel {
                                let ix = ox * w.stride - padding + kx
                                guard ix >= 0 && ix < x.width else { continue }
                                let weight = dense[((o * w.inputs + c) * w.kernel + ky) * w.kernel + kx]
                                sum += Double(weight) * Double(x.data[(c * x.height + iy) * x.width + ix])
                            }
                        }
                    }
                    let value = Float(sum)
                    out.data[(o * outHeight + oy) * outWidth + ox] = w.activation ? value / (1 + expf(-value)) : value
                }
            }
        }
        return out
    }
}
