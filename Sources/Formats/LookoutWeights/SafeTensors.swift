import LookoutJSON
import LookoutSupport

/// safetensors: an 8-byte little-endian header length N, N bytes of JSON
/// (`{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}`), then the data,
/// row-major and little-endian, offsets relative to the end of the header.
///
/// The header is checked fully before any tensor is used: its size against the file, every dtype,
/// shape and offset pair, byte counts against dtype × shape, and that no two tensors overlap.
public enum SafeTensors {
    static let maximumHeaderSize = 100 << 20

    static func load(_ file: MappedFile) throws(WeightsError) -> WeightFile {
        func fail(_ problem: String) -> WeightsError { WeightsError(path: file.path, problem: problem) }
        guard let headerSize = file.integer(at: 0, as: UInt64.self) else { throw fail("file shorter than 8 bytes") }
        guard headerSize >= 2, headerSize <= UInt64(maximumHeaderSize) else {
            throw fail("safetensors header size \(headerSize) is not plausible")
        }
        let dataStart = 8 + Int(headerSize)
        guard dataStart <= file.count else {
            throw fail("safetensors header of \(headerSize) bytes runs past the end of the \(file.count)-byte file")
        }
        let document: JSONDocument
        do {
            document = try JSONDocument(bytes: UnsafeRawBufferPointer(rebasing: file.bytes[8..<dataStart]))
        } catch {
            throw fail("safetensors header is not valid JSON (\(error))")
        }
        let root = document.root
        guard root.kind == .object else { throw fail("safetensors header is not a JSON object") }

        var names: [String] = []
        var ranges: [(range: Range<Int>, name: String)] = []
        var tensors: [String: TensorView] = [:]
        var metadata: [String: String] = [:]
        let dataSize = file.count - dataStart
        var problem: WeightsError?
        root.forEachMember { key, value in
            guard problem == nil else { return }
            let name = String(decoding: key, as: UTF8.self)
            if name == "__metadata__" {
                guard value.kind == .object else {
                    problem = fail("__metadata__ is not an object of strings")
                    return
                }
                value.forEachMember { metaKey, metaValue in
                    if let text = metaValue.string { metadata[String(decoding: metaKey, as: UTF8.self)] = text }
                }
                return
            }
            do throws(WeightsError) {
                let (view, range) = try entry(name, value, file: file, dataStart: dataStart, dataSize: dataSize)
                names.append(name)
                ranges.append((range, name))
                tensors[name] = view
            } catch {
                problem = error
            }
        }
        if let problem { throw problem }
        ranges.sort { $0.range.lowerBound < $1.range.lowerBound }
        for (first, second) in zip(ranges, ranges.dropFirst()) where first.range.upperBound > second.range.lowerBound {
            throw fail("tensors \(first.name) and \(second.name) overlap")
        }
        guard metadata["lookout.format"] != nil else {
            return WeightFile(path: file.path, format: .safetensors, names: names, tensors: tensors, metadata: metadata)
        }
        // Lookout's canonical file (`writeCanonical`): attributes come back as attributes, BatchNorm epsilons
        // from the metadata.
        var attributes: [String: TensorView] = [:]
        let prefix = WeightFile.attributePrefix
        for name in names where name.hasPrefix(prefix) {
            attributes[String(name.dropFirst(prefix.count))] = tensors.removeValue(forKey: name)
        }
        names.removeAll { $0.hasPrefix(prefix) }
        var epsilons: [String: Double] = [:]
        if let text = metadata["lookout.batchnorm_eps"] {
            guard let document = try? JSONDocument(text: text), document.root.kind == .object else {
                throw fail("lookout.batchnorm_eps is not a JSON object")
            }
            document.root.forEachMember { key, value in
                if let number = value.number { epsilons[String(decoding: key, as: UTF8.self)] = number }
            }
        }
        return WeightFile(
            path: file.path, format: .safetensors, names: names, tensors: tensors, metadata: metadata,
            attributes: attributes, batchNormEpsilon: epsilons)
    }

    private static func entry(
        _ name: String, _ value: JSONNode, file: MappedFile, dataStart: Int, dataSize: Int
    ) throws(WeightsError) -> (TensorView, Range<Int>) {
        func fail(_ problem: String) -> WeightsError {
            WeightsError(path: file.path, problem: "tensor \(name): \(problem)")
        }
        guard value.kind == .object, let dtypeName = value["dtype"]?.string, let shapeNode = value["shape"],
            shapeNode.kind == .array, let offsets = value["data_offsets"], offsets.kind == .array, offsets.count == 2
        else { throw fail("entry needs \"dtype\", \"shape\" and two \"data_offsets\"") }
        guard let dtype = DType(rawValue: dtypeName) else { throw fail("unsupported dtype \(dtypeName)") }
        var shape: [Int] = []
        for index in 0..<shapeNode.count {
            guard let dimension = shapeNode[index].int, dimension >= 0, dimension < 1 << 40 else {
                throw fail("shape entries must be non-negative integers")
            }
            shape.append(Int(dimension))
        }
        guard let begin = offsets[0].int, let end = offsets[1].int, begin >= 0, begin <= end, end <= Int64(dataSize)
        else { throw fail("data_offsets lie outside the \(dataSize) data bytes") }
        var count = 1
        for dimension in shape {
            let (product, overflow) = count.multipliedReportingOverflow(by: dimension)
            guard !overflow, product < 1 << 40 else { throw fail("shape \(shape) is too large") }
            count = product
        }
        guard Int64(count * dtype.size) == end - begin else {
            throw fail("\(end - begin) bytes do not hold \(dtypeName) \(shape) (\(count * dtype.size) bytes)")
        }
        var strides = [Int](repeating: 1, count: shape.count)
        for axis in stride(from: shape.count - 2, through: 0, by: -1) {
            strides[axis] = strides[axis + 1] * shape[axis + 1]
        }
        let range = (dataStart + Int(begin))..<(dataStart + Int(end))
        let view = try TensorView(
            file: file, storageRange: range, dtype: dtype, shape: shape, strides: strides, elementOffset: 0, name: name)
        return (view, range)
    }

    /// Writes tensors as a safetensors file (F32 unless a tensor is given with integer values),
    /// in the given order, with `metadata` as `__metadata__`.
    public static func write(
        _ tensors: [(name: String, shape: [Int], values: TensorValues)], metadata: [String: String], to path: String
    ) throws(WeightsError) {
        var header: [(String, JSONValue)] = []
        if !metadata.isEmpty {
            header.append(
                ("__metadata__", .object(metadata.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })))
        }
        var offset = 0
        for tensor in tensors {
            let size = tensor.values.byteCount
            header.append(
                (
                    tensor.name,
                    .object([
                        ("dtype", .string(tensor.values.dtype.rawValue)),
                        ("shape", .array(tensor.shape.map { .int(Int64($0)) })),
                        ("data_offsets", .array([.int(Int64(offset)), .int(Int64(offset + size))])),
                    ])
                ))
            offset += size
        }
        var json = Array(JSONValue.object(header).serialized.utf8)
        // Pad the header with spaces so that the data starts on a 64-byte boundary (8 + header).
        while (8 + json.count) % 64 != 0 { json.append(0x20) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(8 + json.count + offset)
        withUnsafeBytes(of: UInt64(json.count).littleEndian) { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: json)
        for tensor in tensors { tensor.values.append(to: &bytes) }
        do {
            try FileContents.writeAtomically(bytes, to: path)
        } catch {
            throw WeightsError(path: path, problem: error.reason)
        }
    }
}

/// Values to write: Float32, IEEE half (bit patterns) or Int64.
public enum TensorValues: Sendable {
    case float32([Float])
    case float16Bits([UInt16])
    case int64([Int64])

    var dtype: DType {
        switch self {
        case .float32: .float32
        case .float16Bits: .float16
        case .int64: .int64
        }
    }

    var byteCount: Int {
        switch self {
        case .float32(let values): values.count * 4
        case .float16Bits(let values): values.count * 2
        case .int64(let values): values.count * 8
        }
    }

    func append(to bytes: inout [UInt8]) {
        switch self {
        case .float32(let values):
            for value in values { withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) } }
        case .float16Bits(let values):
            for value in values { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
        case .int64(let values):
            for value in values { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
        }
    }
}
