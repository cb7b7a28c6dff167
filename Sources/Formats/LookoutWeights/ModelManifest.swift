import LookoutJSON
import LookoutSupport

/// A model directory: a detector and a text encoder that belong together, named by `lookout-model.json`:
///
///     {
///       "name": "yolov8s-worldv2",
///       "detector":     {"file": "yolov8s-worldv2.pt", "sha256": "…", "url": "…"},
///       "text_encoder": {"file": "ViT-B-32.pt",        "sha256": "…", "url": "…"},
///       "description": "…"
///     }
///
/// Optional roles: `image_encoder` (a CLIP image tower in the text encoder's space) and `scene_tower` (the
/// whole-photo tower an index stores when it is another one; a file or a folder, without a digest for a folder).
/// `file` is relative to the directory. `sha256` and `url` are optional; `lookout models verify` checks the
/// digests (loading does not hash hundreds of megabytes on every start).
public struct ModelManifest: Sendable {
    public struct Entry: Sendable {
        public let path: String
        public let sha256: String?
        public let url: String?
    }

    public static let fileName = "lookout-model.json"

    public let directory: String
    public let name: String
    public let description: String?
    public let detector: Entry
    public let textEncoder: Entry
    /// The CLIP image tower's file (`"image_encoder"`), when the manifest names one: it embeds photos and crops in
    /// the text encoder's space (photos as queries, examples).
    public let imageEncoder: Entry?
    /// The whole-photo tower an index stores by default (`"scene_tower"`), when it is not the image encoder: a
    /// file, or an open_clip or SigLIP folder with its own text tower (the demo's multilingual tower).
    public let sceneTower: Entry?

    public init(directory: String) throws(WeightsError) {
        let path = directory + "/" + Self.fileName
        func fail(_ problem: String) -> WeightsError { WeightsError(path: path, problem: problem) }
        let root: JSONNode
        do {
            root = try JSONDocument(bytes: try FileContents.read(path, maximumSize: 1 << 20)).root
        } catch let error as FileContents.FileError {
            let hint =
                directory.contains("/")
                ? ""
                : "; or the name of a model Lookout has (demo-yoloe ships with Lookout; `lookout models fetch --list` names those it can download)"
            throw fail("\(error.reason) (a model directory needs a \(Self.fileName)\(hint))")
        } catch {
            throw fail("not valid JSON (\(error))")
        }
        func entry(_ key: String) throws(WeightsError) -> Entry {
            guard let node = root[key], let file = node["file"]?.string, !file.isEmpty else {
                throw fail("needs \"\(key)\": {\"file\": …}")
            }
            let sha = node["sha256"]?.string
            if let sha, sha.count != 64 || !sha.allSatisfy(\.isHexDigit) {
                throw fail("\(key).sha256 is not 64 hexadecimal digits")
            }
            return Entry(
                path: file.hasPrefix("/") ? file : directory + "/" + file, sha256: sha?.lowercased(),
                url: node["url"]?.string)
        }
        self.directory = directory
        self.name = root["name"]?.string ?? String(directory.split(separator: "/").last ?? "model")
        self.description = root["description"]?.string
        self.detector = try entry("detector")
        self.textEncoder = try entry("text_encoder")
        self.imageEncoder = root["image_encoder"] == nil ? nil : try entry("image_encoder")
        self.sceneTower = root["scene_tower"] == nil ? nil : try entry("scene_tower")
    }
}
