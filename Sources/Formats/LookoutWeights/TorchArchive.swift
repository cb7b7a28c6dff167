import LookoutJSON

/// PyTorch zip checkpoints (`torch.save`) and TorchScript archives (`torch.jit.save`), read without Python.
///
/// Layout (`torch.save`'s zip format): one top-level folder (its name read from the file), `data.pkl`
/// (pickle protocol 2), and `data/<key>` holding each storage's raw little-endian bytes. The pickle
/// is read by the restricted ``Unpickler``; tensors are views of the storages through their offset
/// and strides. Three layouts of the object graph are recognised:
///
/// - ultralytics checkpoints: a dict whose `ema` or `model` holds a module tree; names come from
///   `_modules` / `_parameters` / `_buffers` (non-persistent buffers skipped), as `state_dict()` gives;
/// - TorchScript archives: `__torch__.*` objects whose attributes are the parameters, buffers and
///   submodules themselves;
/// - plain state dicts: a dict of name → tensor.
enum TorchArchive {
    static let maximumDepth = 64

    static func load(_ file: MappedFile) throws(WeightsError) -> WeightFile {
        func fail(_ problem: String) -> WeightsError { WeightsError(path: file.path, problem: problem) }
        let archive = try ZipArchive(file)
        guard let pickleEntry = archive.entries.first(where: { $0.name.hasSuffix("data.pkl") && isTopLevel($0.name) })
        else { throw fail("zip has no <folder>/data.pkl: not a PyTorch checkpoint") }
        let folder = String(pickleEntry.name.dropLast("data.pkl".count))
        let pickleRange = try archive.dataRange(pickleEntry)
        let document: PickleDocument
        do {
            document = try Unpickler.load(UnsafeRawBufferPointer(rebasing: file.bytes[pickleRange]))
        } catch {
            throw fail("\(pickleEntry.name): \(error)")
        }
        let root = document.root
        let isTorchScript =
            archive.entry(folder + "constants.pkl") != nil
            || archive.entries.contains { $0.name.hasPrefix(folder + "code/") }

        var collector = Collector(file: file, archive: archive, folder: folder)
        var format = WeightFile.Format.torchZip
        if case .object(let object) = root, object.module.hasPrefix("__torch__") {
            format = .torchScript
            try collector.collectScript(object, prefix: "", depth: 0)
        } else if case .dict(let dict) = root, let model = modelEntry(dict) {
            try collector.collectModule(model, prefix: "", depth: 0)
            collector.checkpointMetadata(dict, model: model)
        } else if case .dict(let dict) = root {
            for entry in dict.entries {
                guard let name = entry.key.string, case .tensor(let reference) = entry.value else { continue }
                try collector.add(name, reference)
            }
        } else {
            throw fail("data.pkl holds neither a module, a checkpoint dict nor a state dict")
        }
        if isTorchScript { format = .torchScript }
        guard !collector.names.isEmpty else { throw fail("no tensors found in the checkpoint") }
        return WeightFile(
            path: file.path, format: format, names: collector.names, tensors: collector.tensors,
            metadata: collector.metadata, attributes: collector.attributes, batchNormEpsilon: collector.epsilons)
    }

    private static func isTopLevel(_ name: String) -> Bool {
        name.split(separator: "/", omittingEmptySubsequences: false).count == 2
    }

    /// ultralytics: `ckpt.get("ema") or ckpt["model"]`.
    private static func modelEntry(_ dict: PickleDict) -> PickleObject? {
        for key in ["ema", "model"] {
            if let value = dict[key], case .object(let object) = value { return object }
        }
        return nil
    }

    struct Collector {
        let file: MappedFile
        let archive: ZipArchive
        let folder: String
        var names: [String] = []
        var tensors: [String: TensorView] = [:]
        var attributes: [String: TensorView] = [:]
        var metadata: [String: String] = [:]
        var epsilons: [String: Double] = [:]
        var storages: [String: Range<Int>] = [:]

        func fail(_ problem: String) -> WeightsError { WeightsError(path: file.path, problem: problem) }

        mutating func view(_ name: String, _ reference: TensorReference) throws(WeightsError) -> TensorView {
            let storage = reference.storage
            var range = storages[storage.key]
            if range == nil {
                guard let entry = archive.entry(folder + "data/" + storage.key) else {
                    throw fail("tensor \(name): storage entry data/\(storage.key) is missing")
                }
                let dataRange = try archive.dataRange(entry)
                let (needed, overflow) = storage.count.multipliedReportingOverflow(by: storage.dtype.size)
                guard !overflow, needed <= dataRange.count else {
                    throw fail(
                        "tensor \(name): storage data/\(storage.key) has \(dataRange.count) bytes, \(storage.count) \(storage.dtype.rawValue) elements need \(needed)"
                    )
                }
                range = dataRange.lowerBound..<(dataRange.lowerBound + needed)
                storages[storage.key] = range
            }
            return try TensorView(
                file: file, storageRange: range!, dtype: storage.dtype, shape: reference.shape,
                strides: reference.strides, elementOffset: reference.offset, name: name)
        }

        mutating func add(_ name: String, _ reference: TensorReference) throws(WeightsError) {
            guard tensors[name] == nil else { throw fail("tensor \(name) appears twice") }
            tensors[name] = try view(name, reference)
            names.append(name)
        }

        /// An nn.Module as torch.save pickles it: `__dict__` with `_parameters`, `_buffers`, `_modules`.
        mutating func collectModule(_ module: PickleObject, prefix: String, depth: Int) throws(WeightsError) {
            guard depth < TorchArchive.maximumDepth else {
                throw fail("module tree deeper than \(TorchArchive.maximumDepth)")
            }
            guard let attributes = module.attributes else { return }
            var nonPersistent = Set<String>()
            if case .list(let set) = attributes["_non_persistent_buffers_set"] ?? .none {
                nonPersistent = Set(set.items.compactMap(\.string))
            }
            for key in ["_parameters", "_buffers"] {
                guard let dict = attributes[key]?.dict else { continue }
                for entry in dict.entries {
                    guard let name = entry.key.string, !(key == "_buffers" && nonPersistent.contains(name)) else {
                        continue
                    }
                    if case .tensor(let reference) = entry.value { try add(prefix + name, reference) }
                }
            }
            if module.name.hasPrefix("BatchNorm"), let eps = attributes["eps"]?.double {
                epsilons[String(prefix.dropLast())] = eps
            }
            // Plain tensor attributes that inference needs (ultralytics `txt_feats`, head `stride`).
            for entry in attributes.entries {
                guard let name = entry.key.string, !name.hasPrefix("_"), case .tensor(let reference) = entry.value
                else {
                    continue
                }
                self.attributes[prefix + name] = try view(prefix + name, reference)
            }
            if let children = attributes["_modules"]?.dict {
                for entry in children.entries {
                    guard let name = entry.key.string, case .object(let child) = entry.value else { continue }
                    try collectModule(child, prefix: prefix + name + ".", depth: depth + 1)
                }
            }
        }

        /// A TorchScript object: tensors and submodules are direct attributes.
        mutating func collectScript(_ object: PickleObject, prefix: String, depth: Int) throws(WeightsError) {
            guard depth < TorchArchive.maximumDepth else {
                throw fail("module tree deeper than \(TorchArchive.maximumDepth)")
            }
            guard let attributes = object.attributes else { return }
            for entry in attributes.entries {
                guard let name = entry.key.string else { continue }
                switch entry.value {
                case .tensor(let reference): try add(prefix + name, reference)
                case .object(let child) where child.module.hasPrefix("__torch__"):
                    // The module tree says what no tensor does: which activation the model calls. PyTorch's
                    // nn.GELU pickles as `__torch__.torch.nn.modules.activation[.___torch_mangle_N].GELU`;
                    // OpenAI CLIP's QuickGELU is its own class (`__torch__.clip.model.QuickGELU`). Where each
                    // nn.GELU sits is recorded (``WeightFile/callsGELU(_:at:)``).
                    if child.module.hasPrefix("__torch__.torch.nn.modules.activation"), child.name == "GELU" {
                        let path = prefix + name
                        metadata[WeightFile.geluModulesKey] =
                            metadata[WeightFile.geluModulesKey].map { $0 + "\n" + path } ?? path
                    }
                    try collectScript(child, prefix: prefix + name + ".", depth: depth + 1)
                default: break
                }
            }
        }

        /// Checkpoint facts worth keeping: ultralytics version and date, class names, class count.
        mutating func checkpointMetadata(_ checkpoint: PickleDict, model: PickleObject) {
            for key in ["version", "date", "license"] {
                if let value = checkpoint[key]?.string { metadata[key] = value }
            }
            metadata["class"] = model.qualifiedName
            guard let attributes = model.attributes else { return }
            if let names = attributes["names"]?.dict {
                var pairs: [(Int64, String)] = []
                for entry in names.entries {
                    if let index = entry.key.int, let name = entry.value.string { pairs.append((index, name)) }
                }
                pairs.sort { $0.0 < $1.0 }
                metadata["names"] = encodeNames(pairs.map(\.1))
            }
            if let count = attributes["nc"]?.int { metadata["nc"] = String(count) }
        }
    }
}

/// Class names as one metadata string: a JSON array.
func encodeNames(_ names: [String]) -> String {
    var out = "["
    for (index, name) in names.enumerated() {
        if index > 0 { out += "," }
        JSONValue.writeString(name, to: &out)
    }
    return out + "]"
}

extension WeightFile {
    /// The class names an ultralytics checkpoint stores (`model.names`), in index order; empty when it has none.
    public var classNames: [String] {
        guard let text = metadata["names"], case .array(let values)? = try? JSONValue(parsing: text) else { return [] }
        return values.compactMap {
            if case .string(let name) = $0 { return name }
            return nil
        }
    }
}
