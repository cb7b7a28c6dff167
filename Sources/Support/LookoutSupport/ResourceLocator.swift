#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Finds files that ship with Lookout (the vocabulary, the demo model) when the user names none.
///
/// Looks, in order: at the environment variable, then in each parent folder of the executable
/// (a checkout's `.build/<config>/lookout` finds the checkout's `Vocab/`), under `share/lookout/`
/// there (an installed copy), and finally in the working directory.
public enum ResourceLocator {
    public struct NotFound: Error, CustomStringConvertible {
        public let what: String
        public let searched: [String]
        public let hint: String
        public var description: String {
            "\(what) not found; looked at:\n" + searched.map { "  \($0)" }.joined(separator: "\n") + "\n\(hint)"
        }
    }

    public static func find(
        _ relativePath: String, environment variable: String, what: String, hint: String
    ) throws -> String {
        var searched: [String] = []
        if let override = getenv(variable).map({ String(cString: $0) }), !override.isEmpty {
            if isFile(override) { return override }
            // A folder holding the file is as good as the file.
            let name = relativePath.split(separator: "/").last.map(String.init) ?? relativePath
            if isFile(override + "/" + name) { return override + "/" + name }
            throw NotFound(what: what, searched: ["\(override) (from $\(variable))"], hint: hint)
        }
        var directory = executableDirectory()
        while let current = directory {
            for candidate in [current + "/" + relativePath, current + "/share/lookout/" + relativePath] {
                searched.append(candidate)
                if isFile(candidate) { return candidate }
            }
            directory = parent(of: current)
        }
        let local = currentDirectory().map { $0 + "/" + relativePath } ?? relativePath
        searched.append(local)
        if isFile(local) { return local }
        throw NotFound(what: what, searched: searched, hint: hint)
    }

    /// Where `lookout models fetch` puts models, each in a folder of its name: `$LOOKOUT_MODELS_DIR`, else
    /// `$XDG_DATA_HOME/lookout/models`, else `$HOME/.local/share/lookout/models`; nil when none can be named.
    public static func modelsDirectory() -> String? {
        if let explicit = variable("LOOKOUT_MODELS_DIR") { return explicit }
        if let xdg = variable("XDG_DATA_HOME") { return xdg + "/lookout/models" }
        if let home = variable("HOME") { return home + "/.local/share/lookout/models" }
        return nil
    }

    /// Lookout's cache folder: `$LOOKOUT_CACHE_DIR`, else `$XDG_CACHE_HOME/lookout`, else
    /// `$HOME/.cache/lookout`; nil when none can be named.
    public static func cacheDirectory() -> String? {
        if let explicit = variable("LOOKOUT_CACHE_DIR") { return explicit }
        if let xdg = variable("XDG_CACHE_HOME") { return xdg + "/lookout" }
        if let home = variable("HOME") { return home + "/.cache/lookout" }
        return nil
    }

    /// An environment variable's value, nil when unset or empty.
    public static func variable(_ name: String) -> String? {
        guard let value = getenv(name).map({ String(cString: $0) }), !value.isEmpty else { return nil }
        return value
    }

    private static func isFile(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
    }

    private static func executableDirectory() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        let path = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return parent(of: path)
    }

    private static func currentDirectory() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getcwd(&buffer, buffer.count) != nil, let end = buffer.firstIndex(of: 0) else { return nil }
        return String(decoding: buffer[..<end].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func parent(of path: String) -> String? {
        guard let slash = path.lastIndex(of: "/"), path != "/" else { return nil }
        let result = String(path[..<slash])
        return result.isEmpty ? "/" : result
    }
}
