import Foundation
import LookoutJSON
import LookoutTensor
import Testing

/// `lookout query` fed from a pipe: one answer per query line and per photo, thresholds changed in place,
/// each answer compared with ultralytics predict on the same photo (Tests/Fixtures/demo/expected.json).
@Suite struct QueryCommandTests {
    static let fine = Reference.demoQueries("fine")
    static let case0 = Reference.demo["cases"]![0]

    static func expectAnswer(
        _ answer: JSONNode, case item: JSONNode, expected: JSONNode, queries: [String], _ name: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(answer["image"]!.string! == CLI.root + "/" + item["image"]!.string!, sourceLocation: sourceLocation)
        let (score, box) = Reference.tolerances(
            case: item, width: Int(answer["width"]!.int!), height: Int(answer["height"]!.int!))
        Reference.expectSame(
            Reference.detections(of: answer), Reference.demoDetections(expected, queries: queries), score: score,
            box: box,
            name, sourceLocation: sourceLocation)
    }

    @Test func answersEachLineAndRethresholds() throws {
        let input =
            [
                Self.fine.joined(separator: ", "), ":conf 0.05", ":conf 0.01", ":agnostic on", ":agnostic off",
                ":iou 0.1",
                ":iou 0.7", ":max-det 3", ":bogus", ":conf 7", " , ", ":quit", "never reached",
            ].joined(separator: "\n") + "\n"
        let result = try CLI.run(["query", CLI.root + "/" + Self.case0["image"]!.string!, "--json"], input: input)
        #expect(result.status == 0, "\(result.stderr)")
        let answers = try Reference.lines(result.stdout)
        let expected = [
            ("first query set", Self.case0["detections"]!["0.25"]!), (":conf 0.05", Self.case0["detections"]!["0.05"]!),
            (":conf 0.01", Self.case0["options"]!["conf 0.01"]!), (":agnostic on", Self.case0["options"]!["agnostic"]!),
            (":agnostic off", Self.case0["options"]!["conf 0.01"]!), (":iou 0.1", Self.case0["options"]!["iou 0.1"]!),
            (":iou 0.7", Self.case0["options"]!["conf 0.01"]!), (":max-det 3", Self.case0["options"]!["max-det 3"]!),
        ]
        #expect(answers.count == expected.count)
        for (answer, (name, reference)) in zip(answers, expected) {
            Self.expectAnswer(answer, case: Self.case0, expected: reference, queries: Self.fine, name)
        }
        #expect(result.stderr.contains("unknown command :bogus"))
        #expect(result.stderr.contains(":conf takes a number in [0, 1)"))
        #expect(result.stderr.contains("no queries in that line"))
    }

    /// Two photos, a second query set, features kept on disk (--feature-cache) and a memory bound too small
    /// for one photo's features (--feature-memory 1): each answer still equals the reference, and a second
    /// session answers from the disk cache; a session in int8 does not take fp32's features from it.
    @Test func featureMemoryAndDiskCache() throws {
        let cache = try CLI.scratch("feature-cache")
        defer { CLI.remove(cache) }
        // The "mixed" cases at 640: scene-0005 and the grayscale scene-0003.
        let cases = [Reference.demo["cases"]![1], Reference.demo["cases"]![3]]
        let mixed = Reference.demoQueries("mixed")
        let photos = cases.map { CLI.root + "/" + $0["image"]!.string! }
        let input = mixed.joined(separator: ",") + "\n:conf 0.05\n" + mixed.joined(separator: ",") + "\n"
        var files: [String] = []
        for session in 0..<2 {
            let result = try CLI.run(
                ["query"] + photos + ["--json", "--feature-memory", "1", "--feature-cache", cache], input: input)
            #expect(result.status == 0, "\(result.stderr)")
            let answers = try Reference.lines(result.stdout)
            #expect(answers.count == 6, "session \(session)")
            for (k, answer) in answers.enumerated() {
                let item = cases[k % 2]
                Self.expectAnswer(
                    answer, case: item, expected: item["detections"]![k < 2 ? "0.25" : "0.05"]!, queries: mixed,
                    "session \(session) answer \(k)")
            }
            let now = try FileManager.default.contentsOfDirectory(atPath: cache).sorted()
            #expect(now.count >= 2, "\(now)")
            if session == 1 { #expect(now == files, "the second session reused the first's files") }
            files = now
        }
        // Features computed in int8 are not fp32's: a session in int8 keeps its own files beside them. (Where the CPU
        // has no AVX2, int8 computes fp32, whose files it reuses.)
        let int8 = try CLI.run(
            ["query"] + photos + ["--json", "--feature-cache", cache, "--precision", "int8"], input: input)
        #expect(int8.status == 0, "\(int8.stderr)")
        let after = try FileManager.default.contentsOfDirectory(atPath: cache).sorted()
        if Precision.int8.isNative {
            #expect(Set(after).isStrictSuperset(of: files), "\(after) against \(files)")
        } else {
            #expect(after == files, "\(after) against \(files)")
        }
        let bad = try CLI.run(["query", photos[0], "--feature-memory", "-1"], input: "")
        #expect(bad.status != 0 && bad.stderr.contains("--feature-memory"), "\(bad.stderr)")
    }

    @Test func unreadablePhotosAreSkippedOrFatalWhenAllAre() throws {
        let one = try CLI.run(
            [
                "query", CLI.root + "/Tests/Fixtures/image/files/truncated.jpg",
                CLI.root + "/" + Self.case0["image"]!.string!, "--json",
            ],
            input: Self.fine.joined(separator: ",") + "\n")
        #expect(one.status == 0 && one.stderr.contains("truncated.jpg"), "\(one.stderr)")
        #expect(try Reference.lines(one.stdout).count == 1)
        let none = try CLI.run(["query", CLI.root + "/Tests/Fixtures/image/files/truncated.jpg"], input: "red star\n")
        #expect(none.status != 0 && none.stderr.contains("none of the images could be read"))
    }
}

/// `lookout query` at a terminal (a pseudo-terminal): a line editor with history kept across sessions,
/// Ctrl-C that clears the line, lines longer than the terminal's 4,095-byte line buffer, and the prompt
/// drawn on the terminal only — never into standard output redirected to a file.
@Suite struct QueryTerminalTests {
    static let photo = CLI.root + "/examples/scenes/scene-0001.jpg"

    /// The labels of each JSON answer on standard output.
    static func labels(_ stdout: String) throws -> [[String]] {
        try Reference.lines(stdout).map { answer in
            let detections = answer["detections"]!
            return (0..<detections.count).map { detections[$0]["label"]!.string! }
        }
    }

    static func answered(_ count: Int) -> (TerminalSession) -> Bool {
        { session in session.stdout.split(separator: "\n").count >= count }
    }

    @Test func editingHistoryAndInterrupt() throws {
        let home = try CLI.scratch("terminal-home")
        defer { CLI.remove(home) }
        let session = try TerminalSession(["query", Self.photo, "--json"], home: home)
        #expect(session.wait(until: { $0.screen.contains("query> ") }), "no prompt: \(session.stderr)")
        // Backspace; Ctrl-C clears what was typed; Home then insert; a 5,000-byte line.
        let steps = [
            "blue circlX\u{7F}e\r", "green\u{03}blue circle\r", "circle\u{1B}[Hblue \u{1B}[F\r",
            String(repeating: " ", count: 5000) + "blue circle\r", "\u{1B}[A\r",
        ]
        for (index, keys) in steps.enumerated() {
            session.type(keys)
            #expect(session.wait(until: Self.answered(index + 1)), "step \(index): \(session.stderr)")
        }
        session.type("\u{04}")
        #expect(session.finish() == 0, "\(session.stderr)")
        #expect(try Self.labels(session.stdout) == Array(repeating: ["blue circle"], count: steps.count))
        #expect(!session.stdout.contains("query>"), "the prompt went to standard output")
        #expect(session.screen.contains("^C"))
        let history = try String(contentsOfFile: home + "/.local/state/lookout/query-history", encoding: .utf8)
        #expect(history == "blue circle\n")

        // A new session recalls the previous session's line with ↑.
        let second = try TerminalSession(["query", Self.photo, "--json"], home: home)
        #expect(second.wait(until: { $0.screen.contains("query> ") }))
        second.type("\u{1B}[A\r")
        #expect(second.wait(until: Self.answered(1)))
        second.type(":quit\r")
        #expect(second.finish() == 0)
        #expect(try Self.labels(second.stdout) == [["blue circle"]])
    }

    /// Escape sequences the editor does not know (F5, Alt-x, a mouse report) are read whole and dropped,
    /// never run as a query.
    @Test func unknownKeysAreIgnored() throws {
        let home = try CLI.scratch("terminal-home")
        defer { CLI.remove(home) }
        let session = try TerminalSession(["query", Self.photo, "--json"], home: home)
        #expect(session.wait(until: { $0.screen.contains("query> ") }))
        session.type("\u{1B}[15~\u{1B}x\u{1B}[<0;12;5Mblue circle\r")
        #expect(session.wait(until: Self.answered(1)), "\(session.stderr)")
        session.type("\u{04}")
        #expect(session.finish() == 0)
        #expect(try Self.labels(session.stdout) == [["blue circle"]])
    }

    /// Keys typed while an answer is computed reach the editor as typed: the terminal never goes back to
    /// its own line mode between prompts, where a typed-ahead Ctrl-D would become a NUL the editor cannot
    /// read as an end (a session then waits forever).
    @Test func keysTypedDuringAnAnswerAreKept() throws {
        let home = try CLI.scratch("terminal-home")
        defer { CLI.remove(home) }
        let session = try TerminalSession(["query", Self.photo, "--json"], home: home)
        #expect(session.wait(until: { $0.screen.contains("query> ") }))
        let watching = NSLock()
        nonisolated(unsafe) var watch = true
        nonisolated(unsafe) var lineModeSeen = 0
        let watcher = Thread {
            while watching.withLock({ watch }) {
                if session.lineMode { watching.withLock { lineModeSeen += 1 } }
                usleep(100)
            }
        }
        watcher.start()
        for count in 1...4 {
            session.type("blue circle\r")
            #expect(session.wait(interval: 0.0002, until: Self.answered(count)))
        }
        // The next line and Ctrl-D typed at once, as the editor hands the line over.
        session.type("blue circle\r")
        #expect(session.wait(interval: 0.0002, until: { $0.screen.hasSuffix("\n") || Self.answered(5)($0) }))
        watching.withLock { watch = false }  // at the end the original modes come back
        session.type("blue circle\r\u{04}")
        #expect(session.finish() == 0, "\(session.stderr)")
        #expect(watching.withLock { lineModeSeen } == 0, "the terminal was in line mode between prompts")
        #expect(try Self.labels(session.stdout) == Array(repeating: ["blue circle"], count: 6))
    }

    /// An interrupt (Ctrl-C while an answer is computed reaches the process as SIGINT) does not end the
    /// session: the features are kept and the next query is answered.
    @Test func oneInterruptKeepsTheSession() throws {
        let home = try CLI.scratch("terminal-home")
        defer { CLI.remove(home) }
        let session = try TerminalSession(["query", Self.photo, "--json"], home: home)
        #expect(session.wait(until: { $0.screen.contains("query> ") }))
        kill(session.process.processIdentifier, SIGINT)
        #expect(session.wait(until: { $0.stderr.contains("press Ctrl-C again to leave") }))
        session.type("blue circle\r")
        #expect(session.wait(until: Self.answered(1)), "\(session.stderr)")
        session.type("\u{04}")
        #expect(session.finish() == 0)
        #expect(try Self.labels(session.stdout) == [["blue circle"]])
    }
}
