import Foundation
import LookoutTensor
import LookoutTestSupport
import Testing

/// Every operation of the ``ComputeBackend`` protocol, on every backend this build has, against a plain
/// reference written here from the operation's definition (loops in Double), on random inputs of odd sizes.
/// A second backend (a GPU) is proved by adding it to ``backends``: the same suite runs on it. Compared with
/// `LayerKernelTests`' all-close rule (|a − b| ≤ 1e-5 + 1e-5·|b|); the layout-only operations (slices,
/// concatenation, gathers, upsampling, pooling, head scaling) must be exact.
@Suite struct ComputeBackendTests {
    /// The backends under test: the CPU on two threads and on one (the lanes' pools).
    static let backends: [any ComputeBackend] = [
        CPUBackend(pool: ComputePool(threads: 2)), CPUBackend(pool: ComputePool(threads: 1)),
    ]

    static func close(
        _ actual: [Float], _ expected: [Double], _ name: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        LayerKernelTests.expectAllClose(actual, expected.map(Float.init), name, sourceLocation: sourceLocation)
    }

    static func map(_ channels: Int, _ height: Int, _ width: Int, seed: UInt64) -> FeatureMap {
        FeatureMap(
            channels: channels, height: height, width: width,
            data: LayerKernelTests.random(channels * height * width, seed: seed))
    }

    static func sigmoid(_ x: Double) -> Double { 1 / (1 + exp(-x)) }

    @Test func tasksComeBackInOrder() {
        for backend in Self.backends {
            let maps = backend.tasks(7) { task in FeatureMap(channels: 1, height: 1, width: task + 1) }
            #expect(maps.map(\.width) == Array(1...7), "\(backend.name)")
        }
    }

    @Test func convolutionAndItsStackedInput() {
        let (inputs, outputs, height, width) = (5, 6, 11, 9)
        for (kernel, stride) in [(1, 1), (3, 1), (3, 2)] {
            let weights = ConvolutionWeights(
                weight: LayerKernelTests.random(outputs * inputs * kernel * kernel, seed: 3, scale: 0.5),
                bias: LayerKernelTests.random(outputs, seed: 4), inputs: inputs, outputs: outputs, kernel: kernel,
                stride: stride, activation: true)
            let prepared = ConvolutionKernels.default.prepare(weights)
            let a = Self.map(2, height, width, seed: 5), b = Self.map(3, height, width, seed: 6)
            let x = FeatureMap.concatenate([a, b])
            let (outHeight, outWidth) = weights.outputSize(height: height, width: width)
            var expected = [Double](repeating: 0, count: outputs * outHeight * outWidth)
            let half = kernel / 2
            for o in 0..<outputs {
                for y in 0..<outHeight {
                    for xx in 0..<outWidth {
                        var sum = Double(weights.bias[o])
                        for i in 0..<inputs {
                            for ky in 0..<kernel {
                                for kx in 0..<kernel {
                                    let (iy, ix) = (y * stride + ky - half, xx * stride + kx - half)
                                    guard iy >= 0 && iy < height && ix >= 0 && ix < width else { continue }
                                    sum +=
                                        Double(weights.weight[((o * inputs + i) * kernel + ky) * kernel + kx])
                                        * Double(x.data[(i * height + iy) * width + ix])
                                }
                            }
                        }
                        expected[(o * outHeight + y) * outWidth + xx] = sum * Self.sigmoid(sum)
                    }
                }
            }
            for backend in Self.backends {
                Self.close(
                    backend.convolve(x, prepared, kernel: ConvolutionKernels.default).data, expected,
                    "\(backend.name) \(kernel)×\(kernel)/\(stride)")
                Self.close(
                    backend.convolve(StackedMaps([a, b]), prepared, kernel: ConvolutionKernels.default).data,
                    expected, "\(backend.name) \(kernel)×\(kernel)/\(stride) stacked")
            }
        }
    }

    @Test func depthwiseConvolution() {
        let (channels, height, width) = (5, 8, 13)
        for kernel in [3, 5] {
            let x = Self.map(channels, height, width, seed: 7)
            let weight = LayerKernelTests.random(channels * kernel * kernel, seed: 8)
            let bias = LayerKernelTests.random(channels, seed: 9)
            for activation in [false, true] {
                var expected = [Double](repeating: 0, count: channels * height * width)
                for c in 0..<channels {
                    for y in 0..<height {
                        for xx in 0..<width {
                            var sum = Double(bias[c])
                            for ky in 0..<kernel {
                                for kx in 0..<kernel {
                                    let (iy, ix) = (y + ky - kernel / 2, xx + kx - kernel / 2)
                                    guard iy >= 0 && iy < height && ix >= 0 && ix < width else { continue }
                                    sum +=
                                        Double(weight[(c * kernel + ky) * kernel + kx])
                                        * Double(x.data[(c * height + iy) * width + ix])
                                }
                            }
                            expected[(c * height + y) * width + xx] = activation ? sum * Self.sigmoid(sum) : sum
                        }
                    }
                }
                for backend in Self.backends {
                    let got = backend.depthwiseConvolution(
                        x, weight: weight, bias: bias, kernel: kernel, activation: activation)
                    Self.close(got.data, expected, "\(backend.name) depthwise \(kernel) \(activation)")
                }
            }
        }
    }

    @Test func transposedConvolution() {
        let (inputs, outputs, height, width) = (4, 3, 5, 7)
        let x = Self.map(inputs, height, width, seed: 10)
        let taps = (0..<4).map { LayerKernelTests.random(outputs * inputs, seed: 11 + UInt64($0)) }
        let bias = LayerKernelTests.random(outputs, seed: 15)
        var expected = [Double](repeating: 0, count: outputs * 4 * height * width)
        for o in 0..<outputs {
            for y in 0..<(2 * height) {
                for xx in 0..<(2 * width) {
                    let tap = (y % 2) * 2 + xx % 2
                    var sum = Double(bias[o])
                    for i in 0..<inputs {
                        sum += Double(taps[tap][o * inputs + i]) * Double(x.data[(i * height + y / 2) * width + xx / 2])
                    }
                    expected[(o * 2 * height + y) * 2 * width + xx] = sum
                }
            }
        }
        for backend in Self.backends {
            Self.close(
                backend.transposedConvolution2x2(x, taps: taps, bias: bias).data, expected, "\(backend.name) transposed"
            )
        }
    }

    @Test func layoutOperationsAreExact() {
        let x = Self.map(4, 6, 5, seed: 16), y = Self.map(3, 6, 5, seed: 17)
        for backend in Self.backends {
            // Max pooling (5×5, stride 1, padding that never wins).
            var pooled = [Float](repeating: 0, count: x.data.count)
            for c in 0..<4 {
                for row in 0..<6 {
                    for column in 0..<5 {
                        var best = -Float.infinity
                        for dy in -2...2 {
                            for dx in -2...2 where (0..<6).contains(row + dy) && (0..<5).contains(column + dx) {
                                best = max(best, x.data[(c * 6 + row + dy) * 5 + column + dx])
                            }
                        }
                        pooled[(c * 6 + row) * 5 + column] = best
                    }
                }
            }
            #expect(backend.maxPool(x, size: 5).data == pooled, "\(backend.name) max pool")
            // Nearest ×2.
            let up = backend.upsample(x)
            #expect(up.channels == 4 && up.height == 12 && up.width == 10)
            #expect(
                (0..<(4 * 12 * 10)).allSatisfy { index in
                    let (c, row, column) = (index / 120, index / 10 % 12, index % 10)
                    return up.data[index] == x.data[(c * 6 + row / 2) * 5 + column / 2]
                }, "\(backend.name) upsample")
            // Concatenation and slices.
            let joined = backend.concatenate([x, y])
            #expect(joined.channels == 7 && joined.data == x.data + y.data, "\(backend.name) concatenate")
            #expect(backend.slice(joined, channels: 4..<7).data == y.data, "\(backend.name) slice")
            #expect(backend.floats(joined) == joined.data)
            // Add, from a stack of a map and channels of another.
            var sum = x
            backend.add(&sum, StackedMaps(parts: [.init(map: y, channels: 1..<3), .init(map: y, channels: 0..<2)]))
            let stacked = Array(y.data[30..<90]) + Array(y.data[0..<60])
            #expect(sum.data == zip(x.data, stacked).map { $0 + $1 }, "\(backend.name) add")
            // Gather of pixels.
            let columns = [0, 7, 29, 3]
            let expectedGather: [Float] = (0..<4).flatMap { c in columns.map { x.data[c * 30 + $0] } }
            #expect(backend.gather(x, columns: columns) == expectedGather, "\(backend.name) gather")
            // Heads scaled by their weights.
            let weights = LayerKernelTests.random(2 * 30, seed: 18)
            let scaled = backend.scaleHeads(
                StackedMaps(x), by: FeatureMap(channels: 2, height: x.height, width: x.width, data: weights), heads: 2)
            let expectedScaled: [Float] = (0..<120).map { index in
                let head = index / 30 / 2
                return x.data[index] * weights[head * 30 + index % 30]
            }
            #expect(scaled.data == expectedScaled, "\(backend.name) scale heads")
            // An eval BatchNorm: one rounding, as the head computes it.
            let (scale, shift) = (LayerKernelTests.random(4, seed: 19), LayerKernelTests.random(4, seed: 20))
            var affine = x
            backend.channelAffine(&affine, scale: scale, shift: shift)
            let expectedAffine: [Float] = (0..<120).map { index in
                shift[index / 30].addingProduct(x.data[index], scale[index / 30])
            }
            #expect(affine.data == expectedAffine, "\(backend.name) channel affine")
        }
    }

    @Test func denseOperations() {
        let (rows, inputs, outputs) = (9, 13, 7)
        let x = LayerKernelTests.random(rows * inputs, seed: 21)
        let weight = LayerKernelTests.random(outputs * inputs, seed: 22)
        let bias = LayerKernelTests.random(outputs, seed: 23)
        func linear(_ rows: Int, bias: [Float]?) -> [Double] {
            (0..<(rows * outputs)).map { index in
                let (r, o) = (index / outputs, index % outputs)
                return (0..<inputs).reduce(Double(bias?[o] ?? 0)) {
                    $0 + Double(x[r * inputs + $1]) * Double(weight[o * inputs + $1])
                }
            }
        }
        let map = Self.map(5, 3, 4, seed: 24)
        let channelWeights = LayerKernelTests.random(5, seed: 25)
        for backend in Self.backends {
            for count in [1, 3, rows] {
                Self.close(
                    backend.linear(
                        Array(x[0..<(count * inputs)]), rows: count, inputs: inputs, weight: weight, bias: bias,
                        outputs: outputs), linear(count, bias: bias), "\(backend.name) linear \(count) rows")
            }
            Self.close(
                backend.linear(x, rows: rows, inputs: inputs, weight: weight, bias: nil, outputs: outputs),
                linear(rows, bias: nil), "\(backend.name) linear without bias")
            // matmul: a (rows × inputs) · weightᵀ as a k × n matrix.
            let b = (0..<(inputs * outputs)).map { weight[($0 % outputs) * inputs + $0 / outputs] }
            Self.close(
                backend.matmul(x, b, m: rows, n: outputs, k: inputs), linear(rows, bias: nil), "\(backend.name) matmul")
            Self.close(
                backend.weightedChannelSum(map, weights: channelWeights),
                (0..<12).map { p in
                    (0..<5).reduce(0.0) { $0 + Double(channelWeights[$1]) * Double(map.data[$1 * 12 + p]) }
                },
                "\(backend.name) weighted channel sum")
        }
    }

    @Test func maxSigmoidAttention() {
        let (channels, heads, classes, height, width) = (8, 2, 3, 23, 29)  // 667 pixels: two column blocks
        let x = Self.map(channels, height, width, seed: 26)
        let guide = LayerKernelTests.random(classes * channels, seed: 27)
        let bias = LayerKernelTests.random(heads, seed: 28)
        let (plane, headSize) = (height * width, channels / heads)
        var expected = [Double](repeating: 0, count: heads * plane)
        for m in 0..<heads {
            for p in 0..<plane {
                var best = -Double.infinity
                for k in 0..<classes {
                    var dot = 0.0
                    for j in 0..<headSize {
                        dot +=
                            Double(x.data[(m * headSize + j) * plane + p])
                            * Double(guide[k * channels + m * headSize + j])
                    }
                    best = max(best, dot)
                }
                expected[m * plane + p] = Self.sigmoid(best / Double(headSize).squareRoot() + Double(bias[m]))
            }
        }
        for backend in Self.backends {
            Self.close(
                backend.maxSigmoidAttention(StackedMaps(x), guide: guide, classes: classes, heads: heads, bias: bias)
                    .data,
                expected, "\(backend.name) max-sigmoid attention")
        }
    }

    @Test func spatialAttention() {
        let (heads, keySize, headSize, height, width) = (2, 3, 4, 5, 6)
        let n = height * width
        let group = 2 * keySize + headSize
        let qkv = Self.map(heads * group, height, width, seed: 29)
        var values = [Double](), attended = [Double]()
        for h in 0..<heads {
            let base = h * group * n
            func at(_ channel: Int, _ p: Int) -> Double { Double(qkv.data[base + channel * n + p]) }
            for c in 0..<headSize { values += (0..<n).map { at(2 * keySize + c, $0) } }
            var weights = [[Double]]()
            for i in 0..<n {
                let scores = (0..<n).map { j in
                    (0..<keySize).reduce(0.0) { $0 + at($1, i) * at(keySize + $1, j) } / Double(keySize).squareRoot()
                }
                let top = scores.max()!
                let exps = scores.map { exp($0 - top) }
                let total = exps.reduce(0, +)
                weights.append(exps.map { $0 / total })
            }
            for c in 0..<headSize {
                attended += (0..<n).map { i in (0..<n).reduce(0.0) { $0 + at(2 * keySize + c, $1) * weights[i][$1] } }
            }
        }
        for backend in Self.backends {
            let got = backend.spatialAttention(qkv, heads: heads, keySize: keySize, headSize: headSize)
            Self.close(got.values.data, values, "\(backend.name) values")
            Self.close(got.attended.data, attended, "\(backend.name) attended")
        }
    }

    @Test func maskedSoftmaxPool() {
        let (channels, groups, height, width) = (6, 3, 4, 5)
        let plane = height * width
        let x = Self.map(channels, height, width, seed: 30)
        let scores = Self.map(4, height, width, seed: 31)  // more channels than groups: the first are read
        let mask: [UInt8] = (0..<plane).map { $0 % 3 == 0 ? 1 : 0 }
        var expected = [Double](repeating: 0, count: channels)
        for g in 0..<groups {
            let held = (0..<plane).filter { mask[$0] != 0 }
            let top = held.map { Double(scores.data[g * plane + $0]) }.max()!
            let exps = held.map { exp(Double(scores.data[g * plane + $0]) - top) }
            let total = exps.reduce(0, +)
            for j in 0..<(channels / groups) {
                let channel = g * (channels / groups) + j
                expected[channel] = zip(held, exps).reduce(0.0) {
                    $0 + $1.1 / total * Double(x.data[channel * plane + $1.0])
                }
            }
        }
        for backend in Self.backends {
            Self.close(
                backend.maskedSoftmaxPool(x, scores: scores, mask: mask, groups: groups), expected,
                "\(backend.name) masked softmax pool")
        }
    }

    /// A level's side distances from its bins: the DFL expectation (softmax over the bins, times 0…bins−1),
    /// or the channel itself with one bin.
    static func distances(_ box: FeatureMap, bins: Int, anchor p: Int) -> [Double] {
        (0..<4).map { side in
            guard bins > 1 else { return Double(box.data[side * box.plane + p]) }
            let logits = (0..<bins).map { Double(box.data[(side * bins + $0) * box.plane + p]) }
            let top = logits.max()!
            let exps = logits.map { exp($0 - top) }
            return zip(0..., exps).reduce(0.0) { $0 + Double($1.0) * $1.1 } / exps.reduce(0, +)
        }
    }

    static func box(_ d: [Double], anchor p: Int, width: Int, stride: Double) -> [Double] {
        let (ax, ay) = (Double(p % width) + 0.5, Double(p / width) + 0.5)
        let (x1, y1, x2, y2) = (ax - d[0], ay - d[1], ax + d[2], ay + d[3])
        return [(x1 + x2) / 2 * stride, (y1 + y2) / 2 * stride, (x2 - x1) * stride, (y2 - y1) * stride]
    }

    @Test(arguments: [16, 1])
    func contrastiveDecodeAndBoxes(bins: Int) {
        let (classes, depth, height, width, stride) = (3, 5, 7, 9, 16)
        let plane = height * width
        let box = Self.map(4 * bins, height, width, seed: 32)
        let source = Self.map(depth, height, width, seed: 33)
        let weights = LayerKernelTests.random(classes * depth, seed: 34)
        let constants = LayerKernelTests.random(classes, seed: 35)
        let (scale, bias): (Float, Float) = (1.7, -0.3)
        let (offset, anchors) = (10, plane + 20)
        var expected = [Double](repeating: 0, count: (4 + classes) * anchors)
        for p in 0..<plane {
            let b = Self.box(
                Self.distances(box, bins: bins, anchor: p), anchor: p, width: width, stride: Double(stride))
            for side in 0..<4 { expected[side * anchors + offset + p] = b[side] }
            for k in 0..<classes {
                let logit = (0..<depth).reduce(0.0) {
                    $0 + Double(weights[k * depth + $1]) * Double(source.data[$1 * plane + p])
                }
                expected[(4 + k) * anchors + offset + p] = Self.sigmoid(
                    (logit + Double(constants[k])) * Double(scale) + Double(bias))
            }
        }
        let geometry = AnchorGeometry(
            plane: plane, width: width, anchors: anchors, offset: offset, stride: Float(stride), bins: bins,
            classes: classes)
        let chosen = [0, 5, plane - 1, 17]
        for backend in Self.backends {
            var output = FeatureMap(channels: 4 + classes, height: 1, width: anchors)
            backend.contrastiveDecode(
                box: box, weights: weights, depth: depth, source: source, constants: constants, scale: scale,
                bias: bias,
                geometry: geometry, into: &output)
            Self.close(backend.floats(output), expected, "\(backend.name) decode, \(bins) bins")
            let boxes = backend.decodeBoxes(box, anchors: chosen, geometry: geometry)
            let expectedBoxes = (0..<4).flatMap { side in chosen.map { expected[side * anchors + offset + $0] } }
            Self.close(boxes, expectedBoxes, "\(backend.name) boxes, \(bins) bins")
        }
    }

    @Test func sequenceOperations() {
        let (rows, width, heads) = (7, 8, 2)
        let x = LayerKernelTests.random(rows * width, seed: 40)
        let gamma = LayerKernelTests.random(width, seed: 41), beta = LayerKernelTests.random(width, seed: 42)
        var normed = [Double]()
        for r in 0..<rows {
            let row = (0..<width).map { Double(x[r * width + $0]) }
            let mean = row.reduce(0, +) / Double(width)
            let variance = row.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(width)
            normed += row.enumerated().map {
                ($0.element - mean) / (variance + 1e-5).squareRoot() * Double(gamma[$0.offset])
                    + Double(beta[$0.offset])
            }
        }
        let (inputs, outputs) = (width, 19)  // more than one 16-column panel
        let weight = LayerKernelTests.random(outputs * inputs, seed: 43),
            bias = LayerKernelTests.random(outputs, seed: 44)
        let packed = PackedLinear(weight: weight, bias: bias, inputs: inputs, outputs: outputs)
        let linear: [Double] = (0..<(rows * outputs)).map { index in
            let (r, o) = (index / outputs, index % outputs)
            return (0..<inputs).reduce(Double(bias[o])) {
                $0 + Double(x[r * inputs + $1]) * Double(weight[o * inputs + $1])
            }
        }
        // Two sequences (4 and 3 rows) of queries, keys and values.
        let (lengths, starts) = ([4, 3], [0, 4])
        let qkv = LayerKernelTests.random(rows * 3 * width, seed: 45)
        let headSize = width / heads
        func attention(causal: Bool) -> [Double] {
            var out = [Double](repeating: 0, count: rows * width)
            for (length, start) in zip(lengths, starts) {
                for h in 0..<heads {
                    func at(_ row: Int, _ part: Int, _ d: Int) -> Double {
                        Double(qkv[(start + row) * 3 * width + part * width + h * headSize + d])
                    }
                    for i in 0..<length {
                        let seen = causal ? i + 1 : length
                        let scores = (0..<seen).map { j in
                            (0..<headSize).reduce(0.0) { $0 + at(i, 0, $1) * at(j, 1, $1) }
                                / Double(headSize).squareRoot()
                        }
                        let top = scores.max()!
                        let exps = scores.map { exp($0 - top) }
                        let total = exps.reduce(0, +)
                        for d in 0..<headSize {
                            out[(start + i) * width + h * headSize + d] = (0..<seen).reduce(0.0) {
                                $0 + exps[$1] / total * at($1, 2, d)
                            }
                        }
                    }
                }
            }
            return out
        }
        let quickGELU = x.map { Double($0) * Self.sigmoid(1.702 * Double($0)) }
        let gelu = x.map { 0.5 * Double($0) * (1 + erf(Double($0) / 2.0.squareRoot())) }
        for backend in Self.backends {
            Self.close(
                backend.layerNorm(x, rows: rows, gamma: gamma, beta: beta, epsilon: 1e-5), normed,
                "\(backend.name) layer norm")
            Self.close(backend.linear(x, rows: rows, layer: packed), linear, "\(backend.name) packed linear")
            for causal in [true, false] {
                Self.close(
                    backend.sequenceAttention(
                        qkv, lengths: lengths, starts: starts, width: width, heads: heads, causal: causal),
                    attention(causal: causal), "\(backend.name) attention, causal \(causal)")
            }
            var activated = x
            backend.activate(&activated, .quickGELU)
            Self.close(activated, quickGELU, "\(backend.name) QuickGELU")
            activated = x
            backend.activate(&activated, .gelu)
            Self.close(activated, gelu, "\(backend.name) GELU")
            var sum = x
            backend.add(&sum, normed.map(Float.init))
            #expect(sum == zip(x, normed).map { $0 + Float($1) }, "\(backend.name) add")
        }
    }

    /// The towers' row moves and products: a vision transformer's patch rows, a table added to every sequence,
    /// rows picked, and each row's product alone (the same bits as that row's product by itself).
    @Test func rowMatrixOperations() {
        // Two 3-channel 6×6 images cut into 3×3 patches: 2 × (4 + 1) rows of 27.
        let (side, patch, channels) = (6, 3, 3)
        let images = (0..<2).map { LayerKernelTests.random(channels * side * side, seed: 50 + UInt64($0)) }
        var rows: [Float] = []
        for image in images {
            rows += [Float](repeating: 0, count: channels * patch * patch)
            for gy in 0..<2 {
                for gx in 0..<2 {
                    for c in 0..<channels {
                        for y in 0..<patch {
                            for x in 0..<patch {
                                rows.append(image[(c * side + gy * patch + y) * side + gx * patch + x])
                            }
                        }
                    }
                }
            }
        }
        let table = LayerKernelTests.random(3 * 4, seed: 53)
        let x = RowMatrix(rows: 7, columns: 4, data: LayerKernelTests.random(28, seed: 54))
        let repeated = (0..<28).map { x.data[$0] + table[$0 % 12] }
        let b = LayerKernelTests.random(4 * 5, seed: 55)
        for backend in Self.backends {
            let cut = backend.patchRows(images, channels: channels, side: side, patch: patch)
            #expect(cut.rows == 10 && cut.columns == 27 && cut.data == rows, "\(backend.name) patch rows")
            var sum = x
            backend.addRepeating(&sum, table)
            #expect(sum.data == repeated, "\(backend.name) table added to every sequence")
            let picked = backend.rows(x, at: [6, 0, 6])
            #expect(picked.rows == 3 && picked.data == Array(x.data[24..<28] + x.data[0..<4] + x.data[24..<28]))
            let products = backend.rowProducts(x, b, columns: 5)
            for row in 0..<7 {
                let alone = backend.rowProducts(backend.rows(x, at: [row]), b, columns: 5)
                #expect(Array(products[(row * 5)..<(row * 5 + 5)]) == alone, "\(backend.name) row \(row) alone")
                let want = (0..<5).map { j in
                    (0..<4).reduce(0.0) { $0 + Double(x.data[row * 4 + $1]) * Double(b[$1 * 5 + j]) }
                }
                Self.close(alone, want, "\(backend.name) row \(row) product")
            }
        }
    }

    /// The seam holds: the models' layers say what to compute and never compute it themselves (no pointers,
    /// no BLAS, no kernels, no pool loops, no map floats read), so that every operation goes through a backend.
    @Test func layersComputeOnlyThroughTheBackend() throws {
        let root = Repository.root
        let layers = [
            "Models/LookoutDetector/Blocks.swift", "Models/LookoutDetector/YOLOEBlocks.swift",
            "Models/LookoutDetector/ContrastiveHead.swift", "Models/LookoutDetector/PromptFree.swift",
            "Models/LookoutDetector/VisualPrompts.swift", "Models/LookoutDetector/YOLOWorldNetwork.swift",
            "Models/LookoutDetector/YOLOENetwork.swift", "Models/LookoutDetector/DetectorNetwork.swift",
            "Models/LookoutDetector/Convolution.swift", "Models/LookoutTextEncoder/CLIPTransformer.swift",
            "Models/LookoutTextEncoder/CLIPImageEncoder.swift",
        ]
        // Whole words: `ConvolutionKernels.default` names a kernel choice, `Kernels.silu` computes.
        let forbidden = [
            "withUnsafe", "UnsafeSendable", "(^|[^A-Za-z])BLAS\\.", "(^|[^A-Za-z])Kernels\\.", "parallelFor",
            "\\.data($|[^A-Za-z])", "ComputePool",
        ]
        for layer in layers {
            let text = try String(contentsOfFile: root + "/Sources/" + layer, encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let code = line.components(separatedBy: "//").first ?? ""
                for word in forbidden where code.range(of: word, options: .regularExpression) != nil {
                    Issue.record("\(layer):\(number + 1) computes outside the backend (\(word)): \(line)")
                }
            }
        }
    }
}
