import LookoutSupport

/// The class names an index conditions the detector on and keeps regions under (`lookout index --classes`).
///
/// A list is a text file, one name per line; blank lines and lines starting with `#` are ignored, names are
/// trimmed and repeats dropped (first kept). Lists that ship with Lookout (`Vocab/classes/NAME.txt`) are
/// named by their NAME.
public enum ClassList {
    /// The lists that ship with Lookout, by the name `--classes` takes.
    public static let builtIn = ["coco", "lvis", "objects365", "lvis+objects365"]

    /// Names in a list file's bytes; nil when the bytes are not UTF-8 text.
    public static func parse(_ bytes: [UInt8]) -> [String]? {
        guard String(validating: bytes, as: UTF8.self) != nil, !bytes.contains(0) else { return nil }
        var names: [String] = []
        var seen = Set<String>()
        for line in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            let name = String(decoding: line, as: UTF8.self).trimmingCharacters(in: " \t\r")
            if name.isEmpty || name.hasPrefix("#") || seen.contains(name) { continue }
            seen.insert(name)
            names.append(name)
        }
        return names
    }

    /// The names of a built-in list (`lvis`) or of a list file.
    public static func load(_ nameOrPath: String) throws(IndexError) -> (names: [String], source: String) {
        var path = nameOrPath
        if builtIn.contains(nameOrPath) {
            do {
                path = try ResourceLocator.find(
                    "Vocab/classes/\(nameOrPath).txt", environment: "LOOKOUT_CLASSES_DIR", what: "the class list",
                    hint: "Lookout's Vocab/classes folder ships with it; set $LOOKOUT_CLASSES_DIR to that folder.")
            } catch {
                throw IndexError(path: nameOrPath, kind: .classes, problem: "\(error)")
            }
        }
        let bytes: [UInt8]
        do {
            bytes = try FileContents.read(path, maximumSize: 16 << 20)
        } catch {
            throw IndexError(
                path: path, kind: .classes,
                problem: "\(error.reason) (--classes takes a file, one name per line, or one of: \(builtIn.joined(separator: ", ")))")
        }
        guard let names = parse(bytes) else {
            throw IndexError(path: path, kind: .classes, problem: "not text (a class list holds one name per line, in UTF-8)")
        }
        guard !names.isEmpty else { throw IndexError(path: path, kind: .classes, problem: "no class names in it") }
        guard names.count <= 20_000 else {
            throw IndexError(path: path, kind: .classes, problem: "\(names.count) names: at most 20000")
        }
        return (names, path)
    }
}
