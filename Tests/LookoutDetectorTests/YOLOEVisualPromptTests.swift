import Foundation
import LookoutDetector
import LookoutJSON
import LookoutTensor
import LookoutWeights
import Testing

/// Visual prompts (SAVPE) against ultralytics 8.4.190's `YOLOEVPSegPredictor` on the random YOLOE-11n-seg
/// and YOLOE-26n-seg fixtures (`scripts/reference/make_yoloe_vp_fixtures.py`): the prompt masks made from boxes (exactly), the
/// prompt embeddings, and for prompts drawn on the photo searched, `predict`'s boxes, prompt indices and masks.
@Suite struct YOLOEVisualPromptTests {
    static let fixtures = YOLOEParityTests.fixtures
    static let cases = ["11vp-rocket-416", "11vp-refer-chelsea-416", "26vp-rocket-416"]
    static func network(_ name: String) -> YOLOENetwork { YOLOEParityTests.networks[String(name.prefix(2))]! }
    /// rocket.jpg, where the prompts are drawn in both cases.
    static let promptPhoto = (width: 640, height: 427)

    static func prompts(_ file: WeightFile) throws -> (boxes: [[Float]], classes: [Int]) {
        let boxes = try JSONDocument(text: file.metadata["bboxes"]!).root
        let classes = try JSONDocument(text: file.metadata["cls"]!).root
        return (
            (0..<boxes.count).map { b in (0..<4).map { Float(boxes[b][$0].number!) } },
            (0..<classes.count).map { Int(classes[$0].int!) }
        )
    }

    @Test(arguments: cases)
    func masksAndEmbeddingsMatchUltralytics(name: String) throws {
        let file = try WeightFile.open("\(Self.fixtures)/\(name).safetensors")
        let input = NetworkParityTests.map(try file.view("prompt_input"))
        let (boxes, classes) = try Self.prompts(file)
        let made = VisualPromptMasks.make(
            boxes: boxes, classes: classes, photoWidth: Self.promptPhoto.width, photoHeight: Self.promptPhoto.height,
            inputWidth: input.width, inputHeight: input.height)
        let visuals = try file.view("visuals")
        #expect(visuals.shape == [made.masks.count, made.height, made.width], "\(name) mask grid")
        #expect(made.masks.flatMap { $0 }.map(Float.init) == visuals.floats(), "\(name): prompt masks differ")
        #expect(made.classes == [0, 1])

        let network = Self.network(name)
        let vpe = network.visualPromptEmbeddings(network.backbone(input), masks: made.masks)
        let error = NetworkParityTests.maxError(vpe, try file.view("vpe").floats())
        print("\(name): prompt embeddings max |error| \(error)")
        #expect(error <= 1e-5, "\(name) prompt embeddings differ by \(error)")
    }

    /// Prompts drawn on the photo searched: `predict`'s detections (class = prompt index) and photo-size masks.
    @Test(arguments: ["11vp-rocket-416", "26vp-rocket-416"])
    func predictWithPromptsOnThePhoto(name: String) throws {
        let network = Self.network(name)
        let file = try WeightFile.open("\(Self.fixtures)/\(name).safetensors")
        let input = NetworkParityTests.map(try file.view("prompt_input"))
        let (boxes, classes) = try Self.prompts(file)
        let made = VisualPromptMasks.make(
            boxes: boxes, classes: classes, photoWidth: 640, photoHeight: 427, inputWidth: input.width,
            inputHeight: input.height)
        let features = network.backbone(input)
        let vpe = network.visualPromptEmbeddings(features, masks: made.masks)
        let result = network.run(features, classEmbeddings: vpe, classes: made.classes.count)
        let prototypes = try #require(result.masks)
        var options = SuppressionOptions()
        options.confidence = Float(try #require(file.metadata["conf"].flatMap(Double.init)))
        options.agnostic = true
        let kept = NonMaxSuppression.run(result.output, classes: made.classes.count, options: options)
        let scaled = NonMaxSuppression.scaleBoxes(
            kept, inputWidth: input.width, inputHeight: input.height, imageWidth: 640, imageHeight: 427)
        let found = scaled.compactMap { detection -> (Detection, BinaryMask)? in
            let mask = MaskProcessing.photoMask(
                prototypes, anchor: detection.anchor, box: detection.box, photoWidth: 640, photoHeight: 427)
            return mask.area > 0 ? (detection, mask) : nil
        }
        let reference = try file.view("retina_detections").floats()
        let expectedMasks = try YOLOEParityTests.masks(file, "retina_masks")
        try #require(found.count == reference.count / 6, "\(found.count) vs \(reference.count / 6) detections")
        var worstIoU = 1.0, boxError: Float = 0, scoreError: Float = 0
        for (index, (detection, mask)) in found.enumerated() {
            let row = Array(reference[(6 * index)..<(6 * index + 6)])
            boxError = max(boxError, NetworkParityTests.maxError(detection.box, Array(row[0..<4])))
            scoreError = max(scoreError, abs(detection.score - row[4]))
            #expect(detection.classIndex == Int(row[5]), "detection \(index) prompt")
            worstIoU = min(worstIoU, YOLOEParityTests.iou(mask, expectedMasks[index]))
        }
        print(
            "\(name): \(found.count) detections, boxes \(boxError) px, scores \(scoreError), worst mask IoU \(worstIoU)"
        )
        #expect(found.count >= 3 && boxError <= 0.01 && scoreError <= 1e-5 && worstIoU >= 0.99)
    }
}
