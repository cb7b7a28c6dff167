import LookoutSupport

extension SHA256 {
    /// SHA-256 of a whole file, read through a memory map.
    public static func hex(ofFile path: String) throws(WeightsError) -> String {
        let file = try MappedFile(path: path)
        var hasher = SHA256()
        hasher.update(file.bytes)
        return hasher.finalize()
    }
}
