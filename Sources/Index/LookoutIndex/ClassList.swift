import LookoutEngine
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
                problem:
                    "\(error.reason) (--classes takes a file, one name per line, or one of: \(builtIn.joined(separator: ", ")))"
            )
        }
        guard let names = parse(bytes) else {
            throw IndexError(
                path: path, kind: .classes, problem: "not text (a class list holds one name per line, in UTF-8)")
        }
        guard !names.isEmpty else { throw IndexError(path: path, kind: .classes, problem: "no class names in it") }
        guard names.count <= 20_000 else {
            throw IndexError(path: path, kind: .classes, problem: "\(names.count) names: at most 20000")
        }
        return (names, path)
    }
}

/// The vocabulary an index conditions the detector on: the class names' text embeddings (or the detector's
/// built-in text features), plus generic prompts.
///
/// The generic prompt "object" is always added. With it the neck is not tuned to the named classes alone:
/// on 160 held-out demo scenes indexed with classes that leave out three of the eight shapes, searching the
/// unnamed shapes gave photo-level AP 0.922 without it and 0.935 with it (named shapes 0.968 and 0.966).
public struct IndexVocabulary: Sendable {
    public static let genericPrompts = ["object"]

    /// Text embeddings, one after another (`count` × embedding size).
    public let embeddings: [Float]
    public let count: Int
    /// What the index records about it: "built-in:80+object", or "classes:1203:<digest>+object".
    public let name: String

    /// The vocabulary of `classes` (nil: the detector's built-in classes).
    public init(engine: Engine, classes: [String]?) throws(IndexError) {
        guard let embedder = engine.embedder else {
            throw IndexError(path: "--classes", kind: .classes, problem: "indexing needs a text encoder")
        }
        var embeddings: [Float]
        var name: String
        if let classes {
            embeddings = embedder.embed(classes).embeddings.flatMap { $0 }
            var digest = SHA256()
            digest.update(Array(classes.joined(separator: "\n").utf8))
            name = "classes:\(classes.count):\(digest.finalize().prefix(16))"
        } else {
            guard let builtin = engine.network.builtinText, engine.network.builtinClassCount > 0 else {
                throw IndexError(
                    path: "--classes", kind: .classes,
                    problem: "the detector holds no built-in classes (txt_feats) to index under: give --classes")
            }
            embeddings = builtin
            name = "built-in:\(engine.network.builtinClassCount)"
        }
        embeddings += embedder.embed(Self.genericPrompts).embeddings.flatMap { $0 }
        name += "+" + Self.genericPrompts.joined(separator: "+")
        self.embeddings = embeddings
        self.count = embeddings.count / engine.network.embeddingSize
        self.name = name
    }
}
