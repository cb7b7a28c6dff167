import Foundation
import Testing

/// What `lookout` prints does not depend on how many threads it computes on (`LOOKOUT_THREADS`, which defaults to
/// the machine's CPU count): the same photo and queries give the same bytes on 1, 2 and 3 threads, in every
/// precision the CPU runs, for YOLO-World and YOLOE, and for text and photo embeddings. Twelve queries, so that
/// the text side's products take the many-row paths as well as the few-row one.
@Suite struct ThreadCountTests {
    static let queries = [
        "green circle", "yellow square", "orange cross", "green star", "blue circle", "green hexagon",
        "black circle", "black hexagon", "red square", "blue triangle", "black star", "white star",
    ]
    static let photos = ["scene-0001.jpg", "scene-0003.jpg"].map { CLI.root + "/examples/scenes/" + $0 }

    /// What a command prints, run on 1, 2 and 3 threads, without the timings detect adds to its JSON. Every layer
    /// in the precision asked for (`LOOKOUT_LAYER_CHOICE=precision`): bf16 and int8 otherwise measure per layer
    /// whether fp32 is faster, per thread count, and may choose otherwise on another (``TunedConvolution``); what
    /// is held here is that each kernel's arithmetic does not depend on the threads.
    static func outputs(_ arguments: [String]) throws -> [String] {
        try (1...3).map { threads in
            let done = try CLI.run(
                arguments, environment: ["LOOKOUT_THREADS": String(threads), "LOOKOUT_LAYER_CHOICE": "precision"])
            #expect(done.status == 0, "\(threads) threads: \(done.stderr)")
            return done.stdout.replacing(/,"timings":\{[^}]*\}/, with: "")
        }
    }

    @Test(arguments: ["fp32", "bf16", "int8"])
    func detectionsOnAnyThreadCount(precision: String) throws {
        let printed = try Self.outputs(
            ["detect"] + Self.photos + [
                "-q", Self.queries.joined(separator: ","), "--conf", "0.01", "--json", "--precision", precision,
            ])
        #expect(printed[0].split(separator: "\"label\"").count > 8, "\(printed[0])")
        #expect(!printed[0].contains("timings"))
        #expect(printed[1] == printed[0], "2 threads against 1")
        #expect(printed[2] == printed[0], "3 threads against 1")
    }

    @Test func yoloeOnAnyThreadCount() throws {
        let printed = try Self.outputs(
            ["detect"] + Self.photos + [
                "--model", "demo-yoloe", "-q", Self.queries.joined(separator: ","), "--conf", "0.01", "--json",
            ])
        #expect(printed[0].split(separator: "\"label\"").count > 8, "\(printed[0])")
        #expect(printed[1] == printed[0] && printed[2] == printed[0])
    }

    @Test func embeddingsOnAnyThreadCount() throws {
        for (arguments, lines) in [
            (Self.queries, Self.queries.count), (["--text-model", "multilingual"] + Self.queries, Self.queries.count),
            (["--image"] + Self.photos, Self.photos.count),
            (["--image", "--image-model", "multilingual"] + Self.photos, Self.photos.count),
        ] {
            let printed = try Self.outputs(["embed"] + arguments)
            #expect(printed[0].split(separator: "\n").count == lines, "\(arguments.prefix(2))")
            #expect(printed[1] == printed[0] && printed[2] == printed[0], "\(arguments.prefix(2))")
        }
    }
}
