import Foundation
import LookoutJSON
import LookoutSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What a careful new user ran into (issue 14): each case failed before its fix.
@Suite struct HardeningTests {
    /// A named pipe given as a photo, a queries file or a `query` photo is refused at once, not waited on.
    @Test func namedPipesAreRefusedNotWaitedOn() throws {
        let folder = try CLI.scratch("fifo")
        defer { CLI.remove(folder) }
        let pipe = folder + "/pipe.jpg"
        #expect(mkfifo(pipe, 0o600) == 0)
        let started = Date()
        let photo = try CLI.run(["detect", pipe, "-q", "star"], timeout: 60)
        #expect(
            photo.status == 1 && photo.stderr.contains("\(pipe): not a regular file"), "\(photo.status) \(photo.stderr)"
        )
        let queries = try CLI.run(
            ["detect", CLI.root + "/examples/scenes/scene-0001.jpg", "--queries-file", pipe], timeout: 60)
        #expect(queries.status != 0 && queries.status < 128 && queries.stderr.contains(pipe), "\(queries.stderr)")
        let query = try CLI.run(["query", pipe], input: "star\n", timeout: 60)
        #expect(query.status != 0 && query.status < 128 && query.stderr.contains(pipe), "\(query.stderr)")
        #expect(Date().timeIntervalSince(started) < 60)
    }

    /// A queries file with Windows line endings holds one query per line.
    @Test func crlfQueriesFiles() throws {
        let folder = try CLI.scratch("crlf")
        defer { CLI.remove(folder) }
        try "green star\r\nblue circle\r\nring\r\n".write(toFile: folder + "/q.txt", atomically: true, encoding: .utf8)
        let result = try CLI.run(
            [
                "detect", CLI.root + "/examples/scenes/scene-0001.jpg", "--queries-file", folder + "/q.txt", "--json",
                "--conf", "0.01",
            ])
        #expect(result.status == 0, "\(result.stderr)")
        let labels = Set(Reference.detections(of: try Reference.lines(result.stdout)[0]).map(\.label))
        #expect(!labels.isEmpty && labels.isSubset(of: ["green star", "blue circle", "ring"]), "\(labels)")
        #expect(labels.count >= 2)
    }

    /// `--save` into the photos' own folder, twice: the photos are untouched, the outputs numbered.
    @Test func saveNeverReplacesAFile() throws {
        let folder = try CLI.scratch("save-own")
        defer { CLI.remove(folder) }
        let photo = folder + "/scene-0001.jpg"
        try FileManager.default.copyItem(atPath: CLI.root + "/examples/scenes/scene-0001.jpg", toPath: photo)
        let original = try Data(contentsOf: URL(fileURLWithPath: photo))
        for round in 2...3 {
            let result = try CLI.run(["detect", photo, "-q", "star", "--save", folder])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.contains("saved \(folder)/scene-0001-\(round).jpg"), "\(result.stdout)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: photo)) == original)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: folder).sorted() == [
                "scene-0001-2.jpg", "scene-0001-3.jpg", "scene-0001.jpg",
            ])
    }

    /// A photo whose name is not UTF-8 (`caf\xE9.jpg`, as a latin-1 system writes it) is found by detect
    /// (named through a shell, as a user types it), saved under its own bytes, indexed and searched, and
    /// shown as `caf\xE9.jpg`.
    @Test func fileNamesThatAreNotUTF8() throws {
        let folder = try CLI.scratch("latin1")
        defer { CLI.remove(folder) }
        let photo = Array(folder.utf8) + Array("/caf".utf8) + [0xE9] + Array(".jpg".utf8)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: CLI.root + "/examples/scenes/scene-0001.jpg"))
        let descriptor = (photo.map { CChar(bitPattern: $0) } + [0]).withUnsafeBufferPointer {
            open($0.baseAddress!, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        }
        #expect(descriptor >= 0)
        _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)

        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: "/bin/sh")
        shell.arguments = [
            "-c", #"exec "$LOOKOUT" detect "$(printf 'caf\351.jpg')" -q 'blue circle' --save out"#,
        ]
        shell.environment = CLI.environment(home: folder, ["LOOKOUT": CLI.executable.path])
        shell.currentDirectoryURL = URL(fileURLWithPath: folder)
        let output = Pipe()
        shell.standardOutput = output
        shell.standardError = FileHandle.nullDevice
        try shell.run()
        let detect = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        shell.waitUntilExit()
        #expect(shell.terminationStatus == 0)
        #expect(detect.contains("caf\\xE9.jpg (406×353): 1 detection") && detect.contains("blue circle"), "\(detect)")
        #expect(detect.contains("saved out/caf\\xE9.jpg"), "\(detect)")
        let saved = (Array("\(folder)/out/caf".utf8) + [0xE9] + Array(".jpg".utf8)).map { CChar(bitPattern: $0) } + [0]
        var info = stat()
        #expect(
            saved.withUnsafeBufferPointer { stat($0.baseAddress!, &info) } == 0,
            "the annotated copy keeps the name's bytes")

        let database = folder + "/index.sqlite"
        let index = try CLI.run(["index", folder, "--db", database, "--plain"])
        #expect(index.status == 0 && (index.stdout + index.stderr).contains("2 photos indexed"), "\(index.stderr)")
        let search = try CLI.run(["search", "blue circle", "--db", database])
        #expect(search.stdout.contains("\(folder)/caf\\xE9.jpg  (1 box)"), "\(search.stdout)")
        let exact = try CLI.run(["search", "blue circle", "--db", database, "--exact"])
        #expect(
            exact.status == 0 && exact.stdout.contains("\(folder)/caf\\xE9.jpg  (1 box)"),
            "\(exact.stdout) \(exact.stderr)")
    }

    /// Linked folders are walked (each once, so a link back to the root ends); a broken link is reported; a link
    /// out of the folder is followed only with --follow-links (and reported without).
    @Test func symbolicLinksToFoldersAreFollowed() throws {
        let root = try CLI.scratch("links")
        let elsewhere = try CLI.scratch("linked")
        defer { CLI.remove(root); CLI.remove(elsewhere) }
        let scenes = CLI.root + "/examples/scenes/"
        try FileManager.default.copyItem(atPath: scenes + "scene-0001.jpg", toPath: root + "/a.jpg")
        try FileManager.default.copyItem(atPath: scenes + "scene-0002.jpg", toPath: elsewhere + "/b.jpg")
        #expect(symlink(elsewhere, root + "/album") == 0)
        #expect(symlink(root, root + "/loop") == 0)
        #expect(symlink(root + "/missing.jpg", root + "/broken.jpg") == 0)
        let inside = try CLI.run(["index", root, "--db", root + "/.inside.sqlite", "--plain"], timeout: 120)
        #expect(inside.status == 0, "\(inside.stderr)")
        #expect(inside.stderr.contains("1 photo indexed (1 computed"), "\(inside.stderr)")
        #expect(inside.stderr.contains("1 symbolic link out of the folder skipped"), "\(inside.stderr)")
        let result = try CLI.run(
            ["index", root, "--db", root + "/.index.sqlite", "--plain", "--follow-links"], timeout: 120)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("2 photos indexed (2 computed"), "\(result.stderr)")
        #expect(result.stderr.contains("1 symbolic link skipped: the target does not exist"), "\(result.stderr)")
        let listed = try CLI.run(["search", "ring", "--db", root + "/.index.sqlite", "--conf", "0", "--top", "10"])
        #expect(listed.stdout.contains(root + "/album/b.jpg"), "\(listed.stdout)")
    }

    /// A misspelt option is named as unknown, with the closest option of that command, status 64 — before
    /// any other complaint (detect --hlep used to say only that images were missing).
    @Test func misspeltOptionsGetASuggestion() throws {
        let cases: [([String], String)] = [
            (["detect", "--hlep"], "unknown option '--hlep'. Did you mean '--help'?\nSee 'lookout detect --help'."),
            (["--hlep"], "unknown option '--hlep'. Did you mean '--help'?\nSee 'lookout --help'."),
            (["detect", "a.jpg", "--quereis", "x"], "unknown option '--quereis'. Did you mean '--queries'?"),
            (["search", "ring", "--tpo", "3"], "unknown option '--tpo'. Did you mean '--top'?"),
            (
                ["models", "verify", "--tensors", "x"],
                "unknown option '--tensors'.\nSee 'lookout models verify --help'."
            ),
        ]
        for (arguments, message) in cases {
            let result = try CLI.run(arguments)
            #expect(result.status == 64 && result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
        #expect(try CLI.run(["detect", "--help"]).status == 0)
    }

    /// `models verify` on a model folder whose detector file is garbage still reports the file's digest
    /// (and that it is not the manifest's), then that the file is not a weight file.
    @Test func verifyReportsTheDigestOfGarbage() throws {
        let folder = try CLI.scratch("verify-garbage")
        defer { CLI.remove(folder) }
        for name in ["lookout-model.json", "text-encoder.safetensors"] {
            try FileManager.default.copyItem(atPath: CLI.root + "/Models/demo/" + name, toPath: folder + "/" + name)
        }
        try Data("not weights at all".utf8).write(to: URL(fileURLWithPath: folder + "/detector.safetensors"))
        let result = try CLI.run(["models", "verify", folder])
        #expect(result.status == 1)
        // SHA-256 of "not weights at all" (sha256sum).
        let digest = "edb1cec4cc1683e9c5a2fa4b312edd8f2c7ade3a4dd602e1bbc775a558afb53f"
        #expect(result.stdout.contains("sha256 \(digest) DOES NOT MATCH the manifest"), "\(result.stdout)")
        #expect(result.stdout.contains("NOT READABLE: not a weight file Lookout reads"), "\(result.stdout)")
        #expect(result.stdout.contains("text encoder:") && result.stdout.contains("(matches the manifest)"))
    }

    /// `detect -` reads the image from standard input (and --save names its copy stdin.jpg); - twice, or
    /// with --queries-file -, is a usage error.
    @Test func imageFromStandardInput() throws {
        let folder = try CLI.scratch("stdin-image")
        defer { CLI.remove(folder) }
        let photo = try FileContents.read(CLI.root + "/examples/scenes/scene-0001.jpg")
        let piped = try CLI.run(
            ["detect", "-", "-q", "blue circle", "--json", "--save", folder], inputBytes: photo)
        let named = try CLI.run(["detect", CLI.root + "/examples/scenes/scene-0001.jpg", "-q", "blue circle", "--json"])
        #expect(piped.status == 0, "\(piped.stderr)")
        let answer = try Reference.lines(piped.stdout)[0]
        #expect(answer["image"]!.string! == "-")
        #expect(Reference.detections(of: answer).map(\.label) == ["blue circle"])
        #expect(
            Reference.detections(of: answer).map(\.box)
                == Reference.detections(of: try Reference.lines(named.stdout)[0]).map(\.box))
        #expect(FileManager.default.fileExists(atPath: folder + "/stdin.jpg"))
        let twice = try CLI.run(["detect", "-", "-", "-q", "ring"], inputBytes: photo)
        #expect(twice.status == 64 && twice.stderr.contains("can be given once"), "\(twice.stderr)")
        let both = try CLI.run(["detect", "-", "--queries-file", "-"], inputBytes: photo)
        #expect(both.status == 64 && both.stderr.contains("not both"), "\(both.stderr)")
        let garbage = try CLI.run(["detect", "-", "-q", "ring"], inputBytes: Array(repeating: 7, count: 100))
        #expect(garbage.status == 1 && garbage.stderr.contains("-: not a JPEG or PNG file"), "\(garbage.stderr)")
    }

    /// A huge --top with --exact is a long list, not a trap.
    @Test func hugeTopWithExact() throws {
        let folder = try CLI.scratch("top")
        defer { CLI.remove(folder) }
        try FileManager.default.createDirectory(atPath: folder + "/photos", withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: CLI.root + "/examples/scenes/scene-0002.jpg", toPath: folder + "/photos/a.jpg")
        #expect(try CLI.run(["index", folder + "/photos", "--db", folder + "/i.sqlite"]).status == 0)
        let result = try CLI.run([
            "search", "ring", "--db", folder + "/i.sqlite", "--top", "9223372036854775807", "--exact", "--json",
        ])
        #expect(result.status == 0, "\(result.status) \(result.stderr)")
        #expect(try Reference.lines(result.stdout).count == 1)
    }

    /// Thresholds, memory bounds and database names that cannot work are usage errors naming the value.
    @Test func valuesThatCannotWorkAreRefused() throws {
        let photo = CLI.root + "/examples/scenes/scene-0001.jpg"
        for value in ["nan", "inf", "2", "-1", "1"] {
            let result = try CLI.run(["detect", photo, "-q", "star", "--query-conf", "star=\(value)"])
            #expect(
                result.status == 64 && result.stderr.contains("the threshold must be a number in [0, 1)"),
                "\(value): \(result.stderr)")
        }
        let memory = try CLI.run(["query", photo, "--feature-memory", "9000000000000"], input: "")
        #expect(memory.status == 64 && memory.stderr.contains("--feature-memory is in MiB"), "\(memory.stderr)")
        let folder = try CLI.scratch("db-names")
        defer { CLI.remove(folder) }
        try FileManager.default.createDirectory(atPath: folder + "/photos", withIntermediateDirectories: true)
        for (db, message) in [
            ("", "--db needs a file path"), (":memory:", "in-memory databases keep nothing"),
            ("file:x.sqlite?mode=memory", "in-memory databases keep nothing"),
            ("https://example.org/index", "https:// is not a database Lookout knows"),
        ] {
            let result = try CLI.run(["index", folder + "/photos", "--db", db], directory: folder)
            #expect(result.status != 0 && result.stderr.contains(message), "\(db): \(result.stderr)")
        }
        // Nothing was made: no "https:" folder, no database.
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).sorted() == ["photos"])
    }

    /// Indexing a second folder with other settings would have dropped the first folder's photos from searches
    /// without a word: it now stops and says what differs, and --rebuild does it openly.
    @Test func otherSettingsNeverDropOtherFoldersSilently() throws {
        let folder = try CLI.scratch("two-folders")
        defer { CLI.remove(folder) }
        for (sub, names) in [
            ("scenes", ["scene-0002.jpg", "scene-0006.jpg"]), ("more", ["scene-0007.jpg", "scene-0008.jpg"]),
        ] {
            try FileManager.default.createDirectory(atPath: folder + "/" + sub, withIntermediateDirectories: true)
            for name in names {
                try FileManager.default.copyItem(
                    atPath: CLI.root + "/examples/scenes/" + name, toPath: folder + "/\(sub)/" + name)
            }
        }
        let db = folder + "/index.sqlite"
        #expect(try CLI.run(["index", folder + "/scenes", "--db", db]).status == 0)
        func found() throws -> Set<String> {
            let result = try CLI.run(["search", "ring", "--db", db, "--json", "--conf", "0.01"])
            return Set(
                try Reference.lines(result.stdout).map {
                    $0["image"]!.string!.split(separator: "/").suffix(2).joined(separator: "/")
                })
        }
        let before = try found()
        #expect(before.contains("scenes/scene-0002.jpg") && before.contains("scenes/scene-0006.jpg"), "\(before)")
        let refused = try CLI.run(["index", folder + "/more", "--db", db, "--regions", "16"])
        #expect(
            refused.status != 0 && refused.stderr.contains("holds 2 photos outside")
                && refused.stderr.contains("regions 64 → 16"), "\(refused.stderr)")
        #expect(try found() == before)
        let same = try CLI.run(["index", folder + "/more", "--db", db])
        #expect(same.status == 0 && same.stderr.contains("4 photos indexed (2 computed"), "\(same.stderr)")
        let rebuilt = try CLI.run(["index", folder + "/more", "--db", db, "--regions", "16", "--rebuild"])
        #expect(
            rebuilt.status == 0
                && rebuilt.stderr.contains("2 photos indexed (2 computed, 0 reused, 0 unchanged, 2 removed)"),
            "\(rebuilt.stderr)")
        #expect(try found().allSatisfy { $0.hasPrefix("more/") })
    }

    /// A moved folder leaves the index when the new place is indexed; search leaves out deleted photos and
    /// says which found photos changed since indexing.
    @Test func movedChangedAndDeletedPhotos() throws {
        let folder = try CLI.scratch("moved")
        defer { CLI.remove(folder) }
        let names = ["scene-0002.jpg", "scene-0006.jpg", "scene-0007.jpg"]
        try FileManager.default.createDirectory(atPath: folder + "/mv1", withIntermediateDirectories: true)
        for name in names {
            try FileManager.default.copyItem(
                atPath: CLI.root + "/examples/scenes/" + name, toPath: folder + "/mv1/" + name)
        }
        let db = folder + "/index.sqlite"
        #expect(try CLI.run(["index", folder + "/mv1", "--db", db]).status == 0)
        try FileManager.default.moveItem(atPath: folder + "/mv1", toPath: folder + "/mv2")
        let moved = try CLI.run(["index", folder + "/mv2", "--db", db])
        #expect(
            moved.status == 0
                && moved.stderr.contains("3 photos indexed (0 computed, 3 reused, 0 unchanged, 3 removed)"),
            "\(moved.stderr)")
        let paths = try Reference.lines(try CLI.run(["search", "ring", "--db", db, "--json", "--conf", "0.01"]).stdout)
            .map { $0["image"]!.string! }
        #expect(!paths.isEmpty && paths.allSatisfy { $0.hasPrefix(folder + "/mv2/") }, "\(paths)")

        // One photo replaced by another scene, one deleted.
        try FileManager.default.removeItem(atPath: folder + "/mv2/scene-0002.jpg")
        try FileManager.default.copyItem(
            atPath: CLI.root + "/examples/scenes/scene-0001.jpg", toPath: folder + "/mv2/scene-0002.jpg")
        try FileManager.default.removeItem(atPath: folder + "/mv2/scene-0006.jpg")
        let search = try CLI.run(["search", "ring", "--db", db, "--json", "--conf", "0.01"])
        #expect(search.status == 0)
        let lines = try Reference.lines(search.stdout)
        #expect(!lines.contains { $0["image"]!.string!.hasSuffix("scene-0006.jpg") })
        #expect(
            search.stderr.contains("left out 1 photo deleted or moved since indexing (\(folder)/mv2/scene-0006.jpg)"),
            "\(search.stderr)")
        let replaced = lines.first { $0["image"]!.string!.hasSuffix("scene-0002.jpg") }
        #expect(replaced?["changed_since_indexing"]?.bool == true)
        #expect(search.stderr.contains("changed since indexing"))
        #expect(
            !(lines.first { $0["image"]!.string!.hasSuffix("scene-0007.jpg") }?["changed_since_indexing"]?.bool ?? false)
        )
    }

    /// `scripts/install PREFIX`: the installed binary finds its vocabulary and the demo model from anywhere; a
    /// binary copied alone says where it looked.
    @Test func installedBinaryWorksFromAnywhere() throws {
        let prefix = try CLI.scratch("install")
        defer { CLI.remove(prefix) }
        let install = Process()
        install.executableURL = URL(fileURLWithPath: CLI.root + "/scripts/install")
        install.arguments = [prefix + "/usr"]
        install.environment = CLI.environment(home: prefix, ["LOOKOUT_BINARY": CLI.executable.path])
        install.standardError = FileHandle.nullDevice
        try install.run()
        install.waitUntilExit()
        #expect(install.terminationStatus == 0)
        // Shell completions for the three shells, and a man page with every command's help.
        for (file, words) in [
            ("bash-completion/completions/lookout", "_lookout"), ("zsh/site-functions/_lookout", "#compdef lookout"),
            ("fish/vendor_completions.d/lookout.fish", "complete -c 'lookout'"),
            ("man/man1/lookout.1", ".TH LOOKOUT 1"),
        ] {
            let text = (try? String(contentsOfFile: prefix + "/usr/share/" + file, encoding: .utf8)) ?? ""
            #expect(text.contains(words), "\(file)")
        }
        let manual = (try? String(contentsOfFile: prefix + "/usr/share/man/man1/lookout.1", encoding: .utf8)) ?? ""
        // Every command and every `models` subcommand, read from the binary's own help (issue 49: calibrate was
        // left out of a fixed list).
        func subcommands(_ arguments: [String]) throws -> [String] {
            let help = try CLI.run(arguments + ["--help"]).stdout
            return help.components(separatedBy: "SUBCOMMANDS:").last!.split(separator: "\n").compactMap { line in
                // "  name   what it does": two spaces, then a lower-case name (continuations are indented further).
                let characters = Array(line)
                guard characters.count > 2, characters[0] == " ", characters[1] == " ", characters[2].isLowercase
                else { return nil }
                return String(line.split(separator: " ").first!)
            }
        }
        let models = try subcommands(["models"])
        #expect(models.contains("calibrate") && models.contains("fetch"), "\(models)")
        for section in try subcommands([]).map({ "LOOKOUT " + $0.uppercased() })
            + models.map({ "LOOKOUT MODELS " + $0.uppercased() })
        {
            #expect(manual.contains(".SH \"\(section)\""), "the man page has \(section)")
        }
        // Completions know the values of --precision and --tracker, and ask lookout for --model's.
        let bash =
            (try? String(contentsOfFile: prefix + "/usr/share/bash-completion/completions/lookout", encoding: .utf8))
            ?? ""
        for words in [
            "'fp32'$'\\n''bf16'$'\\n''int8'", "'bytetrack'$'\\n''botsort'", "---completion detect -- --model",
        ] {
            #expect(bash.contains(words), "bash completion offers \(words)")
        }
        let completion = try CLI.run([
            "---completion", "detect", "--", "--model", "3", "5", "lookout", "detect", "--model", "demo-",
        ])
        #expect(completion.stdout.contains("demo-yoloe"), "\(completion.stdout) \(completion.stderr)")
        let copy = prefix + "/scene.jpg"
        try FileManager.default.copyItem(atPath: CLI.root + "/examples/scenes/scene-0001.jpg", toPath: copy)
        func run(_ binary: String) throws -> (Int32, String, String) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = ["detect", copy, "-q", "green star"]
            process.currentDirectoryURL = URL(fileURLWithPath: "/")
            process.environment = CLI.environment(home: prefix)
            let out = Pipe(), err = Pipe()
            process.standardOutput = out
            process.standardError = err
            // A binary copied a moment ago can be "busy" (ETXTBSY) while a child that another test forked in the
            // meantime still holds the copy's descriptor: wait for that child's exec and try again.
            var attempts = 0
            while true {
                do {
                    try process.run()
                    break
                } catch let error as NSError
                    where (error.userInfo[NSUnderlyingErrorKey] as? NSError)?.code == Int(ETXTBSY) && attempts < 20
                {
                    attempts += 1
                    usleep(100_000)
                }
            }
            let stdout = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus, stdout, stderr)
        }
        let (status, stdout, stderr) = try run(prefix + "/usr/bin/lookout")
        #expect(
            status == 0 && stderr.contains("using the demo model in \(prefix)/usr/share/lookout/Models/demo"),
            "\(stderr)")
        #expect(stdout.contains("green star"))
        try FileManager.default.createDirectory(atPath: prefix + "/alone", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: prefix + "/usr/bin/lookout", toPath: prefix + "/alone/lookout")
        let (aloneStatus, _, aloneError) = try run(prefix + "/alone/lookout")
        #expect(
            aloneStatus == 1 && aloneError.contains("not found") && aloneError.contains("lookout models fetch"),
            "\(aloneError)")
    }

    /// Exit status: 64 for a usage mistake wherever it is noticed, 2 when some photos failed, 1 when all did.
    @Test func exitStatuses() throws {
        let photo = CLI.root + "/examples/scenes/scene-0001.jpg"
        let broken = CLI.root + "/Tests/Fixtures/image/files/truncated.jpg"
        #expect(try CLI.run(["detect", photo, "-q", "star", "--conf", "2"]).status == 64)
        // Noticed only after the model has loaded: still a usage error.
        let late = try CLI.run(["detect", photo, "-q", "star", "--query-conf", "dog=0.5"])
        #expect(late.status == 64 && late.stderr.contains("--query-conf names \"dog\""), "\(late.stderr)")
        #expect(try CLI.run(["detect", broken, photo, "-q", "star"]).status == 2)
        #expect(try CLI.run(["detect", broken, "-q", "star"]).status == 1)
        #expect(try CLI.run(["detect", photo, "-q", "star"]).status == 0)
    }

    /// Misspelt commands get a suggestion; a file named like an option is refused with the way to name it;
    /// labels are safe and aligned on a terminal; long and too many queries are said so.
    @Test func terminalAndCommandLine() throws {
        let misspelt = try CLI.run(["detct", "x.jpg"])
        #expect(misspelt.status == 64 && misspelt.stderr.contains("Did you mean 'detect'?"), "\(misspelt.stderr)")
        let folder = try CLI.scratch("dash")
        defer { CLI.remove(folder) }
        try FileManager.default.copyItem(
            atPath: CLI.root + "/examples/scenes/scene-0001.jpg", toPath: folder + "/-dash.jpg")
        let dash = try CLI.run(["detect", "-dash.jpg", "-q", "star"], directory: folder)
        #expect(dash.status == 64 && dash.stderr.contains("write ./-dash.jpg"), "\(dash.stderr)")

        let photo = CLI.root + "/examples/scenes/scene-0001.jpg"
        let escape = try CLI.run([
            "detect", photo, "-q", "green star\u{1b}[31m, 星 green circle, blue circle", "--conf", "0.01",
        ])
        #expect(
            escape.status == 0 && !escape.stdout.contains("\u{1b}") && escape.stdout.contains("\\u{1b}[31m"),
            "\(escape.stdout)")
        // Columns line up: every score starts at the same display column (a CJK character takes two).
        let rows = escape.stdout.split(separator: "\n").dropFirst().map(String.init)
        let columns = rows.map { row -> Int in
            let before = row.components(separatedBy: "  0.").first ?? row
            return before.unicodeScalars.reduce(0) { $0 + ((0x2E80...0xA4CF).contains($1.value) ? 2 : 1) }
        }
        #expect(
            rows.contains { $0.contains("星 green circle") } && rows.contains { $0.contains("blue circle") }, "\(rows)")
        #expect(Set(columns).count == 1, "\(rows)")
        let long = String(repeating: "very ", count: 90) + "long star"
        let warned = try CLI.run(["detect", photo, "-q", long])
        #expect(warned.status == 0 && warned.stderr.contains("tokens; CLIP reads the first 75"), "\(warned.stderr)")
        let many = (0..<5000).map { "q\($0)" }.joined(separator: ",")
        let capped = try CLI.run(["detect", photo, "-q", many])
        #expect(capped.status == 64 && capped.stderr.contains("at most 4096 at once"), "\(capped.stderr)")
    }

    /// `--conf -1` is a value out of range, not a missing value; `query --help` lists only options it takes.
    @Test func negativeValuesAndHelp() throws {
        let photo = CLI.root + "/examples/scenes/scene-0001.jpg"
        let negative = try CLI.run(["detect", photo, "-q", "star", "--conf", "-1"])
        #expect(
            negative.status == 64 && negative.stderr.contains("--conf must be in [0, 1), got -1.0"),
            "\(negative.stderr)")
        let help = try CLI.run(["query", "--help"])
        #expect(help.status == 0 && help.stdout.contains("--conf") && !help.stdout.contains("--query-conf"))
        let detectHelp = try CLI.run(["detect", "--help"])
        #expect(detectHelp.stdout.contains("--query-conf"))
    }

    /// Polish: other image formats named, queries from standard input, the default model named by its folder,
    /// failed photos in JSON output, a folder given as --db.
    @Test func clearerAnswers() throws {
        let folder = try CLI.scratch("polish")
        defer { CLI.remove(folder) }
        let headers: [(String, [UInt8], String)] = [
            ("a.webp", Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WEBPVP8 ".utf8), "a WebP image"),
            ("a.gif", Array("GIF89a".utf8) + [0, 0, 0, 0], "a GIF image"),
            ("a.tif", [0x49, 0x49, 0x2A, 0x00, 8, 0, 0, 0], "a TIFF image"),
            ("a.bmp", Array("BM".utf8) + [0, 0, 0, 0, 0, 0, 0, 0], "a BMP image"),
            ("a.heic", [0, 0, 0, 24] + Array("ftypheic".utf8) + [0, 0, 0, 0], "a HEIC/HEIF image"),
        ]
        var paths: [String] = []
        for (name, bytes, _) in headers {
            try Data(bytes + [UInt8](repeating: 0, count: 64)).write(to: URL(fileURLWithPath: folder + "/" + name))
            paths.append(folder + "/" + name)
        }
        let photo = CLI.root + "/examples/scenes/scene-0001.jpg"
        let result = try CLI.run(["detect"] + paths + [photo, "-q", "star", "--json"])
        #expect(result.status == 2, "partial failure")
        for (name, _, message) in headers {
            #expect(
                result.stderr.contains("\(folder)/\(name): \(message): Lookout reads JPEG and PNG"),
                "\(name): \(result.stderr)")
        }
        let lines = try Reference.lines(result.stdout)
        #expect(lines.count == headers.count + 1)
        #expect(
            lines.prefix(headers.count).allSatisfy {
                $0["error"]?.string?.contains("Lookout reads JPEG and PNG") == true
            })
        #expect(lines.last?["detections"] != nil)

        let piped = try CLI.run(
            ["detect", photo, "--queries-file", "-", "--json", "--conf", "0.05"], input: "green star\nring\n")
        #expect(piped.status == 0, "\(piped.stderr)")
        let labels = Set(Reference.detections(of: try Reference.lines(piped.stdout)[0]).map(\.label))
        #expect(!labels.isEmpty && labels.isSubset(of: ["green star", "ring"]))

        let byFolder = try CLI.run(
            ["detect", photo, "-q", "star"], environment: ["LOOKOUT_DEFAULT_MODEL": CLI.root + "/Models/demo"])
        #expect(byFolder.status == 0 && byFolder.stderr.contains("using the demo model"), "\(byFolder.stderr)")

        let dbFolder = try CLI.run(["search", "ring", "--db", folder])
        #expect(dbFolder.status != 0 && dbFolder.stderr.contains("a folder, not an index file"), "\(dbFolder.stderr)")
        #expect(!dbFolder.stderr.contains("SELECT"))
    }
}
