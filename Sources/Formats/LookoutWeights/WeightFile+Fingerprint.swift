import LookoutSupport

extension WeightFile {
    /// An identity for caches derived from the weights themselves: SHA-256 over every tensor's name,
    /// dtype and shape and over up to 4 KiB of its bytes (the first and last 2 KiB). Far cheaper than
    /// hashing hundreds of megabytes, and it changes with any retrained or differently converted file.
    public func fingerprint() -> String {
        var hasher = SHA256()
        for name in names.sorted() {
            guard let view = tensors[name] else { continue }
            hasher.update(Array("\(name)|\(view.dtype.rawValue)|\(view.shape)|".utf8))
            view.withSampledBytes { hasher.update($0) }
        }
        return hasher.finalize()
    }
}

extension TensorView {
    /// Calls `body` with the first and last 2 KiB of the bytes the view spans.
    func withSampledBytes(_ body: (UnsafeRawBufferPointer) -> Void) {
        guard count > 0, let base = file.bytes.baseAddress else { return }
        let span = min(file.count - byteOffset, max(count * dtype.size, 0))
        let head = min(span, 2048)
        body(UnsafeRawBufferPointer(start: base + byteOffset, count: head))
        if span > head {
            let tail = min(span - head, 2048)
            body(UnsafeRawBufferPointer(start: base + byteOffset + span - tail, count: tail))
        }
    }
}
