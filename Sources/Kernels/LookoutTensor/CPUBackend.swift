import CLookoutKernels

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The CPU backend: today's kernels (the convolution kernels, OpenBLAS through ``BLAS``, ``Kernels``, the C of
/// `CLookoutKernels`) spread across a ``ComputePool``. Operations nested inside ``tasks(_:_:)`` run inline on
/// the task's thread, as the pool runs nested loops.
public struct CPUBackend: ComputeBackend {
    public let pool: ComputePool
    public let settings: KernelSettings

    public init(pool: ComputePool = .shared, settings: KernelSettings = .environment) {
        self.pool = pool
        self.settings = settings
    }

    /// The shared pool's backend.
    public static let shared = CPUBackend()

    public func beginImage() {
        if settings.keepFreedMemory { ComputePool.keepFreedMemory() }
    }

    public var name: String { "cpu (\(pool.threadCount) thread\(pool.threadCount == 1 ? "" : "s"))" }

    public func tasks(_ count: Int, _ body: @escaping @Sendable (Int) -> FeatureMap) -> [FeatureMap] {
        let results = UnsafeMutableBufferPointer<FeatureMap?>.allocate(capacity: count)
        results.initialize(repeating: nil)
        defer {
            _ = results.deinitialize()
            results.deallocate()
        }
        let slots = UnsafeSendable(results.baseAddress!)
        // Each task writes its own slot.
        pool.parallelFor(count, chunk: 1) { range in
            for task in range { slots.pointer[task] = body(task) }
        }
        return results.map { $0! }
    }

    public func floats(_ x: FeatureMap) -> [Float] { x.data }

    // MARK: Convolutions

    public func convolve(_ x: StackedMaps, _ weights: ConvolutionWeights, kernel: any ConvolutionKernel) -> FeatureMap {
        kernel.convolve(x, weights, pool: pool)
    }

    /// A whole map (the kernels' own entry for one map).
    public func convolve(_ x: FeatureMap, _ weights: ConvolutionWeights, kernel: any ConvolutionKernel) -> FeatureMap {
        kernel.convolve(x, weights, pool: pool)
    }

    public func depthwiseConvolution(
        _ x: FeatureMap, weight: [Float], bias: [Float], kernel: Int, activation: Bool
    ) -> FeatureMap {
        let channels = x.channels
        precondition(weight.count == channels * kernel * kernel && bias.count == channels)
        var out = FeatureMap(unfilledChannels: channels, height: x.height, width: x.width)
        let (height, width, half) = (x.height, x.width, kernel / 2)
        let plane = x.plane
        let pool = self.pool
        x.data.withUnsafeBufferPointer { source in
            out.data.withUnsafeMutableBufferPointer { target in
                weight.withUnsafeBufferPointer { weight in
                    let source = UnsafeSendable(UnsafeMutablePointer(mutating: source.baseAddress!))
                    let target = UnsafeSendable(target.baseAddress!)
                    let weight = UnsafeSendable(UnsafeMutablePointer(mutating: weight.baseAddress!))
                    pool.parallelFor(channels, chunk: max(1, channels / (4 * pool.threadCount))) { range in
                        for c in range {
                            let input = source.pointer + c * plane, output = target.pointer + c * plane
                            let filter = weight.pointer + c * kernel * kernel
                            // Borders with bounds checks; the interior row by row without them (vectorisable).
                            func point(_ y: Int, _ x: Int) {
                                var sum: Float = 0
                                for ky in 0..<kernel {
                                    let iy = y + ky - half
                                    guard iy >= 0 && iy < height else { continue }
                                    for kx in 0..<kernel {
                                        let ix = x + kx - half
                                        guard ix >= 0 && ix < width else { continue }
                                        sum += input[iy * width + ix] * filter[ky * kernel + kx]
                                    }
                                }
                                output[y * width + x] = sum + bias[c]
                            }
                            let inner = half..<max(half, width - half)
                            for y in 0..<height {
                                guard y >= half && y < height - half else {
                                    for x in 0..<width { point(y, x) }
                                    continue
                                }
                                for x in 0..<min(half, width) { point(y, x) }
                                for x in max(width - half, half)..<width { point(y, x) }
                                let row = output + y * width
                                for x in inner { row[x] = bias[c] }
                                for ky in 0..<kernel {
                                    let source = input + (y + ky - half) * width - half
                                    for kx in 0..<kernel {
                                        let w = filter[ky * kernel + kx]
                                        let shifted = source + kx
                                        for x in inner { row[x] += shifted[x] * w }
                                    }
                                }
                            }
                            if activation { Kernels.silu(output, count: plane) }
                        }
                    }
                }
            }
        }
        return out
    }

    public func transposedConvolution2x2(_ x: FeatureMap, taps: [[Float]], bias: [Float]) -> FeatureMap {
        let (height, width, plane, inputs, outputs) = (x.height, x.width, x.plane, x.channels, bias.count)
        precondition(taps.count == 4 && taps.allSatisfy { $0.count == outputs * inputs })
        var out = FeatureMap(unfilledChannels: outputs, height: 2 * height, width: 2 * width)
        var products = [Float](repeating: 0, count: 4 * outputs * plane)
        x.data.withUnsafeBufferPointer { source in
            products.withUnsafeMutableBufferPointer { products in
                let source = UnsafeSendable(UnsafeMutablePointer(mutating: source.baseAddress!))
                let products = UnsafeSendable(products.baseAddress!)
                pool.parallelFor(4, chunk: 1) { range in
                    for tap in range {
                        taps[tap].withUnsafeBufferPointer { w in
                            BLAS.gemm(
                                m: outputs, n: plane, k: inputs, a: w.baseAddress!, b: source.pointer,
                                c: products.pointer + tap * outputs * plane)
                        }
                    }
                }
            }
        }
        for o in 0..<outputs {
            for y in 0..<height {
                for x in 0..<width {
                    for tap in 0..<4 {
                        let (dy, dx) = (tap / 2, tap % 2)
                        out.data[(o * 2 * height + 2 * y + dy) * 2 * width + 2 * x + dx] =
                            products[(tap * outputs + o) * plane + y * width + x] + bias[o]
                    }
                }
            }
        }
        return out
    }

    // MARK: Maps

    public func maxPool(_ x: FeatureMap, size: Int) -> FeatureMap { x.maxPooled(size: size, pool: pool) }

    public func upsample(_ x: FeatureMap) -> FeatureMap { x.upsampled() }

    public func concatenate(_ maps: [FeatureMap]) -> FeatureMap { FeatureMap.concatenate(maps) }

    public func slice(_ x: FeatureMap, channels range: Range<Int>) -> FeatureMap { x.channels(range) }

    public func add(_ x: inout FeatureMap, _ y: StackedMaps) { x.add(y, pool: pool) }

    public func channelAffine(_ x: inout FeatureMap, scale: [Float], shift: [Float]) {
        let (channels, plane) = (x.channels, x.plane)
        precondition(scale.count == channels && shift.count == channels)
        let pool = self.pool
        scale.withUnsafeBufferPointer { scale in
            shift.withUnsafeBufferPointer { shift in
                x.data.withUnsafeMutableBufferPointer { e in
                    let scale = UnsafeSendable(UnsafeMutablePointer(mutating: scale.baseAddress!))
                    let shift = UnsafeSendable(UnsafeMutablePointer(mutating: shift.baseAddress!))
                    let e = UnsafeSendable(e.baseAddress!)
                    pool.parallelFor(channels, chunk: 16) { range in
                        for c in range {
                            let (a, b) = (scale.pointer[c], shift.pointer[c])
                            let row = e.pointer + c * plane
                            for p in 0..<plane { row[p] = b.addingProduct(row[p], a) }
                        }
                    }
                }
            }
        }
    }

    public func gather(_ x: FeatureMap, columns: [Int]) -> [Float] {
        var gathered = [Float](repeating: 0, count: x.channels * columns.count)
        for c in 0..<x.channels {
            for (j, p) in columns.enumerated() { gathered[c * columns.count + j] = x.data[c * x.plane + p] }
        }
        return gathered
    }

    public func weightedChannelSum(_ x: FeatureMap, weights: [Float]) -> [Float] {
        precondition(weights.count == x.channels)
        var sums = [Float](repeating: 0, count: x.plane)
        for p in 0..<x.plane {
            var sum: Float = 0
            for c in 0..<x.channels { sum += weights[c] * x.data[c * x.plane + p] }
            sums[p] = sum
        }
        return sums
    }

    // MARK: Dense

    /// ``Kernels/linear(_:rows:inputs:weight:bias:outputs:into:pool:)`` on this backend's pool: its tiles do not
    /// depend on the thread count, so a lane's one-thread backend stores the bits the shared pool computes (an
    /// index computed side by side must store what one computed photo by photo stores). These are the text side's
    /// small products.
    public func linear(_ x: [Float], rows: Int, inputs: Int, weight: [Float], bias: [Float]?, outputs: Int) -> [Float] {
        precondition(
            x.count == rows * inputs && weight.count == outputs * inputs && (bias?.count ?? outputs) == outputs)
        var y = [Float](repeating: 0, count: rows * outputs)
        guard rows > 0 else { return y }
        x.withUnsafeBufferPointer { x in
            weight.withUnsafeBufferPointer { w in
                y.withUnsafeMutableBufferPointer { y in
                    if let bias {
                        bias.withUnsafeBufferPointer { b in
                            Kernels.linear(
                                x.baseAddress!, rows: rows, inputs: inputs, weight: w.baseAddress!,
                                bias: b.baseAddress!, outputs: outputs, into: y.baseAddress!, pool: pool)
                        }
                    } else {
                        Kernels.linear(
                            x.baseAddress!, rows: rows, inputs: inputs, weight: w.baseAddress!, bias: nil,
                            outputs: outputs, into: y.baseAddress!, pool: pool)
                    }
                }
            }
        }
        return y
    }

    public func matmul(_ a: [Float], _ b: [Float], m: Int, n: Int, k: Int) -> [Float] {
        precondition(a.count == m * k && b.count == k * n)
        var c = [Float](repeating: 0, count: m * n)
        guard m > 0 && n > 0 else { return c }
        a.withUnsafeBufferPointer { a in
            b.withUnsafeBufferPointer { b in
                c.withUnsafeMutableBufferPointer { c in
                    BLAS.gemm(m: m, n: n, k: k, a: a.baseAddress!, b: b.baseAddress!, c: c.baseAddress!)
                }
            }
        }
        return c
    }

    // MARK: Attention

    public func maxSigmoidAttention(
        _ x: StackedMaps, guide g: [Float], classes: Int, heads: Int, bias: [Float]
    ) -> FeatureMap {
        precondition(x.parts.count == 1, "the attention reads one map")
        let channels = x.channels
        let headSize = channels / heads
        let plane = x.plane
        precondition(g.count == classes * channels && bias.count == heads)
        // Per head: scores[k, p] = g[k, head slice] · x[head slice, p], then the max over k; heads and
        // column blocks spread across the pool.
        var weights = [Float](repeating: 0, count: heads * plane)
        let divisor = Float(Double(headSize).squareRoot())
        let block = 512
        let blocks = (plane + block - 1) / block
        g.withUnsafeBufferPointer { g in
            x.withParts { bases in
                weights.withUnsafeMutableBufferPointer { weights in
                    let g = UnsafeSendable(UnsafeMutablePointer(mutating: g.baseAddress!))
                    let data = UnsafeSendable(UnsafeMutablePointer(mutating: bases[0]))
                    let weights = UnsafeSendable(weights.baseAddress!)
                    pool.parallelFor(heads * blocks, chunk: 1) { range in
                        let scores = UnsafeMutablePointer<Float>.allocate(capacity: classes * block)
                        defer { scores.deallocate() }
                        for item in range {
                            let m = item / blocks
                            let p0 = (item % blocks) * block
                            let n = min(block, plane - p0)
                            BLAS.gemm(
                                m: classes, n: n, k: headSize, a: g.pointer + m * headSize,
                                b: data.pointer + m * headSize * plane + p0, c: scores, lda: channels, ldb: plane,
                                ldc: n)
                            for p in 0..<n {
                                var best = -Float.infinity
                                for k in 0..<classes { best = max(best, scores[k * n + p]) }
                                weights.pointer[m * plane + p0 + p] = sigmoid(best / divisor + bias[m])
                            }
                        }
                    }
                }
            }
        }
        return FeatureMap(channels: heads, height: x.height, width: x.width, data: weights)
    }

    public func scaleHeads(_ projected: StackedMaps, by map: FeatureMap, heads: Int) -> FeatureMap {
        precondition(projected.parts.count == 1, "scaling one map")
        let channels = projected.channels
        let (headSize, plane) = (channels / heads, projected.plane)
        precondition(map.channels == heads && map.plane == plane)
        let weights = map.data
        var out = FeatureMap(unfilledChannels: channels, height: projected.height, width: projected.width)
        let pool = self.pool
        projected.withParts { bases in
            out.data.withUnsafeMutableBufferPointer { out in
                weights.withUnsafeBufferPointer { weights in
                    let (source, out) = (
                        UnsafeSendable(UnsafeMutablePointer(mutating: bases[0])), UnsafeSendable(out.baseAddress!)
                    )
                    let weights = UnsafeSendable(UnsafeMutablePointer(mutating: weights.baseAddress!))
                    pool.parallelFor(channels, chunk: max(1, channels / (4 * pool.threadCount))) { range in
                        for channel in range {
                            let (base, head) = (channel * plane, (channel / headSize) * plane)
                            for p in 0..<plane {
                                out.pointer[base + p] = source.pointer[base + p] * weights.pointer[head + p]
                            }
                        }
                    }
                }
            }
        }
        return out
    }

    public func spatialAttention(
        _ t: FeatureMap, heads: Int, keySize: Int, headSize: Int
    ) -> (values: FeatureMap, attended: FeatureMap) {
        let n = t.plane
        let group = 2 * keySize + headSize
        precondition(t.channels == heads * group, "a qkv map of \(heads) heads")
        let scale = Float(1 / Double(keySize).squareRoot())
        var values = FeatureMap(unfilledChannels: heads * headSize, height: t.height, width: t.width)
        var attended = FeatureMap(unfilledChannels: heads * headSize, height: t.height, width: t.width)
        t.data.withUnsafeBufferPointer { t in
            values.data.withUnsafeMutableBufferPointer { values in
                attended.data.withUnsafeMutableBufferPointer { attended in
                    let t = UnsafeSendable(UnsafeMutablePointer(mutating: t.baseAddress!))
                    let values = UnsafeSendable(values.baseAddress!)
                    let attended = UnsafeSendable(attended.baseAddress!)
                    pool.parallelFor(heads, chunk: 1) { range in
                        let query = UnsafeMutablePointer<Float>.allocate(capacity: keySize * n)
                        let scores = UnsafeMutablePointer<Float>.allocate(capacity: n * n)
                        defer {
                            query.deallocate()
                            scores.deallocate()
                        }
                        for h in range {
                            let base = t.pointer + h * group * n
                            for index in 0..<(keySize * n) { query[index] = base[index] * scale }
                            let key = base + keySize * n, value = base + 2 * keySize * n
                            (values.pointer + h * headSize * n).update(from: value, count: headSize * n)
                            // scores[i, j] = Σ_d q[d, i]·k[d, j]; softmax over j.
                            BLAS.gemm(m: n, n: n, k: keySize, a: query, transposeA: true, b: key, c: scores)
                            Kernels.softmaxRows(scores, count: n, length: n)
                            // out[c, i] = Σ_j v[c, j]·attn[i, j]
                            BLAS.gemm(
                                m: headSize, n: n, k: n, a: value, b: scores, transposeB: true,
                                c: attended.pointer + h * headSize * n)
                        }
                    }
                }
            }
        }
        return (values, attended)
    }

    public func maskedSoftmaxPool(_ x: FeatureMap, scores y: FeatureMap, mask: [UInt8], groups: Int) -> [Float] {
        let (plane, channels) = (x.plane, x.channels)
        precondition(y.channels >= groups && y.plane == plane && mask.count == plane && channels % groups == 0)
        let perGroup = channels / groups
        var result = [Float](repeating: 0, count: channels)
        var weights = [Float](repeating: 0, count: plane)
        for c in 0..<groups {
            // score = y·vp + ¬vp·lowest, then softmax over the pixels.
            let row = c * plane
            var maximum = -Float.greatestFiniteMagnitude
            for p in 0..<plane {
                let value = mask[p] != 0 ? y.data[row + p] : -Float.greatestFiniteMagnitude
                weights[p] = value
                maximum = max(maximum, value)
            }
            var total: Float = 0
            for p in 0..<plane {
                weights[p] = expf(weights[p] - maximum)
                total += weights[p]
            }
            for p in 0..<plane { weights[p] /= total }
            for j in 0..<perGroup {
                let channel = c * perGroup + j
                var sum: Float = 0
                for p in 0..<plane { sum += weights[p] * x.data[channel * plane + p] }
                result[channel] = sum
            }
        }
        return result
    }

    // MARK: Sequences

    public func layerNorm(_ x: RowMatrix, gamma: [Float], beta: [Float], epsilon: Float) -> RowMatrix {
        let (rows, width) = (x.rows, x.columns)
        precondition(gamma.count == width && beta.count == width)
        let values = x.data
        let y = [Float](unsafeUninitializedCapacity: rows * width) { y, count in
            values.withUnsafeBufferPointer { x in
                gamma.withUnsafeBufferPointer { g in
                    beta.withUnsafeBufferPointer { b in
                        Kernels.layerNorm(
                            x.baseAddress!, rows: rows, width: width, gamma: g.baseAddress!, beta: b.baseAddress!,
                            epsilon: epsilon, into: y.baseAddress!)
                    }
                }
            }
            count = rows * width
        }
        return RowMatrix(rows: rows, columns: width, data: y)
    }

    public func linear(_ x: RowMatrix, layer: PackedLinear, activation: SequenceActivation?) -> RowMatrix {
        precondition(x.columns == layer.inputs)
        let rows = x.rows
        var y = [Float](repeating: 0, count: rows * layer.outputs)
        x.data.withUnsafeBufferPointer { x in
            y.withUnsafeMutableBufferPointer { y in
                layer.apply(x.baseAddress!, rows: rows, into: y.baseAddress!, pool: pool)
            }
        }
        var out = RowMatrix(rows: rows, columns: layer.outputs, data: y)
        if let activation { activate(&out, activation) }
        return out
    }

    public func addLinear(_ x: inout RowMatrix, _ y: RowMatrix, layer: PackedLinear) {
        add(&x, linear(y, layer: layer, activation: nil))
    }

    public func sequenceAttention(
        _ qkv: RowMatrix, lengths: [Int], starts: [Int], heads: Int, causal: Bool
    ) -> RowMatrix {
        let (total, width) = (qkv.rows, qkv.columns / 3)
        let headSize = width / heads
        let scale = 1 / Float(headSize).squareRoot()
        let longest = lengths.max() ?? 0
        var attention = [Float](repeating: 0, count: total * width)
        qkv.data.withUnsafeBufferPointer { qkv in
            attention.withUnsafeMutableBufferPointer { attention in
                let qkv = UnsafeSendable(qkv.baseAddress!)
                let attention = UnsafeSendable(attention.baseAddress!)
                pool.parallelFor(lengths.count * heads, chunk: 1) { range in
                    let scratch = UnsafeMutablePointer<Float>.allocate(
                        capacity: 128 + (causal ? longest : longest * longest))
                    defer { scratch.deallocate() }
                    for item in range {
                        let (sequence, head) = (item / heads, item % heads)
                        let start = starts[sequence]
                        Kernels.attentionHead(
                            qkv: qkv.pointer + start * 3 * width, length: lengths[sequence], width: width, head: head,
                            headSize: headSize, scale: scale, causal: causal,
                            into: attention.pointer + start * width, scratch: scratch)
                    }
                }
            }
        }
        return RowMatrix(rows: total, columns: width, data: attention)
    }

    public func activate(_ x: inout RowMatrix, _ activation: SequenceActivation) {
        x.data.withUnsafeMutableBufferPointer { x in
            switch activation {
            case .quickGELU: Kernels.quickGELU(x.baseAddress!, count: x.count)
            case .gelu: Kernels.gelu(x.baseAddress!, count: x.count)
            case .geluTanh: Kernels.geluTanh(x.baseAddress!, count: x.count)
            }
        }
    }

    public func add(_ x: inout RowMatrix, _ y: RowMatrix) {
        precondition(x.rows == y.rows && x.columns == y.columns)
        y.data.withUnsafeBufferPointer { y in
            x.data.withUnsafeMutableBufferPointer { x in
                Kernels.add(y.baseAddress!, into: x.baseAddress!, count: x.count)
            }
        }
    }

    public func addRepeating(_ x: inout RowMatrix, _ table: [Float]) {
        let width = x.columns
        precondition(width > 0 && !table.isEmpty && table.count % width == 0)
        let period = table.count / width
        table.withUnsafeBufferPointer { table in
            x.data.withUnsafeMutableBufferPointer { x in
                var row = 0
                while row * width < x.count {
                    let count = min(period, x.count / width - row) * width
                    Kernels.add(table.baseAddress!, into: x.baseAddress! + row * width, count: count)
                    row += period
                }
            }
        }
    }

    public func patchRows(_ images: [[Float]], channels: Int, side: Int, patch: Int) -> RowMatrix {
        let grid = side / patch
        let (inputs, tokens) = (channels * patch * patch, grid * grid + 1)
        precondition(images.allSatisfy { $0.count == channels * side * side }, "images must be \(channels) × \(side)²")
        var rows = [Float](repeating: 0, count: images.count * tokens * inputs)
        rows.withUnsafeMutableBufferPointer { rows in
            for (n, image) in images.enumerated() {
                image.withUnsafeBufferPointer { image in
                    for gy in 0..<grid {
                        for gx in 0..<grid {
                            let base = (n * tokens + 1 + gy * grid + gx) * inputs
                            for channel in 0..<channels {
                                for row in 0..<patch {
                                    let source = (channel * side + gy * patch + row) * side + gx * patch
                                    let target = base + (channel * patch + row) * patch
                                    (rows.baseAddress! + target).update(from: image.baseAddress! + source, count: patch)
                                }
                            }
                        }
                    }
                }
            }
        }
        return RowMatrix(rows: images.count * tokens, columns: inputs, data: rows)
    }

    public func patchRows(pixels: [[UInt8]], side: Int, patch: Int, mean: [Float], std: [Float]) -> RowMatrix {
        precondition(mean.count == 3 && std.count == 3)
        let plane = side * side
        let images = pixels.map { rgb in
            precondition(rgb.count == 3 * plane, "images must be \(side) × \(side) × 3")
            var out = [Float](repeating: 0, count: 3 * plane)
            for c in 0..<3 {
                for p in 0..<plane { out[c * plane + p] = (Float(rgb[p * 3 + c]) / 255 - mean[c]) / std[c] }
            }
            return out
        }
        return patchRows(images, channels: 3, side: side, patch: patch)
    }

    /// One row at a time: OpenBLAS picks its kernel by the matrices' shape (a small-matrix kernel on some CPUs), so
    /// a product of several rows may round a row otherwise than that row alone.
    public func rowProducts(_ x: RowMatrix, _ b: [Float], columns: Int) -> [Float] {
        let (width, values) = (x.columns, x.data)
        precondition(b.count == width * columns)
        var out: [Float] = []
        out.reserveCapacity(x.rows * columns)
        for row in 0..<x.rows {
            out += matmul(Array(values[(row * width)..<((row + 1) * width)]), b, m: 1, n: columns, k: width)
        }
        return out
    }

    public func rows(_ x: RowMatrix, at indices: [Int]) -> RowMatrix {
        let width = x.columns
        let values = x.data
        var out = [Float](repeating: 0, count: indices.count * width)
        for (n, row) in indices.enumerated() {
            precondition(row >= 0 && row < x.rows, "row \(row) of \(x.rows)")
            out.replaceSubrange((n * width)..<((n + 1) * width), with: values[(row * width)..<((row + 1) * width)])
        }
        return RowMatrix(rows: indices.count, columns: width, data: out)
    }

    // MARK: The head

    public func contrastiveDecode(
        box: FeatureMap, weights: [Float], depth: Int, source: FeatureMap, constants: [Float], scale: Float,
        bias: Float, geometry g: AnchorGeometry, into output: inout FeatureMap
    ) {
        precondition(source.channels == depth && source.plane == g.plane && weights.count == g.classes * depth)
        precondition(output.channels == 4 + g.classes && output.plane == g.anchors)
        var logits = [Float](repeating: 0, count: g.classes * g.plane)
        weights.withUnsafeBufferPointer { w in
            source.data.withUnsafeBufferPointer { e in
                logits.withUnsafeMutableBufferPointer { l in
                    box.data.withUnsafeBufferPointer { boxData in
                        output.data.withUnsafeMutableBufferPointer { out in
                            let w = UnsafeSendable(UnsafeMutablePointer(mutating: w.baseAddress!))
                            let e = UnsafeSendable(UnsafeMutablePointer(mutating: e.baseAddress!))
                            let l = UnsafeSendable(l.baseAddress!)
                            let boxData = UnsafeSendable(UnsafeMutablePointer(mutating: boxData.baseAddress!))
                            let out = UnsafeSendable(out.baseAddress!)
                            pool.parallelFor(g.plane, chunk: 256) { range in
                                BLAS.gemm(
                                    m: g.classes, n: range.count, k: depth, a: w.pointer,
                                    b: e.pointer + range.lowerBound, c: l.pointer + range.lowerBound,
                                    lda: depth, ldb: g.plane, ldc: g.plane)
                                HeadDecode.anchors(
                                    range, box: boxData.pointer, logits: l.pointer, constants: constants, scale: scale,
                                    bias: bias, geometry: g, into: out.pointer)
                            }
                        }
                    }
                }
            }
        }
    }

    public func decodeBoxes(_ box: FeatureMap, anchors: [Int], geometry g: AnchorGeometry) -> [Float] {
        let n = anchors.count
        var boxes = [Float](repeating: 0, count: 4 * n)
        box.data.withUnsafeBufferPointer { boxData in
            boxes.withUnsafeMutableBufferPointer { out in
                for (j, p) in anchors.enumerated() {
                    let column = AnchorGeometry(
                        plane: g.plane, width: g.width, anchors: n, offset: j - p, stride: g.stride, bins: g.bins,
                        classes: 0)
                    HeadDecode.anchor(
                        p, box: boxData.baseAddress!, logits: boxData.baseAddress!, constants: [], scale: 1, bias: 0,
                        geometry: column, into: out.baseAddress!)
                }
            }
        }
        return boxes
    }
}

/// The head's per-anchor arithmetic on the CPU: DFL expectations, boxes and sigmoid class scores.
enum HeadDecode {
    /// ``anchor(_:box:logits:constants:scale:bias:geometry:into:)`` for a run of anchors, the loops turned inside
    /// out: each bin's row is read along the run (a channel of the map) instead of 64 rows per anchor, eight
    /// anchors at a time with a vector exp (``Kernels/distributionExpectations(_:plane:first:count:bins:into:)``).
    static func anchors(
        _ range: Range<Int>, box: UnsafePointer<Float>, logits: UnsafePointer<Float>, constants: [Float],
        scale: Float, bias: Float, geometry g: AnchorGeometry, into out: UnsafeMutablePointer<Float>
    ) {
        let (bins, plane, n, first) = (g.bins, g.plane, range.count, range.lowerBound)
        guard bins > 1 else {
            for p in range {
                anchor(
                    p, box: box, logits: logits, constants: constants, scale: scale, bias: bias, geometry: g, into: out)
            }
            return
        }
        let distances = UnsafeMutablePointer<Float>.allocate(capacity: 4 * n)
        defer { distances.deallocate() }
        Kernels.distributionExpectations(box, plane: plane, first: first, count: n, bins: bins, into: distances)
        for (i, p) in range.enumerated() {
            store(
                p, distances: (distances[i], distances[n + i], distances[2 * n + i], distances[3 * n + i]),
                logits: logits, constants: constants, scale: scale, bias: bias, geometry: g, into: out)
        }
    }

    /// An anchor's box (centre, size) in input pixels from its four side distances in grid units, and its sigmoid
    /// class scores, into the output.
    @inline(__always)
    static func store(
        _ p: Int, distances d: (Float, Float, Float, Float), logits: UnsafePointer<Float>, constants: [Float],
        scale: Float, bias: Float, geometry g: AnchorGeometry, into out: UnsafeMutablePointer<Float>
    ) {
        let anchorX = Float(p % g.width) + 0.5
        let anchorY = Float(p / g.width) + 0.5
        let x1 = anchorX - d.0, y1 = anchorY - d.1
        let x2 = anchorX + d.2, y2 = anchorY + d.3
        let anchor = g.offset + p
        let anchors = g.anchors
        out[0 * anchors + anchor] = (x1 + x2) / 2 * g.stride
        out[1 * anchors + anchor] = (y1 + y2) / 2 * g.stride
        out[2 * anchors + anchor] = (x2 - x1) * g.stride
        out[3 * anchors + anchor] = (y2 - y1) * g.stride
        for k in 0..<g.classes {
            out[(4 + k) * anchors + anchor] = sigmoid((logits[k * g.plane + p] + constants[k]) * scale + bias)
        }
    }

    /// One anchor: DFL expectation of each side's distance bins (the one channel itself with one bin; the same
    /// kernel as ``anchors(_:box:logits:constants:scale:bias:geometry:into:)``), the box (centre, size) in input
    /// pixels, and the sigmoid class scores.
    @inline(__always)
    static func anchor(
        _ p: Int, box: UnsafePointer<Float>, logits: UnsafePointer<Float>, constants: [Float], scale: Float,
        bias: Float, geometry g: AnchorGeometry, into out: UnsafeMutablePointer<Float>
    ) {
        withUnsafeTemporaryAllocation(of: Float.self, capacity: 4) { d in
            if g.bins > 1 {
                Kernels.distributionExpectations(
                    box, plane: g.plane, first: p, count: 1, bins: g.bins, into: d.baseAddress!)
            } else {
                for side in 0..<4 { d[side] = box[side * g.plane + p] }
            }
            store(
                p, distances: (d[0], d[1], d[2], d[3]), logits: logits, constants: constants, scale: scale, bias: bias,
                geometry: g, into: out)
        }
    }
}
