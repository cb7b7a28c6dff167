// Timing runs for BENCHMARKS.md (never for tests): `swift run -c release lookout-benchmarks SUBCOMMAND …`.
// Each prints medians and p95 over repeated runs.
import ArgumentParser
import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutIndex
import LookoutJSON
import LookoutSupport
import LookoutTensor
import LookoutTextEncoder
import LookoutTokenizer
import LookoutWeights
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

@main
struct Benchmarks: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lookout-benchmarks",
        abstract: "Timing runs recorded in BENCHMARKS.md.",
        subcommands: [
            Tokenizer.self, Weights.self, Detect.self, Text.self, MeanAveragePrecision.self, Search.self,
            SearchScale.self, ImageTowerBenchmark.self, PostgresSearch.self, Layers.self, Video.self,
            PrecisionDeltas.self,
            CPUReport.self,
        ]
    )
}

func now() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) * 1e-9
}

/// `count` random 512-d unit vectors, one after another: text embeddings for timing runs.
func randomUnitQueries(_ count: Int) -> [Float] {
    var generator = SystemRandomNumberGenerator()
    return randomUnitQueries(count, using: &generator)
}

/// The same from `generator` (a seeded one repeats them).
func randomUnitQueries(_ count: Int, using generator: inout some RandomNumberGenerator) -> [Float] {
    var text = (0..<(count * 512)).map { _ in Float.random(in: -1...1, using: &generator) }
    for k in 0..<count {
        let norm = (0..<512).reduce(Float(0)) { $0 + text[k * 512 + $1] * text[k * 512 + $1] }.squareRoot()
        for d in 0..<512 { text[k * 512 + d] /= norm }
    }
    return text
}

func measure(_ name: String, repetitions: Int, _ body: () throws -> Void) rethrows {
    var samples: [Double] = []
    for _ in 0..<repetitions {
        let start = now()
        try body()
        samples.append(now() - start)
    }
    samples.sort()
    let median = samples[samples.count / 2] * 1000
    let p95 = samples[min(samples.count - 1, Int(Double(samples.count) * 0.95))] * 1000
    print("\(name): median \(format3(median)) ms, p95 \(format3(p95)) ms (\(repetitions) runs)")
}

func format3(_ value: Double) -> String {
    let scaled = (value * 1000).rounded() / 1000
    return "\(scaled)"
}

/// The model directory's engine with an in-memory text-embedding cache only (no disk cache, so that runs
/// do not depend on earlier ones).
func loadEngine(model: String, vocab: String) throws -> Engine {
    let manifest = try ModelManifest(directory: model)
    let network = try YOLOWorldNetwork(weights: WeightFile.open(manifest.detector.path))
    let embedder = try TextEmbedder(
        tokenizer: CLIPTokenizer(vocabularyFile: vocab),
        encoder: CLIPTextEncoder(contentsOf: manifest.textEncoder.path),
        cache: TextEmbeddingCache(directory: nil))
    return try Engine(network: network, embedder: embedder)
}

/// Peak resident memory of this process, in MB.
/// User and system CPU time of the process so far.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6
}

func peakMegabytes() -> Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return usage.ru_maxrss / 1024
}

/// Vocabulary loading and tokenizing (the reference corpus's LVIS names).
struct Tokenizer: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Vocabulary loading and tokenizing (the corpus's LVIS names).")
    @Option(help: "The repository root (for Vocab/ and the tokenizer corpus).") var root = "."

    func run() throws {
        let vocabularyPath = root + "/Vocab/clip_vocab.json"
        let corpus = try FileContents.read(root + "/Tests/LookoutTokenizerTests/Fixtures/clip_tokenizer_golden.jsonl")
        var lvis: [String] = []
        for line in corpus.split(separator: UInt8(ascii: "\n")) {
            let record = try JSONDocument(bytes: Array(line)).root
            if record["category"]?.string == "lvis" { lvis.append(record["text"]!.string!) }
        }

        try measure("load vocabulary (read + parse + validate)", repetitions: 20) {
            _ = try CLIPVocabulary(contentsOf: vocabularyPath)
        }
        let cacheDirectory = "/tmp/lookout-benchmark-cache"
        _ = try CLIPVocabulary.load(contentsOf: vocabularyPath, cacheDirectory: cacheDirectory)
        try measure("load vocabulary through the binary cache (read JSON bytes + digest + cache)", repetitions: 20) {
            _ = try CLIPVocabulary.load(contentsOf: vocabularyPath, cacheDirectory: cacheDirectory)
        }
        let tokenizer = try CLIPTokenizer(vocabularyFile: vocabularyPath)
        measure("tokenize \"a photo of a red car\"", repetitions: 200) {
            _ = tokenizer.tokenize("a photo of a red car")
        }
        measure("tokenize LVIS class names (\(lvis.count))", repetitions: 30) {
            for name in lvis { _ = tokenizer.tokenize(name) }
        }
        let vocabularyBytes = try FileContents.read(vocabularyPath)
        try measure("  of which: json-c parse", repetitions: 20) {
            _ = try JSONDocument(bytes: vocabularyBytes)
        }
    }
}

/// Opening weight files, and reading every tensor as F32.
struct Weights: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Opening weight files, and reading every tensor as F32.")
    @Argument(help: "Weight files.") var files: [String]

    func run() throws {
        for path in files {
            try measure("open \(path)", repetitions: 10) { _ = try WeightFile.open(path) }
            try measure("open + every tensor as F32 \(path)", repetitions: 5) {
                let weights = try WeightFile.open(path)
                for name in weights.names { _ = weights.tensors[name]!.floats() }
            }
        }
    }
}

/// The stages of a detection with random unit queries (80 by default), re-query, re-threshold, peak memory.
struct Detect: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stages of a detection with random queries, re-query, re-threshold, peak memory.")
    @Option(help: "Detector weights.") var detector: String
    @Option(help: "A photo.") var image: String
    @Option(help: "Network input size.") var imgsz = 640
    @Option(help: "How many random unit queries.") var queries = 80
    @Option(help: "Timed runs of the full detection.") var repetitions = 11
    @Flag(help: "Only the full detection (no re-query, neck or re-threshold).") var fullOnly = false
    @Option(
        help: "The convolutions' arithmetic: fp32, bf16 or int8 (int8: a detector `lookout models calibrate` made).")
    var precision = "fp32"

    func run() throws {
        guard let arithmetic = Precision(rawValue: precision) else {
            throw ValidationError("--precision \(precision): choose fp32, bf16 or int8.")
        }
        if !arithmetic.isNative { print("this CPU does not run \(precision) natively: fp32") }
        let network = try YOLOWorldNetwork(
            weights: WeightFile.open(detector), precision: arithmetic.isNative ? arithmetic : .fp32)
        let engine = try Engine(network: network, embedder: nil)
        let size = imgsz
        let text = randomUnitQueries(queries)
        let labels = (0..<queries).map { "q\($0)" }
        var prepared = try engine.prepare(path: image, size: size)
        let (cpuBefore, wallBefore) = (cpuSeconds(), now())
        let parallelBefore = ComputePool.parallelNanoseconds.load(ordering: .relaxed)
        try measure("full detect (decode → NMS), \(queries) queries, \(size)", repetitions: repetitions) {
            prepared = try engine.prepare(path: image, size: size)
            _ = engine.detect(prepared, labels: labels, text: text)
        }
        let wall = now() - wallBefore
        let busy = (cpuSeconds() - cpuBefore) / wall
        let parallel = Double(ComputePool.parallelNanoseconds.load(ordering: .relaxed) - parallelBefore) * 1e-9
        print(
            "time in loops across threads: \(Int(parallel / wall * 100))% of the detections' wall time (\(format3((wall - parallel) / Double(repetitions) * 1000)) ms per detection on the calling thread alone)"
        )
        print(
            "threads busy during the detections: \(format3(busy)) of \(engine.pool.threadCount) (idle \(Int((1 - busy / Double(engine.pool.threadCount)) * 100))%)"
        )
        let result = engine.detect(prepared, labels: labels, text: text)
        print("network input \(prepared.letterbox.height)x\(prepared.letterbox.width)")
        print(
            "stages of the last run (ms): "
                + result.timings.milliseconds.map { "\($0.0) \(format3($0.1))" }.joined(separator: ", "))
        if fullOnly {
            print("peak resident memory: \(peakMegabytes()) MB")
            return
        }
        measure("re-query (neck + head + NMS), \(queries) queries", repetitions: 11) {
            _ = engine.detect(prepared, labels: labels, text: text)
        }
        measure("  of which the neck (layers 10–21, the text-free part of 12 kept)", repetitions: 11) {
            _ = network.neck(prepared.features, text: text, classes: queries)
        }
        var options = SuppressionOptions()
        options.confidence = 0.1
        let output = network.head(prepared.features, text: text, classes: queries)
        measure("re-threshold (NMS + scaling only)", repetitions: 20) {
            _ = NonMaxSuppression.run(output, classes: queries, options: options)
        }
        print("peak resident memory: \(peakMegabytes()) MB")
    }
}

/// The CLIP text encoder: one query, the COCO names, cached look-ups.
struct Text: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The CLIP text encoder: one query, the COCO names, cached look-ups.")
    @Option(help: "Text encoder weights.") var model: String
    @Option(help: "The repository root (vocabulary and corpus).") var root = "."

    func run() throws {
        let start = now()
        let encoder = try CLIPTextEncoder(contentsOf: model)
        print("load text encoder \(model): \(format3((now() - start) * 1000)) ms")
        let tokenizer = try CLIPTokenizer(vocabularyFile: root + "/Vocab/clip_vocab.json")
        let coco = try cocoNames(root: root)
        let one = [tokenizer.tokenize("red car")]
        measure("encode \"red car\" (not cached)", repetitions: 30) { _ = encoder.encode(one) }
        let rows = coco.map { tokenizer.tokenize($0) }
        measure("encode the \(coco.count) COCO class names (not cached)", repetitions: 10) { _ = encoder.encode(rows) }
        let embedder = try TextEmbedder(
            tokenizer: tokenizer, encoder: encoder, cache: TextEmbeddingCache(directory: nil))
        _ = embedder.embed(coco)
        measure("embed the \(coco.count) COCO class names, cached (tokenize + look-up)", repetitions: 30) {
            _ = embedder.embed(coco)
        }
        print("peak resident memory: \(peakMegabytes()) MB")
    }
}

/// The 80 COCO class names of the tokenizer's golden corpus.
func cocoNames(root: String) throws -> [String] {
    let corpus = try FileContents.read(root + "/Tests/LookoutTokenizerTests/Fixtures/clip_tokenizer_golden.jsonl")
    var coco: [String] = []
    for line in corpus.split(separator: UInt8(ascii: "\n")) {
        let record = try JSONDocument(bytes: Array(line)).root
        if record["category"]?.string == "coco" { coco.append(record["text"]!.string!) }
    }
    return coco
}

/// A whole-photo tower (OpenAI CLIP's, an open_clip or SigLIP model's folder): preprocessing and the tower on one
/// photo and on eight as one batch; its own text tower (open_clip, SigLIP) on one query and on the COCO names.
struct ImageTowerBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "image", abstract: "A whole-photo tower: one photo, eight as one batch, and its own text tower.")
    @Option(help: "OpenAI CLIP weights (ViT-B-32.pt), or an open_clip or SigLIP model's folder.") var model: String
    @Option(help: "A photo.") var photo = "examples/photos/astronaut.jpg"
    @Option(help: "The linear layers' arithmetic: fp32 or bf16.") var precision = "fp32"
    @Option(help: "The repository root (vocabulary and corpus).") var root = "."

    func run() throws {
        guard let arithmetic = Precision(rawValue: precision), arithmetic != .int8 else {
            throw ValidationError("--precision \(precision): choose fp32 or bf16.")
        }
        let start = now()
        let tower = try LookoutEngine.ImageTower(contentsOf: model, precision: arithmetic)
        if arithmetic == .bf16 && !arithmetic.isNative { print("this CPU has no AVX-512 BF16: fp32") }
        print("load image tower \(model) (\(tower.family.rawValue)): \(format3((now() - start) * 1000)) ms")
        let side = tower.transform.size
        let bytes = try FileContents.read(photo)
        var input: [Float] = []
        measure("decode + preprocess \(photo) to \(side)×\(side)", repetitions: 20) {
            input = try! tower.input(bytes, name: photo)
        }
        _ = tower.encode([input])
        measure("encode_image, one photo", repetitions: 20) { _ = tower.encode([input]) }
        let batch = [[Float]](repeating: input, count: 8)
        measure("encode_image, 8 photos as one batch (divide by 8 per photo)", repetitions: 5) {
            _ = tower.encode(batch)
        }
        if tower.ownTextSize != nil {
            let tokenizer = try CLIPTokenizer(vocabularyFile: root + "/Vocab/clip_vocab.json")
            guard let text = try LookoutEngine.ImageTower.sceneText(model, tokenizer: tokenizer, precision: arithmetic)
            else { throw ValidationError("\(model) has no text tower of its own") }
            let coco = try cocoNames(root: root)
            measure("its text tower, \"red car\"", repetitions: 30) { _ = text.embed(["red car"]) }
            measure("its text tower, the \(coco.count) COCO class names", repetitions: 5) { _ = text.embed(coco) }
        }
        print("peak resident memory: \(peakMegabytes()) MB")
    }
}

/// mAP50 of a model on a generated scene set, every label queried at once (conf 0.001, IoU 0.7, max 300),
/// seen and held-out labels apart.
struct MeanAveragePrecision: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "map", abstract: "mAP50 of a model on a generated scene set, seen and held-out labels apart.")
    @Option(help: "Model directory.") var model: String
    @Option(help: "The scene set's truth.json.") var truth: String
    @Option(help: "Network input size.") var imgsz = 640
    @Option(help: "CLIP vocabulary.") var vocab = "Vocab/clip_vocab.json"
    @Flag(help: "Append the official demos' \" \" query and drop its boxes.") var pad = false
    @Flag(help: "One query per run (each label alone) instead of all labels at once.") var single = false

    func run() throws {
        let scenes = try SceneTruth(contentsOf: truth)
        let size = imgsz
        let engine = try loadEngine(model: model, vocab: vocab)
        let labels = Array(Set(scenes.scenes.flatMap { $0.objects.map(\.label) }).union(scenes.heldOut)).sorted()
        // "pad": append the " " query of the official demos and drop its boxes. "single": one query per run, each
        // label alone (as a user asking for one thing), instead of all labels at once.
        var options = SuppressionOptions()
        options.confidence = 0.001
        var evaluation = DetectionEvaluation(iouThreshold: 0.5)
        let start = now()
        for (index, scene) in scenes.scenes.enumerated() {
            let prepared = try engine.prepare(path: scene.file, size: size)
            let sets = single ? labels.map { [$0] } : [labels]
            var predictions: [DetectionEvaluation.Prediction] = []
            for set in sets {
                var result = engine.detect(
                    prepared, queries: pad ? PaddingQuery.appended(to: set) : set, options: options)
                if pad { result = result.droppingPadding() }
                predictions += result.detections.map { .init(label: $0.label, score: $0.score, box: $0.box) }
            }
            evaluation.add(predictions: predictions, truth: scene.objects)
            if (index + 1) % 100 == 0 { print("  \(index + 1) images, \(format3(now() - start)) s") }
        }
        let held = Set(scenes.heldOut)
        let seen = labels.filter { !held.contains($0) }
        let unseen = labels.filter { held.contains($0) }
        let seenMAP = evaluation.meanAveragePrecision(over: seen)
        let unseenMAP = evaluation.meanAveragePrecision(over: unseen)
        let seenPR = evaluation.precisionRecall(above: 0.25, over: seen)
        let unseenPR = evaluation.precisionRecall(above: 0.25, over: unseen)
        print(
            "\(scenes.scenes.count) images, \(single ? "each of \(labels.count) queries alone" : "\(labels.count) queries at once")\(pad ? " + \" \" padding" : ""), imgsz \(size), \(format3(now() - start)) s"
        )
        print(
            "seen combinations:     mAP50 \(format3(seenMAP.value)) over \(seenMAP.labels) labels; at conf 0.25 precision \(format3(seenPR.precision)), recall \(format3(seenPR.recall))"
        )
        print(
            "held-out combinations: mAP50 \(format3(unseenMAP.value)) over \(unseenMAP.labels) labels; at conf 0.25 precision \(format3(unseenPR.precision)), recall \(format3(unseenPR.recall))"
        )
        for label in unseen { print("  \(label): AP50 \(format3(evaluation.averagePrecision(label) ?? 0))") }
    }
}

/// An indexed generated collection: warm search time, precision@5 of the fast ranking, and for every 4th
/// label the exact ranking (detector re-run on the 15 best candidates) and how far the two agree.
struct Search: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Warm search time and precision@5 of an indexed generated collection, fast and exact.")
    @Option(help: "Model directory.") var model: String
    @Option(help: "Index database.") var db: String
    @Option(help: "The scene set's truth.json.") var truth: String
    @Option(help: "CLIP vocabulary.") var vocab = "Vocab/clip_vocab.json"

    func run() throws {
        let index = try PhotoIndex(path: db, readOnly: true)
        let scenes = try SceneTruth(contentsOf: truth)
        let engine = try loadEngine(model: model, vocab: vocab)
        let statistics = try index.statistics()
        print(
            "\(statistics.files) photos, \(statistics.regionBytes / max(1, statistics.images)) bytes of regions per photo, database \(statistics.databaseBytes / 1024) KiB (\(statistics.databaseBytes / max(1, statistics.files)) bytes per photo)"
        )
        var holding: [String: Set<String>] = [:]
        for scene in scenes.scenes {
            let name = String(scene.file.split(separator: "/").last!)
            for object in scene.objects { holding[object.label, default: []].insert(name) }
        }
        let labels = holding.keys.sorted()
        let texts = engine.embedder!.embed(labels).embeddings
        try measure("search the whole index (20 queries, each)", repetitions: 20) {
            _ = try index.search(text: texts[Int.random(in: 0..<texts.count)], confidence: 0.1, top: 20)
        }
        func name(_ path: String) -> String { String(path.split(separator: "/").last!) }
        var fastHits = 0
        var exactHits = 0
        var fastSubset = 0
        var overlap = 0
        var exactLabels = 0
        let start = now()
        for (k, label) in labels.enumerated() {
            let fast = try index.search(text: texts[k], confidence: 0.001, top: 15)
            fastHits += fast.prefix(5).filter { holding[label]!.contains(name($0.path)) }.count
            guard k % 4 == 0 else { continue }
            exactLabels += 1
            fastSubset += fast.prefix(5).filter { holding[label]!.contains(name($0.path)) }.count
            var options = SuppressionOptions()
            options.confidence = 0.001
            var rescored: [(String, Float)] = []
            for hit in fast {
                let result = engine.detect(
                    try engine.prepare(path: hit.path, size: 640), queries: [label], options: options)
                rescored.append((hit.path, result.detections.first?.score ?? 0))
            }
            let exact = rescored.sorted { $0.1 > $1.1 }.prefix(5).map(\.0)
            exactHits += exact.filter { holding[label]!.contains(name($0)) }.count
            overlap += Set(exact).intersection(fast.prefix(5).map(\.path)).count
        }
        print(
            "precision@5, fast ranking, all \(labels.count) labels: \(format3(Double(fastHits) / Double(5 * labels.count)))"
        )
        print(
            "on \(exactLabels) labels: fast \(format3(Double(fastSubset) / Double(5 * exactLabels))), exact \(format3(Double(exactHits) / Double(5 * exactLabels))), top-5 overlap fast/exact \(format3(Double(overlap) / Double(5 * exactLabels))) (\(format3(now() - start)) s)"
        )
    }
}

/// Every convolution shape of the s model at 640×640, each kernel that can run it, median time per layer.
struct Layers: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The s model's convolutions at 640×640, per layer and kernel (random weights and inputs).")
    @Option(help: "Timed runs per layer and kernel.") var repetitions = 15
    @Option(help: "Threads.") var threads = 2

    /// inputs, outputs, kernel, stride, input height, input width, times per detection.
    static let shapes: [(Int, Int, Int, Int, Int, Int, Int)] = [
        (3, 32, 3, 2, 640, 640, 1), (32, 64, 3, 2, 320, 320, 1), (64, 128, 3, 2, 160, 160, 1),
        (128, 256, 3, 2, 80, 80, 1), (256, 512, 3, 2, 40, 40, 1), (128, 128, 3, 2, 80, 80, 1),
        (256, 256, 3, 2, 40, 40, 1),
        (32, 32, 3, 1, 160, 160, 2), (64, 64, 3, 1, 80, 80, 8), (128, 128, 3, 1, 80, 80, 2),
        (128, 128, 3, 1, 40, 40, 11), (256, 256, 3, 1, 20, 20, 5), (128, 64, 3, 1, 80, 80, 1),
        (256, 128, 3, 1, 40, 40, 1), (256, 64, 3, 1, 40, 40, 1), (512, 128, 3, 1, 20, 20, 1),
        (512, 64, 3, 1, 20, 20, 1), (64, 64, 3, 1, 40, 40, 1), (64, 64, 3, 1, 20, 20, 1), (128, 128, 3, 1, 20, 20, 1),
        (64, 64, 1, 1, 160, 160, 1), (96, 64, 1, 1, 160, 160, 1), (128, 128, 1, 1, 80, 80, 1),
        (256, 128, 1, 1, 80, 80, 2), (384, 128, 1, 1, 80, 80, 1), (64, 64, 1, 1, 80, 80, 1),
        (256, 256, 1, 1, 40, 40, 1), (384, 256, 1, 1, 40, 40, 1), (512, 256, 1, 1, 40, 40, 3),
        (768, 256, 1, 1, 40, 40, 1), (64, 64, 1, 1, 40, 40, 1), (512, 256, 1, 1, 20, 20, 1),
        (512, 512, 1, 1, 20, 20, 1), (768, 512, 1, 1, 20, 20, 2), (1024, 512, 1, 1, 20, 20, 2),
        (64, 64, 1, 1, 20, 20, 1),
    ]

    /// A layer of `shapes` with random weights (±0.1) and a random input (±1), its input range recorded as ±1
    /// (what int8 quantises with); and the operations of a direct convolution of it.
    static func randomLayer(
        inputs: Int, outputs: Int, kernel: Int, stride: Int, height: Int, width: Int,
        using generator: inout some RandomNumberGenerator
    ) -> (weights: ConvolutionWeights, input: FeatureMap, operations: Double) {
        var weights = ConvolutionWeights(
            weight: (0..<(outputs * inputs * kernel * kernel)).map { _ in
                Float.random(in: -0.1...0.1, using: &generator)
            },
            bias: (0..<outputs).map { _ in Float.random(in: -0.1...0.1, using: &generator) }, inputs: inputs,
            outputs: outputs, kernel: kernel, stride: stride, activation: true)
        weights.inputRange = -1...1
        let input = FeatureMap(
            channels: inputs, height: height, width: width,
            data: (0..<(inputs * height * width)).map { _ in Float.random(in: -1...1, using: &generator) })
        let (outHeight, outWidth) = weights.outputSize(height: height, width: width)
        return (weights, input, 2.0 * Double(outputs * inputs * kernel * kernel * outHeight * outWidth))
    }

    /// The median seconds of `repetitions` convolutions of `input` by `implementation` (its weights prepared once,
    /// one run first, untimed).
    static func medianSeconds(
        _ implementation: any ConvolutionKernel, _ weights: ConvolutionWeights, _ input: FeatureMap,
        pool: ComputePool, repetitions: Int
    ) -> Double {
        let prepared = implementation.prepare(weights)
        _ = implementation.convolve(input, prepared, pool: pool)
        var samples: [Double] = []
        for _ in 0..<repetitions {
            let start = now()
            _ = implementation.convolve(input, prepared, pool: pool)
            samples.append(now() - start)
        }
        return samples.sorted()[samples.count / 2]
    }

    func run() throws {
        let pool = ComputePool(threads: threads)
        var kernels: [(String, any ConvolutionKernel)] = [("lowered, OpenBLAS", LoweredConvolution(packed: false))]
        if ConvolutionGEMM.available { kernels.append(("lowered, packed GEMM", LoweredConvolution())) }
        if WinogradConvolution.available {
            kernels.append(("winograd F(4×4, 3×3), OpenBLAS", WinogradConvolution(packed: false)))
            if ConvolutionGEMM.available {
                kernels.append(("winograd F(4×4, 3×3), packed GEMM (as loaded)", WinogradConvolution()))
            }
        }
        var totals = [Double](repeating: 0, count: kernels.count)
        var best = 0.0
        var generator = SystemRandomNumberGenerator()
        print("| layer | per detection | " + kernels.map(\.0).joined(separator: " | ") + " |")
        print("|---|---|" + kernels.map { _ in "---|" }.joined())
        for (inputs, outputs, kernel, stride, height, width, count) in Self.shapes {
            let (weights, x, flops) = Self.randomLayer(
                inputs: inputs, outputs: outputs, kernel: kernel, stride: stride, height: height, width: width,
                using: &generator)
            var cells: [String] = []
            var fastest = Double.infinity
            for (index, (_, implementation)) in kernels.enumerated() {
                let median =
                    Self.medianSeconds(implementation, weights, x, pool: pool, repetitions: repetitions) * 1000
                totals[index] += median * Double(count)
                fastest = min(fastest, median)
                cells.append("\(format3(median)) ms (\(Int(flops / median / 1e6)))")
            }
            best += fastest * Double(count)
            print(
                "| \(inputs)→\(outputs) k\(kernel) s\(stride) \(height)×\(width) | \(count) | "
                    + cells.joined(separator: " | ") + " |")
        }
        print(
            "| all convolutions of a detection | | " + totals.map { "\(format3($0)) ms" }.joined(separator: " | ")
                + " |")
        print(
            "fastest kernel per layer, all convolutions of a detection: \(format3(best)) ms (cells: median ms, GFLOP/s counted as direct convolution)"
        )
    }
}

/// How far a reduced precision moves the detector's raw output from fp32's, anchor by anchor (before NMS, so
/// that nothing is matched up): every class score and every box coordinate of every anchor.
struct PrecisionDeltas: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "precision",
        abstract: "Score and box deltas of a precision against fp32 on the raw head output (max, 99th percentile).")
    @Option(help: "Detector weights.") var detector: String
    @Option(help: "Photos.") var image: [String]
    @Option(help: "Network input size.") var imgsz = 640
    @Option(help: "How many seeded unit queries.") var queries = 3
    @Option(help: "The precision to compare with fp32.") var precision = "bf16"

    func run() throws {
        guard let arithmetic = Precision(rawValue: precision), arithmetic.isNative else {
            throw ValidationError("--precision \(precision): not a precision this CPU runs")
        }
        let reference = try YOLOWorldNetwork(weights: WeightFile.open(detector))
        let reduced = try YOLOWorldNetwork(weights: WeightFile.open(detector), precision: arithmetic)
        let engine = try Engine(network: reference, embedder: nil)
        let reducedEngine = try Engine(network: reduced, embedder: nil)
        var generator = SeededRandom(seed: 7)
        let text = randomUnitQueries(queries, using: &generator)
        var scores: [Double] = []
        var boxes: [Double] = []
        for path in image {
            let a = reference.head(try engine.prepare(path: path, size: imgsz).features, text: text, classes: queries)
            let b = reduced.head(
                try reducedEngine.prepare(path: path, size: imgsz).features, text: text, classes: queries)
            let anchors = a.count / (4 + queries)
            for row in 0..<(4 + queries) {
                for anchor in 0..<anchors {
                    let d = Double(abs(a[row * anchors + anchor] - b[row * anchors + anchor]))
                    if row < 4 { boxes.append(d) } else { scores.append(d) }
                }
            }
        }
        func percentile(_ values: [Double], _ p: Double) -> Double {
            let sorted = values.sorted()
            return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p))]
        }
        print(
            "\(precision) against fp32, \(image.count) photos × \(boxes.count / 4 / image.count) anchors × \(queries) queries:"
        )
        print(
            "  score: max \(format3(scores.max() ?? 0)), 99th percentile \(format3(percentile(scores, 0.99))), median \(format3(percentile(scores, 0.5)))"
        )
        print(
            "  box coordinate (input pixels): max \(format3(boxes.max() ?? 0)), 99th percentile \(format3(percentile(boxes, 0.99))), median \(format3(percentile(boxes, 0.5)))"
        )
    }
}
