import ArgumentParser
import LookoutDetector
import LookoutEngine
import LookoutImage

/// `--prompt-box`, `--prompt-image` and `--combine-examples`: examples of what to find, drawn on the photo searched
/// or on reference photos, several per label (detect and eval).
struct ExampleOptions: ParsableArguments {
    @Option(
        name: .customLong("prompt-box"),
        help: ArgumentHelp(
            "A box around an example of what to find, x1,y1,x2,y2 in pixels of the --prompt-image it follows (without one, of the one photo searched), optionally :label (default \"object\"). Repeatable: the boxes of one label, on one photo or several, make one query (YOLOE: its visual prompt embeddings, averaged over the photos; YOLO-World: the CLIP image embeddings of the crops, averaged).",
            valueName: "x1,y1,x2,y2[:label]"))
    var promptBoxes: [String] = []

    @Option(
        name: .customLong("prompt-image"),
        help: ArgumentHelp(
            "A reference photo that the --prompt-box boxes after it are drawn on (ultralytics' refer_image). Repeatable: --prompt-image A.jpg --prompt-box …:mug --prompt-image B.jpg --prompt-box …:mug gives \"mug\" two examples; boxes before the first --prompt-image belong to it.",
            valueName: "path"))
    var promptImages: [String] = []

    @Option(
        name: .customLong("combine-examples"),
        help: ArgumentHelp(
            "How a label given both as a query and by examples makes one query: best (the query's text and the examples are alternatives: each place takes the better score) or mean (one embedding, the average of the text's and the examples').",
            valueName: "best|mean"))
    var combination: String?

    var combinationChosen: Examples.Combination {
        get throws {
            guard let combination else { return .best }
            guard let chosen = Examples.Combination(rawValue: combination.lowercased()) else {
                throw ValidationError("--combine-examples \(combination): give best or mean.")
            }
            return chosen
        }
    }

    /// The boxes as prompts.
    func prompts() throws -> [VisualPrompt] { try DetectCommand.visualPrompts(promptBoxes) }

    func validate() throws {
        if !promptImages.isEmpty && promptBoxes.isEmpty {
            throw ValidationError("--prompt-image is a photo the --prompt-box boxes are drawn on: give the boxes too.")
        }
        _ = try prompts()
        _ = try combinationChosen
        if !promptImages.isEmpty {
            for group in try groups() where group.boxes.isEmpty {
                throw ValidationError(
                    "--prompt-image \(group.image!) has no --prompt-box after it: give its boxes after it.")
            }
        }
    }

    /// The boxes of each reference photo, in the order given: a `--prompt-box` belongs to the `--prompt-image`
    /// before it (those before the first, to the first); without `--prompt-image`, all to the photo searched
    /// (image nil).
    func groups(arguments: [String] = CommandLine.arguments) throws -> [(image: String?, boxes: [VisualPrompt])] {
        let all = try prompts()
        guard !promptImages.isEmpty else { return all.isEmpty ? [] : [(nil, all)] }
        // ArgumentParser keeps each option's values but not how the two interleave: read the order from the
        // arguments themselves (values counted, so a path that looks like an option cannot confuse it).
        var owner: [Int] = []
        var images = 0
        var index = 1
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--" { break }
            if argument == "--prompt-image" || argument.hasPrefix("--prompt-image=") {
                images += 1
                if argument == "--prompt-image" { index += 1 }
            } else if argument == "--prompt-box" || argument.hasPrefix("--prompt-box=") {
                owner.append(max(images, 1) - 1)
                if argument == "--prompt-box" { index += 1 }
            }
            index += 1
        }
        if owner.count != all.count || images != promptImages.count {
            // Not from this process's arguments (a test, a wrapper): with one photo, every box is on it.
            guard promptImages.count == 1 else {
                throw ValidationError("--prompt-image and --prompt-box: give each photo's boxes right after it.")
            }
            owner = all.map { _ in 0 }
        }
        return promptImages.indices.map { photo in
            (promptImages[photo], all.indices.filter { owner[$0] == photo }.map { all[$0] })
        }
    }

    /// The CLIP image tower that turns YOLO-World's example boxes into queries (their crops), with an error that
    /// says what boxes need when there is none.
    static func cropTower(path: String?, configuration: EngineConfiguration, engine: Engine) throws -> ImagePrompts {
        do {
            return try ImagePrompts(path: path, configuration: configuration, engine: engine)
        } catch {
            throw ValidationError(
                "--prompt-box: \(engine.network.path) (\(engine.network.familyName)) has no visual prompt encoder, so its examples are CLIP image crops, and they need the image tower: \(error). Or use a YOLOE model, whose visual prompts need no tower."
            )
        }
    }

    /// The examples' queries, one per label. YOLOE: each photo's visual prompt embeddings, a reference photo
    /// letterboxed square as ultralytics' refer_image is, boxes on the photo searched on `searched()` (its usual
    /// letterbox). YOLO-World: the CLIP image embeddings of the crops, boxes on the photo searched cut from
    /// `searchedPath`.
    func queries(
        _ groups: [(image: String?, boxes: [VisualPrompt])], engine: Engine, imgsz: Int, imageModel: String?,
        configuration: EngineConfiguration, searched: () throws -> PreparedImage, searchedPath: String?
    ) throws -> [ExampleQuery] {
        if let yoloe = engine.network as? YOLOENetwork, yoloe.acceptsVisualPrompts {
            var photos: [ExamplePhoto] = []
            for group in groups {
                let prepared =
                    try group.image.map {
                        engine.prepare(image: try ImageFile.read($0), name: $0, size: imgsz, square: true)
                    } ?? searched()
                photos.append(ExamplePhoto(photo: prepared, prompts: group.boxes))
            }
            do {
                return try engine.exampleQueries(photos)
            } catch {
                throw ValidationError(error.description)
            }
        }
        let tower = try Self.cropTower(path: imageModel, configuration: configuration, engine: engine)
        return try tower.exampleQueries(groups.map { ($0.image ?? searchedPath!, $0.boxes) })
    }
}
