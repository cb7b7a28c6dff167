import Foundation
import LookoutDetector
import LookoutTensor
import LookoutWeights
import Testing

/// A prompt-free YOLOE (`-pf`) against ultralytics 8.4.190: a random YOLOE-11n-seg and YOLOE-26n-seg re-parameterised by
/// `set_vocab` exactly as ultralytics makes its `-pf` files (`scripts/reference/make_yoloe_pf_fixtures.py`):
/// the anchors the proposal filter keeps, the head's output over them (boxes, the 40 names' scores, mask
/// coefficients), and `YOLOE.predict` without any prompt (boxes, names, photo-size masks).
@Suite struct YOLOEPromptFreeTests {
    static let fixtures = YOLOEParityTests.fixtures
    static let networks = [
        "11": try! YOLOENetwork(weights: WeightFile.open(fixtures + "/yoloe-11n-seg-pf-random.pt")),
        "26": try! YOLOENetwork(weights: WeightFile.open(fixtures + "/yoloe-26n-seg-pf-random.pt")),
    ]
    static let cases = ["11pf-rocket-416", "11pf-chelsea-352", "26pf-rocket-416", "26pf-chelsea-352"]
    static func network(_ name: String) -> YOLOENetwork { networks[String(name.prefix(2))]! }

    @Test func namesComeFromTheCheckpoint() {
        for network in Self.networks.values {
            let names = network.promptFreeNames ?? []
            #expect(names.count == 40 && names.first == "thing00" && names.last == "thing39")
            #expect(network.segments)
        }
        #expect(Self.networks["11"]?.family == .v11 && Self.networks["26"]?.family == .v26)
    }

    @Test(arguments: cases)
    func keptAnchorsAndOutputMatchUltralytics(name: String) throws {
        let network = Self.network(name)
        let file = try WeightFile.open("\(Self.fixtures)/\(name).safetensors")
        let input = NetworkParityTests.map(try file.view("input"))
        let names = network.promptFreeNames!.count
        let result = network.score(network.backbone(input), text: [], classes: names, backend: CPUBackend.shared)
        let masks = try #require(result.masks)
        let expected = try file.view("output")
        let index = try file.view("index").floats()
        let keptByReference = index.filter { $0 != 0 }.count
        let kept = result.output.count / (4 + names)
        print("\(name): kept \(kept) anchors, ultralytics \(keptByReference) of \(index.count)")
        try #require(kept == keptByReference && expected.shape == [1, 4 + names + masks.count, kept])
        let reference = expected.floats()
        let boxError = NetworkParityTests.maxError(
            Array(result.output[0..<(4 * kept)]), Array(reference[0..<(4 * kept)]))
        let scoreError = NetworkParityTests.maxError(
            Array(result.output[(4 * kept)...]), Array(reference[(4 * kept)..<((4 + names) * kept)]))
        let coefficientError = NetworkParityTests.maxError(
            masks.coefficients, Array(reference[((4 + names) * kept)...]))
        print("\(name): boxes \(boxError) px, scores \(scoreError), mask coefficients \(coefficientError)")
        // The bounds of the same photo and size through the text-prompt model these weights come from (ten times
        // that reference's own float32 error, YOLOEParityTests): the prompt-free head is its head
        // re-parameterised.
        let textModel = try WeightFile.open(
            "\(Self.fixtures)/\(name.replacingOccurrences(of: "pf-", with: "-")).safetensors")
        let bounds = ["boxes", "scores", "coefficients"].map { NetworkParityTests.tolerance(textModel, $0) }
        print("\(name): bounds \(bounds)")
        #expect(boxError <= bounds[0], "\(name) boxes \(boxError)")
        #expect(scoreError <= bounds[1], "\(name) scores \(scoreError)")
        #expect(coefficientError <= bounds[2], "\(name) coefficients \(coefficientError)")
    }

    /// `YOLOE.predict` of the `-pf` file with no prompt: class-agnostic NMS, the vocabulary's names, masks at
    /// the photo's size.
    @Test(arguments: cases)
    func predictMatchesUltralytics(name: String) throws {
        let network = Self.network(name)
        let file = try WeightFile.open("\(Self.fixtures)/\(name).safetensors")
        let input = NetworkParityTests.map(try file.view("input"))
        let names = network.promptFreeNames!.count
        let original = try file.view("original_shape").integers()
        let (photoHeight, photoWidth) = (Int(original[0]), Int(original[1]))
        let result = network.score(network.backbone(input), text: [], classes: names, backend: CPUBackend.shared)
        let prototypes = try #require(result.masks)
        var options = SuppressionOptions()
        options.confidence = Float(try #require(file.metadata["conf"].flatMap(Double.init)))
        options.agnostic = true
        let kept = NonMaxSuppression.run(result.output, classes: names, options: options)
        let scaled = NonMaxSuppression.scaleBoxes(
            kept, inputWidth: input.width, inputHeight: input.height, imageWidth: photoWidth, imageHeight: photoHeight)
        var found: [(Detection, BinaryMask)] = []
        for detection in scaled {
            let mask = MaskProcessing.photoMask(
                prototypes, anchor: detection.anchor, box: detection.box, photoWidth: photoWidth,
                photoHeight: photoHeight)
            if mask.area > 0 { found.append((detection, mask)) }
        }
        let reference = try file.view("retina_detections").floats()
        let expectedMasks = try YOLOEParityTests.masks(file, "retina_masks")
        try #require(found.count == reference.count / 6, "\(name): \(found.count) vs \(reference.count / 6) detections")
        var worstIoU = 1.0, boxError: Float = 0, scoreError: Float = 0
        for (index, (detection, mask)) in found.enumerated() {
            let row = Array(reference[(6 * index)..<(6 * index + 6)])
            boxError = max(boxError, NetworkParityTests.maxError(detection.box, Array(row[0..<4])))
            scoreError = max(scoreError, abs(detection.score - row[4]))
            #expect(detection.classIndex == Int(row[5]), "\(name) detection \(index) class")
            worstIoU = min(worstIoU, YOLOEParityTests.iou(mask, expectedMasks[index]))
        }
        print(
            "\(name) prompt-free predict: \(found.count) detections, boxes \(boxError) px, scores \(scoreError), worst mask IoU \(worstIoU)"
        )
        #expect(found.count >= 3)
        #expect(boxError <= 0.01 && scoreError <= 1e-5 && worstIoU >= 0.99)
    }
}
