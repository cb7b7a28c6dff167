/// CLIP's reversible byte → character map (`bytes_to_unicode` in `simple_tokenizer.py`).
///
/// The 188 printable bytes 33–126, 161–172 and 174–255 map to the code point of the same number;
/// the other 68 bytes, in increasing order, map to U+0100, U+0101, … . The order in which bytes are
/// listed (printable ones first) is also the order of token ids 0–255.
public enum ByteEncoder {
    /// Bytes in `bytes_to_unicode` order: index `i` is the byte whose symbol has token id `i`.
    public static let bytesInVocabularyOrder: [UInt8] = {
        let printable = Array(33...126) + Array(161...172) + Array(174...255)
        let rest = (0...255).filter { !printable.contains($0) }
        return (printable + rest).map { UInt8($0) }
    }()

    /// The character standing for each byte value.
    public static let scalarForByte: [Unicode.Scalar] = {
        var table = [Unicode.Scalar](repeating: "\0", count: 256)
        var extra: UInt32 = 256
        for (position, byte) in bytesInVocabularyOrder.enumerated() {
            if position < 188 {
                table[Int(byte)] = Unicode.Scalar(byte)
            } else {
                table[Int(byte)] = Unicode.Scalar(extra)!
                extra += 1
            }
        }
        return table
    }()

    /// The UTF-8 bytes of `text`, each replaced by its character.
    public static func encode(_ text: String) -> String {
        var view = String.UnicodeScalarView()
        for byte in text.utf8 { view.append(scalarForByte[Int(byte)]) }
        return String(view)
    }
}
