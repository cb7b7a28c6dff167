import LookoutTensor
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

/// YOLOE's visual prompt encoder (ultralytics `SAVPE`, "spatial-aware visual prompt embedding"): from the
/// neck's three maps and one mask per prompt at the P3 map's size, one L2-normalised embedding per prompt, which
/// the contrastive head scores as it scores `get_tpe`'s text embeddings.
///
/// `cv1` (two 3×3 `Conv`s per level, upsampled to P3 by nearest ×2 and ×4) and `cv3` (1×1 to the embedding
/// size) give the features; `cv2` (1×1 `Conv` per level, upsampled) and `cv4` (3×3 to 16 channels) a spatial
/// context, which `cv6` (3×3 `Conv`, 3×3 conv) joins with the prompt mask through `cv5` (3×3 conv of the mask):
/// 16 attention maps, each a softmax over the prompt's pixels (the others at float's lowest), each weighing one
/// sixteenth of the feature channels.
struct VisualPromptEncoder: Sendable {
    let features: [[Convolution]]
    let context: [Convolution]
    let project: Convolution
    let contextMix: Convolution
    let maskConvolution: Convolution
    let join: [Convolution]
    /// Attention groups (`self.c`, 16).
    let groups: Int

    init(_ prefix: String, in file: WeightBinding) throws(WeightsError) {
        features = try (0..<3).map { (i: Int) throws(WeightsError) -> [Convolution] in
            [
                try Convolution(conv: "\(prefix).cv1.\(i).0", stride: 1, in: file),
                try Convolution(conv: "\(prefix).cv1.\(i).1", stride: 1, in: file),
            ]
        }
        context = try (0..<3).map { (i: Int) throws(WeightsError) -> Convolution in
            try Convolution(conv: "\(prefix).cv2.\(i).0", stride: 1, in: file)
        }
        project = try Convolution(plain: prefix + ".cv3", in: file)
        contextMix = try Convolution(plain: prefix + ".cv4", in: file)
        maskConvolution = try Convolution(plain: prefix + ".cv5", in: file)
        join = [
            try Convolution(conv: prefix + ".cv6.0", stride: 1, in: file),
            try Convolution(plain: prefix + ".cv6.1", in: file),
        ]
        groups = contextMix.outputs
        guard groups > 0, project.outputs % groups == 0, maskConvolution.inputs == 1,
            maskConvolution.outputs == groups, join[0].inputs == 2 * groups, join[1].outputs == groups
        else {
            throw WeightsError(
                path: file.path,
                problem:
                    "\(prefix): \(groups) attention groups do not fit its convolutions (cv3 \(project.outputs), cv5 \(maskConvolution.inputs)→\(maskConvolution.outputs), cv6 \(join[0].inputs)→\(join[1].outputs))"
            )
        }
    }

    var embeddingSize: Int { project.outputs }

    /// Nearest-neighbour upsampling by 2^`times`.
    static func upsampled(_ map: FeatureMap, times: Int, backend: any ComputeBackend) -> FeatureMap {
        (0..<times).reduce(map) { map, _ in backend.upsample(map) }
    }

    /// One embedding per prompt mask (`masks[q]`: 0/1 per pixel of the P3 map, row-major), `masks.count ×
    /// embeddingSize`, each L2-normalised.
    func callAsFunction(_ maps: [FeatureMap], masks: [[UInt8]], backend: any ComputeBackend) -> [Float] {
        let (height, width) = (maps[0].height, maps[0].width)
        let contextMaps = maps.enumerated().map { i, x in
            Self.upsampled(context[i](x, backend: backend), times: i, backend: backend)
        }
        let spatial = contextMix(backend.concatenate(contextMaps), backend: backend)
        let featureMaps = maps.enumerated().map { i, x in
            Self.upsampled(
                features[i][1](features[i][0](x, backend: backend), backend: backend), times: i, backend: backend)
        }
        let x = project(backend.concatenate(featureMaps), backend: backend)
        let channels = x.channels
        var result = [Float](repeating: 0, count: masks.count * channels)
        for (q, mask) in masks.enumerated() {
            let prompt = FeatureMap(channels: 1, height: height, width: width, data: mask.map { Float($0) })
            let y = join[1](
                join[0](backend.concatenate([spatial, maskConvolution(prompt, backend: backend)]), backend: backend),
                backend: backend)
            let pooled = backend.maskedSoftmaxPool(x, scores: y, mask: mask, groups: groups)
            var squares: Float = 0
            for k in 0..<channels { squares += pooled[k] * pooled[k] }
            let norm = max(squares.squareRoot(), 1e-12)
            for k in 0..<channels { result[q * channels + k] = pooled[k] / norm }
        }
        return result
    }
}

/// The prompt masks ultralytics' `YOLOEVPDetectPredictor` makes from boxes drawn on a photo: the boxes moved into
/// the letterboxed input (`gain` = the letterbox's scale, offsets `round((input − round(photo·gain))/2 − 0.1)`,
/// float32 as numpy computes them), scaled by 1/8, and per class the union of its boxes' cells
/// (`LoadVisualPrompt.make_mask`: x1 ≤ column < x2, y1 ≤ row < y2) on the `input/8` grid. Classes in ascending
/// order, as `torch.unique` sorts them.
public enum VisualPromptMasks {
    public static func make(
        boxes: [[Float]], classes: [Int], photoWidth: Int, photoHeight: Int, inputWidth: Int, inputHeight: Int
    ) -> (classes: [Int], masks: [[UInt8]], height: Int, width: Int) {
        let gain = min(Double(inputHeight) / Double(photoHeight), Double(inputWidth) / Double(photoWidth))
        let padX = Float((Double(inputWidth) - (Double(photoWidth) * gain).rounded(.toNearestOrEven)) / 2 - 0.1)
            .rounded(.toNearestOrEven)
        let padY = Float((Double(inputHeight) - (Double(photoHeight) * gain).rounded(.toNearestOrEven)) / 2 - 0.1)
            .rounded(.toNearestOrEven)
        let (height, width) = (Int(Double(inputHeight) / 8), Int(Double(inputWidth) / 8))
        let unique = Array(Set(classes)).sorted()
        var masks = [[UInt8]](repeating: [UInt8](repeating: 0, count: height * width), count: unique.count)
        for (box, label) in zip(boxes, classes) {
            let q = unique.firstIndex(of: label)!
            let x1 = (box[0] * Float(gain) + padX) * 0.125, x2 = (box[2] * Float(gain) + padX) * 0.125
            let y1 = (box[1] * Float(gain) + padY) * 0.125, y2 = (box[3] * Float(gain) + padY) * 0.125
            for row in 0..<height where Float(row) >= y1 && Float(row) < y2 {
                for column in 0..<width where Float(column) >= x1 && Float(column) < x2 {
                    masks[q][row * width + column] = 1
                }
            }
        }
        return (unique, masks, height, width)
    }
}
