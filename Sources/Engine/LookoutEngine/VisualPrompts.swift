import LookoutDetector
import LookoutImage

/// YOLOE's visual prompts: boxes drawn on a photo ("find more of this"), each with a label; the boxes of one
/// label make one prompt, as ultralytics' `visual_prompts` (`bboxes`, `cls`) does. Their embeddings come from the
/// head's SAVPE module on that photo (``YOLOENetwork/visualPromptEmbeddings(_:masks:pool:)``) and are scored by
/// the contrastive head as text queries are.
public struct VisualPrompt: Sendable, Equatable {
    /// `x1, y1, x2, y2` in the prompt photo's pixels.
    public var box: [Float]
    public var label: String

    public init(box: [Float], label: String) {
        self.box = box
        self.label = label
    }
}

public struct VisualPromptError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

extension Engine {
    /// One class embedding per label of `prompts` (in the order labels first appear), computed on `prepared`: the
    /// photo the boxes are drawn on, letterboxed as ultralytics' visual-prompt predictor does (as `predict` for the
    /// photo searched itself, ``prepare(image:name:size:square:)`` with `square` for a reference photo).
    public func visualPromptEmbeddings(
        _ prompts: [VisualPrompt], on prepared: PreparedImage
    ) throws(VisualPromptError) -> [(label: String, embedding: [Float])] {
        guard let yoloe = network as? YOLOENetwork, yoloe.acceptsVisualPrompts else {
            throw VisualPromptError(
                description:
                    "\(network.path): visual prompts (boxes on a photo) need a YOLOE model with its visual prompt encoder (savpe); \(network.familyName) has none"
            )
        }
        guard !prompts.isEmpty else { throw VisualPromptError(description: "no visual prompt boxes") }
        for prompt in prompts {
            let b = prompt.box
            guard b.count == 4, b.allSatisfy({ $0.isFinite }), b[2] > b[0], b[3] > b[1], b[2] > 0, b[3] > 0,
                b[0] < Float(prepared.width), b[1] < Float(prepared.height)
            else {
                throw VisualPromptError(
                    description:
                        "visual prompt box \(b.map { "\($0)" }.joined(separator: ",")) is not x1,y1,x2,y2 with x1 < x2, y1 < y2 overlapping the \(prepared.width)×\(prepared.height) photo \(prepared.name)"
                )
            }
        }
        var labels: [String] = []
        for prompt in prompts where !labels.contains(prompt.label) { labels.append(prompt.label) }
        let made = VisualPromptMasks.make(
            boxes: prompts.map(\.box), classes: prompts.map { labels.firstIndex(of: $0.label)! },
            photoWidth: prepared.width, photoHeight: prepared.height, inputWidth: prepared.letterbox.width,
            inputHeight: prepared.letterbox.height)
        let embeddings = yoloe.visualPromptEmbeddings(prepared.features, masks: made.masks, backend: backend)
        let size = network.embeddingSize
        return made.classes.enumerated().map { row, index in
            (labels[index], Array(embeddings[(row * size)..<((row + 1) * size)]))
        }
    }
}
