import Foundation
import LookoutDetector
import LookoutTensor
import LookoutWeights
import Testing

/// YOLOE (v8, 11 and 26, segmentation heads) against ultralytics 8.4.190 on random-weight checkpoints it built
/// from its own yamls (`scripts/reference/make_yoloe_fixtures.py`): the class embeddings after `get_tpe`,
/// backbone and neck maps, the raw output (boxes, scores, mask coefficients) and the prototypes, each within
/// ten times the reference's own float32 error (its float32 run against float64); then what `YOLOE.predict`
/// returns from the photo file — class-agnostic NMS, boxes in the photo's pixels, and masks at the input's
/// size (`retina_masks=False`) and at the photo's (`retina_masks=True`).
@Suite struct YOLOEParityTests {
    static let root = NetworkParityTests.root
    static let fixtures = root + "/Tests/Fixtures/yoloe"
    static let networks: [String: YOLOENetwork] = [
        "v8": try! YOLOENetwork(weights: WeightFile.open(fixtures + "/yoloe-v8n-seg-random.pt")),
        "11": try! YOLOENetwork(weights: WeightFile.open(fixtures + "/yoloe-11n-seg-random.pt")),
        "26": try! YOLOENetwork(weights: WeightFile.open(fixtures + "/yoloe-26n-seg-random.pt")),
    ]
    static let cases = [
        "v8-chelsea-352", "v8-rocket-416", "11-chelsea-352", "11-rocket-416", "26-chelsea-352", "26-rocket-416",
    ]
    static let layers = ["v8": [4, 6, 9, 15, 18, 21], "11": [4, 6, 10, 16, 19, 22], "26": [4, 6, 10, 16, 19, 22]]

    static func family(_ name: String) -> String { String(name.prefix { $0 != "-" }) }

    @Test func familiesAndScalesAreRecognised() {
        #expect(Self.networks["v8"]?.family == .v8)
        #expect(Self.networks["11"]?.family == .v11)
        #expect(Self.networks["26"]?.family == .v26)
        #expect(Self.networks["26"]?.hasOneToOneHead == true && Self.networks["11"]?.hasOneToOneHead == false)
        #expect(Self.networks["26"]?.textTower == .mobileCLIP2 && Self.networks["11"]?.textTower == .mobileCLIP)
        #expect(Self.networks.values.allSatisfy { $0.scale == "n" && $0.segments && $0.embeddingSize == 512 })
    }

    @Test(arguments: cases)
    func mapsAndOutputMatchUltralytics(name: String) throws {
        let network = Self.networks[Self.family(name)]!
        let file = try WeightFile.open("\(Self.fixtures)/\(name).safetensors")
        let input = NetworkParityTests.map(try file.view("input"))
        let textView = try file.view("text")
        let classes = textView.shape[1]

        let tpe = network.classEmbeddings(textView.floats(), classes: classes)
        let tpeError = NetworkParityTests.maxError(tpe, try file.view("tpe").floats())
        print("\(name) get_tpe: max |error| \(tpeError)")
        #expect(tpeError <= 1e-6, "\(name): class embeddings differ by \(tpeError)")

        let features = network.backbone(input)
        let neck = network.neck(features)
        for (map, layer) in zip(features + neck, Self.layers[Self.family(name)]!) {
            let expected = try file.view("layer\(layer)")
            #expect([1, map.channels, map.height, map.width] == expected.shape, "\(name) layer \(layer)")
            let error = NetworkParityTests.maxError(map.data, expected.floats())
            let bound = NetworkParityTests.tolerance(file, "layer\(layer)")
            print("\(name) layer \(layer): max |error| \(error), tolerance \(bound)")
            #expect(error <= bound, "\(name) layer \(layer): max |error| \(error) > \(bound)")
        }

        let result = network.run(features, text: textView.floats(), classes: classes)
        let masks = try #require(result.masks)
        let expected = try file.view("output")
        let anchors = result.output.count / (4 + classes)
        #expect(expected.shape == [1, 4 + classes + masks.count, anchors])
        let reference = expected.floats()
        let boxError = NetworkParityTests.maxError(
            Array(result.output[0..<(4 * anchors)]), Array(reference[0..<(4 * anchors)]))
        let scoreError = NetworkParityTests.maxError(
            Array(result.output[(4 * anchors)...]), Array(reference[(4 * anchors)..<((4 + classes) * anchors)]))
        let coefficientError = NetworkParityTests.maxError(
            masks.coefficients, Array(reference[((4 + classes) * anchors)...]))
        let protoView = try file.view("protos")
        #expect(
            protoView.shape == [1, masks.count, masks.prototypes.height, masks.prototypes.width], "\(name) protos")
        let protoError = NetworkParityTests.maxError(masks.prototypes.data, protoView.floats())
        print(
            "\(name): boxes \(boxError) px, scores \(scoreError), mask coefficients \(coefficientError), prototypes \(protoError)"
        )
        #expect(boxError <= NetworkParityTests.tolerance(file, "boxes"), "\(name) boxes \(boxError)")
        #expect(scoreError <= NetworkParityTests.tolerance(file, "scores"), "\(name) scores \(scoreError)")
        #expect(
            coefficientError <= NetworkParityTests.tolerance(file, "coefficients"),
            "\(name) coefficients \(coefficientError)")
        #expect(protoError <= NetworkParityTests.tolerance(file, "protos"), "\(name) prototypes \(protoError)")
    }

    /// Masks stored one bit per pixel (numpy.packbits over N×H×W), their shape in the metadata.
    static func masks(_ file: WeightFile, _ key: String) throws -> [BinaryMask] {
        let shape = try #require(file.metadata[key + "_shape"]).split(separator: ",").compactMap { Int($0) }
        let bits = try file.view(key).floats().map { UInt8($0) }
        let (count, height, width) = (shape[0], shape[1], shape[2])
        return (0..<count).map { n in
            BinaryMask(
                width: width, height: height,
                pixels: (0..<(height * width)).map { p in
                    let index = n * height * width + p
                    return (bits[index / 8] >> (7 - UInt8(index % 8))) & 1
                })
        }
    }

    static func iou(_ a: BinaryMask, _ b: BinaryMask) -> Double {
        var (both, either) = (0, 0)
        for (x, y) in zip(a.wholePixels, b.wholePixels) {
            both += Int(x & y)
            either += Int(x | y)
        }
        return either == 0 ? 1 : Double(both) / Double(either)
    }

    /// `YOLOE.predict` end to end: YOLOE's defaults (class-agnostic NMS, IoU 0.7), the photo's boxes and both
    /// kinds of masks; a detection whose mask is empty is dropped, as ultralytics drops it.
    @Test(arguments: cases)
    func predictMatchesUltralytics(name: String) throws {
        try Self.comparePredictions(name, oneToOne: false)
    }

    /// YOLOE-26 with `nms=False`: the one-to-one head, its output kept by top-k (class-agnostic, as YOLOE
    /// predicts) instead of NMS.
    @Test(arguments: ["26-chelsea-352", "26-rocket-416"])
    func oneToOnePredictMatchesUltralytics(name: String) throws {
        try Self.comparePredictions(name, oneToOne: true)
    }

    static func comparePredictions(_ name: String, oneToOne: Bool) throws {
        let network = Self.networks[Self.family(name)]!
        let file = try WeightFile.open("\(Self.fixtures)/\(name).safetensors")
        let input = NetworkParityTests.map(try file.view("input"))
        let textView = try file.view("text")
        let classes = textView.shape[1]
        let original = try file.view("original_shape").integers()
        let (photoHeight, photoWidth) = (Int(original[0]), Int(original[1]))
        let result = network.run(
            network.backbone(input), classEmbeddings: network.classEmbeddings(textView.floats(), classes: classes),
            classes: classes, oneToOne: oneToOne)
        let prototypes = try #require(result.masks)
        var options = SuppressionOptions()
        options.confidence = Float(try #require(file.metadata[oneToOne ? "e2e_conf" : "conf"].flatMap(Double.init)))
        options.agnostic = true
        let kept =
            oneToOne
            ? NonMaxSuppression.topK(result.output, classes: classes, options: options)
            : NonMaxSuppression.run(result.output, classes: classes, options: options)

        for retina in oneToOne ? [false] : [false, true] {
            let prefix = oneToOne ? "e2e_" : retina ? "retina_" : ""
            let reference = try file.view(prefix + "detections").floats()
            let expectedMasks = try Self.masks(file, prefix + "masks")
            let scaled = NonMaxSuppression.scaleBoxes(
                kept, inputWidth: input.width, inputHeight: input.height, imageWidth: photoWidth,
                imageHeight: photoHeight)
            var found: [(Detection, BinaryMask)] = []
            for (detection, inInput) in zip(scaled, kept) {
                let mask =
                    retina
                    ? MaskProcessing.photoMask(
                        prototypes, anchor: detection.anchor, box: detection.box, photoWidth: photoWidth,
                        photoHeight: photoHeight)
                    : MaskProcessing.inputMask(
                        prototypes, anchor: inInput.anchor, box: inInput.box, inputWidth: input.width,
                        inputHeight: input.height)
                if mask.area > 0 { found.append((detection, mask)) }
            }
            try #require(
                found.count == reference.count / 6,
                "\(name) \(prefix)detections: \(found.count) vs \(reference.count / 6)")
            var worstIoU = 1.0, differing = 0, boxError: Float = 0, scoreError: Float = 0
            for (index, (detection, mask)) in found.enumerated() {
                let row = Array(reference[(6 * index)..<(6 * index + 6)])
                boxError = max(boxError, NetworkParityTests.maxError(detection.box, Array(row[0..<4])))
                scoreError = max(scoreError, abs(detection.score - row[4]))
                #expect(detection.classIndex == Int(row[5]), "\(name) detection \(index) class")
                let expected = expectedMasks[index]
                #expect(mask.width == expected.width && mask.height == expected.height, "\(name) mask size")
                worstIoU = min(worstIoU, Self.iou(mask, expected))
                differing += zip(mask.wholePixels, expected.wholePixels).filter { $0 != $1 }.count
            }
            print(
                "\(name) \(retina ? "retina" : "input-size") masks: \(found.count) detections, boxes \(boxError) px, scores \(scoreError), worst mask IoU \(worstIoU), \(differing) pixels differ"
            )
            // Ten times the reference's own float32 error, the boxes' scaled from the input to the photo.
            let gain = min(Float(input.width) / Float(photoWidth), Float(input.height) / Float(photoHeight))
            let (boxBound, scoreBound) = (
                NetworkParityTests.tolerance(file, "boxes") / gain, NetworkParityTests.tolerance(file, "scores")
            )
            #expect(boxError <= boxBound, "\(name) boxes \(boxError) px > \(boxBound)")
            #expect(scoreError <= scoreBound, "\(name) scores \(scoreError) > \(scoreBound)")
            #expect(worstIoU >= 0.99, "\(name) mask IoU \(worstIoU)")
        }
    }

    /// Strings from pycocotools 2.0.10's `mask.encode` on the same masks.
    @Test func cocoRunLengthsAsPycocotoolsWritesThem() {
        // 3×2, column-major 0 0 | 1 1 | 0 1: runs 2, 2, 1, 1; from the fourth on, minus the run two before.
        #expect(BinaryMask(width: 3, height: 2, pixels: [0, 1, 0, 0, 1, 1]).cocoRLE == "221O")
        // 23×37 random pixels (numpy default_rng(5), > 0.6), given row-major.
        let rows =
            "11000000011001110010001011011010000010010100100001010101001110010110100101111110110001000011101010001100000010000001100110100101100000001100011101010101000000010000100010010111000000101000100000101000010000001110110101010011001010000000000010010010011000110000110000110000100101001010100100001010111010000001010001101000010000110011010000000100111100001001001000000000111000001110011001110000100010100000011010000011000011101000010100100000010000101110000110010011100010010001101001001010101000000010011000100100001010100001000000101001000000000001110001011010101100011010110010011000000101001010000010010001001000000001010101110101000100001001100000110001000010110000000110100010000110101100010010000011100000000100100000010100100100001111110000000010101100101111111010100000010111011011010010010010110000110010111000010010110100100001000011100100000"
        let mask = BinaryMask(width: 23, height: 37, pixels: rows.utf8.map { $0 - 48 })
        #expect(
            mask.cocoRLE
                == "0131OO41KO2011N020OO00N2011MO251LMO13OM0210O21O3NL11NO94KOOMM30M20N031O0NO001210NO1O20N01002NN132M10M030O1N0OO1022M02N00N11O41M20N1OM30M000000001050J0020N60J0104000K00030M31MO10O20N01010O030M030L031OO010O21LO028NI0011012NO0O10OO80I0N10O30O0N0115OJ010O0126NK001N01O4000K130MO60L001OOO03010O0N21NO010235MI0O2OO2OO32M22LNO010O00000021NO12O40J040O14OI010O0020N1050L0N0101000N10O43OM30J011OO0"
        )
    }
}
