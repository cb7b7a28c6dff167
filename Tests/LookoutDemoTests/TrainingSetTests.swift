import LookoutEngine
import Testing

/// The names and label lines of a training set (`lookout label`, the search export).
@Suite struct TrainingSetTests {
    /// Two photos whose names differ only in the extension or the case would share a label file: the later ones
    /// get a stem of their own.
    @Test func namesNeverShareALabelFile() {
        var taken = Set<String>()
        let names = ["a.jpg", "a.png", "A.JPG", "b.jpg", "a-2.jpg", ".hidden"].map {
            TrainingSet.uniqueName($0, taken: &taken)
        }
        #expect(names == ["a.jpg", "a-2.png", "A-3.JPG", "b.jpg", "a-2-2.jpg", ".hidden"])
        let labels = names.map {
            TrainingSet.yoloLabels(TrainingSet.Photo(name: $0, split: "train", width: 10, height: 10)).path.lowercased()
        }
        #expect(Set(labels).count == labels.count)
    }

    /// A box's YOLO line: class, centre and size over the photo's width and height, six decimals, clamped to 0–1.
    @Test func yoloLinesAreNormalised() {
        let photo = TrainingSet.Photo(
            name: "p.jpg", split: "val", width: 200, height: 100,
            boxes: [
                TrainingSet.Box(classIndex: 2, score: 0.9, box: [20, 10, 60, 90]),
                TrainingSet.Box(classIndex: 0, score: 0.5, box: [-10, 0, 210, 100]),
            ])
        let (path, text) = TrainingSet.yoloLabels(photo)
        #expect(path == "labels/val/p.txt")
        #expect(text == "2 0.200000 0.500000 0.200000 0.800000\n0 0.500000 0.500000 1.000000 1.000000\n")
    }
}
