import LookoutSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A line editor for `lookout query` at a terminal: the prompt and the echo go to the terminal (never to
/// standard output, which may be redirected), lines of any length, history kept across sessions.
///
/// Keys: ← → Home End (Ctrl-A, Ctrl-E) move; ↑ ↓ (Ctrl-P, Ctrl-N) walk the history; Backspace, Delete,
/// Ctrl-K, Ctrl-U and Ctrl-W delete; Ctrl-L clears the screen; Ctrl-C clears the line; Ctrl-D on an empty
/// line ends input. Between lines, keys typed ahead wait unechoed for the next prompt (`TerminalModes`).
final class LineEditor {
    enum Input: Equatable {
        case line(String)
        case end
    }

    static let historyLimit = 1000

    private let input: Int32
    private let output: Int32
    private let historyPath: String?
    private let modes: TerminalModes
    private(set) var history: [String] = []

    // The line being edited.
    private var buffer: [Character] = []
    private var cursor = 0
    private var scroll = 0
    private var prompt = ""
    private var historyIndex = 0
    private var draft: [Character] = []

    /// An editor on standard input, when standard input is a terminal; `nil` otherwise.
    init?(historyPath: String?) {
        guard isatty(0) == 1 else { return nil }
        input = 0
        // Write where we read when the terminal was opened for reading and writing (as shells open it);
        // else to standard error when that is a terminal; else to the process's terminal.
        if fcntl(0, F_GETFL) & O_ACCMODE == O_RDWR {
            output = 0
        } else if isatty(2) == 1 {
            output = 2
        } else {
            let terminal = open("/dev/tty", O_WRONLY | O_CLOEXEC)
            guard terminal >= 0 else { return nil }
            output = terminal
        }
        self.historyPath = historyPath
        if let historyPath { history = Self.loadHistory(historyPath) }
        modes = TerminalModes(input)
    }

    /// Gives the terminal back its original modes (also done at exit and on a terminating signal).
    func finish() { modes.restore() }

    deinit { modes.restore() }

    /// `$XDG_STATE_HOME/lookout/query-history`, else `~/.local/state/lookout/query-history`.
    static func defaultHistoryPath() -> String? {
        let variable = { (name: String) in getenv(name).map { String(cString: $0) } }
        if let state = variable("XDG_STATE_HOME"), state.hasPrefix("/") { return state + "/lookout/query-history" }
        guard let home = variable("HOME"), home.hasPrefix("/") else { return nil }
        return home + "/.local/state/lookout/query-history"
    }

    func write(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes {
                Glibc.write(output, $0.baseAddress! + offset, $0.count - offset)
            }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }

    /// Reads one line at `prompt`.
    func readLine(prompt: String) -> Input {
        self.prompt = prompt
        buffer = []
        cursor = 0
        scroll = 0
        historyIndex = history.count
        draft = []
        modes.set(.reading)
        defer { modes.set(.answering) }
        render()
        while let byte = readByte() {
            switch byte {
            case 0x0D, 0x0A:
                write("\r\n")
                let line = String(buffer)
                remember(line)
                return .line(line)
            case 0x03:
                write("^C\r\n")
                buffer = []
                cursor = 0
                historyIndex = history.count
            case 0x04:
                if buffer.isEmpty {
                    write("\r\n")
                    return .end
                }
                deleteForward()
            case 0x7F, 0x08: deleteBackward()
            case 0x01: cursor = 0
            case 0x05: cursor = buffer.count
            case 0x02: cursor = max(0, cursor - 1)
            case 0x06: cursor = min(buffer.count, cursor + 1)
            case 0x0B: buffer.removeSubrange(cursor...)
            case 0x15:
                buffer.removeSubrange(..<cursor)
                cursor = 0
            case 0x17: deleteWordBackward()
            case 0x0C: write("\u{1B}[H\u{1B}[2J")
            case 0x10: walkHistory(by: -1)
            case 0x0E: walkHistory(by: 1)
            case 0x1B: escapeSequence()
            case 0x09: insert(" ")
            case 0x00..<0x20: break
            default: insertUTF8(startingWith: byte)
            }
            render()
        }
        write("\r\n")
        return .end
    }

    // MARK: Editing

    private func insert(_ character: Character) {
        buffer.insert(character, at: cursor)
        cursor += 1
    }

    private func insertUTF8(startingWith first: UInt8) {
        let length = first >= 0xF0 ? 4 : first >= 0xE0 ? 3 : first >= 0xC0 ? 2 : 1
        var bytes = [first]
        while bytes.count < length, let next = readByte() { bytes.append(next) }
        let text = String(decoding: bytes, as: UTF8.self)
        for character in text where character.unicodeScalars.allSatisfy({ !Self.isControl($0.value) }) {
            // A combining mark joins the character before the cursor.
            if cursor > 0, let joined = Optional(String(buffer[cursor - 1]) + String(character)), joined.count == 1 {
                buffer[cursor - 1] = Character(joined)
            } else {
                insert(character)
            }
        }
    }

    private static func isControl(_ value: UInt32) -> Bool { value < 0x20 || (0x7F..<0xA0).contains(value) }

    private func deleteBackward() {
        guard cursor > 0 else { return }
        buffer.remove(at: cursor - 1)
        cursor -= 1
    }

    private func deleteForward() {
        guard cursor < buffer.count else { return }
        buffer.remove(at: cursor)
    }

    private func deleteWordBackward() {
        var start = cursor
        while start > 0 && buffer[start - 1] == " " { start -= 1 }
        while start > 0 && buffer[start - 1] != " " { start -= 1 }
        buffer.removeSubrange(start..<cursor)
        cursor = start
    }

    private func walkHistory(by step: Int) {
        let target = historyIndex + step
        guard target >= 0 && target <= history.count else { return }
        if historyIndex == history.count { draft = buffer }
        historyIndex = target
        buffer = target == history.count ? draft : Array(history[target])
        cursor = buffer.count
    }

    /// `ESC [ params final` or `ESC O final`; unknown sequences are read whole and ignored.
    private func escapeSequence() {
        guard let kind = readByte() else { return }
        guard kind == 0x5B || kind == 0x4F else { return }
        var parameters: [UInt8] = []
        var final: UInt8 = 0
        while let byte = readByte() {
            if (0x40...0x7E).contains(byte) {
                final = byte
                break
            }
            parameters.append(byte)
            if parameters.count > 16 { return }
        }
        switch (final, String(decoding: parameters, as: UTF8.self)) {
        case (0x41, _): walkHistory(by: -1)
        case (0x42, _): walkHistory(by: 1)
        case (0x43, _): cursor = min(buffer.count, cursor + 1)
        case (0x44, _): cursor = max(0, cursor - 1)
        case (0x48, _), (0x7E, "1"), (0x7E, "7"): cursor = 0
        case (0x46, _), (0x7E, "4"), (0x7E, "8"): cursor = buffer.count
        case (0x7E, "3"): deleteForward()
        default: break
        }
    }

    // MARK: Display

    private static func width(_ character: Character) -> Int { Report.displayWidth(String(character)) }

    /// Redraws the line on one terminal row, scrolled sideways so that the cursor is always visible.
    private func render() {
        let columns = Self.terminalColumns(output)
        let promptWidth = Report.displayWidth(prompt)
        let room = max(8, columns - promptWidth - 1)
        if cursor < scroll { scroll = cursor }
        while scroll < cursor && buffer[scroll..<cursor].reduce(0, { $0 + Self.width($1) }) > room { scroll += 1 }
        var visible = ""
        var used = 0
        var cursorColumn = promptWidth
        for index in scroll..<buffer.count {
            let width = Self.width(buffer[index])
            if used + width > room { break }
            if index < cursor { cursorColumn += width }
            visible.append(buffer[index])
            used += width
        }
        write("\r" + prompt + visible + "\u{1B}[K\r" + (cursorColumn > 0 ? "\u{1B}[\(cursorColumn)C" : ""))
    }

    private static func terminalColumns(_ descriptor: Int32) -> Int {
        var size = winsize()
        if ioctl(descriptor, UInt(TIOCGWINSZ), &size) == 0 && size.ws_col > 0 { return Int(size.ws_col) }
        return 80
    }

    private func readByte() -> UInt8? {
        var byte: UInt8 = 0
        while true {
            let count = read(input, &byte, 1)
            if count == 1 { return byte }
            if count < 0 && errno == EINTR { continue }
            return nil
        }
    }

    // MARK: History

    /// Adds a line to the history (trimmed; not an empty line, nor a repeat of the last one).
    private func remember(_ typed: String) {
        let line = typed.trimmingCharacters(in: " ")
        guard !line.isEmpty, history.last != line else { return }
        history.append(line)
        if history.count > Self.historyLimit { history.removeFirst(history.count - Self.historyLimit) }
        guard let historyPath else { return }
        let folder = String(historyPath[..<(historyPath.lastIndex(of: "/") ?? historyPath.startIndex)])
        if !folder.isEmpty { Self.makeFolders(folder) }
        let descriptor = open(historyPath, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
    }

    private static func makeFolders(_ path: String) {
        var partial = ""
        for component in path.split(separator: "/") {
            partial += "/" + component
            mkdir(partial, 0o700)
        }
    }

    /// The last `historyLimit` lines of the history file; a file grown past twice that is rewritten.
    static func loadHistory(_ path: String) -> [String] {
        guard let bytes = try? FileContents.read(path, maximumSize: 16 << 20) else { return [] }
        let lines = bytes.split(separator: 0x0A).map { String(decoding: $0, as: UTF8.self) }
            .filter { !$0.isEmpty && !$0.unicodeScalars.contains(where: { isControl($0.value) }) }
        let kept = Array(lines.suffix(historyLimit))
        if lines.count > 2 * historyLimit {
            try? FileContents.writeAtomically(Array(kept.map { $0 + "\n" }.joined().utf8), to: path)
        }
        return kept
    }
}

/// The terminal's modes for a session at the prompt. While a line is read the terminal is raw (no echo, no
/// line discipline, no signals from keys). While an answer is computed, keys are queued as typed, unechoed,
/// and Ctrl-C still interrupts: what is typed ahead (Ctrl-D and Enter included) reaches the editor at the
/// next prompt byte for byte. (In the terminal's own line mode a typed-ahead Ctrl-D would be turned into an
/// end-of-line marker that raw reads return as a NUL.) The original modes come back when the session ends,
/// at `exit`, and on a terminating signal.
final class TerminalModes {
    enum Mode {
        case reading
        case answering
    }

    private let descriptor: Int32
    private var original = termios()
    private var reading = termios()
    private var answering = termios()
    private var active = false

    init(_ descriptor: Int32) {
        self.descriptor = descriptor
        guard tcgetattr(descriptor, &original) == 0 else { return }
        reading = original
        reading.c_lflag &= ~tcflag_t(ICANON | ECHO | ISIG | IEXTEN)
        reading.c_iflag &= ~tcflag_t(IXON | ICRNL | INLCR)
        withUnsafeMutableBytes(of: &reading.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        answering = reading
        answering.c_lflag |= tcflag_t(ISIG)
        active = true
        savedTerminal = original
        savedDescriptor = descriptor
        for signal in [SIGTERM, SIGHUP, SIGQUIT] { Glibc.signal(signal, restoreAndReraise) }
        if !exitHookInstalled {
            exitHookInstalled = true
            atexit { restoreSavedTerminal() }
        }
        set(.answering)
    }

    /// TCSANOW: bytes typed ahead are kept across the change.
    func set(_ mode: Mode) {
        guard active else { return }
        if mode == .reading {
            tcsetattr(descriptor, TCSANOW, &reading)
        } else {
            tcsetattr(descriptor, TCSANOW, &answering)
        }
    }

    func restore() {
        guard active else { return }
        active = false
        tcsetattr(descriptor, TCSANOW, &original)
        savedDescriptor = -1
        for signal in [SIGTERM, SIGHUP, SIGQUIT] { Glibc.signal(signal, SIG_DFL) }
    }
}

nonisolated(unsafe) private var savedTerminal = termios()
nonisolated(unsafe) private var savedDescriptor: Int32 = -1
nonisolated(unsafe) private var exitHookInstalled = false

/// Async-signal-safe: `tcsetattr` only.
private func restoreSavedTerminal() {
    if savedDescriptor >= 0 { tcsetattr(savedDescriptor, TCSANOW, &savedTerminal) }
}

private func restoreAndReraise(_ signal: Int32) {
    restoreSavedTerminal()
    Glibc.signal(signal, SIG_DFL)
    raise(signal)
}

/// Ctrl-C while a query is answered: the first press says the answer is on its way (the features are
/// kept); a second press within the same answer leaves with status 130.
enum InterruptGuard {
    static func install() {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = interrupted
        sigemptyset(&action.sa_mask)
        action.sa_flags = SA_RESTART
        sigaction(SIGINT, &action, nil)
        // A parent may have started us with SIGINT blocked; the guard needs it delivered.
        var unblock = sigset_t()
        sigemptyset(&unblock)
        sigaddset(&unblock, SIGINT)
        sigprocmask(SIG_UNBLOCK, &unblock, nil)
    }

    /// Call when an answer is complete.
    static func reset() { pressedDuringAnswer = 0 }
}

nonisolated(unsafe) private var pressedDuringAnswer: Int32 = 0

private func interrupted(_: Int32) {
    pressedDuringAnswer += 1
    if pressedDuringAnswer > 1 {
        restoreSavedTerminal()
        _exit(130)
    }
    let message = Array(
        "\nlookout: still answering; press Ctrl-C again to leave (at the prompt, Ctrl-C clears the line)\n".utf8)
    _ = message.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}
