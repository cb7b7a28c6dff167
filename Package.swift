// swift-tools-version: 6.1
import PackageDescription

// Targets in layer order: C libraries and small utilities first, then the modules that build on them, then
// the command line and the benchmarks, then the tests. A module depends only on modules above it.
let package = Package(
    name: "Lookout",
    products: [
        .executable(name: "lookout", targets: ["lookout"]),
        .executable(name: "lookout-gpu-check", targets: ["lookout-gpu-check"]),
        .library(name: "LookoutSupport", targets: ["LookoutSupport"]),
        .library(name: "LookoutJSON", targets: ["LookoutJSON"]),
        .library(name: "LookoutTensor", targets: ["LookoutTensor"]),
        .library(name: "LookoutCUDA", targets: ["LookoutCUDA"]),
        .library(name: "LookoutTokenizer", targets: ["LookoutTokenizer"]),
        .library(name: "LookoutWeights", targets: ["LookoutWeights"]),
        .library(name: "LookoutImage", targets: ["LookoutImage"]),
        .library(name: "LookoutVideo", targets: ["LookoutVideo"]),
        .library(name: "LookoutTextEncoder", targets: ["LookoutTextEncoder"]),
        .library(name: "LookoutDetector", targets: ["LookoutDetector"]),
        .library(name: "LookoutEngine", targets: ["LookoutEngine"]),
        .library(name: "LookoutEvaluation", targets: ["LookoutEvaluation"]),
        .library(name: "LookoutFrames", targets: ["LookoutFrames"]),
        .library(name: "LookoutIndex", targets: ["LookoutIndex"]),
        .library(name: "LookoutStore", targets: ["LookoutStore"]),
        .library(name: "LookoutIndexPostgres", targets: ["LookoutIndexPostgres"]),
        .library(name: "LookoutServer", targets: ["LookoutServer"]),
        .library(name: "LookoutFetch", targets: ["LookoutFetch"]),
        .library(name: "LookoutTracking", targets: ["LookoutTracking"]),
    ],
    // Network (on by default): `lookout serve`, PostgreSQL indexes and `lookout models fetch`, whose packages
    // (SwiftNIO, Hummingbird, postgres-nio, AsyncHTTPClient) take most of a fresh build. The README's first
    // command builds without it (`--disable-default-traits`), which leaves those commands saying how to get them.
    traits: [
        .trait(
            name: "Network",
            description:
                "lookout serve, PostgreSQL indexes and lookout models fetch (SwiftNIO, Hummingbird, postgres-nio, AsyncHTTPClient)"
        ),
        .trait(
            name: "Video",
            description:
                "video files, streams and cameras through Debian's FFmpeg libraries (libavformat, libavcodec, libswscale, libavdevice)"
        ),
        .default(enabledTraits: ["Network", "Video"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
    ],
    targets: [
        // Layer 0: C libraries (each imported by exactly one Swift module) and Lookout's own C code.
        .systemLibrary(
            name: "CJSONC", path: "Sources/Support/CJSONC", pkgConfig: "json-c", providers: [.apt(["libjson-c-dev"])]),
        .systemLibrary(
            name: "COpenBLAS", path: "Sources/Kernels/COpenBLAS", pkgConfig: "openblas",
            providers: [.apt(["libopenblas-dev"])]),
        .systemLibrary(
            name: "CSQLite", path: "Sources/Index/CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // Vector kernels in C with run-time CPU dispatch (AVX-512, AVX2/FMA/F16C or portable C). Optimised in
        // debug builds too: the convolutions' GEMM at -O0 keeps its accumulators in memory and runs about ten
        // times slower than OpenBLAS, which debug tests and `swift run` would otherwise pay on every layer.
        .target(
            name: "CLookoutKernels", path: "Sources/Kernels/CLookoutKernels",
            cSettings: [.unsafeFlags(["-O3"], .when(configuration: .debug))]),
        // JPEG (TurboJPEG) and PNG (libpng) decoding and encoding in C: libpng reports errors by longjmp.
        .target(
            name: "CLookoutCodecs", path: "Sources/Formats/CLookoutCodecs",
            linkerSettings: [.linkedLibrary("turbojpeg"), .linkedLibrary("png16")]),
        // Video decoding and H.264 encoding over Debian's FFmpeg libraries (cameras through libavdevice's V4L2).
        // Without the Video trait it compiles to functions that say how to get video, and links no FFmpeg.
        .target(
            name: "CLookoutVideo", path: "Sources/Formats/CLookoutVideo",
            cSettings: [.define("LOOKOUT_VIDEO", .when(traits: ["Video"]))],
            linkerSettings: ["avformat", "avcodec", "swscale", "avutil", "avdevice"].map {
                .linkedLibrary($0, .when(traits: ["Video"]))
            }),

        // Layer 1: utilities every layer may use (resource lookup, environment, stopwatch, trimming).
        // SHA-256 blocks with the CPU's SHA instructions (LookoutSupport's SHA256 falls back to Swift).
        .target(name: "CLookoutHash", path: "Sources/Support/CLookoutHash"),
        .target(name: "LookoutSupport", dependencies: ["CLookoutHash"], path: "Sources/Support/LookoutSupport"),
        // JSON through json-c (vocabulary files, JSON lines, manifests), and file reading.
        .target(name: "LookoutJSON", dependencies: ["CJSONC", "LookoutSupport"], path: "Sources/Support/LookoutJSON"),
        // Tensor storage, the OpenBLAS wrapper, the compute pool and row kernels.
        .target(
            name: "LookoutTensor", dependencies: ["COpenBLAS", "CLookoutKernels", "LookoutSupport"],
            path: "Sources/Kernels/LookoutTensor"),

        // The NVIDIA driver and NVRTC, opened at run time with dlopen (nothing of CUDA at build time): finding,
        // naming and checking GPUs, the first part of the CUDA backend (issue 51).
        .target(name: "CLookoutCUDA", path: "Sources/Kernels/CLookoutCUDA"),
        .target(
            name: "LookoutCUDA", dependencies: ["CLookoutCUDA", "LookoutSupport", "LookoutTensor"],
            path: "Sources/Kernels/LookoutCUDA"),

        // Layer 2: formats and inputs.
        // CLIP BPE tokenizer: text cleaning, pre-tokenisation, byte map, merges. No tensor code.
        .target(
            name: "LookoutTokenizer", dependencies: ["LookoutJSON", "LookoutSupport"],
            path: "Sources/Formats/LookoutTokenizer"),
        // Weight files: safetensors and PyTorch zip checkpoints (restricted unpickler), strict binding.
        .target(
            name: "LookoutWeights", dependencies: ["LookoutJSON", "LookoutSupport", "LookoutTensor"],
            path: "Sources/Formats/LookoutWeights"),
        // Images: decoding, OpenCV-exact resizing, letterboxing, annotation. No tensor code.
        .target(
            name: "LookoutImage", dependencies: ["CLookoutCodecs", "LookoutSupport"],
            path: "Sources/Formats/LookoutImage"),
        // Videos: frames decoded into Lookout's images (rotation applied), read ahead on a thread; H.264 MP4 out.
        .target(
            name: "LookoutVideo", dependencies: ["CLookoutVideo", "LookoutImage", "LookoutSupport"],
            path: "Sources/Formats/LookoutVideo"),

        // Layer 3: the models.
        // CLIP text transformer on OpenBLAS, and the text-embedding cache.
        .target(
            name: "LookoutTextEncoder",
            dependencies: ["LookoutTensor", "LookoutWeights", "LookoutTokenizer", "LookoutJSON"],
            path: "Sources/Models/LookoutTextEncoder"
        ),
        // YOLO-World v2 network: backbone, text-guided neck, contrastive head, NMS.
        .target(
            name: "LookoutDetector", dependencies: ["LookoutTensor", "LookoutWeights"],
            path: "Sources/Models/LookoutDetector"),

        // Following objects from frame to frame (ByteTrack as ultralytics computes it) and counting them
        // (supervision's line and zone counts).
        .target(name: "LookoutTracking", dependencies: ["LookoutSupport"], path: "Sources/Models/LookoutTracking"),

        // Layer 4: what programs use.
        // The pipeline (photo → letterbox → backbone → neck/head with the query embeddings → NMS), its
        // configuration and loading, the feature store, evaluation.
        .target(
            name: "LookoutEngine",
            dependencies: [
                "LookoutCUDA", "LookoutDetector", "LookoutImage", "LookoutJSON", "LookoutSupport", "LookoutTensor",
                "LookoutTextEncoder",
                "LookoutTokenizer", "LookoutWeights",
            ], path: "Sources/Engine/LookoutEngine"
        ),
        // The one loop over a video's frames (detect and track a video or stream, index a video, a video upload):
        // frames from a source, detected with a prepared query, optionally tracked, handed to a consumer.
        .target(
            name: "LookoutFrames",
            dependencies: ["LookoutEngine", "LookoutImage", "LookoutTracking", "LookoutVideo"],
            path: "Sources/Engine/LookoutFrames"),
        // COCO evaluation as pycocotools computes it (boxes and masks, COCO's files): `lookout eval`.
        .target(
            name: "LookoutEvaluation", dependencies: ["LookoutDetector", "LookoutJSON", "LookoutSupport"],
            path: "Sources/Engine/LookoutEvaluation"),
        // A photo folder's index in SQLite: candidate regions with their embeddings, searched by text.
        .target(
            name: "LookoutIndex",
            dependencies: [
                "CSQLite", "LookoutDetector", "LookoutEngine", "LookoutFrames", "LookoutImage", "LookoutJSON",
                "LookoutStore", "LookoutSupport", "LookoutTensor", "LookoutWeights", "LookoutVideo",
            ], path: "Sources/Index/LookoutIndex"),
        // The storage half of the index, apart from the models: the IndexStore protocol, the SQLite store and its
        // region lists, the stored model, regions and labels, and the registry that opens a store from where it
        // lives. It imports no engine, so a store (PostgreSQL) depends on it alone.
        .target(
            name: "LookoutStore",
            dependencies: [
                "CSQLite", "CLookoutKernels", "LookoutJSON", "LookoutSupport", "LookoutTensor", "LookoutWeights",
            ], path: "Sources/Index/LookoutStore"),

        // The index on PostgreSQL (postgres-nio): many workers sharing one job through leased claims, and
        // search through pgvector's HNSW indexes where the server has the extension. `IndexLocation` opens
        // either store from a `--db` value.
        .target(
            name: "LookoutIndexPostgres",
            dependencies: [
                "LookoutStore", "LookoutSupport",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ], path: "Sources/Index/LookoutIndexPostgres"),

        // `lookout models fetch`: official models downloaded over HTTPS (AsyncHTTPClient), resumed, checked.
        .target(
            name: "LookoutFetch",
            dependencies: [
                "LookoutJSON", "LookoutSupport", "LookoutWeights",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ], path: "Sources/Server/LookoutFetch"),

        // `lookout serve`: the HTTP API and the web page (Hummingbird), over the engine and the index.
        .target(
            name: "LookoutServer",
            dependencies: [
                "LookoutDetector", "LookoutEngine", "LookoutFrames", "LookoutImage", "LookoutIndex",
                "LookoutIndexPostgres", "LookoutJSON", "LookoutTextEncoder", "LookoutTracking", "LookoutVideo",
                "LookoutSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
            ], path: "Sources/Server/LookoutServer"),

        // Layer 5: the command line (a thin shell over the libraries) and the benchmarks.
        .executableTarget(
            name: "lookout",
            dependencies: [
                "LookoutSupport", "LookoutTokenizer", "LookoutJSON", "LookoutWeights", "LookoutTextEncoder",
                "LookoutEngine", "LookoutEvaluation", "LookoutFrames", "LookoutIndex", "LookoutTensor",
                "LookoutDetector", "LookoutCUDA",
                "LookoutImage",
                "LookoutVideo", "LookoutTracking",
                .target(name: "LookoutIndexPostgres", condition: .when(traits: ["Network"])),
                .target(name: "LookoutServer", condition: .when(traits: ["Network"])),
                .target(name: "LookoutFetch", condition: .when(traits: ["Network"])),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ], path: "Sources/CommandLine/lookout"
        ),
        // The GPU checks (the driver, the op-by-op suite, detection parity against the CPU; no FFmpeg, no network):
        // what scripts/device/bundle carries to the GPU machine, statically linked.
        .executableTarget(
            name: "lookout-gpu-check",
            dependencies: [
                "LookoutCUDA", "LookoutDetector", "LookoutEngine", "LookoutEvaluation", "LookoutImage",
                "LookoutSupport",
                "LookoutTensor", "LookoutTextEncoder", "LookoutWeights",
            ],
            path: "Sources/CommandLine/lookout-gpu-check"),
        .executableTarget(
            name: "lookout-benchmarks",
            dependencies: [
                "LookoutSupport", "LookoutTokenizer", "LookoutJSON", "LookoutWeights", "LookoutTextEncoder",
                "LookoutDetector", "LookoutEngine", "LookoutIndex", "LookoutIndexPostgres", "LookoutImage",
                "LookoutVideo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Benchmarks/LookoutBenchmarks"
        ),

        // Tests (Tests/README.md says what each proves), and what several of them share.
        .target(
            name: "LookoutTestSupport", dependencies: ["LookoutJSON", "LookoutSupport", "LookoutWeights"],
            path: "Tests/LookoutTestSupport"),
        .testTarget(name: "LookoutJSONTests", dependencies: ["LookoutSupport", "LookoutJSON"]),
        .testTarget(
            name: "LookoutTensorTests", dependencies: ["LookoutTestSupport", "LookoutSupport", "LookoutTensor"]),
        .testTarget(
            name: "LookoutTokenizerTests", dependencies: ["LookoutSupport", "LookoutTokenizer", "LookoutJSON"],
            exclude: ["Fixtures"]),
        .target(
            name: "LookoutFuzzing",
            dependencies: [
                "LookoutEngine", "LookoutIndex", "LookoutSupport", "LookoutTokenizer", "LookoutVideo", "LookoutWeights",
            ], path: "Sources/CommandLine/LookoutFuzzing"),
        .testTarget(name: "LookoutFuzzTests", dependencies: ["LookoutFuzzing", "LookoutSupport"]),
        .testTarget(name: "LookoutWeightsTests", dependencies: ["LookoutSupport", "LookoutWeights", "LookoutJSON"]),
        .testTarget(
            name: "LookoutTextEncoderTests",
            dependencies: [
                "LookoutSupport", "LookoutTextEncoder", "LookoutTokenizer", "LookoutWeights", "LookoutJSON",
                "LookoutImage",
            ]
        ),
        .testTarget(
            name: "LookoutDetectorTests",
            dependencies: [
                "LookoutTestSupport",
                "LookoutSupport", "LookoutDetector", "LookoutWeights", "LookoutImage", "LookoutEngine", "LookoutTensor",
                "LookoutEvaluation",
            ]),
        .testTarget(
            name: "LookoutDemoTests",
            dependencies: [
                "LookoutTestSupport",
                "LookoutSupport",
                "LookoutTensor", "LookoutDetector", "LookoutEngine", "LookoutImage", "LookoutJSON",
                "LookoutTextEncoder",
                "LookoutTokenizer",
                "LookoutWeights",
            ]),
        .testTarget(
            name: "LookoutIndexTests",
            dependencies: [
                "LookoutTestSupport", "LookoutSupport",
                "CSQLite", "LookoutDetector", "LookoutEngine", "LookoutImage", "LookoutIndex", "LookoutJSON",
                "LookoutTextEncoder", "LookoutTensor",
                "LookoutTokenizer", "LookoutWeights",
            ]),
        // Runs the built `lookout` executable (a dependency, so that it is built before these tests run).
        .testTarget(
            name: "LookoutCLITests",
            dependencies: [
                "LookoutTestSupport", "LookoutSupport", "lookout", "lookout-gpu-check", "LookoutJSON", "LookoutIndex",
                "LookoutWeights",
                "LookoutEvaluation",
                "LookoutImage", "LookoutServer", "LookoutVideo",
            ]),
        .testTarget(
            name: "LookoutTrackingTests",
            dependencies: ["LookoutTracking", "LookoutJSON", "LookoutSupport", "LookoutVideo", "LookoutImage"]),
        .testTarget(
            name: "LookoutFramesTests",
            dependencies: [
                "LookoutTestSupport", "LookoutSupport", "LookoutDetector", "LookoutEngine", "LookoutFrames",
                "LookoutImage",
                "LookoutTracking", "LookoutVideo",
            ]),
        .testTarget(
            name: "LookoutVideoTests",
            dependencies: ["LookoutTestSupport", "LookoutSupport", "LookoutImage", "LookoutVideo"]),
    ],
    swiftLanguageModes: [.v6]
)

// libFuzzer targets, only when asked for (they have no main of their own): scripts/fuzz.
if Context.environment["LOOKOUT_FUZZ"] != nil {
    package.targets += [
        .executableTarget(name: "lookout-fuzz", dependencies: ["LookoutFuzzing"], path: "Fuzz/Driver")
    ]
}
