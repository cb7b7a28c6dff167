import ArgumentParser
import LookoutSupport

#if canImport(Glibc)
    import Glibc
#endif

@main
struct Lookout: ParsableCommand {
    /// Checks what ArgumentParser would misread before it parses: a misspelt subcommand gets a suggestion, and
    /// a file whose name starts with "-" (which would read as short options, `-h` among them) is refused
    /// with the way to name it.
    static func main() {
        // File names need not be UTF-8: their other bytes are kept (FileName), not replaced by U+FFFD.
        let arguments = (1..<Int(CommandLine.argc)).map { FileName.decode(cString: CommandLine.unsafeArgv[$0]!) }
        // The shell asking for completions (`---completion …`, from the scripts ArgumentParser writes).
        if arguments.first == "---completion" { Self.main(arguments) }
        let names = configuration.subcommands.compactMap { $0.configuration.commandName }
        if let first = arguments.first, !first.hasPrefix("-"), !names.contains(first), first != "help" {
            let closest = names.min { distance($0, first) < distance($1, first) }
            let hint = closest.map { distance($0, first) <= 2 ? " Did you mean '\($0)'?" : "" } ?? ""
            usageError("unknown command '\(first)'.\(hint) Commands: \(names.joined(separator: ", ")).")
        }
        checkLongOptions(arguments)
        for argument in arguments.dropFirst() {
            if argument == "--" { break }
            var info = stat()
            if argument.hasPrefix("-") && !argument.hasPrefix("--") && argument.count > 2
                && FileSystem.stat(argument, &info) == 0
            {
                usageError(
                    "'\(argument)' is a file whose name starts with '-': write ./\(argument), or put -- before it.")
            }
        }
        run(arguments)
    }

    /// Parses and runs the command. An error found while parsing is ArgumentParser's to print (with the
    /// command's usage); one thrown while running prints its message alone, and a usage mistake noticed only
    /// then (a ValidationError: exit status 64) points to the command's own help, not the root's usage line.
    static func run(_ arguments: [String]) -> Never {
        var command: ParsableCommand
        do {
            command = try parseAsRoot(arguments)
        } catch {
            exit(withError: error)
        }
        do {
            try command.run()
            Glibc.exit(0)
        } catch let error as ValidationError {
            let path = ["lookout"] + commandPath(arguments)
            printError("Error: \(error.message)\nSee '\(path.joined(separator: " ")) --help'.")
            Glibc.exit(ExitCode.validationFailure.rawValue)
        } catch {
            exit(withError: error)
        }
    }

    /// The subcommand names at the start of `arguments` (`models`, `fetch`).
    static func commandPath(_ arguments: [String]) -> [String] {
        var command: ParsableCommand.Type = Lookout.self
        var path: [String] = []
        for argument in arguments {
            guard let next = command.configuration.subcommands.first(where: { $0._commandName == argument }) else {
                break
            }
            command = next
            path.append(argument)
        }
        return path
    }

    /// An unknown `--option` is refused before parsing (ArgumentParser would report a missing argument
    /// first), with the closest option the command takes.
    static func checkLongOptions(_ arguments: [String]) {
        var command: ParsableCommand.Type = Lookout.self
        let path = ["lookout"] + commandPath(arguments)
        for name in path.dropFirst() {
            command = command.configuration.subcommands.first { $0._commandName == name }!
        }
        // A command this build left out takes anything, and says how to get it.
        if command is LeftOutCommand.Type { return }
        let help = Lookout.helpMessage(for: command, columns: 1000)
        // ArgumentParser's own, not in the help: shell completions (scripts/install writes them).
        var known: Set<String> = ["--help", "--version", "--generate-completion-script", "--experimental-dump-help"]
        let characters = Array(help)
        var index = 0
        while index + 2 < characters.count {
            if characters[index] == "-" && characters[index + 1] == "-" {
                var end = index + 2
                while end < characters.count
                    && (characters[end].isLetter || characters[end].isNumber || characters[end] == "-")
                {
                    end += 1
                }
                if end > index + 2 { known.insert(String(characters[index..<end])) }
                index = end
            } else {
                index += 1
            }
        }
        for argument in arguments {
            if argument == "--" { break }
            guard argument.hasPrefix("--"), argument.count > 2 else { continue }
            let name = String(argument.prefix { $0 != "=" })
            guard !known.contains(name) else { continue }
            let closest = known.min { distance($0, name) < distance($1, name) }
            let hint = closest.map { distance($0, name) <= 2 ? " Did you mean '\($0)'?" : "" } ?? ""
            printError(
                "Error: unknown option '\(Report.visible(name))'.\(hint)\nSee '\(path.joined(separator: " ")) --help'.")
            Glibc.exit(64)
        }
    }

    static func usageError(_ message: String) -> Never {
        printError("Error: \(message)\nSee 'lookout --help'.")
        Glibc.exit(64)
    }

    /// Levenshtein distance (for suggestions).
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var row = Array(0...b.count)
        for i in 1...max(1, a.count) where !a.isEmpty {
            var previous = row[0]
            row[0] = i
            for j in 1...max(1, b.count) where !b.isEmpty {
                let current = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                previous = current
            }
        }
        return row[b.count]
    }

    static let configuration = CommandConfiguration(
        commandName: "lookout",
        abstract: "Open-vocabulary object detection: type what you are looking for, and Lookout finds it.",
        discussion: """
            Lookout pairs the YOLO-World v2 detector with the CLIP text encoder, on the CPU, and gives \
            the boxes ultralytics gives for the same weights. Without --model it uses the embedded demo \
            model (Models/demo), which knows coloured shapes only; Models/README.md tells how to get the \
            official weights.

            Start here:
              lookout detect examples/scenes/scene-0001.jpg -q "green star" --save out
              lookout query photo.jpg        new queries, image features kept
              lookout index ~/Pictures       then: lookout search "red car"

            Exit status: 0 success; 1 error (nothing done: a missing model, an unreadable index, …); 2 partial \
            failure (some photos could not be read or indexed, the others were); 64 usage error (a wrong option \
            or value, wherever it is noticed).
            """,
        version: "0.1.0",
        subcommands: [
            DetectCommand.self, TrackCommand.self, QueryCommand.self, IndexCommand.self, SearchCommand.self,
            EvalCommand.self, LabelCommand.self,
            TokenizeCommand.self,
            EmbedCommand.self, SimilarCommand.self, DuplicatesCommand.self, ServeCommand.self, ModelsCommand.self,
            DevicesCommand.self,
        ]
    )
}
