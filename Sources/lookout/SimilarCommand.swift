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

    @Option(help: "Only photos at least this similar (cosine similarity, from -1 to 1).")
    var minScore: Float = -1

    @OptionGroup var filters: PhotoFilterOptions

    @Flag(help: "One JSON object per photo per line, best first.")
    var json = false

    func validate() throws {
        guard top > 0 else { throw ValidationError("--top must be positive.") }
        guard minScore >= -1 && minScore <= 1 else { throw ValidationError("--min-score is a cosine, from -1 to 1.") }
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
        let input = try CLIPPreprocessing.input(
            try FileContents.read(photo, maximumSize: 1 << 30), name: photo, size: tower.configuration.inputResolution)
        let embedding = tower.encode([input])[0]
        let found = try index.similar(to: embedding, top: top, filter: try filters.filter()).filter {
            $0.cosine >= minScore
        }
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

/// `--in`, `--after`, `--before`: which indexed photos a search or `similar` considers.
struct PhotoFilterOptions: ParsableArguments {
    @Option(name: .customLong("in"), help: ArgumentHelp("Only photos under this folder.", valueName: "folder"))
    var folder: String?

    @Option(
        help: ArgumentHelp(
            "Only photos taken on or after this date (EXIF DateTimeOriginal, else the file's time): 2024, 2024-06, 2024-06-01 or 2024-06-01 14:30.",
            valueName: "date"))
    var after: String?

    @Option(help: ArgumentHelp("Only photos taken before this date (same forms as --after).", valueName: "date"))
    var before: String?

    func validate() throws {
        for (name, value) in [("--after", after), ("--before", before)] {
            if let value, CalendarTime.seconds(typed: value) == nil {
                throw ValidationError(
                    "\(name) \(value): not a date (use 2024, 2024-06, 2024-06-01, or 2024-06-01 14:30)")
            }
        }
    }

    /// The library's filter; the folder is made canonical (as the index stores paths).
    func filter() throws -> PhotoFilter {
        var folderPath: String?
        if let folder {
            guard let canonical = FileSystem.realpath(folder) else {
                throw LookoutError("\(folder): no such folder (--in)")
            }
            folderPath = canonical
        }
        return PhotoFilter(
            folder: folderPath, after: after.flatMap(CalendarTime.seconds(typed:)),
            before: before.flatMap(CalendarTime.seconds(typed:)))
    }
}
