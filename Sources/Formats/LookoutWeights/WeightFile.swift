/// The one interface through which models load weights, whatever the file format.
///
/// Tensors keep the names of the file's state dict (`model.0.conv.weight`,
/// `transformer.resblocks.0.attn.in_proj_weight`, `text_model.encoder.…`); models map names at their
/// own load boundary. Values are converted to Float32 when read.
public struct WeightFile: Sendable {
    public enum Format: String, Sendable {
        case safetensors
        case torchZip = "pytorch-zip"
        case torchScript = "torchscript"
    }

    public let path: String
    public let format: Format
    /// Tensors in file order.
    public let names: [String]
    public let tensors: [String: TensorView]
    /// Non-tensor facts from the file: safetensors `__metadata__`, or for ultralytics checkpoints
    /// `names` (class names), `version`, `date`, `nc`.
    public let metadata: [String: String]
    /// Tensors that are attributes rather than state-dict entries (ultralytics `txt_feats`, head `stride`).
    public let attributes: [String: TensorView]
    /// Per BatchNorm module (by state-dict prefix), its `eps`, where the file records it.
    public let batchNormEpsilon: [String: Double]

    init(
        path: String, format: Format, names: [String], tensors: [String: TensorView], metadata: [String: String] = [:],
        attributes: [String: TensorView] = [:], batchNormEpsilon: [String: Double] = [:]
    ) {
        self.path = path
        self.format = format
        self.names = names
        self.tensors = tensors
        self.metadata = metadata
        self.attributes = attributes
        self.batchNormEpsilon = batchNormEpsilon
    }

    /// Metadata of a TorchScript file: the module paths (one per line) where the traced model holds PyTorch's
    /// exact `nn.GELU` (what no tensor says; kept by canonical conversion).
    public static let geluModulesKey = "torchscript.gelu_modules"

    /// Whether the file's module tree holds `nn.GELU` at `path` (e.g. `text.transformer.resblocks.0.mlp.gelu`).
    public static func callsGELU(_ file: WeightFile, at path: String) -> Bool {
        file.metadata[geluModulesKey]?.split(separator: "\n").contains { $0 == path } ?? false
    }

    /// Opens a weight file, choosing the reader by its first bytes (`PK` zip or safetensors header).
    public static func open(_ path: String) throws(WeightsError) -> WeightFile {
        let file = try MappedFile(path: path)
        return try open(file)
    }

    public static func open(_ file: MappedFile) throws(WeightsError) -> WeightFile {
        if file.count >= 4, file.integer(at: 0, as: UInt32.self) == 0x0403_4B50 {
            return try TorchArchive.load(file)
        }
        if file.count >= 10, [UInt8(ascii: "{"), UInt8(ascii: "["), 0x20, 0x09, 0x0A, 0x0D].contains(file.bytes[8]) {
            return try SafeTensors.load(file)
        }
        throw WeightsError(
            path: file.path, kind: .unsupportedFormat,
            problem: "not a weight file Lookout reads (expected a PyTorch zip checkpoint or safetensors; "
                + "legacy non-zip PyTorch files are not supported)")
    }

    /// Drops the file's pages read so far from resident memory (``MappedFile/dropResidentPages()``); views stay
    /// valid.
    public func dropResidentPages() {
        tensors.values.first?.file.dropResidentPages()
    }

    /// The tensor `name`, or an error naming the key.
    public func view(_ name: String) throws(WeightsError) -> TensorView {
        guard let view = tensors[name] else {
            throw WeightsError(path: path, kind: .missingTensor(name), problem: "missing tensor \(name)")
        }
        return view
    }

    /// The tensor `name` as Float32 values, checking its shape.
    public func floats(_ name: String, shape expected: [Int]? = nil) throws(WeightsError) -> [Float] {
        let view = try view(name)
        if let expected, view.shape != expected {
            throw WeightsError(
                path: path, kind: .shapeMismatch(tensor: name, shape: view.shape, expected: expected),
                problem: "tensor \(name) has shape \(view.shape), expected \(expected)")
        }
        return view.floats()
    }
}
