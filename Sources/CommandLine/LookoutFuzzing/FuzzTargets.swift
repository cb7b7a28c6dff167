import LookoutEngine
import LookoutIndex
import LookoutSupport
import LookoutTokenizer
import LookoutVideo
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

/// What each fuzz target does with one input: the readers of every file a user can hand Lookout.
/// `scripts/fuzz TARGET` runs them under libFuzzer (Fuzz/Driver); `FuzzCorpusTests` replays the committed
/// corpus (Fuzz/corpus/TARGET, where every crasher found is kept) through the same functions.
public enum FuzzTarget: String, CaseIterable, Sendable {
    case safetensors, pickle, featureCache = "feature-cache", index, queries, video

    public func run(_ input: [UInt8]) {
        switch self {
        case .safetensors: Self.safetensors(input)
        case .pickle: Self.pickle(input)
        case .featureCache: Self.featureCache(input)
        case .index: Self.index(input)
        case .queries: Self.queries(input)
        case .video: Self.video(input)
        }
    }

    /// Any bytes as a video, as `lookout detect` and the upload endpoint take one: the container check of its
    /// first bytes, then (when it passes) FFmpeg's demuxers of ordinary containers through an ``UnlinkedFile`` as
    /// the upload endpoint gives it, a few frames at most, under a small pixel limit and a 2-second budget per read.
    static func video(_ bytes: [UInt8]) {
        guard VideoFile.looksLikeVideo(Array(bytes.prefix(16))),
            let file = try? UnlinkedFile(bytes: bytes, directory: "/tmp"),
            let reader = try? VideoReader(path: file.path, pixelLimit: 1 << 22, timeout: 2)
        else { return }
        for _ in 0..<3 { guard (try? reader.next()) != nil else { return } }
    }

    /// Any bytes as a weight file (safetensors header and data, or a zip). Most inputs are given a plausible
    /// header length so that they reach the safetensors reader, unless they already start like a
    /// safetensors or zip file.
    static func safetensors(_ raw: [UInt8]) {
        var bytes: [UInt8] = []
        if raw.count >= 9 && (raw[8] == UInt8(ascii: "{") || (raw[0] == 0x50 && raw[1] == 0x4B)) {
            bytes = raw
        } else {
            withUnsafeBytes(of: UInt64(raw.count).littleEndian) { bytes.append(contentsOf: $0) }
            bytes.append(contentsOf: raw)
        }
        readEverything(MappedFile(contents: bytes, name: "fuzz"))
    }

    /// Any bytes as a pickle, on its own and as the data.pkl of a torch zip checkpoint with one 64-byte
    /// storage "0".
    static func pickle(_ pickle: [UInt8]) {
        _ = try? pickle.withUnsafeBytes { try Unpickler.load($0) }
        let archive = storedZip([("fuzz/data.pkl", pickle), ("fuzz/data/0", [UInt8](repeating: 0x3F, count: 64))])
        readEverything(MappedFile(contents: archive, name: "fuzz.pt"))
    }

    private static func readEverything(_ file: MappedFile) {
        guard let weights = try? WeightFile.open(file) else { return }
        for name in weights.names { _ = weights.tensors[name]!.floats() }
        for view in weights.attributes.values { _ = view.floats() }
    }

    /// Any bytes as a `--feature-cache` file. The image size and map channels it is checked against are
    /// those it records (when it is long enough to record them), so that mutations reach the shape checks.
    static func featureCache(_ bytes: [UInt8]) { _ = decodesFeatureCache(bytes) }

    /// Whether `bytes` decode as a feature file (checked against the size and channels they record).
    public static func decodesFeatureCache(_ bytes: [UInt8]) -> Bool {
        func integer(at offset: Int) -> Int? {
            guard offset + 8 <= bytes.count else { return nil }
            return Int(
                Int64(littleEndian: bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: Int64.self) }))
        }
        let size = integer(at: 24) ?? 640
        let count = min(max(integer(at: 32) ?? 3, 0), 8)
        let channels = (0..<count).map { integer(at: 40 + 24 * $0) ?? 64 }
        let maps = channels.enumerated().map { (channels: $1, stride: 8 << $0) }
        guard let prepared = FeatureStore.decode(bytes, name: "fuzz", size: size, maps: maps) else {
            return false
        }
        // What was accepted must be internally whole: every map's values are there.
        for map in prepared.features { precondition(map.data.count == map.channels * map.height * map.width) }
        return true
    }

    /// Any bytes as an index database, opened read-only: the model, statistics, failures, a search with
    /// the stored embedding size, and the integrity check.
    static func index(_ bytes: [UInt8]) {
        let path = "/tmp/lookout-fuzz-index-\(getpid()).sqlite"
        defer { _ = FileSystem.unlink(path) }
        guard (try? FileContents.writeAtomically(bytes, to: path)) != nil,
            let store = try? SQLiteIndexStore(path: path, readOnly: true)
        else { return }
        let index = PhotoIndex(store: store)
        _ = try? index.statistics()
        _ = try? index.failures()
        if let model = try? index.storedModel(), (1...4096).contains(model.embeddingSize) {
            var text = [Float](repeating: 0, count: model.embeddingSize)
            text[0] = 1
            _ = try? index.search(text: text, confidence: 0, top: 1000)
        }
        _ = try? index.integrityCheck()
    }

    private static let tokenizer: CLIPTokenizer? = {
        let path = try? ResourceLocator.find(
            "Vocab/clip_vocab.json", environment: "LOOKOUT_VOCAB", what: "the CLIP vocabulary", hint: "")
        return path.flatMap { try? CLIPTokenizer(vocabularyFile: $0) }
    }()

    /// Any bytes as a `--queries-file`: split into queries, each split as `-q` would and tokenized.
    static func queries(_ bytes: [UInt8]) {
        guard let lines = parseQueriesFile(bytes) else { return }
        for line in lines.prefix(64) {
            _ = parseQueries(line)
            if let (queries, _) = try? QuerySyntax.parseLine(line) {
                for query in queries {
                    precondition(!query.alternatives.isEmpty && !query.label.isEmpty)
                    precondition(query.threshold.map { $0 >= 0 && $0 < 1 } ?? true)
                    // Written back and read again, a query is the same query.
                    precondition(try! QuerySyntax.parse(query.written) == query, "\(query.written)")
                }
            }
            if let tokenizer {
                let ids = tokenizer.tokenize(line)
                precondition(ids.count == 77 && ids[0] == 49406)
            }
        }
    }

    /// Stored zip entries with a central directory (CRCs left zero: the reader does not check them).
    static func storedZip(_ entries: [(String, [UInt8])]) -> [UInt8] {
        var out: [UInt8] = []
        var central: [UInt8] = []
        func put<T: FixedWidthInteger>(_ value: T, _ target: inout [UInt8]) {
            withUnsafeBytes(of: value.littleEndian) { target.append(contentsOf: $0) }
        }
        for (name, data) in entries {
            let offset = out.count
            let nameBytes = Array(name.utf8)
            put(UInt32(0x0403_4B50), &out)
            for _ in 0..<5 { put(UInt16(0), &out) }
            put(UInt32(0), &out)
            put(UInt32(data.count), &out)
            put(UInt32(data.count), &out)
            put(UInt16(nameBytes.count), &out)
            put(UInt16(0), &out)
            out += nameBytes + data
            put(UInt32(0x0201_4B50), &central)
            for _ in 0..<6 { put(UInt16(0), &central) }
            put(UInt32(0), &central)
            put(UInt32(data.count), &central)
            put(UInt32(data.count), &central)
            put(UInt16(nameBytes.count), &central)
            for _ in 0..<4 { put(UInt16(0), &central) }
            put(UInt32(0), &central)
            put(UInt32(offset), &central)
            central += nameBytes
        }
        let directory = out.count
        out += central
        put(UInt32(0x0605_4B50), &out)
        put(UInt16(0), &out)
        put(UInt16(0), &out)
        put(UInt16(entries.count), &out)
        put(UInt16(entries.count), &out)
        put(UInt32(central.count), &out)
        put(UInt32(directory), &out)
        put(UInt16(0), &out)
        return out
    }
}
