import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Runs the built `lookout` executable as a user would, isolated from the machine running the tests: a
/// clean environment (no `LOOKOUT_*`, `XDG_*` or other inherited variables) and a fresh temporary home
/// folder for every process, so that nothing under the caller's `~/.cache` or `~/.local` is read or written.
enum CLI {
    static let root: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path
    }()

    /// The `lookout` executable of this build (the test target depends on it, so it is built first): it
    /// sits in the products folder beside the test bundle.
    static let executable: URL = {
        let bundle = URL(
            fileURLWithPath: CommandLine.arguments.first { $0.contains(".xctest") } ?? CommandLine.arguments[0])
        var directory = bundle.deletingLastPathComponent()
        while !FileManager.default.isExecutableFile(atPath: directory.appendingPathComponent("lookout").path),
            directory.path != "/"
        {
            directory = directory.deletingLastPathComponent()
        }
        let url = directory.appendingPathComponent("lookout")
        precondition(FileManager.default.isExecutableFile(atPath: url.path), "the lookout executable was not built")
        return url
    }()

    struct Result {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    /// A new, empty temporary folder (removed by the caller).
    static func scratch(_ name: String) throws -> String {
        let folder = NSTemporaryDirectory() + "lookout-\(name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        return folder
    }

    static func remove(_ path: String) { try? FileManager.default.removeItem(atPath: path) }

    /// The environment of a test process: PATH and a home folder, plus `extra`.
    static func environment(home: String, _ extra: [String: String] = [:]) -> [String: String] {
        ["PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8"].merging(extra) { $1 }
    }

    /// Runs `lookout arguments` with `input` on standard input; `home` is the home folder (a fresh one
    /// that is removed afterwards when nil).
    /// A process still running after `timeout` seconds is killed (its status then records the signal);
    /// `directory` is its working directory (this process's when nil).
    static func run(
        _ arguments: [String], input: String? = nil, environment extra: [String: String] = [:], home: String? = nil,
        directory: String? = nil, timeout: Double = 600
    ) throws -> Result {
        let ownHome = home == nil ? try scratch("home") : nil
        defer { if let ownHome { remove(ownHome) } }
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = environment(home: home ?? ownHome!, extra)
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let stdout = Pipe()
        let stderr = Pipe()
        let stdin = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = stdin
        try process.run()
        let pid = process.processIdentifier
        let watchdog = DispatchWorkItem { kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        defer { watchdog.cancel() }
        // Read both pipes while the process runs (a full pipe would block it), then wait.
        let group = DispatchGroup()
        nonisolated(unsafe) var out = Data()
        nonisolated(unsafe) var err = Data()
        DispatchQueue.global().async(group: group) { out = stdout.fileHandleForReading.readDataToEndOfFile() }
        DispatchQueue.global().async(group: group) { err = stderr.fileHandleForReading.readDataToEndOfFile() }
        if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
        try stdin.fileHandleForWriting.close()
        group.wait()
        process.waitUntilExit()
        return Result(
            status: process.terminationReason == .uncaughtSignal
                ? 128 + process.terminationStatus : process.terminationStatus,
            stdout: String(decoding: out, as: UTF8.self),
            stderr: String(decoding: err, as: UTF8.self))
    }
}
