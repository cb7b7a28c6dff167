import LookoutFuzzing
import LookoutSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Every input of the committed fuzz corpus (Fuzz/corpus/TARGET: seeds, and each crasher libFuzzer ever
/// found, kept as `regression-*`) runs through its target's readers without a crash or a trap, as under
/// `scripts/fuzz`. A reader that traps on any of them ends this test process.
@Suite struct FuzzCorpusTests {
    static let root: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path
    }()

    static func inputs(_ target: FuzzTarget) -> [String] {
        let folder = root + "/Fuzz/corpus/" + target.rawValue
        guard let directory = opendir(folder) else { return [] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = FileSystem.name(of: entry)
            if !name.hasPrefix(".") { names.append(folder + "/" + name) }
        }
        return names.sorted()
    }

    @Test(arguments: FuzzTarget.allCases)
    func corpusRunsClean(_ target: FuzzTarget) throws {
        let inputs = Self.inputs(target)
        #expect(inputs.count >= 3, "the \(target.rawValue) corpus has seeds")
        for path in inputs { target.run(try FileContents.read(path)) }
    }

    /// The regression inputs of the hostile feature-cache headers from issue 14 (a width of 2^50, an
    /// absurd map count, negative channels, an overflowing height, a truncated file) are all refused, and
    /// the untouched file is accepted — so the target does reach the decoder.
    @Test func featureCacheRegressionsAreRefused() throws {
        for path in Self.inputs(.featureCache) {
            let bytes = try FileContents.read(path)
            let accepted = FuzzTarget.decodesFeatureCache(bytes)
            #expect(accepted == !path.contains("regression-"), "\(path)")
        }
    }
}
