import Foundation
import LookoutJSON
import Testing

/// `lookout query` fed from a pipe: one answer per query line, thresholds changed in place.
@Suite struct QueryCommandTests {
    @Test func answersEachLineAndRethresholds() throws {
        let root = CLI.root
        let input = "rocket, sky\n:conf 0.01\n:bogus\n , \ncat\n:quit\nnever reached\n"
        let result = try CLI.run(
            ["query"] + DetectCommandTests.model + [root + "/examples/photos/rocket.jpg", "--imgsz", "320", "--json"],
            input: input)
        #expect(result.status == 0, "\(result.stderr)")
        let answers = try result.stdout.split(separator: "\n").map { try JSONDocument(text: String($0)).root }
        #expect(answers.count == 3)  // the first query set, its re-threshold, the second query set
        let first = answers[0]["detections"]!
        let rethresholded = answers[1]["detections"]!
        #expect(rethresholded.count >= first.count)
        for index in 0..<rethresholded.count {
            #expect(["rocket", "sky"].contains(rethresholded[index]["label"]!.string!))
        }
        let second = answers[2]["detections"]!
        for index in 0..<second.count { #expect(second[index]["label"]!.string! == "cat") }
        #expect(result.stderr.contains("unknown command :bogus"))
        #expect(result.stderr.contains("no queries in that line"))
    }
}
