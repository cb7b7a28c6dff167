#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A feature map of one image: `channels × height × width` floats, channel-major (PyTorch's NCHW with N = 1).
///
/// The layout the layers exchange; a kernel that computes in another layout (blocked channels, Winograd
/// tiles) converts at its boundary, so model code never depends on it.
public struct FeatureMap: Sendable {
    public let channels: Int
    public let height: Int
    public let width: Int
    public var data: [Float]

    public init(channels: Int, height: Int, width: Int, data: [Float]) {
        precondition(data.count == channels * height * width, "feature map data does not match its shape")
        self.channels = channels
        self.height = height
        self.width = width
        self.data = data
    }

    /// A map of zeros.
    public init(channels: Int, height: Int, width: Int) {
        self.init(
            channels: channels, height: height, width: width,
            data: [Float](repeating: 0, count: channels * height * width))
    }

    public var plane: Int { height * width }

    /// Channels `range` as a new map (`torch.chunk` halves, split outputs).
    public func channels(_ range: Range<Int>) -> FeatureMap {
        FeatureMap(
            channels: range.count, height: height, width: width,
            data: Array(data[(range.lowerBound * plane)..<(range.upperBound * plane)]))
    }

    /// `torch.cat(maps, dim=1)`.
    public static func concatenate(_ maps: [FeatureMap]) -> FeatureMap {
        var data: [Float] = []
        data.reserveCapacity(maps.reduce(0) { $0 + $1.data.count })
        for map in maps {
            precondition(
                map.height == maps[0].height && map.width == maps[0].width, "concatenating maps of different sizes")
            data += map.data
        }
        return FeatureMap(
            channels: maps.reduce(0) { $0 + $1.channels }, height: maps[0].height, width: maps[0].width, data: data)
    }

    /// Nearest-neighbour upsampling by 2 (`nn.Upsample(scale_factor=2, mode="nearest")`).
    public func upsampled() -> FeatureMap {
        var out = FeatureMap(channels: channels, height: height * 2, width: width * 2)
        for c in 0..<channels {
            for y in 0..<(height * 2) {
                for x in 0..<(width * 2) {
                    out.data[(c * height * 2 + y) * width * 2 + x] = data[(c * height + y / 2) * width + x / 2]
                }
            }
        }
        return out
    }

    /// Max pooling with a `size`×`size` window, stride 1 and padding `size / 2` that never wins (−∞).
    public func maxPooled(size: Int) -> FeatureMap {
        let radius = size / 2
        var out = FeatureMap(channels: channels, height: height, width: width)
        for c in 0..<channels {
            let base = c * plane
            for y in 0..<height {
                for x in 0..<width {
                    var best = -Float.infinity
                    for dy in max(0, y - radius)...min(height - 1, y + radius) {
                        for dx in max(0, x - radius)...min(width - 1, x + radius) {
                            best = max(best, data[base + dy * width + dx])
                        }
                    }
                    out.data[base + y * width + x] = best
                }
            }
        }
        return out
    }

    /// `x + other`.
    public func adding(_ other: FeatureMap) -> FeatureMap {
        var out = self
        for index in out.data.indices { out.data[index] += other.data[index] }
        return out
    }
}

/// SiLU in place: `x / (1 + exp(−x))` (PyTorch's form).
public func silu(_ values: inout [Float]) {
    values.withUnsafeMutableBufferPointer { Kernels.silu($0.baseAddress!, count: $0.count) }
}

public func sigmoid(_ x: Float) -> Float { 1 / (1 + expf(-x)) }
