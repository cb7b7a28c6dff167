import LookoutImage
import LookoutSupport
import LookoutTensor
import LookoutTextEncoder
import LookoutTokenizer
import LookoutWeights

#if canImport(Glibc)
    import Glibc
#endif

/// A whole-photo image tower with its preprocessing, and where it has one its own text tower: OpenAI CLIP's
/// (a file with `visual.*` tensors: `clip._transform`, and queries scored in the detector's CLIP text space), an
/// open_clip model's folder (its `preprocess_cfg`, and its own text tower for queries), or a SigLIP model's
/// `transformers` folder (its image processor, its own text tower and tokenizer, sigmoid scores: issue 52). The one
/// place that tells them apart, for `index`, `search`, `similar`, `serve` and `embed`.
public struct ImageTower: Sendable {
    /// Which family the tower is.
    public enum Family: String, Sendable {
        case clip = "CLIP"
        case openCLIP = "open_clip"
        case sigLIP = "SigLIP"
    }

    enum Encoder: Sendable {
        case clip(CLIPImageEncoder)
        case sigLIP(SigLIPModel)
    }

    let encoder: Encoder
    public let family: Family
    public let transform: CLIPPreprocessing.Transform
    public let path: String
    /// The embedding size of the tower's own text tower (open_clip, SigLIP); nil where queries come from the
    /// detector's CLIP text encoder.
    public let ownTextSize: Int?

    /// Identity of the tower's weights (what an index records; a SigLIP or open_clip text tower shares it).
    public var fingerprint: String {
        switch encoder {
        case .clip(let encoder): encoder.fingerprint
        case .sigLIP(let model): model.image.fingerprint
        }
    }

    /// The size of the photo embeddings.
    public var embeddingSize: Int {
        switch encoder {
        case .clip(let encoder): encoder.configuration.embeddingSize
        case .sigLIP(let model): model.configuration.vision.width
        }
    }

    /// How a cosine becomes a scene score, `σ((cos − center) · slope)`: SigLIP's own probability
    /// (`σ(exp(logit_scale)·cos + logit_bias)`: center `−logit_bias / exp(logit_scale)`, slope
    /// `exp(logit_scale)`), or the calibration recorded in a Lookout-trained tower's metadata (a CLIP tower's
    /// safetensors, a SigLIP folder's `config.json`); nil for the others.
    public var sceneScore: (center: Float, slope: Float)? {
        switch encoder {
        case .clip(let encoder):
            guard let center = encoder.sceneCenter, let slope = encoder.sceneSlope else { return nil }
            return (center, slope)
        case .sigLIP(let model):
            if let center = model.configuration.sceneCenter, let slope = model.configuration.sceneSlope {
                return (center, slope)
            }
            let slope = expf(model.logitScale)
            return (-model.logitBias / slope, slope)
        }
    }

    /// The cosine above which two photos are duplicates, where the tower's file records one.
    public var duplicateThreshold: Float? {
        switch encoder {
        case .clip(let encoder): encoder.duplicateThreshold
        case .sigLIP(let model): model.configuration.duplicateThreshold
        }
    }

    /// The family of the tower at `path`, from its files' names and configuration (nothing loaded).
    public static func family(of path: String) -> Family {
        SigLIPModel.isModel(path) ? .sigLIP : OpenCLIPModel.isModel(path) ? .openCLIP : .clip
    }

    /// Whether `path` names a model with its own text tower (an open_clip or SigLIP folder), without loading it.
    public static func hasOwnText(_ path: String) -> Bool { OpenCLIPModel.isModel(path) || SigLIPModel.isModel(path) }

    /// The own text tower of the tower at `path` (an open_clip or SigLIP folder's), loaded without the image tower;
    /// nil where its queries come from the detector's text encoder. `tokenizer`: CLIP's, which open_clip's towers
    /// read; a SigLIP folder brings its own.
    public static func sceneText(
        _ path: String, tokenizer: CLIPTokenizer, precision: Precision = .fp32
    ) throws(WeightsError) -> SceneText? {
        if SigLIPModel.isModel(path) {
            let (words, encoder) = try SigLIPModel.textTower(contentsOf: path, precision: precision)
            return SceneText(kind: .sigLIP(words, encoder))
        }
        guard OpenCLIPModel.isModel(path) else { return nil }
        let encoder = try OpenCLIPModel.textEncoder(contentsOf: path, precision: precision)
        return SceneText(kind: .clip(try TextEmbedder(tokenizer: tokenizer, encoder: encoder, cache: nil)))
    }

    public init(contentsOf path: String, precision: Precision = .fp32) throws(WeightsError) {
        if SigLIPModel.isModel(path) {
            let model = try SigLIPModel(contentsOf: path, precision: precision)
            let c = model.configuration
            encoder = .sigLIP(model)
            family = .sigLIP
            ownTextSize = c.projectionSize
            transform = CLIPPreprocessing.Transform(
                size: c.imageSize, mean: c.mean, std: c.std, resize: .squash, filter: c.bilinear ? .bilinear : .bicubic,
                convertFirst: c.convertFirst)
        } else if OpenCLIPModel.isModel(path) {
            let model = try OpenCLIPModel(contentsOf: path, precision: precision)
            let c = model.configuration
            encoder = .clip(model.image)
            family = .openCLIP
            ownTextSize = model.text.configuration.embeddingSize
            transform = CLIPPreprocessing.Transform(
                size: c.imageSize, mean: c.mean, std: c.std, resize: c.resizeMode == "squash" ? .squash : .shortest)
        } else {
            let image = try CLIPImageEncoder(contentsOf: path, precision: precision)
            encoder = .clip(image)
            family = .clip
            ownTextSize = nil
            transform = .openAI(size: image.configuration.inputResolution)
        }
        self.path = path
    }

    /// The preprocessed input of a photo file's bytes.
    public func input(_ bytes: [UInt8], name: String) throws(ImageError) -> [Float] {
        try CLIPPreprocessing.input(bytes, name: name, transform: transform)
    }

    /// L2-normalised embeddings of preprocessed photos (``input(_:name:)``).
    public func encode(_ inputs: [[Float]], backend: any ComputeBackend = CPUBackend.shared) -> [[Float]] {
        switch encoder {
        case .clip(let encoder): encoder.encode(inputs, backend: backend)
        case .sigLIP(let model): model.image.encode(inputs, backend: backend)
        }
    }

    /// Whether a GPU backend computes every operation of the tower with its activations kept there: a CLIP or
    /// open_clip tower with fp32 weights. A SigLIP tower's pooling head and layers packed for the CPU's bf16 go
    /// through the host, each crossing costing more than the GPU saves: those run on the CPU.
    public var keepsActivationsOnGPU: Bool {
        switch encoder {
        case .clip(let encoder): encoder.precision == .fp32
        case .sigLIP: false
        }
    }

    /// The L2-normalised embedding of a photo file's bytes. A CLIP tower takes the photo's 8-bit pixels and
    /// normalises them on the backend (a GPU receives a quarter of the bytes); the same embedding. `decoded`: the
    /// detector's decode of the same bytes, where there is one: a JPEG is then not decoded again
    /// (``CLIPPreprocessing/pilImage(jpeg:decoded:)``, the same pixels); other formats are.
    public func embedding(
        _ bytes: [UInt8], decoded: Image? = nil, name: String, backend: any ComputeBackend = CPUBackend.shared
    ) throws(ImageError) -> [Float] {
        let rgb = try resized(bytes, decoded: decoded, name: name)
        switch encoder {
        case .clip(let encoder):
            return encoder.encode(pixels: [rgb.pixels], mean: transform.mean, std: transform.std, backend: backend)[0]
        case .sigLIP:
            return encode([CLIPPreprocessing.tensor(rgb, mean: transform.mean, std: transform.std)], backend: backend)[
                0]
        }
    }
}

extension ImageTower {
    /// The photo resized and cropped as the tower's preprocessing makes it, before normalisation.
    func resized(_ bytes: [UInt8], decoded: Image?, name: String) throws(ImageError) -> Image {
        let photo: PILImage
        if let decoded, let made = CLIPPreprocessing.pilImage(jpeg: bytes, decoded: decoded) {
            photo = made
        } else {
            photo = try CLIPPreprocessing.decode(bytes, name: name)
        }
        return CLIPPreprocessing.resized(photo, transform: transform)
    }

    /// Whether ``pixels(_:decoded:name:)`` and ``embeddings(ofPixels:backend:)`` split ``embedding(_:decoded:name:backend:)``
    /// (a CLIP tower's: its normalisation runs on the backend): the photos' preprocessing on the threads that
    /// decode them, their embeddings in batches.
    public var embedsPixels: Bool {
        if case .clip = encoder { true } else { false }
    }

    /// A photo's 8-bit pixels as a CLIP tower takes them (``embedsPixels``): the first half of
    /// ``embedding(_:decoded:name:backend:)``.
    public func pixels(_ bytes: [UInt8], decoded: Image? = nil, name: String) throws(ImageError) -> [UInt8] {
        try resized(bytes, decoded: decoded, name: name).pixels
    }

    /// The L2-normalised embeddings of photos' ``pixels(_:decoded:name:)``, as one batch: each photo's embedding
    /// is the one it gets alone, within the rounding a larger product's summation order may give on a GPU.
    public func embeddings(ofPixels pixels: [[UInt8]], backend: any ComputeBackend = CPUBackend.shared) -> [[Float]] {
        guard case .clip(let encoder) = encoder else { preconditionFailure("only a CLIP tower embeds pixels") }
        return encoder.encode(pixels: pixels, mean: transform.mean, std: transform.std, backend: backend)
    }
}

/// A whole-photo tower's own text tower with its tokenizer: open_clip's (CLIP's tokenizer) or SigLIP's (its
/// SentencePiece tokenizer). Embeds queries in the space the tower's photo embeddings were indexed in.
public final class SceneText: Sendable {
    enum Kind: Sendable {
        case clip(TextEmbedder)
        case sigLIP(any TextTokenizer, SigLIPTextEncoder)
    }

    let kind: Kind

    init(kind: Kind) { self.kind = kind }

    /// The weights' identity: the image tower's, as the index recorded it.
    public var fingerprint: String {
        switch kind {
        case .clip(let embedder): embedder.encoder.fingerprint
        case .sigLIP(_, let encoder): encoder.fingerprint
        }
    }

    public var embeddingSize: Int {
        switch kind {
        case .clip(let embedder): embedder.encoder.configuration.embeddingSize
        case .sigLIP(_, let encoder): encoder.configuration.projectionSize
        }
    }

    /// L2-normalised embeddings of `texts`.
    public func embed(_ texts: [String], backend: any ComputeBackend = CPUBackend.shared) -> [[Float]] {
        switch kind {
        case .clip(let embedder): embedder.embed(texts).embeddings
        case .sigLIP(let tokenizer, let encoder): encoder.encode(texts.map(tokenizer.tokenize), backend: backend)
        }
    }
}
