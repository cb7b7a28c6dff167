import LookoutSupport
import LookoutWeights

/// Queries given as precomputed text-tower embeddings (`--text-embeddings FILE`): what the detector's text
/// tower outputs for each query, for YOLO-World (CLIP) and YOLOE (MobileCLIP) alike; the detector applies its
/// own text head to them (YOLOE's `get_tpe`) as it does to a tower's output.
///
/// - A safetensors file whose tensors are named by their labels, one vector each (shape `[D]` or `[1, D]`),
///   in the file's order.
/// - A NumPy `.npy` array `N × D` (float32, float64 or float16, C order), whose labels come from the queries
///   given with it, in order.
public enum TextEmbeddingsFile {
    public struct Problem: Error, CustomStringConvertible {
        public let description: String
    }

    /// The labels and embeddings of `path`. `labels`: the queries to take (for `.npy`, required, one per row);
    /// nil takes every tensor of a safetensors file. `size`: the detector's embedding size.
    public static func load(
        _ path: String, labels: [String]?, size: Int
    ) throws -> [(label: String, embedding: [Float])] {
        let bytes = try FileContents.read(path)
        if bytes.starts(with: [0x93] + Array("NUMPY".utf8)) {
            guard let labels, !labels.isEmpty else {
                throw Problem(
                    description: "\(path): an .npy array has no labels: give them as queries (-q a,b,c), one per row")
            }
            let (rows, columns, values) = try npy(bytes, path: path)
            guard rows == labels.count else {
                throw Problem(description: "\(path) holds \(rows) embeddings but \(labels.count) queries were given")
            }
            guard columns == size else {
                throw Problem(description: "\(path) holds \(columns)-d embeddings; the detector takes \(size)-d")
            }
            return try labels.enumerated().map { index, label in
                try checked(label, Array(values[(index * columns)..<((index + 1) * columns)]), path: path)
            }
        }
        let file: WeightFile
        do {
            file = try WeightFile.open(path)
        } catch {
            throw Problem(description: "\(path): not a safetensors file of embeddings or an .npy array (\(error))")
        }
        var table: [String: [Float]] = [:]
        for name in file.names {
            guard let view = file.tensors[name] else { continue }
            guard view.count == size, view.shape.last == size else {
                throw Problem(
                    description:
                        "\(path): tensor \"\(name)\" has shape \(view.shape); each label needs one \(size)-d vector")
            }
            table[name] = view.floats()
        }
        guard !table.isEmpty else { throw Problem(description: "\(path) holds no embeddings") }
        let wanted = labels ?? file.names.filter { table[$0] != nil }
        return try wanted.map { label in
            guard let embedding = table[label] else {
                throw Problem(
                    description:
                        "\(path) has no embedding named \"\(label)\"; it has: \(file.names.prefix(20).joined(separator: ", "))"
                )
            }
            return try checked(label, embedding, path: path)
        }
    }

    static func checked(_ label: String, _ embedding: [Float], path: String) throws -> (String, [Float]) {
        guard embedding.allSatisfy(\.isFinite), embedding.contains(where: { $0 != 0 }) else {
            throw Problem(description: "\(path): the embedding of \"\(label)\" is zero or not finite")
        }
        return (label, embedding)
    }

    /// A 2-D `.npy` array (format versions 1–3, little-endian floats, C order): rows, columns, values.
    static func npy(_ bytes: [UInt8], path: String) throws -> (Int, Int, [Float]) {
        func fail(_ problem: String) -> Problem { Problem(description: "\(path): \(problem)") }
        guard bytes.count >= 10 else { throw fail("truncated .npy header") }
        let major = bytes[6]
        let lengthBytes = major == 1 ? 2 : 4
        guard major >= 1 && major <= 3, bytes.count >= 8 + lengthBytes else {
            throw fail("unknown .npy version \(major)")
        }
        var headerLength = 0
        for k in 0..<lengthBytes { headerLength |= Int(bytes[8 + k]) << (8 * k) }
        let start = 8 + lengthBytes
        guard headerLength <= 65_536, bytes.count >= start + headerLength else { throw fail("truncated .npy header") }
        let header = String(decoding: bytes[start..<(start + headerLength)], as: UTF8.self)
        func field(_ key: String) -> String? {
            guard let range = header.range(of: "'\(key)':") else { return nil }
            return String(header[range.upperBound...]).trimmingCharacters(in: " ")
        }
        guard let descr = field("descr"), let order = field("fortran_order"), let shapeText = field("shape") else {
            throw fail("an .npy header without descr, fortran_order and shape")
        }
        guard order.hasPrefix("False") else { throw fail("a Fortran-ordered .npy array; save it in C order") }
        let width: Int
        if descr.hasPrefix("'<f4'") {
            width = 4
        } else if descr.hasPrefix("'<f8'") {
            width = 8
        } else if descr.hasPrefix("'<f2'") {
            width = 2
        } else {
            throw fail(
                "an .npy array of \(descr.prefix(6)); embeddings must be little-endian float32, float64 or float16")
        }
        guard shapeText.hasPrefix("("), let close = shapeText.firstIndex(of: ")") else {
            throw fail("a bad .npy shape")
        }
        let dims = shapeText[shapeText.index(after: shapeText.startIndex)..<close].split(separator: ",").map {
            Int($0.trimmingCharacters(in: " "))
        }
        guard dims.count == 2, let rows = dims[0], let columns = dims[1], rows > 0, columns > 0,
            rows <= 100_000, columns <= 65_536
        else {
            throw fail(
                "an .npy array of shape (\(dims.map { $0.map(String.init) ?? "?" }.joined(separator: ","))); expected N × D"
            )
        }
        let dataStart = start + headerLength
        guard bytes.count - dataStart == rows * columns * width else {
            throw fail(
                "an .npy array of \(rows) × \(columns) needs \(rows * columns * width) data bytes, the file has \(bytes.count - dataStart)"
            )
        }
        var values = [Float](repeating: 0, count: rows * columns)
        for index in values.indices {
            let offset = dataStart + index * width
            var bits: UInt64 = 0
            for k in 0..<width { bits |= UInt64(bytes[offset + k]) << (8 * UInt64(k)) }
            switch width {
            case 4: values[index] = Float(bitPattern: UInt32(bits))
            case 8: values[index] = Float(Double(bitPattern: bits))
            default: values[index] = Float(Float16(bitPattern: UInt16(bits)))
            }
        }
        return (rows, columns, values)
    }
}
