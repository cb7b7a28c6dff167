import Foundation
import LookoutJSON
import LookoutSupport
import LookoutTestSupport
import Testing

/// Search through the region lists against the exact scan (`--scan`), on a library of the demo's scenes and
/// their variants (flipped, cropped, hue-shifted copies made by ffmpeg: 275 distinct photos, lists built from
/// 100), for scene captions and colour–shape queries, in every evidence mode: objects, scenes and both. The
/// lists must find what the scan finds (issue 49: scene matches lost to the regions when both shared one budget).
@Suite(.serialized) struct SearchListsTests {
    static let captions = [
        "textured background", "plain background", "cluttered background", "three shapes", "two shapes",
        "red shape", "yellow circle", "red ring", "green star", "blue square", "brown square", "hexagon",
    ]

    @Test func listsFindWhatTheScanFindsInEveryMode() throws {
        try #require(TestVideos.haveFFmpeg, "ffmpeg is missing: scripts/test installs it")
        let folder = try CLI.scratch("search-lists")
        defer { CLI.remove(folder) }
        let photos = folder + "/photos"
        try FileManager.default.createDirectory(atPath: photos, withIntermediateDirectories: true)
        let variants = [
            "null", "hflip", "vflip", "hflip,vflip", "hue=h=40", "hue=h=-40", "crop=iw*0.8:ih*0.8:0:0",
            "crop=iw*0.8:ih*0.8:iw*0.2:ih*0.2", "scale=iw*0.7:-2", "eq=brightness=0.08", "transpose=1",
        ]
        let scenes = try FileManager.default.contentsOfDirectory(atPath: CLI.root + "/examples/scenes")
            .filter { $0.hasSuffix(".jpg") }.sorted()
        for scene in scenes {
            let stem = String(scene.dropLast(4))
            let split = "[0]split=\(variants.count)" + (0..<variants.count).map { "[s\($0)]" }.joined()
            let chains = variants.enumerated().map { "[s\($0.offset)]\($0.element)[o\($0.offset)]" }
            let outputs = (0..<variants.count).map {
                "-map '[o\($0)]' -q:v 3 \(TestVideos.quoted(photos + "/\(stem)-v\($0).jpg"))"
            }
            let status = TestVideos.shell(
                "ffmpeg -nostdin -y -i \(TestVideos.quoted(CLI.root + "/examples/scenes/" + scene)) -filter_complex "
                    + TestVideos.quoted(([split] + chains).joined(separator: ";")) + " "
                    + outputs.joined(separator: " "))
            try #require(status == 0, "ffmpeg failed on \(scene)")
        }
        let db = folder + "/index.sqlite"
        let index = try CLI.run(["index", photos, "--db", db, "--plain", "--lists-from", "100"], timeout: 900)
        try #require(index.status == 0, "\(index.stderr)")
        #expect(index.stderr.contains("built the region lists"), "no lists built: \(index.stderr)")

        func top(_ query: String, _ options: [String]) throws -> [String: Double] {
            let result = try CLI.run(["search", query, "--db", db, "--json", "--top", "10"] + options)
            try #require(result.status == 0, "\(query) \(options): \(result.stderr)")
            var found: [String: Double] = [:]
            for line in try Reference.lines(result.stdout) {
                found[line["image"]!.string!] = line["score"]!.number!
            }
            return found
        }
        for mode in [[], ["--objects"], ["--scenes"]] {
            var same = 0, total = 0
            for caption in Self.captions {
                let listed = try top(caption, mode), scanned = try top(caption, mode + ["--scan"])
                let shared = Set(listed.keys).intersection(scanned.keys)
                same += shared.count
                total += scanned.count
                // A photo both return carries the scan's very score.
                for path in shared { #expect(listed[path] == scanned[path], "\(caption) \(mode): \(path)") }
                // Scenes: every one of the scan's. Objects (and so both): the lists probe the regions' most
                // promising lists only, and may miss one of ten (measured: one query of twelve, 9 of 10).
                #expect(
                    shared.count >= scanned.count - (mode == ["--scenes"] ? 0 : 1),
                    "\(caption) \(mode): the lists found \(shared.count) of the scan's \(scanned.count)")
            }
            print("region lists against the scan, \(mode.first ?? "both"): \(same) of \(total) of the top 10s")
            #expect(Double(same) >= 0.98 * Double(total), "\(mode): \(same) of \(total)")
        }
    }
}
