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
    }

    @Test(arguments: [
        "", "[]", #"{"images": 3}"#, #"{"ranges": {"a": [1]}}"#, #"{"ranges": {"a": [2, 1]}}"#,
        #"{"ranges": {"a": ["0", 1]}}"#, #"{"ranges": {"a": [0, 1e400]}}"#, #"{"ranges": []}"#,
    ])
    func damagedIsNotRead(text: String) {
        #expect(ActivationRanges(serialized: text) == nil)
    }
}
