import LookoutJSON
import LookoutSupport

/// The models `lookout models fetch` knows: for each, the files to download (URL and, where known, SHA-256)
/// and the `lookout-model.json` to write beside them. Built in (``builtIn``), or read from a JSON file of the
/// same form (a mirror's own list, or a test's):
///
///     {"models": [
///       {"name": "clip-vit-b-32", "description": "…",
///        "files": [{"file": "ViT-B-32.pt", "url": "https://…/ViT-B-32.pt", "sha256": "40d3…"}]},
///       {"name": "yolov8s-worldv2", "description": "…", "requires": ["clip-vit-b-32"],
///        "files": [{"file": "yolov8s-worldv2.pt", "url": "https://…/yolov8s-worldv2.pt"}],
///        "manifest": {"detector": "yolov8s-worldv2.pt", "text_encoder": "../clip-vit-b-32/ViT-B-32.pt",
///                     "image_encoder": "../clip-vit-b-32/ViT-B-32.pt"}}]}
///
/// A model's files go into a folder of its name; `manifest` paths are relative to that folder (so models
/// share the CLIP file a folder up instead of holding a copy each).
public struct ModelCatalogue: Sendable {
    public struct File: Sendable, Equatable {
        public var name: String
        public var url: String
        /// Lowercase hex; nil where no digest is published (then the digest of the first download is
        /// recorded in the model's manifest, and later fetches check against it).
        public var sha256: String?
        /// The most bytes the file may have (its size and a margin); a download that goes past it is stopped and
        /// removed. Nil: the fetcher's own cap.
        public var maximumBytes: Int64? = nil
    }

    public struct Model: Sendable {
        public var name: String
        public var description: String
        public var files: [File]
        /// Models fetched first (the text encoder a detector uses).
        public var requires: [String]
        /// The `lookout-model.json` roles (`detector`, `text_encoder`, `image_encoder`) and their paths,
        /// relative to the model's folder; empty for a model that is only a part of others.
        public var manifest: [(role: String, path: String)]
    }

    public var models: [Model]

    public func model(named name: String) -> Model? { models.first { $0.name == name } }

    /// `name` and the models it requires, those first, each once.
    public func withRequirements(_ name: String) throws(FetchError) -> [Model] {
        var order: [Model] = []
        func visit(_ name: String, from: [String]) throws(FetchError) {
            guard !from.contains(name) else { throw FetchError("the catalogue's models require each other: \(from)") }
            guard let model = model(named: name) else {
                throw FetchError(
                    "no model named \(name); known: \(models.map(\.name).joined(separator: ", ")) (or all)")
            }
            for required in model.requires { try visit(required, from: from + [name]) }
            if !order.contains(where: { $0.name == name }) { order.append(model) }
        }
        try visit(name, from: [])
        return order
    }

    /// Reads a catalogue; every problem names the file and the entry.
    public init(json bytes: [UInt8], source: String) throws(FetchError) {
        func fail(_ problem: String) -> FetchError { FetchError("\(source): \(problem)") }
        let root: JSONNode
        do {
            root = try JSONDocument(bytes: bytes).root
        } catch {
            throw fail("not valid JSON (\(error))")
        }
        guard let list = root["models"], list.kind == .array else { throw fail("needs \"models\": [ … ]") }
        var models: [Model] = []
        for k in 0..<list.count {
            let node = list[k]
            guard let name = node["name"]?.string, !name.isEmpty, !name.contains("/"), !name.hasPrefix(".") else {
                throw fail("model \(k + 1) needs a \"name\" (no slashes)")
            }
            var files: [File] = []
            if let fileList = node["files"] {
                for f in 0..<fileList.count {
                    let entry = fileList[f]
                    guard let file = entry["file"]?.string, !file.isEmpty, !file.contains("/"),
                        let url = entry["url"]?.string, url.hasPrefix("https://") || url.hasPrefix("http://")
                    else { throw fail("\(name): file \(f + 1) needs \"file\" (a name) and \"url\" (http[s]://…)") }
                    let sha = entry["sha256"]?.string?.lowercased()
                    if let sha, sha.count != 64 || !sha.allSatisfy(\.isHexDigit) {
                        throw fail("\(name): \(file).sha256 is not 64 hexadecimal digits")
                    }
                    var maximum: Int64?
                    if let size = entry["max_bytes"] {
                        guard let value = size.int, value > 0 else {
                            throw fail("\(name): \(file).max_bytes must be a whole number of bytes above 0")
                        }
                        maximum = value
                    }
                    files.append(File(name: file, url: url, sha256: sha, maximumBytes: maximum))
                }
            }
            var requires: [String] = []
            if let list = node["requires"] {
                for r in 0..<list.count { if let value = list[r].string { requires.append(value) } }
            }
            var manifest: [(String, String)] = []
            if let roles = node["manifest"] {
                for role in ["detector", "text_encoder", "image_encoder"] {
                    guard let path = roles[role]?.string else { continue }
                    // A file of this model's folder, or of a sibling model's (../NAME/FILE): nothing else.
                    let parts = path.split(separator: "/", omittingEmptySubsequences: false)
                    let inside = parts.count == 1 && !parts[0].isEmpty && parts[0] != "." && parts[0] != ".."
                    let sibling =
                        parts.count == 3 && parts[0] == ".." && !parts[1].isEmpty && !parts[1].hasPrefix(".")
                        && !parts[2].isEmpty && !parts[2].hasPrefix(".")
                    guard inside || sibling else {
                        throw fail(
                            "\(name): manifest \(role) \(path) must name a file of the model's folder (FILE) or of another model's (../NAME/FILE)"
                        )
                    }
                    manifest.append((role, path))
                }
                guard manifest.contains(where: { $0.0 == "detector" }),
                    manifest.contains(where: { $0.0 == "text_encoder" })
                else { throw fail("\(name): a manifest needs a detector and a text_encoder") }
            }
            models.append(
                Model(
                    name: name, description: node["description"]?.string ?? "", files: files, requires: requires,
                    manifest: manifest))
        }
        self.models = models
        for model in models {
            _ = try withRequirements(model.name)
        }
    }

    /// The official models: ultralytics' YOLO-World v2 and YOLOE detectors and YOLOE's text towers (their release
    /// assets), OpenAI's CLIP ViT-B/32 (its URL carries its SHA-256) and open_clip towers (LAION's folders). ultralytics publishes no digests for its assets: a detector's
    /// digest is recorded at its first download.
    public static let builtIn: ModelCatalogue = {
        let clipDigest = "40d365715913c9da98579312b702a82c18be219cc2a73407c4526f58eba950af"
        var models = [
            Model(
                name: "clip-vit-b-32", description: "OpenAI CLIP ViT-B/32: the text and image towers",
                files: [
                    File(
                        name: "ViT-B-32.pt",
                        url: "https://openaipublic.azureedge.net/clip/models/\(clipDigest)/ViT-B-32.pt",
                        sha256: clipDigest, maximumBytes: 400 << 20)
                ], requires: [], manifest: [])
        ]
        for scale in ["s", "m", "l", "x"] {
            let file = "yolov8\(scale)-worldv2.pt"
            models.append(
                Model(
                    name: "yolov8\(scale)-worldv2",
                    description: "ultralytics YOLO-World v2 \(scale) with CLIP ViT-B/32",
                    files: [
                        File(
                            name: file, url: "https://github.com/ultralytics/assets/releases/download/v8.3.0/\(file)",
                            sha256: nil, maximumBytes: 400 << 20)
                    ], requires: ["clip-vit-b-32"],
                    manifest: [
                        ("detector", file), ("text_encoder", "../clip-vit-b-32/ViT-B-32.pt"),
                        ("image_encoder", "../clip-vit-b-32/ViT-B-32.pt"),
                    ]))
        }
        // YOLOE (ultralytics' release v8.4.0, where 8.4.x downloads its assets): each family with its own text
        // tower — the MobileCLIP-B(LT) file for YOLOE-v8 and YOLOE-11, MobileCLIP2-B for YOLOE-26. The `-pf`
        // (prompt-free) files take no text.
        let assets = "https://github.com/ultralytics/assets/releases/download/v8.4.0/"
        for (name, file, description) in [
            (
                "mobileclip-blt", "mobileclip_blt.ts",
                "Apple MobileCLIP-B(LT) as ultralytics traces it: YOLOE-v8/11's text tower"
            ),
            (
                "mobileclip2-b", "mobileclip2_b.ts",
                "Apple MobileCLIP2-B's text tower as ultralytics ships it: YOLOE-26's"
            ),
        ] {
            models.append(
                Model(
                    name: name, description: description,
                    files: [File(name: file, url: assets + file, sha256: nil, maximumBytes: 1536 << 20)], requires: [],
                    manifest: []))
        }
        for (family, scales, tower) in [
            ("v8", "sml", ("mobileclip-blt", "mobileclip_blt.ts")),
            ("11", "sml", ("mobileclip-blt", "mobileclip_blt.ts")),
            ("26", "nsmlx", ("mobileclip2-b", "mobileclip2_b.ts")),
        ] {
            for scale in scales {
                let stem = "yoloe-\(family)\(scale)-seg"
                models.append(
                    Model(
                        name: stem, description: "ultralytics YOLOE-\(family) \(scale) (segmentation) with \(tower.0)",
                        files: [
                            File(name: stem + ".pt", url: assets + stem + ".pt", sha256: nil, maximumBytes: 400 << 20)
                        ],
                        requires: [tower.0],
                        manifest: [("detector", stem + ".pt"), ("text_encoder", "../\(tower.0)/\(tower.1)")]))
                models.append(
                    Model(
                        name: stem + "-pf",
                        description: "ultralytics YOLOE-\(family) \(scale) prompt-free: names what it sees, no text",
                        files: [
                            File(
                                name: stem + "-pf.pt", url: assets + stem + "-pf.pt", sha256: nil,
                                maximumBytes: 400 << 20)
                        ],
                        requires: [],
                        manifest: [("detector", stem + "-pf.pt")]))
            }
        }
        // open_clip image–text towers (issue 52), from the Hugging Face folders open_clip's `hf-hub:` reads: a folder
        // each, for `--image-model` (index, search, similar, embed) and `--text-model` (embed). No published digests.
        for (name, repository, size, description) in [
            (
                "openclip-vit-b-32-256-datacomp", "laion/CLIP-ViT-B-32-256x256-DataComp-s34B-b86K", 700,
                "open_clip ViT-B-32 at 256 px trained on DataComp-1B (rclip's tower): a photo tower for index and search"
            ),
            (
                "openclip-vit-b-32-laion2b", "laion/CLIP-ViT-B-32-laion2B-s34B-b79K", 700,
                "open_clip ViT-B-32 trained on LAION-2B: a photo tower for index and search"
            ),
            (
                "openclip-vit-b-16-laion2b", "laion/CLIP-ViT-B-16-laion2B-s34B-b88K", 700,
                "open_clip ViT-B-16 trained on LAION-2B: a photo tower for index and search"
            ),
            (
                "openclip-vit-l-14-laion2b", "laion/CLIP-ViT-L-14-laion2B-s32B-b82K", 2000,
                "open_clip ViT-L-14 trained on LAION-2B: a photo tower for index and search (large)"
            ),
        ] {
            let base = "https://huggingface.co/\(repository)/resolve/main/"
            models.append(
                Model(
                    name: name, description: description,
                    files: [
                        File(
                            name: "open_clip_config.json", url: base + "open_clip_config.json", sha256: nil,
                            maximumBytes: 1 << 20),
                        File(
                            name: "open_clip_pytorch_model.bin", url: base + "open_clip_pytorch_model.bin", sha256: nil,
                            maximumBytes: Int64(size) << 20),
                    ], requires: [], manifest: []))
        }
        // SigLIP and SigLIP 2 (fixed resolution) image–text towers (issue 52), from Google's transformers folders: the
        // files Lookout reads (configuration, weights, image processor, tokenizer). No published digests.
        for (name, repository, size, tokenizer, description) in [
            (
                "siglip-base-patch16-224", "google/siglip-base-patch16-224", 900, "spiece.model",
                "SigLIP B/16 at 224 px (WebLI): a photo tower with sigmoid scores for index and search"
            ),
            (
                "siglip-base-patch16-256-multilingual", "google/siglip-base-patch16-256-multilingual", 1600,
                "spiece.model",
                "SigLIP B/16 at 256 px, multilingual (WebLI): queries in many languages, sigmoid scores"
            ),
            (
                "siglip2-base-patch16-224", "google/siglip2-base-patch16-224", 1600, "tokenizer.json",
                "SigLIP 2 B/16 at 224 px, multilingual (Gemma's tokenizer): a photo tower with sigmoid scores"
            ),
        ] {
            let base = "https://huggingface.co/\(repository)/resolve/main/"
            models.append(
                Model(
                    name: name, description: description,
                    files: [
                        File(name: "config.json", url: base + "config.json", sha256: nil, maximumBytes: 1 << 20),
                        File(
                            name: "preprocessor_config.json", url: base + "preprocessor_config.json", sha256: nil,
                            maximumBytes: 1 << 20),
                        File(
                            name: "tokenizer_config.json", url: base + "tokenizer_config.json", sha256: nil,
                            maximumBytes: 4 << 20),
                        File(name: tokenizer, url: base + tokenizer, sha256: nil, maximumBytes: 64 << 20),
                        File(
                            name: "model.safetensors", url: base + "model.safetensors", sha256: nil,
                            maximumBytes: Int64(size) << 20),
                    ], requires: [], manifest: []))
        }
        return ModelCatalogue(models: models)
    }()

    init(models: [Model]) { self.models = models }
}

/// A fetch that failed, in a sentence for the user.
public struct FetchError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
