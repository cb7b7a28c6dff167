import ArgumentParser
import LookoutImage
import LookoutIndex
import LookoutJSON
import LookoutSupport
import LookoutTextEncoder

struct SimilarCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "similar",
        abstract: "The indexed photos nearest to a photo (whole-image CLIP embeddings), best first.",
        discussion: """
            Needs an index made with `lookout index FOLDER --image-model ViT-B-32.pt`. The photo may be in the \
            index or not: it is embedded with the index's image tower (from where the index was made, or \
            --image-model) and compared with every indexed photo by cosine similarity; the photo itself, \
            when indexed, comes first at 1.000.

            Examples:
              lookout similar ~/Pictures/beach.jpg
              lookout similar photo.png --top 5 --json
            """
    )

    @Argument(help: "A JPEG or PNG photo.")
    var photo: String

    @OptionGroup var database: IndexDatabaseOption

    @Option(help: "Photos to list.")
    var top = 10

    @Option(
        help: ArgumentHelp(
            "The image tower the index was made with, when it has moved since (checked by its fingerprint).",
            valueName: "path"))
    var imageModel: String?

    @Flag(help: "One JSON object per photo per line, best first.")
    var json = false

    func validate() throws {
        guard top > 0 else { throw ValidationError("--top must be positive.") }
    }

    func run() throws {
        let path = try database.path()
        let index = try PhotoIndex(path: path, readOnly: true)
        guard let stored = try index.storedModel() else {
            throw LookoutError("\(path) holds no indexed photos yet: run `lookout index FOLDER --image-model …` first")
        }
        guard let fingerprint = stored.imageTower, let towerPath = imageModel ?? stored.imageTowerPath else {
            throw LookoutError(
                "\(path) holds no whole-photo embeddings: index the folder again with --image-model ViT-B-32.pt")
        }
        let tower = try CLIPImageEncoder(contentsOf: towerPath)
        guard tower.fingerprint == fingerprint else {
            throw LookoutError(
                "\(towerPath) is not the image tower \(path) was made with: give that one with --image-model")
        }
        let decoded = try CLIPPreprocessing.decode(try FileContents.read(photo, maximumSize: 1 << 30), name: photo)
        let side = tower.configuration.inputResolution
        let embedding = tower.encode([
            CLIPPreprocessing.tensor(CLIPPreprocessing.resizedAndCropped(decoded, size: side))
        ])[0]
        let found = try index.similar(to: embedding, top: top)
        for (path, cosine) in found {
            if json {
                print(JSONValue.object([("image", .string(path)), ("cosine", Report.shortest(cosine))]).serialized)
            } else {
                print("\(Report.format3(cosine))  \(Report.visible(path))")
            }
        }
        if found.isEmpty && !json { print("no indexed photo has a whole-photo embedding") }
    }
}
