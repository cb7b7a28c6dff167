import Foundation
import LookoutDetector
import LookoutImage
import LookoutJSON
import LookoutSupport
import LookoutTensor
import LookoutWeights

/// `--precision auto`: the fastest precision of a detector on this CPU among those that keep their accuracy
/// bounds (fp32 always; bf16 where the CPU has AVX-512 BF16 — within 0.5 point of fp32's mAP50-95 on the demo;
/// int8 where it has AVX2 and the file holds its calibration — within 1.5), measured once per CPU model,
/// detector, input size and thread count, and kept in the cache folder (`precision-auto.json`). A lower
/// precision is picked only when it is at least 5 % faster than every higher one: its accuracy is not given up
/// for noise. A damaged cache is ignored with a notice and measured again.
public enum AutomaticPrecision {
    /// What was picked, and why.
    public struct Choice: Sendable, Equatable {
        public let precision: Precision
        /// The milliseconds of one detection (the best of three, after a warm-up) in each candidate precision.
        public let milliseconds: [Precision: Double]
        /// Whether the choice came from the cache (measured on an earlier run).
        public let kept: Bool
        /// The CPU it was measured on.
        public let cpu: String

        /// One line for a person: what was picked over what.
        public var summary: String {
            let others = Precision.allCases.filter { $0 != precision && milliseconds[$0] != nil }
            let times = others.map { "\($0.rawValue) \(Self.format(milliseconds[$0]!))" }.joined(separator: ", ")
            return "--precision auto: \(precision.rawValue) (\(Self.format(milliseconds[precision] ?? 0)) a photo)"
                + (times.isEmpty ? ", the only precision this CPU and file allow" : " over \(times)")
                + "; \(kept ? "measured earlier" : "measured now") on \(cpu)"
        }

        static func format(_ value: Double) -> String { String(format: "%.1f ms", value) }
    }

    /// A lower precision must be this much faster to be picked.
    public static let margin = 0.05

    /// The precisions `weights` can run in on this CPU, highest first.
    public static func candidates(_ weights: WeightFile) -> [Precision] {
        var candidates: [Precision] = [.fp32]
        if Precision.bf16.isNative { candidates.append(.bf16) }
        if Precision.int8.isNative,
            weights.metadata[ActivationRanges.metadataKey].flatMap({ ActivationRanges(serialized: $0) }) != nil
        {
            candidates.append(.int8)
        }
        return candidates
    }

    /// The choice for `configuration`'s detector at `imageSize`: from the cache, or measured (and kept).
    /// `notice`: what a person should know (a damaged cache ignored).
    public static func choose(
        _ configuration: EngineConfiguration, imageSize: Int = 640, notice: (String) -> Void = { _ in }
    ) throws -> Choice {
        let detectorPath = try configuration.resolveModel().detector
        let weights = try WeightFile.open(detectorPath)
        let candidates = candidates(weights)
        let cpu = cpuModel()
        let threads = configuration.kernels.threads ?? ComputePool.shared.threadCount
        let key = [cpu, weights.fingerprint(), "\(imageSize)", "\(threads) threads"].joined(separator: " | ")
        let file = configuration.resolvedCacheDirectory.map { $0 + "/precision-auto.json" }
        var entries: [(String, JSONValue)] = []
        if let file, FileSystem.access(file, F_OK) == 0 {
            if let read = read(file) {
                entries = read
                if let choice = cached(entries, key: key, candidates: candidates, cpu: cpu) { return choice }
            } else {
                notice("\(file) is damaged: it is ignored, and the precision measured again")
            }
        }
        var milliseconds: [Precision: Double] = [:]
        for precision in candidates {
            milliseconds[precision] = try measure(
                weights, precision: precision, configuration: configuration, size: imageSize)
        }
        var best = Precision.fp32
        for precision in candidates.dropFirst() where milliseconds[precision]! < milliseconds[best]! * (1 - margin) {
            best = precision
        }
        let choice = Choice(precision: best, milliseconds: milliseconds, kept: false, cpu: cpu)
        if let file {
            entries.removeAll { $0.0 == key }
            entries.append((key, entry(choice)))
            try? FileContents.makeDirectories(String(file[..<file.lastIndex(of: "/")!]))
            try? FileContents.writeAtomically(Array(JSONValue.object(entries).serialized.utf8), to: file)
        }
        return choice
    }

    /// One detection's milliseconds in `precision`: the network bound in it, a mid-grey photo letterboxed at
    /// `size` with three queries, the best of three runs after one to warm up.
    static func measure(
        _ weights: WeightFile, precision: Precision, configuration: EngineConfiguration, size: Int
    ) throws -> Double {
        let network = try openDetector(weights, precision: precision, kernels: configuration.kernels)
        let engine = try Engine(network: network, embedder: nil, kernels: configuration.kernels)
        let photo = Image(width: size, height: size * 3 / 4, filledWith: 114)
        let labels = ["a", "b", "c"]
        var text = [Float](repeating: 0, count: labels.count * network.embeddingSize)
        for index in text.indices { text[index] = Float((index * 7919) % 200 - 100) / 1000 }
        var best = Double.infinity
        for round in 0..<4 {
            var clock = Stopwatch()
            let prepared = engine.prepare(image: photo, name: "auto", size: size)
            _ = engine.detect(prepared, labels: labels, text: text)
            let seconds = clock.lap()
            if round > 0 { best = min(best, seconds * 1000) }
        }
        return best
    }

    static func entry(_ choice: Choice) -> JSONValue {
        .object([
            ("precision", .string(choice.precision.rawValue)),
            (
                "milliseconds",
                .object(
                    Precision.allCases.compactMap { precision in
                        choice.milliseconds[precision].map {
                            (precision.rawValue, .double(($0 * 1000).rounded() / 1000))
                        }
                    })
            ),
        ])
    }

    /// The cache's entries, or nil when it cannot be read as one.
    static func read(_ file: String) -> [(String, JSONValue)]? {
        guard let bytes = try? FileContents.read(file), let text = String(validating: bytes, as: UTF8.self),
            let value = try? JSONValue(parsing: text), case .object(let entries) = value
        else { return nil }
        return entries
    }

    /// The kept choice for `key`, when it names a precision that is still a candidate.
    static func cached(_ entries: [(String, JSONValue)], key: String, candidates: [Precision], cpu: String) -> Choice? {
        guard let (_, value) = entries.last(where: { $0.0 == key }), case .object(let fields) = value,
            let (_, picked) = fields.first(where: { $0.0 == "precision" }), case .string(let name) = picked,
            let precision = Precision(rawValue: name), candidates.contains(precision)
        else { return nil }
        var milliseconds: [Precision: Double] = [:]
        if let (_, times) = fields.first(where: { $0.0 == "milliseconds" }), case .object(let rows) = times {
            for (name, time) in rows {
                if let precision = Precision(rawValue: name), case .double(let value) = time {
                    milliseconds[precision] = value
                }
            }
        }
        return Choice(precision: precision, milliseconds: milliseconds, kept: true, cpu: cpu)
    }

    /// The CPU's model name (`/proc/cpuinfo`), or its architecture.
    public static func cpuModel() -> String {
        if let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) {
            for line in text.split(separator: "\n") where line.hasPrefix("model name") {
                if let colon = line.firstIndex(of: ":") {
                    return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
            }
        }
        #if arch(x86_64)
            return "x86_64"
        #else
            return "this CPU"
        #endif
    }
}
