import LookoutJSON
import LookoutSupport

/// The range of values calibration saw at each convolution's input, by the convolution's name in the weight
/// file (`model.2.cv1`): what int8 quantises each input to. Stored in a detector file's metadata under
/// ``metadataKey`` as a JSON object of `[min, max]` pairs.
public struct ActivationRanges: Sendable, Equatable {
    public var ranges: [String: ClosedRange<Float>]
    /// How many images calibration ran.
    public var images: Int

    public static let metadataKey = "lookout.int8_input_ranges"

    public init(ranges: [String: ClosedRange<Float>] = [:], images: Int = 0) {
        self.ranges = ranges
        self.images = images
    }

    /// The JSON stored in the metadata: `{"images": N, "ranges": {"name": [min, max], ...}}`.
    public var serialized: String {
        let pairs = ranges.sorted { $0.key < $1.key }.map {
            ($0.key, JSONValue.array([.double(Double($0.value.lowerBound)), .double(Double($0.value.upperBound))]))
        }
        return JSONValue.object([("images", .double(Double(images))), ("ranges", .object(pairs))]).serialized
    }

    /// Reads ``serialized``; nil when the text is not that (a damaged or foreign entry).
    public init?(serialized text: String) {
        func number(_ value: JSONValue) -> Double? {
            switch value {
            case .int(let v): return Double(v)
            case .double(let v): return v.isFinite ? v : nil
            default: return nil
            }
        }
        guard case .object(let members)? = try? JSONValue(parsing: text),
            case .object(let table)? = members.first(where: { $0.0 == "ranges" })?.1
        else { return nil }
        var ranges: [String: ClosedRange<Float>] = [:]
        for (name, pair) in table {
            guard case .array(let values) = pair, values.count == 2, let low = number(values[0]).map(Float.init),
                let high = number(values[1]).map(Float.init), low.isFinite, high.isFinite, low <= high
            else { return nil }
            ranges[name] = low...high
        }
        let images = members.first(where: { $0.0 == "images" }).flatMap { number($0.1) } ?? 0
        guard images >= 0 && images <= 1e12 else { return nil }
        self.init(ranges: ranges, images: Int(images))
    }

    /// A short digest of the ranges (the first 8 hex digits of the SHA-256 of ``serialized``): which calibration
    /// int8 results came from, for caches and indexes.
    public var digest: String {
        var hash = SHA256()
        hash.update(Array(serialized.utf8))
        return String(hash.finalize().prefix(8))
    }
}
