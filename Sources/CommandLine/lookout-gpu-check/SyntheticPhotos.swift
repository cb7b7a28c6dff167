import Dispatch
import Foundation
import LookoutImage

/// Large JPEG photos to index (scripts/bench/gpu_index.py): the example photos and scenes resized to
/// `width × height` (bilinear) with pseudo-random noise of ±10 levels added, so that each file is distinct (the index
/// reuses identical content) and decodes as a camera's photo of that size does, with fine detail everywhere.
struct SyntheticPhotos {
    enum Problem: Error, CustomStringConvertible {
        case noSources(String)
        case notWritten(String)
        var description: String {
            switch self {
            case .noSources(let folder): "no JPEG photos in \(folder) to start from (run from the repository's root)"
            case .notWritten(let problem): problem
            }
        }
    }

    let folder: String
    let width: Int
    let height: Int

    /// Writes `count` photos (`photo-00000.jpg` …) and says how many bytes they took.
    func write(_ count: Int) throws -> String {
        let sources = try ["examples/photos", "examples/scenes"].flatMap { directory in
            try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".jpg") }.sorted()
                .map { "\(directory)/\($0)" }
        }
        guard !sources.isEmpty else { throw Problem.noSources("examples/") }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let resized = try sources.map { try ImageFile.read($0).resizedBilinear(width: width, height: height) }
        let total = Total()
        DispatchQueue.concurrentPerform(iterations: count) { index in
            var image = resized[index % resized.count]
            var state = UInt64(index) &* 0x9E37_79B9_7F4A_7C15 | 1
            image.pixels.withUnsafeMutableBufferPointer { pixels in
                for p in pixels.indices {
                    state ^= state << 13
                    state ^= state >> 7
                    state ^= state << 17
                    pixels[p] = UInt8(clamping: Int(pixels[p]) + Int(state % 21) - 10)
                }
            }
            let name = "\(folder)/photo-\(String(index + 100_000).dropFirst()).jpg"
            do {
                let bytes = try ImageFile.encode(image, format: .jpeg(quality: 92), name: name)
                try Data(bytes).write(to: URL(fileURLWithPath: name))
                total.add(bytes.count)
            } catch {
                total.fail("\(error)")
            }
        }
        if let failure = total.failure { throw Problem.notWritten(failure) }
        return "\(count) photos of \(width)×\(height) in \(folder): \(total.bytes / count) bytes each on average"
    }

    final class Total: @unchecked Sendable {
        private let lock = NSLock()
        private(set) var bytes = 0
        private(set) var failure: String?
        func add(_ count: Int) { lock.withLock { bytes += count } }
        func fail(_ problem: String) { lock.withLock { failure = failure ?? problem } }
    }
}
