#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// File names as Lookout's strings hold them.
///
/// A Linux file name is bytes, not necessarily UTF-8 (`caf\xE9.jpg`, written by a latin-1 system). Lookout
/// keeps such a name in a `String` without losing it: each byte that is not part of valid UTF-8 becomes
/// one code point of Unicode's last private-use block, U+10FF00 + byte (U+10FF80–U+10FFFF), and the system
/// calls get the original bytes back (`withSystemName`). People see those bytes as `\xE9` (`shown`).
/// A name that really holds one of those 128 code points keeps its bytes the same way.
public enum FileName {
    static let escapeBase: UInt32 = 0x10FF00

    /// The name of the system's bytes (without a terminating NUL).
    public static func decode<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let bytes = Array(bytes)
        var scalars = String.UnicodeScalarView()
        var index = 0
        while index < bytes.count {
            guard let (value, length) = decodeOne(bytes, at: index) else {
                scalars.append(Unicode.Scalar(escapeBase + UInt32(bytes[index]))!)
                index += 1
                continue
            }
            if value < escapeBase + 0x80 {
                scalars.append(Unicode.Scalar(value)!)
            } else {
                // A code point of the escape block itself: keep its bytes as escapes.
                for byte in bytes[index..<(index + length)] {
                    scalars.append(Unicode.Scalar(escapeBase + UInt32(byte))!)
                }
            }
            index += length
        }
        return String(scalars)
    }

    /// The name of a NUL-terminated system string.
    public static func decode(cString: UnsafePointer<CChar>) -> String {
        decode(
            UnsafeBufferPointer(
                start: UnsafeRawPointer(cString).assumingMemoryBound(to: UInt8.self), count: strlen(cString)))
    }

    /// The system's bytes of a name (escapes turned back into their byte).
    public static func bytes(_ name: String) -> [UInt8] {
        guard needsEscapes(name) else { return Array(name.utf8) }
        var out: [UInt8] = []
        for scalar in name.unicodeScalars {
            if scalar.value >= escapeBase + 0x80 {
                out.append(UInt8(scalar.value - escapeBase))
            } else {
                out.append(contentsOf: String(scalar).utf8)
            }
        }
        return out
    }

    /// Calls `body` with the name as the system spells it (NUL-terminated).
    public static func withSystemName<Result>(
        _ name: String, _ body: (UnsafePointer<CChar>) throws -> Result
    ) rethrows -> Result {
        guard needsEscapes(name) else { return try name.withCString(body) }
        let bytes = self.bytes(name).map { CChar(bitPattern: $0) } + [0]
        return try bytes.withUnsafeBufferPointer { try body($0.baseAddress!) }
    }

    /// The name for people: the bytes that are not UTF-8 shown as `\xE9`.
    public static func shown(_ name: String) -> String {
        guard needsEscapes(name) else { return name }
        var out = ""
        for scalar in name.unicodeScalars {
            if scalar.value >= escapeBase + 0x80 {
                let byte = String(scalar.value - escapeBase, radix: 16, uppercase: true)
                out += "\\x" + byte
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    static func needsEscapes(_ name: String) -> Bool {
        name.utf8.contains(0xF4) && name.unicodeScalars.contains { $0.value >= escapeBase + 0x80 }
    }

    /// One strict UTF-8 sequence at `index`: its code point and length.
    private static func decodeOne(_ bytes: [UInt8], at index: Int) -> (UInt32, Int)? {
        let first = bytes[index]
        if first < 0x80 { return (UInt32(first), 1) }
        let length: Int
        let secondRange: ClosedRange<UInt8>
        switch first {
        case 0xC2...0xDF: (length, secondRange) = (2, 0x80...0xBF)
        case 0xE0: (length, secondRange) = (3, 0xA0...0xBF)
        case 0xED: (length, secondRange) = (3, 0x80...0x9F)
        case 0xE1...0xEF: (length, secondRange) = (3, 0x80...0xBF)
        case 0xF0: (length, secondRange) = (4, 0x90...0xBF)
        case 0xF1...0xF3: (length, secondRange) = (4, 0x80...0xBF)
        case 0xF4: (length, secondRange) = (4, 0x80...0x8F)
        default: return nil
        }
        guard index + length <= bytes.count, secondRange.contains(bytes[index + 1]) else { return nil }
        var value = UInt32(first) & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07)
        for offset in 1..<length {
            let byte = bytes[index + offset]
            guard offset == 1 || (0x80...0xBF).contains(byte) else { return nil }
            value = value << 6 | UInt32(byte & 0x3F)
        }
        return (value, length)
    }
}

/// The system calls Lookout makes on file names, taking names as `FileName` holds them.
public enum FileSystem {
    public static func open(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 {
        FileName.withSystemName(path) { Glibc.open($0, flags, mode) }
    }

    public static func stat(_ path: String, _ info: inout Glibc.stat) -> Int32 {
        FileName.withSystemName(path) { systemStat($0, &info) }
    }

    public static func lstat(_ path: String, _ info: inout Glibc.stat) -> Int32 {
        FileName.withSystemName(path) { systemLstat($0, &info) }
    }

    public static func unlink(_ path: String) -> Int32 { FileName.withSystemName(path) { Glibc.unlink($0) } }

    public static func rename(_ from: String, _ to: String) -> Int32 {
        FileName.withSystemName(from) { from in FileName.withSystemName(to) { Glibc.rename(from, $0) } }
    }

    public static func access(_ path: String, _ mode: Int32) -> Int32 {
        FileName.withSystemName(path) { Glibc.access($0, mode) }
    }

    public static func mkdir(_ path: String, _ mode: mode_t) -> Int32 {
        FileName.withSystemName(path) { Glibc.mkdir($0, mode) }
    }

    public static func opendir(_ path: String) -> OpaquePointer? { FileName.withSystemName(path) { Glibc.opendir($0) } }

    /// The canonical absolute name, or nil (errno set).
    public static func realpath(_ path: String) -> String? {
        guard let resolved = FileName.withSystemName(path, { Glibc.realpath($0, nil) }) else { return nil }
        defer { free(resolved) }
        return FileName.decode(cString: resolved)
    }

    /// The names in a folder, "." and ".." left out, sorted; nil when it cannot be read.
    public static func entries(of path: String) -> [String]? {
        guard let folder = opendir(path) else { return nil }
        defer { closedir(folder) }
        var names: [String] = []
        while let entry = readdir(folder) {
            let entryName = name(of: entry)
            if entryName != "." && entryName != ".." { names.append(entryName) }
        }
        return names.sorted()
    }

    /// Whether `path` is a folder (following links).
    public static func isDirectory(_ path: String) -> Bool {
        var info = Glibc.stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    /// The name of a directory entry.
    public static func name(of entry: UnsafeMutablePointer<dirent>) -> String {
        withUnsafeBytes(of: entry.pointee.d_name) { raw in FileName.decode(raw.prefix(while: { $0 != 0 })) }
    }
}

private func systemStat(_ path: UnsafePointer<CChar>, _ info: inout stat) -> Int32 { stat(path, &info) }
private func systemLstat(_ path: UnsafePointer<CChar>, _ info: inout stat) -> Int32 { lstat(path, &info) }
