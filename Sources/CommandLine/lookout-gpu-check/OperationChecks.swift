import LookoutCUDA
import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutSupport
import LookoutTensor

#if canImport(Glibc)
    import Glibc
#endif

/// The op-by-op suite on a GPU: every ``ComputeBackend`` operation on random inputs of odd sizes, on the GPU's
/// backend and on the CPU's (which `ComputeBackendTests` proves against plain Double references wherever the
/// tests run), compared with the suite's all-close rule, `|gpu − cpu| ≤ 1e-5 + 1e-5·|cpu|`. Operations that
/// only move values (pooling, upsampling, concatenation, slices, gathers, head scaling) must be exact. The
/// convolutions of more than a few channels are compared with their value computed in Double.
struct OperationChecks {
    let gpu: any ComputeBackend
    let cpu: any ComputeBackend

    struct Result {
        let name: String
        let count: Int
        let largestDifference: Float
        let passed: Bool
        let exact: Bool

        var line: String {
            let rule = exact ? "exact" : "all-close"
            return
                "  \(passed ? "passed" : "FAILED") \(name): \(count) values, largest difference \(largestDifference) (\(rule))"
        }
    }

    /// Deterministic values in [−scale, scale).
    static func random(_ count: Int, seed: UInt64, scale: Float = 1) -> [Float] {
        var state = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return (0..<count).map { _ in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return (Float(state >> 40) / Float(1 << 24) * 2 - 1) * scale
        }
    }

    static func map(_ channels: Int, _ height: Int, _ width: Int, seed: UInt64, scale: Float = 1) -> FeatureMap {
        FeatureMap(
            channels: channels, height: height, width: width,
            data: random(channels * height * width, seed: seed, scale: scale))
    }

    /// `bounds`: each value's own bound in place of the rule.
    static func compare(
        _ name: String, _ got: [Float], _ want: [Float], exact: Bool = false, bounds: [Float]? = nil
    ) -> Result {
        guard got.count == want.count else {
            return Result(
                name: name + " (sizes differ)", count: got.count, largestDifference: .infinity, passed: false,
                exact: exact)
        }
        var (largest, passed): (Float, Bool) = (0, true)
        for (index, (a, b)) in zip(got, want).enumerated() {
            let difference = abs(a - b)
            if !(difference <= largest) { largest = difference.isNaN ? .infinity : difference }
            let bound: Float = bounds?[index] ?? (exact ? 0 : 1e-5 + 1e-5 * abs(b))
            if !(difference <= bound) && !(a == b) { passed = false }
        }
        return Result(name: name, count: got.count, largestDifference: largest, passed: passed, exact: exact)
    }

    /// A convolution in Double from its definition (the CPU's 3×3 kernels compute by Winograd, whose own error
    /// on 37 inputs, about 3e-5, is above the rule: the GPU is compared with the exact value instead).
    static func convolution(_ x: FeatureMap, _ w: ConvolutionWeights) -> [Float] {
        let (outHeight, outWidth) = w.outputSize(height: x.height, width: x.width)
        let (k, half, values) = (w.kernel, w.kernel / 2, x.data)
        var out = [Float](repeating: 0, count: w.outputs * outHeight * outWidth)
        for o in 0..<w.outputs {
            for y in 0..<outHeight {
                for column in 0..<outWidth {
                    var sum = Double(w.bias[o])
                    for i in 0..<w.inputs {
                        for ky in 0..<k {
                            for kx in 0..<k {
                                let (iy, ix) = (y * w.stride + ky - half, column * w.stride + kx - half)
                                guard iy >= 0 && iy < x.height && ix >= 0 && ix < x.width else { continue }
                                sum +=
                                    Double(w.weight[((o * w.inputs + i) * k + ky) * k + kx])
                                    * Double(values[(i * x.height + iy) * x.width + ix])
                            }
                        }
                    }
                    out[(o * outHeight + y) * outWidth + column] = Float(w.activation ? sum / (1 + exp(-sum)) : sum)
                }
            }
        }
        return out
    }

    func run() -> [Result] {
        var results: [Result] = []
        func check(_ name: String, exact: Bool = false, _ body: (any ComputeBackend) -> [Float]) {
            results.append(Self.compare(name, body(gpu), body(cpu), exact: exact))
        }
        // Convolutions: 1×1, 3×3 and 3×3 stride 2, of a whole map and of stacked parts (one a channel range).
        let (height, width) = (23, 19)
        let a = Self.map(20, height, width, seed: 1), b = Self.map(24, height, width, seed: 2)
        for (kernel, stride) in [(1, 1), (3, 1), (3, 2)] {
            for activation in [true, false] {
                let weights = ConvolutionWeights(
                    weight: Self.random(29 * 37 * kernel * kernel, seed: 3, scale: 0.3),
                    bias: Self.random(29, seed: 4), inputs: 37, outputs: 29, kernel: kernel, stride: stride,
                    activation: activation)
                let prepared = ConvolutionKernels.default.prepare(weights)
                let stacked = StackedMaps(parts: [.init(map: a), .init(map: b, channels: 7..<24)])
                let whole = FeatureMap.concatenate([a, b.channels(7..<24)])
                let exact = Self.convolution(whole, weights)
                let name = "convolution \(kernel)×\(kernel)/\(stride) \(activation ? "SiLU" : "linear")"
                results.append(
                    Self.compare(
                        name + " stacked, against Double",
                        gpu.convolve(stacked, prepared, kernel: ConvolutionKernels.default).data, exact))
                results.append(
                    Self.compare(
                        name + " whole, against Double",
                        gpu.convolve(whole, prepared, kernel: ConvolutionKernels.default).data, exact))
            }
        }
        // The first layer's shape: 3 channels in, stride 2, at 640.
        let photo = Self.map(3, 640, 480, seed: 5)
        let stem = ConvolutionKernels.default.prepare(
            ConvolutionWeights(
                weight: Self.random(16 * 27, seed: 6, scale: 0.5), bias: Self.random(16, seed: 7), inputs: 3,
                outputs: 16, kernel: 3, stride: 2, activation: true))
        check("convolution 3×3/2 of a 3×640×480 photo") {
            $0.convolve(photo, stem, kernel: ConvolutionKernels.default).data
        }
        let wide = Self.map(64, 20, 20, seed: 40)
        let deep = ConvolutionWeights(
            weight: Self.random(32 * 64 * 9, seed: 41, scale: 0.1), bias: Self.random(32, seed: 42), inputs: 64,
            outputs: 32, kernel: 3, stride: 1, activation: true)
        results.append(
            Self.compare(
                "convolution 3×3/1 of 64 channels at 20×20, against Double",
                gpu.convolve(wide, ConvolutionKernels.default.prepare(deep), kernel: ConvolutionKernels.default).data,
                Self.convolution(wide, deep)))
        for kernel in [3, 5] {
            for activation in [false, true] {
                let x = Self.map(13, 17, 11, seed: 8)
                let weight = Self.random(13 * kernel * kernel, seed: 9), bias = Self.random(13, seed: 10)
                check("depthwise \(kernel)×\(kernel) \(activation ? "SiLU" : "linear")") {
                    $0.depthwiseConvolution(x, weight: weight, bias: bias, kernel: kernel, activation: activation)
                        .data
                }
            }
        }
        let taps = (0..<4).map { Self.random(11 * 9, seed: 11 + UInt64($0)) }
        let tapBias = Self.random(11, seed: 15)
        let small = Self.map(9, 7, 5, seed: 16)
        check("transposed convolution 2×2") {
            $0.transposedConvolution2x2(small, taps: taps, bias: tapBias).data
        }
        let x = Self.map(12, 15, 21, seed: 17)
        check("max pool 5", exact: true) { $0.maxPool(x, size: 5).data }
        check("upsample", exact: true) { $0.upsample(x).data }
        check("concatenate", exact: true) { $0.concatenate([x, Self.map(5, 15, 21, seed: 18), x]).data }
        check("slice", exact: true) { $0.slice(x, channels: 3..<9).data }
        check("add stacked", exact: true) { backend in
            var y = Self.map(12, 15, 21, seed: 19)
            backend.add(&y, StackedMaps(parts: [.init(map: x, channels: 0..<5), .init(map: x, channels: 5..<12)]))
            return y.data
        }
        let scale = Self.random(12, seed: 20), shift = Self.random(12, seed: 21)
        check("channel affine", exact: true) { backend in
            var y = backend.upsample(x)
            backend.channelAffine(&y, scale: scale, shift: shift)
            return y.data
        }
        let columns = [0, 5, 314, 17, 100, 5]
        check("gather", exact: true) { $0.gather(x, columns: columns) }
        let channelWeights = Self.random(12, seed: 22)
        check("weighted channel sum") { $0.weightedChannelSum(x, weights: channelWeights) }
        let rows = Self.random(7 * 33, seed: 23), weight = Self.random(21 * 33, seed: 24)
        let bias = Self.random(21, seed: 25)
        check("linear with bias") { $0.linear(rows, rows: 7, inputs: 33, weight: weight, bias: bias, outputs: 21) }
        check("linear without bias") { $0.linear(rows, rows: 7, inputs: 33, weight: weight, bias: nil, outputs: 21) }
        let left = Self.random(13 * 11, seed: 26), right = Self.random(11 * 17, seed: 27)
        check("matmul") { $0.matmul(left, right, m: 13, n: 17, k: 11) }
        // Past the backend's host bound (small products of host arrays are the host's): on the GPU.
        let manyRows = Self.random(96 * 160, seed: 40), wideWeight = Self.random(80 * 160, seed: 41)
        let wideBias = Self.random(80, seed: 42)
        check("linear with bias, 96×160 by 80") {
            $0.linear(manyRows, rows: 96, inputs: 160, weight: wideWeight, bias: wideBias, outputs: 80)
        }
        let tall = Self.random(160 * 97, seed: 43)
        check("matmul 96×160 by 97") { $0.matmul(manyRows, tall, m: 96, n: 97, k: 160) }
        // The neck's attention: 64 channels in 2 heads, 5 classes, at 20×20.
        let projected = Self.map(64, 20, 20, seed: 28)
        let guide = Self.random(5 * 64, seed: 29), headBias = Self.random(2, seed: 30)
        check("max-sigmoid attention") {
            $0.maxSigmoidAttention(StackedMaps(projected), guide: guide, classes: 5, heads: 2, bias: headBias).data
        }
        let headWeights = FeatureMap(channels: 2, height: 20, width: 20, data: Self.random(2 * 400, seed: 31))
        check("scale heads", exact: true) {
            $0.scaleHeads(StackedMaps(projected), by: headWeights, heads: 2).data
        }
        let qkv = Self.map(2 * (2 * 16 + 32), 10, 10, seed: 32)
        check("spatial attention values", exact: true) {
            $0.spatialAttention(qkv, heads: 2, keySize: 16, headSize: 32).values.data
        }
        check("spatial attention") { $0.spatialAttention(qkv, heads: 2, keySize: 16, headSize: 32).attended.data }
        let features = Self.map(24, 9, 8, seed: 33)
        let scores = Self.map(4, 9, 8, seed: 34)
        let mask = (0..<72).map { UInt8($0 % 3 == 0 ? 1 : 0) }
        check("masked softmax pool") { $0.maskedSoftmaxPool(features, scores: scores, mask: mask, groups: 4) }
        // The head: 16 bins per side at 12×10, 6 classes, depth 32, written into a 3-level output.
        let box = Self.map(64, 12, 10, seed: 35, scale: 4)
        let source = Self.map(32, 12, 10, seed: 36)
        let classWeights = Self.random(6 * 32, seed: 37), constants = Self.random(6, seed: 38)
        let geometry = AnchorGeometry(
            plane: 120, width: 10, anchors: 300, offset: 100, stride: 16, bins: 16, classes: 6)
        check("contrastive decode") { backend in
            // Values outside the level stay as they were.
            var output = FeatureMap(
                channels: 10, height: 1, width: 300, data: (0..<3000).map { Float($0 % 17) - 8 })
            backend.contrastiveDecode(
                box: box, weights: classWeights, depth: 32, source: source, constants: constants, scale: 1.3,
                bias: -0.4, geometry: geometry, into: &output)
            return backend.floats(output)
        }
        let anchors = [0, 7, 119, 64, 3]
        check("decode boxes") { $0.decodeBoxes(box, anchors: anchors, geometry: geometry) }
        let distances = Self.map(4, 12, 10, seed: 39, scale: 3)
        let direct = AnchorGeometry(plane: 120, width: 10, anchors: 120, offset: 0, stride: 8, bins: 1, classes: 0)
        check("decode boxes, one bin") { $0.decodeBoxes(distances, anchors: anchors, geometry: direct) }
        // The towers' sequence operations: 3 sequences (7, 12 and 5 rows), rowWidth 96 in 4 heads.
        let (rowsOf, rowWidth) = ([7, 12, 5], 96)
        let total = rowsOf.reduce(0, +)
        let starts = [0, 7, 19]
        let sequence = Self.random(total * rowWidth, seed: 60)
        let gamma = Self.random(rowWidth, seed: 61, scale: 2), beta = Self.random(rowWidth, seed: 62)
        check("layer norm") { $0.layerNorm(sequence, rows: total, gamma: gamma, beta: beta, epsilon: 1e-5) }
        // Rows of 768 (ViT-B's, held in registers) and of 1100 (past 1024: read in each pass).
        for long in [768, 1100] {
            let values = Self.random(9 * long, seed: 76, scale: 3)
            let (g, b) = (Self.random(long, seed: 77), Self.random(long, seed: 78))
            check("layer norm of rows of \(long)") { $0.layerNorm(values, rows: 9, gamma: g, beta: b, epsilon: 1e-5) }
        }
        let packed = PackedLinear(
            weight: Self.random(3 * rowWidth * rowWidth, seed: 63, scale: 0.2),
            bias: Self.random(3 * rowWidth, seed: 64),
            inputs: rowWidth, outputs: 3 * rowWidth)
        check("packed linear") { $0.linear(sequence, rows: total, layer: packed) }
        let sequenceMatrix = RowMatrix(rows: total, columns: rowWidth, data: sequence)
        for activation in SequenceActivation.allCases {
            check("packed linear with \(activation)") {
                $0.floats($0.linear(sequenceMatrix, layer: packed, activation: activation).map)
            }
        }
        let square = PackedLinear(
            weight: Self.random(rowWidth * rowWidth, seed: 69, scale: 0.2), bias: Self.random(rowWidth, seed: 70),
            inputs: rowWidth, outputs: rowWidth)
        check("residual linear, x + (y·Wᵀ + b)") { backend in
            var x = sequenceMatrix
            backend.addLinear(
                &x, RowMatrix(rows: total, columns: rowWidth, data: Self.random(total * rowWidth, seed: 71)),
                layer: square)
            return backend.floats(x.map)
        }
        let norm = SequenceNorm(
            gamma: Self.random(rowWidth, seed: 72), beta: Self.random(rowWidth, seed: 73), epsilon: 1e-5)
        check("attention sublayer, x += attention(LayerNorm(x)·Qᵀ + q)·Oᵀ + o") { backend in
            var x = sequenceMatrix
            backend.residualAttention(
                &x, norm: norm, qkv: packed, output: square, lengths: rowsOf, starts: starts, heads: 4, causal: true,
                next: nil)
            return backend.floats(x.map)
        }
        check("MLP sublayer, x += QuickGELU(LayerNorm(x)·Uᵀ + u)·Dᵀ + d") { backend in
            var x = sequenceMatrix
            backend.residualMLP(
                &x, norm: norm, up: packed, activation: .quickGELU,
                down: PackedLinear(
                    weight: Self.random(3 * rowWidth * rowWidth, seed: 74, scale: 0.1),
                    bias: Self.random(rowWidth, seed: 75),
                    inputs: 3 * rowWidth, outputs: rowWidth), next: nil)
            return backend.floats(x.map)
        }
        let rowsQKV = Self.random(total * 3 * rowWidth, seed: 65)
        for causal in [true, false] {
            check("sequence attention \(causal ? "causal" : "full")") {
                $0.sequenceAttention(
                    rowsQKV, lengths: rowsOf, starts: starts, width: rowWidth, heads: 4, causal: causal)
            }
        }
        for activation in SequenceActivation.allCases {
            check("activation \(activation)") { backend in
                var values = sequence
                backend.activate(&values, activation)
                return values
            }
        }
        check("add rows", exact: true) { backend in
            var values = sequence
            backend.add(&values, rowsQKV.prefix(sequence.count).map { $0 })
            return values
        }
        // The towers' sizes: 50 and 200 tokens in heads of 64 (lk_attention_64; 200 past 48 KB of shared memory),
        // 120 in heads of 96 (lk_attention_block past 48 KB) and 300 in heads of 96 (past an H200's 227 KB: a thread
        // a row).
        for (tokens, width, heads) in [(50, 128, 2), (200, 128, 2), (120, 192, 2), (300, 192, 2)] {
            let many = Self.random(3 * tokens * 3 * width, seed: 66, scale: 2)
            for causal in [true, false] {
                check(
                    "sequence attention \(causal ? "causal" : "full"), 3 × \(tokens) tokens, heads of \(width / heads)"
                ) {
                    $0.sequenceAttention(
                        many, lengths: [tokens, tokens - 3, tokens], starts: [0, tokens, 2 * tokens], width: width,
                        heads: heads, causal: causal)
                }
            }
        }
        let images = (0..<3).map { Self.random(3 * 20 * 20, seed: 70 + UInt64($0)) }
        check("patch rows", exact: true) { $0.patchRows(images, channels: 3, side: 20, patch: 5).data }
        let pixels = (0..<3).map { n in (0..<(3 * 20 * 20)).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ n &* 101) } }
        check("patch rows of 8-bit pixels, normalised", exact: true) {
            $0.patchRows(
                pixels: pixels, side: 20, patch: 5, mean: [0.48145466, 0.4578275, 0.40821073],
                std: [0.26862954, 0.26130258, 0.27577711]
            ).data
        }
        let table = Self.random(3 * rowWidth, seed: 67)
        check("table added to every sequence", exact: true) { backend in
            var values = RowMatrix(rows: total, columns: rowWidth, data: sequence)
            backend.addRepeating(&values, table)
            return backend.floats(values.map)
        }
        let matrix = RowMatrix(rows: total, columns: rowWidth, data: sequence)
        check("rows picked", exact: true) { $0.floats($0.rows(matrix, at: [23, 0, 7, 7]).map) }
        let projection = Self.random(rowWidth * 40, seed: 68, scale: 0.3)
        check("each row's product alone") { $0.rowProducts(matrix, projection, columns: 40) }
        check("a row's product as in its batch", exact: true) { backend in
            let all = backend.rowProducts(matrix, projection, columns: 40)
            let alone = backend.rowProducts(backend.rows(matrix, at: [5]), projection, columns: 40)
            return zip(all[200..<240], alone).map { $0 - $1 }
        }
        // NMS's overlaps of 3,000 boxes, against the host's arithmetic (bit for bit).
        let corners = (0..<3000).flatMap { index -> [Float] in
            let values = Self.random(4, seed: 100 + UInt64(index), scale: 1)
            let (x, y) = ((values[0] + 1) * 300, (values[1] + 1) * 300)
            let (w, h) = ((values[2] + 1.2) * 40, (values[3] + 1.2) * 40)
            return [x, y, x + w, y + h]
        }
        let areas = (0..<3000).map { (index: Int) -> Float in
            let width: Float = corners[4 * index + 2] - corners[4 * index]
            let height: Float = corners[4 * index + 3] - corners[4 * index + 1]
            return width * height
        }
        let host = NonMaxSuppression.overlaps(corners, areas: areas, count: 3000, threshold: 0.7)
        let overlaps = gpu.overlaps(corners, areas: areas, count: 3000, threshold: 0.7) ?? []
        results.append(
            Result(
                name: "NMS overlaps of 3000 boxes", count: host.count,
                largestDifference: overlaps == host ? 0 : .infinity, passed: overlaps == host, exact: true))
        // NMS past its thresholds on the GPU (ranked, arranged, overlaps, greedy pass) keeps the candidates the
        // host's steps keep (NonMaxSuppression.apart), in the same order: scores on a coarse grid so that many are
        // equal (index order among them), −0 beside +0, three queries' offsets or none (agnostic); uncapped,
        // capped at 300 (the default) and at 7 (inside the first chunk), 100 candidates (one chunk, partly
        // filled), and 31,000 (past NMS's 30,000: the rest are never boxes).
        for (count, maximum, agnostic) in [
            (3000, 3000, false), (3000, 300, false), (3000, 7, false), (3000, 300, true), (100, 100, false),
            (31_000, 300, false),
        ] {
            let boxes = (0..<count).flatMap { index -> [Float] in
                let values = Self.random(4, seed: 100 + UInt64(index), scale: 1)
                let (x, y) = ((values[0] + 1) * 300, (values[1] + 1) * 300)
                let (w, h) = ((values[2] + 1.2) * 40, (values[3] + 1.2) * 40)
                return [x, y, x + w, y + h]
            }
            let scores = Self.random(count, seed: 7 + UInt64(count), scale: 1).enumerated().map { index, value in
                index % 97 == 0 ? (index % 2 == 0 ? Float(0) : -Float(0)) : ((value + 1) * 32).rounded() / 64
            }
            let offsets = (0..<count).map { agnostic ? 0 : Float($0 % 3) * SuppressionOptions.classOffset }
            let expected = NonMaxSuppression.apart(
                corners: boxes, scores: scores, offsets: offsets, count: count, threshold: 0.7, maximum: maximum)
            let kept =
                gpu.suppress(
                    corners: boxes, scores: scores, offsets: offsets, count: count,
                    candidates: SuppressionOptions.maximumCandidates, threshold: 0.7, maximum: maximum) ?? [-1]
            results.append(
                Result(
                    name:
                        "NMS kept of \(count) candidates\(agnostic ? " (agnostic)" : ""), at most \(maximum) (\(expected.count) kept)",
                    count: expected.count, largestDifference: kept == expected ? 0 : .infinity,
                    passed: kept == expected, exact: true))
        }
        // The letterbox from a photo's bytes, against the host's C (the same floats): shrunk, enlarged, kept
        // (640×480 needs no resize), and of four channels.
        for (width, height, channels) in [(1000, 750, 3), (100, 77, 3), (640, 480, 3), (333, 501, 4)] {
            var generator = SplitMix64(seed: UInt64(width * height))
            let image = Image(
                width: width, height: height, channels: channels,
                pixels: (0..<(width * height * channels)).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
            let letterbox = Letterbox(width: width, height: height, size: 640)
            let host = letterbox.tensor(of: image)
            let device =
                gpu.letterbox(
                    image.pixels, width: width, height: height, channels: channels,
                    plan: Engine.plan(letterbox, for: image))?.data ?? []
            let difference = zip(host, device).map { abs($0 - $1) }.max() ?? .infinity
            results.append(
                Result(
                    name: "letterbox of \(width)×\(height)×\(channels) to \(letterbox.width)×\(letterbox.height)",
                    count: host.count, largestDifference: host.count == device.count ? difference : .infinity,
                    passed: host == device, exact: true))
        }
        check("tasks in order", exact: true) { backend in
            backend.tasks(3) { task in backend.slice(x, channels: task..<(task + 2)) }.flatMap(\.data)
        }
        results += batches()
        return results
    }

    /// Three images stacked as one tall map (``ComputeBackend/batched(_:_:)``): each operation that looks past a
    /// pixel, on the GPU within the batch, against each image alone (the CPU's, or Double's for convolutions);
    /// the stacking itself exactly.
    func batches() -> [Result] {
        var results: [Result] = []
        let images = (0..<3).map { Self.map(20, 14, 9, seed: 60 + UInt64($0)) }
        let tall = gpu.stack(images)
        results.append(
            Self.compare("batch: stacked as the host stacks", tall.data, cpu.stack(images).data, exact: true))
        results.append(
            Self.compare(
                "batch: unstacked as given", gpu.unstack(tall, images: 3).flatMap(\.data), images.flatMap(\.data),
                exact: true))
        func each(_ name: String, exact: Bool = false, _ op: (any ComputeBackend, FeatureMap) -> FeatureMap) {
            let made = gpu.batched(3) { op(gpu, tall) }
            let got = gpu.unstack(made, images: 3).flatMap(\.data)
            results.append(
                Self.compare("batch of 3: " + name, got, images.flatMap { op(cpu, $0).data }, exact: exact))
        }
        for (kernel, stride) in [(1, 1), (3, 1), (3, 2), (1, 2)] {
            let weights = ConvolutionWeights(
                weight: Self.random(11 * 20 * kernel * kernel, seed: 70, scale: 0.3), bias: Self.random(11, seed: 71),
                inputs: 20, outputs: 11, kernel: kernel, stride: stride, activation: true)
            let prepared = ConvolutionKernels.default.prepare(weights)
            let made = gpu.batched(3) { gpu.convolve(tall, prepared, kernel: ConvolutionKernels.default) }
            results.append(
                Self.compare(
                    "batch of 3: convolution \(kernel)×\(kernel)/\(stride), against Double",
                    gpu.unstack(made, images: 3).flatMap(\.data), images.flatMap { Self.convolution($0, weights) }))
        }
        each("max pool 5", exact: true) { $0.maxPool($1, size: 5) }
        each("upsample", exact: true) { $0.upsample($1) }
        let weight = Self.random(20 * 9, seed: 72), bias = Self.random(20, seed: 73)
        each("depthwise 3×3") { $0.depthwiseConvolution($1, weight: weight, bias: bias, kernel: 3, activation: true) }
        let taps = (0..<4).map { Self.random(5 * 20, seed: 74 + UInt64($0)) }
        each("transposed convolution 2×2") {
            $0.transposedConvolution2x2($1, taps: taps, bias: Self.random(5, seed: 78))
        }
        // The head's level: each image's anchors decoded at their own rows (16 bins per side, 6 classes).
        let boxes = (0..<3).map { Self.map(64, 12, 10, seed: 80 + UInt64($0), scale: 4) }
        let sources = (0..<3).map { Self.map(32, 12, 10, seed: 83 + UInt64($0)) }
        let classWeights = Self.random(6 * 32, seed: 86), constants = Self.random(6, seed: 87)
        func decode(_ backend: any ComputeBackend, box: FeatureMap, source: FeatureMap) -> [Float] {
            let plane = box.plane
            var output = FeatureMap(channels: 10, height: 1, width: plane)
            backend.contrastiveDecode(
                box: box, weights: classWeights, depth: 32, source: source, constants: constants, scale: 1.3,
                bias: -0.4,
                geometry: AnchorGeometry(
                    plane: plane, width: 10, anchors: plane, offset: 0, stride: 16, bins: 16, classes: 6),
                into: &output)
            return backend.floats(output)
        }
        let (tallBoxes, tallSources) = (gpu.stack(boxes), gpu.stack(sources))
        let decoded = gpu.batched(3) { decode(gpu, box: tallBoxes, source: tallSources) }
        // Each row holds the images' 120 anchors in turn.
        var want = [Float](repeating: 0, count: 10 * 360)
        for n in 0..<3 {
            let alone = decode(cpu, box: boxes[n], source: sources[n])
            for row in 0..<10 {
                want[(row * 360 + n * 120)..<(row * 360 + n * 120 + 120)] = alone[(row * 120)..<(row * 120 + 120)]
            }
        }
        results.append(Self.compare("batch of 3: contrastive decode", decoded, want))
        return results
    }
}

extension OperationChecks {
    /// A convolution in Double of operands rounded as `arithmetic` rounds them (the weights and the input; the
    /// bias stays fp32), with each output's bound: a sum of `K` exact products in fp32, in any order, is within
    /// `K·2⁻²⁴·Σ|products|` of the exact sum; twice that, plus the bias's and SiLU's rounding.
    static func convolution16(
        _ x: FeatureMap, _ w: ConvolutionWeights, _ arithmetic: GPUArithmetic
    ) -> (values: [Float], bounds: [Float]) {
        let (outHeight, outWidth) = w.outputSize(height: x.height, width: x.width)
        let (k, half) = (w.kernel, w.kernel / 2)
        let values = x.data.map(arithmetic.rounded), weight = w.weight.map(arithmetic.rounded)
        let depth = Double(w.inputs * k * k)
        var out = [Float](repeating: 0, count: w.outputs * outHeight * outWidth), bounds = out
        for o in 0..<w.outputs {
            for y in 0..<outHeight {
                for column in 0..<outWidth {
                    var (sum, magnitude) = (Double(0), Double(0))
                    for i in 0..<w.inputs {
                        for ky in 0..<k {
                            for kx in 0..<k {
                                let (iy, ix) = (y * w.stride + ky - half, column * w.stride + kx - half)
                                guard iy >= 0 && iy < x.height && ix >= 0 && ix < x.width else { continue }
                                let product =
                                    Double(weight[((o * w.inputs + i) * k + ky) * k + kx])
                                    * Double(values[(i * x.height + iy) * x.width + ix])
                                sum += product
                                magnitude += abs(product)
                            }
                        }
                    }
                    sum += Double(w.bias[o])
                    let at = (o * outHeight + y) * outWidth + column
                    out[at] = Float(w.activation ? sum / (1 + exp(-sum)) : sum)
                    let epsilon = 1.0 / Double(1 << 24)
                    bounds[at] = Float(1.1 * (2 * depth * epsilon * magnitude + 4 * epsilon * abs(sum)) + 1e-7)
                }
            }
        }
        return (out, bounds)
    }

    /// The convolutions of a backend computing in fp16 or bf16 (``GPUArithmetic``) against
    /// ``convolution16(_:_:_:)``: stacked parts and whole maps, 1×1, 3×3 and 3×3 stride 2, the stem's 3 channels.
    static func sixteenBit(_ gpu: CUDABackend) -> [Result] {
        let arithmetic = gpu.arithmetic
        let lowered =
            switch gpu.lowering {
            case .inMemory: ""
            case .asMultiplied(let wide, _): wide ? " (lk_conv_16_wide)" : " (lk_conv_16)"
            }
        var results: [Result] = []
        func compare(_ name: String, _ got: [Float], _ want: (values: [Float], bounds: [Float])) {
            results.append(
                Self.compare(
                    "\(arithmetic.rawValue) \(name)\(lowered), against Double of the rounded operands (fp32 sums' bound)",
                    got,
                    want.values, bounds: want.bounds))
        }
        // A tower's linear layer: 37 rows of 200 by 130 outputs, with bias.
        let (rows, inputs, outputs) = (37, 200, 130)
        let x = random(rows * inputs, seed: 80), weight = random(outputs * inputs, seed: 81, scale: 0.2)
        let bias = random(outputs, seed: 82)
        let layer = PackedLinear(weight: weight, bias: bias, inputs: inputs, outputs: outputs)
        var linear: (values: [Float], bounds: [Float]) = ([], [])
        let epsilon = 1.0 / Double(1 << 24)
        for r in 0..<rows {
            for o in 0..<outputs {
                var (sum, magnitude) = (Double(bias[o]), Double(0))
                for i in 0..<inputs {
                    let product =
                        Double(arithmetic.rounded(x[r * inputs + i]))
                        * Double(arithmetic.rounded(weight[o * inputs + i]))
                    sum += product
                    magnitude += abs(product)
                }
                linear.values.append(Float(sum))
                linear.bounds.append(
                    Float(1.1 * (2 * Double(inputs) * epsilon * magnitude + 4 * epsilon * abs(sum)) + 1e-7))
            }
        }
        results.append(
            Self.compare(
                "\(arithmetic.rawValue) packed linear 37×200 by 130, against Double of the rounded operands (fp32 sums' bound)",
                gpu.linear(x, rows: rows, layer: layer), linear.values, bounds: linear.bounds))
        // The 16-bit operands written by the kernels that make a linear layer's input (LayerNorm, attention, a
        // linear layer with its activation) against the input rounded afterwards: the same product, bit for bit.
        let matrix = RowMatrix(rows: rows, columns: inputs, data: x)
        func fromHost(_ made: RowMatrix) -> RowMatrix {
            RowMatrix(rows: made.rows, columns: made.columns, data: gpu.floats(made.map))
        }
        let normed = gpu.layerNorm(
            matrix, gamma: random(inputs, seed: 83, scale: 2), beta: random(inputs, seed: 84), epsilon: 1e-5)
        let widen = PackedLinear(
            weight: random(inputs * 50, seed: 85, scale: 0.2), bias: random(inputs, seed: 86), inputs: 50,
            outputs: inputs)
        let activated = gpu.linear(
            RowMatrix(rows: rows, columns: 50, data: random(rows * 50, seed: 87)), layer: widen, activation: .quickGELU)
        let qkv = RowMatrix(rows: rows, columns: 3 * inputs, data: random(rows * 3 * inputs, seed: 88))
        let attended = gpu.sequenceAttention(qkv, lengths: [20, 17], starts: [0, 20], heads: 4, causal: false)
        // Heads of 64 (lk_attention_64) into a layer of 128 inputs.
        let attended64 = gpu.sequenceAttention(
            RowMatrix(rows: rows, columns: 384, data: random(rows * 384, seed: 89)), lengths: [20, 17],
            starts: [0, 20],
            heads: 2, causal: true)
        let narrow = PackedLinear(
            weight: random(30 * 128, seed: 90, scale: 0.2), bias: random(30, seed: 91), inputs: 128, outputs: 30)
        for (name, made, next) in [
            ("LayerNorm", normed, layer), ("linear with QuickGELU", activated, layer), ("attention", attended, layer),
            ("attention in heads of 64", attended64, narrow),
        ] {
            results.append(
                Self.compare(
                    "\(arithmetic.rawValue) operand written by \(name) against it rounded after",
                    gpu.floats(gpu.linear(made, layer: next).map),
                    gpu.floats(gpu.linear(fromHost(made), layer: next).map),
                    exact: true))
        }
        let (height, width) = (23, 19)
        let a = map(20, height, width, seed: 1), b = map(24, height, width, seed: 2)
        for (kernel, stride) in [(1, 1), (3, 1), (3, 2)] {
            let weights = ConvolutionWeights(
                weight: random(29 * 37 * kernel * kernel, seed: 3, scale: 0.3), bias: random(29, seed: 4),
                inputs: 37, outputs: 29, kernel: kernel, stride: stride, activation: true)
            let prepared = ConvolutionKernels.default.prepare(weights)
            let stacked = StackedMaps(parts: [.init(map: a), .init(map: b, channels: 7..<24)])
            let whole = FeatureMap.concatenate([a, b.channels(7..<24)])
            let want = convolution16(whole, weights, arithmetic)
            let name = "convolution \(kernel)×\(kernel)/\(stride)"
            compare(name + " stacked", gpu.convolve(stacked, prepared, kernel: ConvolutionKernels.default).data, want)
            compare(name + " whole", gpu.convolve(whole, prepared, kernel: ConvolutionKernels.default).data, want)
        }
        let photo = map(3, 160, 120, seed: 5)
        let stem = ConvolutionWeights(
            weight: random(16 * 27, seed: 6, scale: 0.5), bias: random(16, seed: 7), inputs: 3, outputs: 16,
            kernel: 3, stride: 2, activation: true)
        compare(
            "convolution 3×3/2 of a 3×160×120 photo",
            gpu.convolve(photo, ConvolutionKernels.default.prepare(stem), kernel: ConvolutionKernels.default).data,
            convolution16(photo, stem, arithmetic))
        let wide = map(64, 20, 20, seed: 40)
        let deep = ConvolutionWeights(
            weight: random(32 * 64 * 9, seed: 41, scale: 0.1), bias: random(32, seed: 42), inputs: 64, outputs: 32,
            kernel: 3, stride: 1, activation: true)
        compare(
            "convolution 3×3/1 of 64 channels at 20×20",
            gpu.convolve(wide, ConvolutionKernels.default.prepare(deep), kernel: ConvolutionKernels.default).data,
            convolution16(wide, deep, arithmetic))
        // More outputs than one tile of 64 and a K of many tiles, stacked in four parts (the most lk_conv_16 reads
        // where they lie) and in five (lowered into memory instead), and a 5×5 kernel (no constant divisions).
        let quarters = (0..<5).map { map(15, 17, 21, seed: 50 + UInt64($0)) }
        let many = ConvolutionWeights(
            weight: random(130 * 60 * 9, seed: 56, scale: 0.1), bias: random(130, seed: 57), inputs: 60,
            outputs: 130, kernel: 3, stride: 1, activation: false)
        compare(
            "convolution 3×3/1 of 4 stacked parts, 130 outputs",
            gpu.convolve(
                StackedMaps(parts: quarters.prefix(4).map { .init(map: $0) }), ConvolutionKernels.default.prepare(many),
                kernel: ConvolutionKernels.default
            ).data, convolution16(FeatureMap.concatenate(Array(quarters.prefix(4))), many, arithmetic))
        let five = ConvolutionWeights(
            weight: random(70 * 75, seed: 58, scale: 0.1), bias: random(70, seed: 59), inputs: 75, outputs: 70,
            kernel: 1, stride: 1, activation: true)
        compare(
            "convolution 1×1/1 of 5 stacked parts, 70 outputs",
            gpu.convolve(
                StackedMaps(parts: quarters.map { .init(map: $0) }), ConvolutionKernels.default.prepare(five),
                kernel: ConvolutionKernels.default
            ).data, convolution16(FeatureMap.concatenate(quarters), five, arithmetic))
        let wider = ConvolutionWeights(
            weight: random(40 * 15 * 25, seed: 60, scale: 0.1), bias: random(40, seed: 61), inputs: 15, outputs: 40,
            kernel: 5, stride: 2, activation: true)
        compare(
            "convolution 5×5/2 of 15 channels",
            gpu.convolve(quarters[0], ConvolutionKernels.default.prepare(wider), kernel: ConvolutionKernels.default)
                .data, convolution16(quarters[0], wider, arithmetic))
        return results
    }

    /// The towers' pre-norm sublayers, which a 16-bit backend fuses (16-bit intermediates, attention on the tensor
    /// cores), against the CPU's fp32 operations one after another: what each adds to the residual rows, as a
    /// relative RMS error, bounded by 8u (u the 16-bit type's unit roundoff: 2⁻¹¹ fp16, 2⁻⁸ bf16; six
    /// intermediates are rounded once each). Full and causal attention, sequences of 64 and 128 rows or fewer (the
    /// fused kernels) and of 200 (the composed path), heads of 64; QuickGELU and GELU MLPs.
    static func sublayers(_ gpu: CUDABackend) -> [Result] {
        let arithmetic = gpu.arithmetic
        let u: Double = arithmetic == .fp16 ? 1.0 / 2048 : 1.0 / 256
        let width = 128
        func result(_ name: String, _ x: [Float], _ got: [Float], _ want: [Float]) -> Result {
            var (error, size, largest) = (Double(0), Double(0), Float(0))
            for i in 0..<min(got.count, want.count) {
                let (a, b) = (Double(got[i] - x[i]), Double(want[i] - x[i]))
                error += (a - b) * (a - b)
                size += b * b
                if !(abs(got[i] - want[i]) <= largest) {
                    largest = abs(got[i] - want[i]).isNaN ? .infinity : abs(got[i] - want[i])
                }
            }
            let relative = (error / max(size, .leastNormalMagnitude)).squareRoot()
            return Result(
                name:
                    "\(arithmetic.rawValue) \(name), its increment's relative RMS error \(Float(relative)) (bound 8u = \(Float(8 * u)))",
                count: got.count, largestDifference: largest, passed: got.count == want.count && relative <= 8 * u,
                exact: false)
        }
        func norm(_ seed: UInt64) -> SequenceNorm {
            SequenceNorm(
                gamma: random(width, seed: seed, scale: 1).map { 1 + $0 / 2 }, beta: random(width, seed: seed + 1),
                epsilon: 1e-5)
        }
        var results: [Result] = []
        let qkv = PackedLinear(
            weight: random(3 * width * width, seed: 92, scale: 0.15), bias: random(3 * width, seed: 93), inputs: width,
            outputs: 3 * width)
        let output = PackedLinear(
            weight: random(width * width, seed: 94, scale: 0.1), bias: random(width, seed: 95), inputs: width,
            outputs: width)
        for (lengths, causal) in [
            ([50, 47, 50], false), ([50, 47, 50], true), ([77, 60, 1], true), ([120, 9], false), ([200, 20], false),
        ] {
            let rows = lengths.reduce(0, +)
            let starts = lengths.indices.map { lengths[..<$0].reduce(0, +) }
            let x = random(rows * width, seed: 96, scale: 2)
            func run(_ backend: any ComputeBackend) -> [Float] {
                var matrix = RowMatrix(rows: rows, columns: width, data: x)
                backend.residualAttention(
                    &matrix, norm: norm(97), qkv: qkv, output: output, lengths: lengths, starts: starts, heads: 2,
                    causal: causal, next: nil)
                return backend.floats(matrix.map)
            }
            results.append(
                result(
                    "attention sublayer, \(causal ? "causal" : "full"), sequences of \(lengths) rows, heads of 64", x,
                    run(gpu), run(CPUBackend.shared)))
        }
        let up = PackedLinear(
            weight: random(4 * width * width, seed: 98, scale: 0.15), bias: random(4 * width, seed: 99), inputs: width,
            outputs: 4 * width)
        let down = PackedLinear(
            weight: random(4 * width * width, seed: 100, scale: 0.08), bias: random(width, seed: 101),
            inputs: 4 * width, outputs: width)
        // A whole block: the attention sublayer told the MLP's LayerNorm, which it then writes with its output.
        do {
            let lengths = [50, 50, 33]
            let rows = lengths.reduce(0, +)
            let x = random(rows * width, seed: 104, scale: 2)
            let mlpNorm = norm(103)
            func run(_ backend: any ComputeBackend, told: Bool = true) -> [Float] {
                var matrix = RowMatrix(rows: rows, columns: width, data: x)
                backend.residualAttention(
                    &matrix, norm: norm(97), qkv: qkv, output: output, lengths: lengths, starts: [0, 50, 100],
                    heads: 2, causal: false, next: told ? mlpNorm : nil)
                backend.residualMLP(&matrix, norm: mlpNorm, up: up, activation: .quickGELU, down: down, next: nil)
                return backend.floats(matrix.map)
            }
            let told = run(gpu)
            results.append(
                result(
                    "block (attention, its output's next LayerNorm written with it, then the MLP), \(lengths) rows",
                    x, told, run(CPUBackend.shared)))
            // The LayerNorm written with the residual is the one the MLP would compute: the same block, bit for bit.
            results.append(
                Self.compare(
                    "\(arithmetic.rawValue) block with the next LayerNorm written with the residual, against it computed apart",
                    told, run(gpu, told: false), exact: true))
        }
        let rows = 157
        let x = random(rows * width, seed: 102, scale: 2)
        for activation in [SequenceActivation.quickGELU, .gelu] {
            func run(_ backend: any ComputeBackend) -> [Float] {
                var matrix = RowMatrix(rows: rows, columns: width, data: x)
                backend.residualMLP(&matrix, norm: norm(103), up: up, activation: activation, down: down, next: nil)
                return backend.floats(matrix.map)
            }
            results.append(
                result("MLP sublayer with \(activation), \(rows) rows", x, run(gpu), run(CPUBackend.shared)))
        }
        return results
    }
}
