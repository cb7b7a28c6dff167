import LookoutWeights
import Testing

/// The int8 calibration's form in a detector file's metadata: read back exactly as written; anything else is
/// not read (the network then refuses int8 and says the calibration is damaged).
@Suite struct ActivationRangesTests {
    @Test func roundTrip() throws {
        let ranges = ActivationRanges(
            ranges: ["model.2.cv1": -0.27846455...7.123456, "model.22.cv3.0.2": 0...0, "model.9.cv2": -1e-7...3e5],
            images: 64)
        let text = ranges.serialized
        #expect(text.hasPrefix(#"{"images":64"#), "\(text)")
        #expect(ActivationRanges(serialized: text) == ranges)
        // The digest that keys int8 results tells calibrations apart.
        var other = ranges
        other.ranges["model.9.cv2"] = -1e-7...3.1e5
        #expect(ranges.digest.count == 8 && ranges.digest == ActivationRanges(serialized: text)!.digest)
        #expect(other.digest != ranges.digest)
    }

    @Test(arguments: [
        "", "[]", #"{"images": 3}"#, #"{"ranges": {"a": [1]}}"#, #"{"ranges": {"a": [2, 1]}}"#,
        #"{"ranges": {"a": ["0", 1]}}"#, #"{"ranges": {"a": [0, 1e400]}}"#, #"{"ranges": []}"#,
        #"{"ranges": {"a": [0, 1e300]}}"#, #"{"images": 1e300, "ranges": {}}"#, #"{"images": -2, "ranges": {}}"#,
    ])
    func damagedIsNotRead(text: String) {
        #expect(ActivationRanges(serialized: text) == nil)
    }
}
