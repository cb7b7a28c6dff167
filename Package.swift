// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "Lookout",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "lookout", targets: ["lookout"]),
        .library(name: "LookoutTokenizer", targets: ["LookoutTokenizer"]),
        .library(name: "LookoutTensor", targets: ["LookoutTensor"]),
        .library(name: "LookoutJSON", targets: ["LookoutJSON"]),
        .library(name: "LookoutWeights", targets: ["LookoutWeights"]),
        .library(name: "LookoutTextEncoder", targets: ["LookoutTextEncoder"]),
        .library(name: "LookoutDetector", targets: ["LookoutDetector"]),
        .library(name: "LookoutImage", targets: ["LookoutImage"]),
        .library(name: "LookoutEngine", targets: ["LookoutEngine"]),
        .library(name: "LookoutIndex", targets: ["LookoutIndex"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2")
    ],
    targets: [
        // C libraries, each imported by exactly one Swift module.
        .systemLibrary(
            name: "CJSONC",
            pkgConfig: "json-c",
            providers: [.apt(["libjson-c-dev"])]
        ),
        .systemLibrary(
            name: "COpenBLAS",
            pkgConfig: "openblas",
            providers: [.apt(["libopenblas-dev"])]
        ),

        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // A photo folder's index in SQLite: candidate regions with their embeddings, searched by text.
        .target(
            name: "LookoutIndex",
            dependencies: [
                "CSQLite", "LookoutDetector", "LookoutEngine", "LookoutImage", "LookoutJSON", "LookoutTensor",
                "LookoutWeights",
            ]),

        // JSON through json-c (vocabulary files, JSON lines on the command line).
        .target(name: "LookoutJSON", dependencies: ["CJSONC"]),
        // Lookout's own vector kernels in C (run-time CPU dispatch: AVX2/FMA/F16C or portable C).
        .target(name: "CLookoutKernels", cSettings: [.unsafeFlags(["-O3"])]),
        // Tensor storage, the OpenBLAS wrapper, the compute pool and row kernels.
        .target(name: "LookoutTensor", dependencies: ["COpenBLAS", "CLookoutKernels"]),
        // CLIP BPE tokenizer: text cleaning, pre-tokenisation, byte map, merges. No tensor code.
        .target(name: "LookoutTokenizer", dependencies: ["LookoutJSON"]),
        // Weight files: safetensors and PyTorch zip checkpoints (restricted unpickler), one interface.
        .target(name: "LookoutWeights", dependencies: ["LookoutJSON", "LookoutTensor"]),
        // JPEG (TurboJPEG) and PNG (libpng) decoding in C: libpng reports errors by longjmp.
        .target(
            name: "CLookoutCodecs",
            linkerSettings: [.linkedLibrary("turbojpeg"), .linkedLibrary("png16")]
        ),
        // Images: decoding, OpenCV-exact resizing, letterboxing. No tensor code.
        .target(name: "LookoutImage", dependencies: ["CLookoutCodecs"]),
        // YOLO-World v2 network: backbone, text-guided neck, contrastive head.
        .target(name: "LookoutDetector", dependencies: ["LookoutTensor", "LookoutWeights"]),
        // The pipeline: photo → letterbox → backbone → neck/head with the query embeddings → NMS.
        .target(
            name: "LookoutEngine",
            dependencies: [
                "LookoutDetector", "LookoutImage", "LookoutJSON", "LookoutTensor", "LookoutTextEncoder",
                "LookoutWeights",
            ]
        ),
        // CLIP text transformer on OpenBLAS, and the text-embedding cache.
        .target(
            name: "LookoutTextEncoder",
            dependencies: ["LookoutTensor", "LookoutWeights", "LookoutTokenizer", "LookoutJSON"]
        ),

        .executableTarget(
            name: "lookout",
            dependencies: [
                "LookoutTokenizer",
                "LookoutJSON",
                "LookoutWeights",
                "LookoutTextEncoder",
                "LookoutEngine",
                "LookoutIndex",
                "LookoutDetector",
                "LookoutImage",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        .executableTarget(
            name: "lookout-benchmarks",
            dependencies: [
                "LookoutTokenizer", "LookoutJSON", "LookoutWeights", "LookoutTextEncoder", "LookoutDetector",
                "LookoutEngine", "LookoutIndex",
            ],
            path: "Benchmarks/LookoutBenchmarks"
        ),

        .testTarget(name: "LookoutJSONTests", dependencies: ["LookoutJSON"]),
        .testTarget(name: "LookoutTensorTests", dependencies: ["LookoutTensor"]),
        .testTarget(name: "LookoutWeightsTests", dependencies: ["LookoutWeights", "LookoutJSON"]),
        .testTarget(
            name: "LookoutTextEncoderTests",
            dependencies: ["LookoutTextEncoder", "LookoutTokenizer", "LookoutWeights", "LookoutJSON"]
        ),
        .testTarget(
            name: "LookoutTokenizerTests",
            dependencies: ["LookoutTokenizer", "LookoutJSON"],
            exclude: ["Fixtures"]
        ),
        // Runs the built `lookout` executable (a dependency, so that it is built before these tests run).
        .testTarget(
            name: "LookoutCLITests", dependencies: ["lookout", "LookoutJSON", "LookoutIndex", "LookoutWeights"]),
        .testTarget(
            name: "LookoutIndexTests",
            dependencies: [
                "LookoutDetector", "LookoutEngine", "LookoutImage", "LookoutIndex", "LookoutJSON", "LookoutTextEncoder",
                "LookoutTokenizer", "LookoutWeights",
            ]),
        .testTarget(
            name: "LookoutDemoTests",
            dependencies: [
                "LookoutDetector", "LookoutEngine", "LookoutImage", "LookoutJSON", "LookoutTextEncoder",
                "LookoutTokenizer",
                "LookoutWeights",
            ]),
        .testTarget(
            name: "LookoutDetectorTests",
            dependencies: ["LookoutDetector", "LookoutWeights", "LookoutImage", "LookoutEngine"]),
    ],
    swiftLanguageModes: [.v6]
)

// libFuzzer targets, only when asked for (they have no main of their own): scripts/fuzz.
if Context.environment["LOOKOUT_FUZZ"] != nil {
    package.targets += [
        .executableTarget(name: "fuzz-safetensors", dependencies: ["LookoutWeights"], path: "Fuzz/SafeTensorsFuzz"),
        .executableTarget(name: "fuzz-pickle", dependencies: ["LookoutWeights"], path: "Fuzz/PickleFuzz"),
    ]
}
