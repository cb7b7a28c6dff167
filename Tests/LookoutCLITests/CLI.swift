import Foundation
import LookoutTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Runs the built `lookout` executable as a user would, isolated from the machine running the tests: a
/// clean environment (no `LOOKOUT_*`, `XDG_*` or other inherited variables) and a fresh temporary home
/// folder for every process, so that nothing under the caller's `~/.cache` or `~/.local` is read or written.
enum CLI {
    static let root = Repository.root

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
        _ arguments: [String], input: String? = nil, inputBytes: [UInt8]? = nil,
        environment extra: [String: String] = [:],
        home: String? = nil, directory: String? = nil, timeout: Double = 600
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
        if let inputBytes { stdin.fileHandleForWriting.write(Data(inputBytes)) }
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

/// `lookout` on a pseudo-terminal, as a person types at it: standard input is the terminal (what the
/// program draws there is `screen`), standard output and error are pipes (as with `> out.json`).
final class TerminalSession: @unchecked Sendable {
    let process = Process()
    private let master: Int32
    private let state = NSLock()
    private var screenBytes: [UInt8] = []
    private var stdoutBytes: [UInt8] = []
    private var stderrBytes: [UInt8] = []
    private let group = DispatchGroup()

    init(_ arguments: [String], home: String, columns: UInt16 = 80) throws {
        var master: Int32 = -1
        var slave: Int32 = -1
        var size = winsize(ws_row: 24, ws_col: columns, ws_xpixel: 0, ws_ypixel: 0)
        guard openpty(&master, &slave, nil, nil, &size) == 0 else { throw CocoaError(.fileNoSuchFile) }
        self.master = master
        process.executableURL = CLI.executable
        process.arguments = arguments
        process.environment = CLI.environment(home: home)
        process.standardInput = FileHandle(fileDescriptor: slave, closeOnDealloc: false)
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        close(slave)
        drain(master) { self.screenBytes += $0 }
        drain(stdout.fileHandleForReading.fileDescriptor) { self.stdoutBytes += $0 }
        drain(stderr.fileHandleForReading.fileDescriptor) { self.stderrBytes += $0 }
    }

    private func drain(_ descriptor: Int32, into append: @escaping @Sendable ([UInt8]) -> Void) {
        DispatchQueue.global().async(group: group) {
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = read(descriptor, &chunk, chunk.count)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { return }
                self.state.withLock { append(Array(chunk[0..<count])) }
            }
        }
    }

    var screen: String { state.withLock { String(decoding: screenBytes, as: UTF8.self) } }
    var stdout: String { state.withLock { String(decoding: stdoutBytes, as: UTF8.self) } }
    var stderr: String { state.withLock { String(decoding: stderrBytes, as: UTF8.self) } }

    func type(_ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(master, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }

    /// Whether the terminal is in its own line mode (ICANON) now, as the program left it.
    var lineMode: Bool {
        var modes = termios()
        guard tcgetattr(master, &modes) == 0 else { return false }
        return modes.c_lflag & tcflag_t(ICANON) != 0
    }

    /// Waits (at most `timeout` seconds, looking every `interval` seconds) until `condition` holds;
    /// returns whether it did.
    @discardableResult
    func wait(timeout: Double = 120, interval: Double = 0.02, until condition: (TerminalSession) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition(self) { return true }
            usleep(UInt32(interval * 1e6))
        }
        return condition(self)
    }

    /// Waits for the process to end (killing it after `timeout` seconds) and returns its status.
    func finish(timeout: Double = 60) -> Int32 {
        let pid = process.processIdentifier
        let watchdog = DispatchWorkItem { kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        process.waitUntilExit()
        watchdog.cancel()
        close(master)
        group.wait()
        return process.terminationReason == .uncaughtSignal
            ? 128 + process.terminationStatus : process.terminationStatus
    }
}
