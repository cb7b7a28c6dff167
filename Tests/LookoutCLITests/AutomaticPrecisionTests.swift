import Foundation
import LookoutJSON
import LookoutTestSupport
import Testing

/// `--precision auto` (issue 54): it says what it picked, measured now or kept from an earlier run, and detects
/// exactly as that precision given by name does; a damaged cache is ignored with a notice and measured again; a
/// word that is no precision is refused.
@Suite(.serialized) struct AutomaticPrecisionTests {
    static let photo = CLI.root + "/examples/scenes/scene-0001.jpg"
    static let queries = ["-q", "green star, red ring, blue square"]

    /// The precision a `--precision auto` line names, and whether it was measured now.
    static func pick(_ stderr: String) -> (precision: String, now: Bool)? {
        guard let line = stderr.split(separator: "\n").first(where: { $0.contains("--precision auto: ") }) else {
            return nil
        }
        let after = line.components(separatedBy: "--precision auto: ")[1]
        return (String(after.prefix { $0 != " " }), line.contains("measured now"))
    }

    static func detections(_ stdout: String) throws -> String {
        try Reference.lines(stdout).map { $0["detections"]!.value.serialized }.joined(separator: "\n")
    }

    @Test func itSaysWhatItPickedAndDetectsAsThatPrecision() throws {
        let cache = try CLI.scratch("auto-precision")
        defer { CLI.remove(cache) }
        let environment = ["LOOKOUT_CACHE_DIR": cache]
        let first = try CLI.run(
            ["detect", Self.photo] + Self.queries + ["--precision", "auto", "--json"], environment: environment)
        #expect(first.status == 0, "\(first.stderr)")
        let picked = try #require(Self.pick(first.stderr), "no pick said: \(first.stderr)")
        #expect(picked.now && ["fp32", "bf16", "int8"].contains(picked.precision), "\(first.stderr)")
        #expect(first.stderr.contains("fp32 "), "fp32 is always measured: \(first.stderr)")

        let named = try CLI.run(
            ["detect", Self.photo] + Self.queries + ["--precision", picked.precision, "--json"],
            environment: environment)
        #expect(try Self.detections(first.stdout) == Self.detections(named.stdout))
        #expect(!(try Self.detections(first.stdout)).isEmpty)

        let second = try CLI.run(
            ["detect", Self.photo] + Self.queries + ["--precision", "auto", "--json"], environment: environment)
        let kept = try #require(Self.pick(second.stderr))
        #expect(kept.precision == picked.precision && !kept.now, "kept from the first run: \(second.stderr)")
        let file = cache + "/precision-auto.json"
        let entries = try JSONValue(parsing: String(contentsOfFile: file, encoding: .utf8))
        guard case .object(let rows) = entries else { Issue.record("\(file) holds no object"); return }
        #expect(rows.count == 1 && rows[0].0.contains("| 640 |"))
    }

    @Test func aDamagedCacheIsMeasuredAgain() throws {
        let cache = try CLI.scratch("auto-precision-damaged")
        defer { CLI.remove(cache) }
        let file = cache + "/precision-auto.json"
        for damage in ["{\"unfinished", "[1, 2]", "\u{FF}\u{FE}garbage"] {
            try damage.write(toFile: file, atomically: true, encoding: .utf8)
            let result = try CLI.run(
                ["detect", Self.photo] + Self.queries + ["--precision", "auto", "--json"],
                environment: ["LOOKOUT_CACHE_DIR": cache])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stderr.contains("is damaged: it is ignored, and the precision measured again"), "\(damage)")
            #expect(Self.pick(result.stderr)?.now == true, "\(result.stderr)")
            #expect((try? JSONValue(parsing: String(contentsOfFile: file, encoding: .utf8))) != nil, "rewritten")
        }
    }

    @Test func otherWordsAreRefused() throws {
        let result = try CLI.run(["detect", Self.photo] + Self.queries + ["--precision", "fastest"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("choose fp32, bf16, int8, fp16 (on a GPU) or auto"), "\(result.stderr)")
    }
}
