/// Maps stacked along channels (`torch.cat(maps, dim=1)`), and channel ranges of maps, without the copy: what a
/// convolution reads. Each part is a channel range of a ``FeatureMap`` (contiguous, the layout being channel-major),
/// kept alive here. The kernels that can read the parts where they lie do (1×1 GEMMs through a table of row
/// pointers, int8's quantisers, a single part's first channel for the 3×3 kernels); the others ``joined()`` them,
/// which is the concatenation the model code used to make. Either way the result is the same floats.
public struct StackedMaps: Sendable {
    public struct Part: Sendable {
        public let map: FeatureMap
        public let channels: Range<Int>

        /// Channels `range` of `map` (all of them by default).
        public init(map: FeatureMap, channels range: Range<Int>? = nil) {
            let range = range ?? 0..<map.channels
            precondition(
                range.lowerBound >= 0 && range.upperBound <= map.channels, "channels \(range) of \(map.channels)")
            self.map = map
            channels = range
        }
    }

    public let parts: [Part]
    public let channels: Int
    public let height: Int
    public let width: Int

    public var plane: Int { height * width }

    /// The maps, whole, one after another.
    public init(_ maps: [FeatureMap]) {
        self.init(parts: maps.map { Part(map: $0) })
    }

    /// One map, whole.
    public init(_ map: FeatureMap) {
        self.init(parts: [Part(map: map)])
    }

    /// Channels `range` of `map`.
    public init(_ map: FeatureMap, channels range: Range<Int>) {
        self.init(parts: [Part(map: map, channels: range)])
    }

    public init(parts: [Part]) {
        precondition(!parts.isEmpty, "stacking no maps")
        let (height, width) = (parts[0].map.height, parts[0].map.width)
        precondition(
            parts.allSatisfy { $0.map.height == height && $0.map.width == width }, "stacking maps of different sizes")
        self.parts = parts
        self.height = height
        self.width = width
        var starts = [0]
        for part in parts { starts.append(starts.last! + part.channels.count) }
        self.starts = starts
        channels = starts.last!
    }

    /// Where each part starts among the stack's channels (``channels`` last).
    public let starts: [Int]

    /// Calls `body(part, local, channel, count)` for each run of channels `range` of the stack that lies in one
    /// part: `count` channels from the stack's channel `channel`, which is the part's `local`-th channel (from
    /// the first of its range, where ``withParts(_:)``'s pointer points).
    public func forEachRun(
        in range: Range<Int>, _ body: (_ part: Int, _ local: Int, _ channel: Int, _ count: Int) -> Void
    ) {
        var (channel, part) = (range.lowerBound, 0)
        while channel < range.upperBound {
            while starts[part + 1] <= channel { part += 1 }
            let count = min(range.upperBound, starts[part + 1]) - channel
            body(part, channel - starts[part], channel, count)
            channel += count
        }
    }

    /// Whether it is one map, whole (then ``joined()`` is that map, not a copy).
    public var isWholeMap: Bool { parts.count == 1 && parts[0].channels == 0..<parts[0].map.channels }

    /// One map holding the channels in order: the map itself when it is one whole map, a copy otherwise.
    public func joined() -> FeatureMap {
        if isWholeMap { return parts[0].map }
        let plane = self.plane
        let data = [Float](unsafeUninitializedCapacity: channels * plane) { buffer, count in
            var offset = 0
            for part in parts {
                let values = part.channels.count * plane
                part.map.data.withUnsafeBufferPointer { source in
                    (buffer.baseAddress! + offset).initialize(
                        from: source.baseAddress! + part.channels.lowerBound * plane, count: values)
                }
                offset += values
            }
            count = channels * plane
        }
        return FeatureMap(channels: channels, height: height, width: width, data: data)
    }

    /// Calls `body` with each part's first channel (its `channels.count × plane` values follow), valid during the
    /// call.
    public func withParts<Result>(_ body: ([UnsafePointer<Float>]) throws -> Result) rethrows -> Result {
        var bases: [UnsafePointer<Float>] = []
        bases.reserveCapacity(parts.count)
        return try nest(0, &bases, body)
    }

    private func nest<Result>(
        _ index: Int, _ bases: inout [UnsafePointer<Float>], _ body: ([UnsafePointer<Float>]) throws -> Result
    ) rethrows -> Result {
        if index == parts.count { return try body(bases) }
        let part = parts[index]
        let plane = self.plane
        return try part.map.data.withUnsafeBufferPointer { data in
            bases.append(data.baseAddress! + part.channels.lowerBound * plane)
            return try nest(index + 1, &bases, body)
        }
    }

    /// Calls `body` with a pointer to every channel in order (``channels`` of them), valid during the call: the
    /// row table of ``ConvolutionGEMM``'s `rows` products.
    public func withRows<Result>(_ body: (UnsafePointer<UnsafePointer<Float>?>) throws -> Result) rethrows -> Result {
        let plane = self.plane
        return try withParts { bases in
            var rows: [UnsafePointer<Float>?] = []
            rows.reserveCapacity(channels)
            for (base, part) in zip(bases, parts) {
                for c in 0..<part.channels.count { rows.append(base + c * plane) }
            }
            return try rows.withUnsafeBufferPointer { try body($0.baseAddress!) }
        }
    }
}

extension FeatureMap {
    /// `self += x`, in place (`x` stacked to the same shape); `pool`: channels spread across it (each value is
    /// the same sum either way).
    public mutating func add(_ x: StackedMaps, pool: ComputePool? = nil) {
        precondition(x.channels == channels && x.height == height && x.width == width, "adding maps of different sizes")
        let (plane, channels) = (self.plane, self.channels)
        data.withUnsafeMutableBufferPointer { target in
            let target = UnsafeSendable(target.baseAddress!)
            x.withParts { bases in
                let bases = bases.map { UnsafeSendable(UnsafeMutablePointer(mutating: $0)) }
                let work = { (range: Range<Int>) in
                    x.forEachRun(in: range) { part, local, channel, count in
                        let (out, source) = (target.pointer + channel * plane, bases[part].pointer + local * plane)
                        for index in 0..<(count * plane) { out[index] += source[index] }
                    }
                }
                if let pool {
                    pool.parallelFor(channels, chunk: max(1, channels / (4 * pool.threadCount))) { work($0) }
                } else {
                    work(0..<channels)
                }
            }
        }
    }
}
