import LookoutTensor
import LookoutWeights

/// What a detector file is, recognised from its tensor names and shapes alone (nothing is loaded): what
/// `models inspect` and `models verify` say about it.
public struct DetectorDescription: Sendable, Equatable, CustomStringConvertible {
    /// The family in words: `YOLO-World v2`, `YOLOE-11`, or a family's layout Lookout does not run.
    public var family: String
    /// `n` … `x` from the stem's width, or the width itself.
    public var scale: String
    /// Whether its head gives masks.
    public var segments: Bool
    /// The ways it can be asked: `text`, `visual` (boxes on a photo), `prompt-free`.
    public var modes: [String]
    /// The text embedding size its head takes (YOLO-World; nil where the family does not say it this way).
    public var embedding: Int?
    /// The classes stored in the file (YOLO-World's `txt_feats`; nil where the family keeps none).
    public var builtinClasses: Int?
    /// The text tower the file names in its metadata (``TextTower/metadataKey``), nil for the family's own.
    public var textTower: String?

    public init(
        family: String, scale: String, segments: Bool = false, modes: [String] = ["text"], embedding: Int? = nil,
        builtinClasses: Int? = nil, textTower: String? = nil
    ) {
        (self.family, self.scale, self.segments, self.modes) = (family, scale, segments, modes)
        (self.embedding, self.builtinClasses, self.textTower) = (embedding, builtinClasses, textTower)
    }

    public var description: String {
        if let embedding, let builtinClasses {
            return "\(family) detector, scale \(scale), text embedding \(embedding), \(builtinClasses) built-in classes"
        }
        return "\(family) \(segments ? "segmentation" : "detection") model, scale \(scale), prompts: "
            + modes.joined(separator: ", ") + (textTower.map { ", text tower \($0)" } ?? "")
    }

    /// The scale of a YOLO stem of `width` channels.
    static func scale(stemWidth width: Int) -> String {
        [16: "n", 32: "s", 48: "m", 64: "l", 80: "x"][width] ?? "custom (\(width) stem channels)"
    }
}

/// How a detector is opened: its arithmetic, a recorder of convolution inputs (calibration), and YOLOE-26's
/// one-to-one head.
public struct DetectorOptions: Sendable {
    public var precision: Precision
    public var recorder: ActivationRecorder?
    public var oneToOne: Bool
    /// The kernels the convolutions choose.
    public var kernels: KernelSettings

    public init(
        precision: Precision = .fp32, recorder: ActivationRecorder? = nil, oneToOne: Bool = false,
        kernels: KernelSettings = .environment
    ) {
        (self.precision, self.recorder, self.oneToOne, self.kernels) = (precision, recorder, oneToOne, kernels)
    }
}

/// A family of detectors Lookout runs. Each says how it recognises a weight file, what one is, and how it opens
/// one; the text tower its queries come through is its networks' ``DetectorNetwork/textTower``.
public protocol DetectorFamily: Sendable {
    /// The file as this family's, or nil when it is not one (from tensor names and shapes, nothing loaded).
    static func describe(_ weights: WeightFile) -> DetectorDescription?
    /// Opens a file ``describe(_:)`` recognised.
    static func open(_ weights: WeightFile, options: DetectorOptions) throws(WeightsError) -> any DetectorNetwork
}

/// The families, asked in order: the first that recognises a file describes and opens it. A new family is a
/// file with its network and its ``DetectorFamily`` conformance, and one entry here (ARCHITECTURE.md).
public enum DetectorFamilies {
    public static let all: [any DetectorFamily.Type] = [YOLOENetwork.self, YOLOWorldNetwork.self]

    /// The family of a file and what the file is; nil when no family recognises it.
    public static func recognise(_ weights: WeightFile) -> (family: any DetectorFamily.Type, DetectorDescription)? {
        for family in all {
            if let description = family.describe(weights) { return (family, description) }
        }
        return nil
    }

    /// Opens a detector file as the family it holds.
    public static func open(
        _ weights: WeightFile, options: DetectorOptions = .init()
    ) throws(WeightsError) -> any DetectorNetwork {
        guard let (family, _) = recognise(weights) else {
            throw WeightsError(
                path: weights.path, kind: .wrongModel,
                problem:
                    "not a detector Lookout runs: neither a YOLO-World v2 detector nor a YOLOE model (expected model.0.conv.weight and a WorldDetect or YOLOEDetect head)"
            )
        }
        return try family.open(weights, options: options)
    }

    /// Index of a YOLO detection head: the last layer with a contrastive head's bias (`cv4.0.bias`), or a
    /// prompt-free YOLOE's vocabulary (`lrpc`), which replaces it.
    public static func headIndex(_ tensors: [String: TensorView]) -> Int? {
        for index in stride(from: 40, through: 0, by: -1)
        where tensors["model.\(index).cv4.0.bias"] != nil || tensors["model.\(index).lrpc.0.vocab.weight"] != nil {
            return index
        }
        return nil
    }
}

/// Opens a detector file as the family it holds (``DetectorFamilies/open(_:options:)``).
public func openDetector(
    _ weights: WeightFile, precision: Precision = .fp32, recorder: ActivationRecorder? = nil, oneToOne: Bool = false,
    kernels: KernelSettings = .environment
) throws(WeightsError) -> any DetectorNetwork {
    try DetectorFamilies.open(
        weights,
        options: DetectorOptions(precision: precision, recorder: recorder, oneToOne: oneToOne, kernels: kernels))
}

extension YOLOWorldNetwork: DetectorFamily {
    /// A YOLO head with a contrastive head's bias and none of YOLOE's parts.
    public static func describe(_ weights: WeightFile) -> DetectorDescription? {
        let tensors = weights.tensors
        guard let stem = tensors["model.0.conv.weight"], let head = DetectorFamilies.headIndex(tensors),
            tensors["model.\(head).reprta.m.w12.weight"] == nil, tensors["model.\(head).lrpc.0.vocab.weight"] == nil
        else { return nil }
        var classes = 0
        if let names = weights.metadata["names"] { classes = names.filter { $0 == "," }.count + 1 }
        if let txt = weights.attributes["txt_feats"], txt.shape.count == 3 { classes = txt.shape[1] }
        return DetectorDescription(
            family: "YOLO-World v2", scale: DetectorDescription.scale(stemWidth: stem.shape.first ?? 0),
            embedding: tensors["model.\(head).cv3.0.2.weight"]?.shape.first ?? 0, builtinClasses: classes)
    }

    public static func open(
        _ weights: WeightFile, options: DetectorOptions
    ) throws(WeightsError) -> any DetectorNetwork {
        if options.oneToOne {
            throw WeightsError(
                path: weights.path,
                problem:
                    "this YOLO-World file has no one-to-one head (one2one_cv2, …): only YOLOE-26 text-prompt files have one; leave out --end-to-end"
            )
        }
        return try YOLOWorldNetwork(
            weights: weights, precision: options.precision, recorder: options.recorder, kernels: options.kernels)
    }
}

extension YOLOENetwork: DetectorFamily {
    /// A YOLO head with YOLOE's text network (`reprta`) or a prompt-free vocabulary (`lrpc`).
    public static func describe(_ weights: WeightFile) -> DetectorDescription? {
        let tensors = weights.tensors
        guard let stem = tensors["model.0.conv.weight"], let head = DetectorFamilies.headIndex(tensors),
            tensors["model.\(head).reprta.m.w12.weight"] != nil || tensors["model.\(head).lrpc.0.vocab.weight"] != nil
        else { return nil }
        // YOLO26's last neck stage (layer 22) is a C3k2 with attention blocks; YOLO11's has none.
        let family =
            head == 22
            ? Family.v8.rawValue
            : tensors["model.10.m.0.attn.qkv.conv.weight"] == nil
                ? "YOLOE (a layout Lookout does not run)"
                : tensors["model.22.m.0.1.attn.qkv.conv.weight"] != nil ? Family.v26.rawValue : Family.v11.rawValue
        var modes: [String] = []
        if tensors["model.\(head).reprta.m.w12.weight"] != nil { modes.append("text") }
        if tensors["model.\(head).savpe.cv3.weight"] != nil { modes.append("visual") }
        if tensors["model.\(head).lrpc.0.vocab.weight"] != nil { modes.append("prompt-free") }
        return DetectorDescription(
            family: family, scale: DetectorDescription.scale(stemWidth: stem.shape.first ?? 0),
            segments: tensors["model.\(head).proto.cv1.conv.weight"] != nil, modes: modes,
            textTower: weights.metadata[TextTower.metadataKey])
    }

    public static func open(
        _ weights: WeightFile, options: DetectorOptions
    ) throws(WeightsError) -> any DetectorNetwork {
        try YOLOENetwork(
            weights: weights, precision: options.precision, recorder: options.recorder, oneToOne: options.oneToOne,
            kernels: options.kernels)
    }
}
