import CLookoutKernels

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
    /// The values on the host, or empty while they live in ``device``.
    private var host: [Float]
    /// Where a GPU backend keeps the values (nil: on the host). Reading ``data`` copies them back.
    public private(set) var device: (any DeviceStorage)?

    /// The values, channel-major. Of a map on a GPU, read back (once per read: a backend hands out
    /// ``ComputeBackend/floats(_:)`` where it matters); writing through it brings the map to the host.
    public var data: [Float] {
        get {
            guard let device else { return host }
            return Self.download(device)
        }
        set {
            host = newValue
            device = nil
        }
        _modify {
            if let device {
                host = Self.download(device)
                self.device = nil
            }
            yield &host
        }
    }

    public init(channels: Int, height: Int, width: Int, data: [Float]) {
        precondition(data.count == channels * height * width, "feature map data does not match its shape")
        self.channels = channels
        self.height = height
        self.width = width
        self.host = data
        self.device = nil
    }

    /// A map whose values live in a backend's memory (`storage.count` must be `channels × height × width`).
    public init(channels: Int, height: Int, width: Int, device storage: any DeviceStorage) {
        precondition(storage.count == channels * height * width, "feature map storage does not match its shape")
        self.channels = channels
        self.height = height
        self.width = width
        self.host = []
        self.device = storage
    }

    private static func download(_ storage: any DeviceStorage) -> [Float] {
        [Float](unsafeUninitializedCapacity: storage.count) { buffer, count in
            storage.download(into: buffer)
            count = storage.count
        }
    }

    /// A map of zeros.
    public init(channels: Int, height: Int, width: Int) {
        self.init(
            channels: channels, height: height, width: width,
            data: [Float](repeating: 0, count: channels * height * width))
    }

    /// A map whose values are left as the allocator gives them, for a kernel that writes every one (no
    /// zero-filling pass on the calling thread before the parallel work).
    public init(unfilledChannels channels: Int, height: Int, width: Int) {
        let count = channels * height * width
        self.init(
            channels: channels, height: height, width: width,
            data: [Float](unsafeUninitializedCapacity: count) { _, initialized in initialized = count })
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
        let (outHeight, outWidth) = (height * 2, width * 2)
        let data = [Float](unsafeUninitializedCapacity: channels * outHeight * outWidth) { out, count in
            self.data.withUnsafeBufferPointer { source in
                for c in 0..<channels {
                    for y in 0..<height {
                        let line = source.baseAddress! + (c * height + y) * width
                        let target = out.baseAddress! + (c * outHeight + 2 * y) * outWidth
                        for x in 0..<width {
                            target[2 * x] = line[x]
                            target[2 * x + 1] = line[x]
                        }
                        (target + outWidth).update(from: target, count: outWidth)
                    }
                }
            }
            count = channels * outHeight * outWidth
        }
        return FeatureMap(channels: channels, height: outHeight, width: outWidth, data: data)
    }

    /// Max pooling with a `size`×`size` window, stride 1 and padding `size / 2` that never wins (−∞): the
    /// maximum over columns, then over rows (the same values: a maximum does not depend on the order), in C
    /// (`lookout_max_pool`). `pool`: channels spread across it.
    public func maxPooled(size: Int, pool: ComputePool? = nil) -> FeatureMap {
        let radius = size / 2
        let (height, width, plane) = (height, width, plane)
        let data = [Float](unsafeUninitializedCapacity: channels * plane) { out, count in
            self.data.withUnsafeBufferPointer { source in
                let source = UnsafeSendable(UnsafeMutablePointer(mutating: source.baseAddress!))
                let out = UnsafeSendable(out.baseAddress!)
                // Channels are independent: spread across the pool, each through a row buffer of its own.
                let work = { (range: Range<Int>) in
                    let rows = UnsafeMutablePointer<Float>.allocate(capacity: plane)
                    defer { rows.deallocate() }
                    for c in range {
                        lookout_max_pool(
                            source.pointer + c * plane, Int32(height), Int32(width), Int32(radius), rows,
                            out.pointer + c * plane)
                    }
                }
                if let pool {
                    pool.parallelFor(channels, chunk: max(1, channels / (4 * pool.threadCount))) { work($0) }
                } else {
                    work(0..<channels)
                }
            }
            count = channels * plane
        }
        return FeatureMap(channels: channels, height: height, width: width, data: data)
    }

    /// `x + other`.
    public func adding(_ other: FeatureMap) -> FeatureMap {
        var out = other
        out.add(self)
        return out
    }

    /// `self += other`, in place.
    public mutating func add(_ other: FeatureMap) {
        precondition(other.data.count == data.count, "adding maps of different sizes")
        data.withUnsafeMutableBufferPointer { target in
            other.data.withUnsafeBufferPointer { source in
                for index in 0..<target.count { target[index] += source[index] }
            }
        }
    }
}

/// Memory outside the host that holds a map's values (a GPU's), owned by the backend that made it.
public protocol DeviceStorage: AnyObject, Sendable {
    /// Floats held.
    var count: Int { get }
    /// Copies the values into `buffer` (`count` floats).
    func download(into buffer: UnsafeMutableBufferPointer<Float>)
}

/// SiLU in place: `x / (1 + exp(−x))` (PyTorch's form).
public func silu(_ values: inout [Float]) {
    values.withUnsafeMutableBufferPointer { Kernels.silu($0.baseAddress!, count: $0.count) }
}

public func sigmoid(_ x: Float) -> Float { 1 / (1 + expf(-x)) }
