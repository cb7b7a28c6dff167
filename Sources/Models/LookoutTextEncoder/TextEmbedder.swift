import LookoutTensor
import LookoutTokenizer
import LookoutWeights

/// From query strings to L2-normalised embeddings: the tokenizer, the text encoder and the cache.
public final class TextEmbedder: Sendable {
    public let tokenizer: CLIPTokenizer
    public let encoder: CLIPTextEncoder
    public let cache: TextEmbeddingCache?

    /// Checks that the tokenizer and the encoder fit together (vocabulary size, context length).
    public init(tokenizer: CLIPTokenizer, encoder: CLIPTextEncoder, cache: TextEmbeddingCache?) throws(WeightsError) {
        let configuration = encoder.configuration
        guard tokenizer.vocabulary.count == configuration.vocabularySize else {
            throw WeightsError(
                path: encoder.path, kind: .incompatibleModels,
                problem:
                    "its token embedding has \(configuration.vocabularySize) rows but the vocabulary has \(tokenizer.vocabulary.count) tokens"
            )
        }
        guard tokenizer.vocabulary.contextLength == configuration.contextLength else {
            throw WeightsError(
                path: encoder.path, kind: .incompatibleModels,
                problem:
                    "its context length is \(configuration.contextLength) but the vocabulary's is \(tokenizer.vocabulary.contextLength)"
            )
        }
        self.tokenizer = tokenizer
        self.encoder = encoder
        self.cache = cache
    }

    /// Counts of the last `embed` call, for timings and tests.
    public struct Report: Sendable {
        public var cached = 0
        public var computed = 0

        public init(cached: Int = 0, computed: Int = 0) { (self.cached, self.computed) = (cached, computed) }
    }

    /// One embedding per text, in order. Cached texts are looked up; the rest are encoded in one batch.
    public func embed(_ texts: [String]) -> (embeddings: [[Float]], report: Report) {
        let size = encoder.configuration.embeddingSize
        var results = [[Float]?](repeating: nil, count: texts.count)
        var report = Report()
        var missing: [(index: Int, ids: [Int32], key: String)] = []
        for (index, text) in texts.enumerated() {
            let ids = tokenizer.tokenize(text)
            let key = TextEmbeddingCache.key(
                model: encoder.cacheKey, vocabulary: tokenizer.vocabulary.digest, ids: ids)
            if let cache, let hit = cache.lookup(key, ids: ids, size: size) {
                results[index] = hit
                report.cached += 1
            } else if let earlier = missing.first(where: { $0.key == key }) {
                missing.append((index, earlier.ids, key))
            } else {
                missing.append((index, ids, key))
            }
        }
        if !missing.isEmpty {
            var unique: [(ids: [Int32], key: String)] = []
            var position: [String: Int] = [:]
            for item in missing where position[item.key] == nil {
                position[item.key] = unique.count
                unique.append((item.ids, item.key))
            }
            let computed = encoder.encode(unique.map(\.ids))
            report.computed = unique.count
            for (entry, values) in zip(unique, computed) { cache?.store(entry.key, ids: entry.ids, values: values) }
            for item in missing { results[item.index] = computed[position[item.key]!] }
        }
        return (results.map { $0! }, report)
    }
}
