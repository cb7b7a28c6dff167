import LookoutJSON

extension WeightFile {
    static let attributePrefix = "attribute."

    /// Writes Lookout's canonical safetensors: every tensor as F32 (I64 kept for integer tensors such as
    /// `num_batches_tracked`) under its state-dict name, attributes as `attribute.<name>`, and metadata:
    /// the source format and file, class names, and BatchNorm epsilons (a JSON object).
    ///
    /// With `keepHalf`, tensors stored as F16 stay F16 (their bits copied, nothing rounded): half the size,
    /// the same values. `extraMetadata` is added to (and replaces entries of) the file's metadata.
    public func writeCanonical(
        to output: String, keepHalf: Bool = false, extraMetadata: [String: String] = [:]
    ) throws(WeightsError) {
        var entries: [(name: String, shape: [Int], values: TensorValues)] = []
        func values(_ view: TensorView) -> TensorValues {
            if keepHalf, let bits = view.halfBits() { return .float16Bits(bits) }
            return view.dtype.isFloatingPoint ? .float32(view.floats()) : .int64(view.integers())
        }
        for name in names {
            let view = tensors[name]!
            entries.append((name, view.shape, values(view)))
        }
        for name in attributes.keys.sorted() {
            let view = attributes[name]!
            entries.append((Self.attributePrefix + name, view.shape, values(view)))
        }
        var metadata = self.metadata
        metadata.merge(extraMetadata) { $1 }
        metadata["lookout.format"] = "canonical-1"
        metadata["lookout.source_format"] = metadata["lookout.source_format"] ?? format.rawValue
        if !batchNormEpsilon.isEmpty {
            metadata["lookout.batchnorm_eps"] =
                JSONValue.object(
                    batchNormEpsilon.sorted { $0.key < $1.key }.map { ($0.key, .double($0.value)) }
                ).serialized
        }
        try SafeTensors.write(entries, metadata: metadata, to: output)
    }
}
