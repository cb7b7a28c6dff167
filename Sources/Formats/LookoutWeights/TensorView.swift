import LookoutTensor

/// A tensor stored in a mapped file: its element type, shape and strides over a byte range.
/// Nothing is copied until ``floats()`` or ``tensor()`` is called.
public struct TensorView: Sendable {
    public let dtype: DType
    public let shape: [Int]
    /// Strides in elements, row-major for safetensors; as stored for PyTorch tensors.
    public let strides: [Int]
    let file: MappedFile
    /// Byte offset of element 0 (after the storage offset) in the file.
    let byteOffset: Int

    /// Builds a view after checking that every element it can address lies inside
    /// `storageRange` (a byte range of `file`).
    init(
        file: MappedFile, storageRange: Range<Int>, dtype: DType, shape: [Int], strides: [Int], elementOffset: Int,
        name: String
    ) throws(WeightsError) {
        func fail(_ problem: String) -> WeightsError {
            WeightsError(path: file.path, problem: "tensor \(name): \(problem)")
        }
        guard shape.count == strides.count else { throw fail("shape \(shape) and strides \(strides) differ in rank") }
        guard shape.allSatisfy({ $0 >= 0 }), strides.allSatisfy({ $0 >= 0 }), elementOffset >= 0 else {
            throw fail("negative shape, stride or offset")
        }
        guard storageRange.lowerBound >= 0, storageRange.upperBound <= file.count else {
            throw fail("storage bytes \(storageRange) lie outside the \(file.count)-byte file")
        }
        let (count, countOverflow) = shape.reduce((1, false)) { partial, dimension in
            let product = partial.0.multipliedReportingOverflow(by: dimension)
            return (product.partialValue, partial.1 || product.overflow)
        }
        guard !countOverflow, count <= 1 << 40 else { throw fail("shape \(shape) is too large") }
        if count > 0 {
            var last = elementOffset
            for (dimension, stride) in zip(shape, strides) {
                let step = (dimension - 1).multipliedReportingOverflow(by: stride)
                let sum = last.addingReportingOverflow(step.partialValue)
                guard !step.overflow, !sum.overflow else { throw fail("strides \(strides) overflow") }
                last = sum.partialValue
            }
            let (end, overflow) = (last + 1).multipliedReportingOverflow(by: dtype.size)
            guard !overflow, end <= storageRange.count else {
                throw fail(
                    "shape \(shape), strides \(strides) and offset \(elementOffset) reach beyond its storage of \(storageRange.count / dtype.size) elements"
                )
            }
        }
        self.file = file
        self.dtype = dtype
        self.shape = shape
        self.strides = strides
        self.byteOffset = storageRange.lowerBound + elementOffset * dtype.size
    }

    public var count: Int { shape.reduce(1, *) }

    var isContiguous: Bool {
        var expected = 1
        for (dimension, stride) in zip(shape, strides).reversed() where dimension != 1 {
            if stride != expected { return false }
            expected *= dimension
        }
        return true
    }

    /// The values converted to Float32, in row-major order of `shape`.
    public func floats() -> [Float] {
        let total = count
        guard total > 0, let base = file.bytes.baseAddress?.advanced(by: byteOffset) else { return [] }
        var out = [Float](repeating: 0, count: total)
        out.withUnsafeMutableBufferPointer { target in
            if isContiguous {
                if dtype == .float32 {
                    UnsafeMutableRawBufferPointer(target).copyMemory(
                        from: UnsafeRawBufferPointer(start: base, count: total * 4))
                } else if dtype == .float16 && byteOffset % 2 == 0 {
                    Kernels.halfToFloat(base.assumingMemoryBound(to: UInt16.self), target.baseAddress!, count: total)
                } else {
                    for index in 0..<total { target[index] = dtype.float(base, index) }
                }
            } else {
                forEachOffset { index, offset in target[index] = dtype.float(base, offset) }
            }
        }
        return out
    }

    /// The values as Int64, in row-major order (for integer tensors).
    public func integers() -> [Int64] {
        guard count > 0, let base = file.bytes.baseAddress?.advanced(by: byteOffset) else { return [] }
        var out = [Int64](repeating: 0, count: count)
        forEachOffset { index, offset in out[index] = dtype.int64(base, offset) }
        return out
    }

    /// The raw IEEE-half bit patterns in row-major order, when the stored type is F16.
    public func halfBits() -> [UInt16]? {
        guard dtype == .float16, let base = file.bytes.baseAddress?.advanced(by: byteOffset) else { return nil }
        var out = [UInt16](repeating: 0, count: count)
        forEachOffset { index, offset in
            out[index] = UInt16(littleEndian: base.loadUnaligned(fromByteOffset: offset * 2, as: UInt16.self))
        }
        return out
    }

    public func tensor() -> Tensor {
        Tensor(shape: shape, storage: floats())
    }

    /// Calls `body(index in row-major order, element offset in storage)` for every element.
    private func forEachOffset(_ body: (Int, Int) -> Void) {
        let rank = shape.count
        if rank == 0 {
            body(0, 0)
            return
        }
        var position = [Int](repeating: 0, count: rank)
        var offset = 0
        for index in 0..<count {
            body(index, offset)
            var axis = rank - 1
            while axis >= 0 {
                position[axis] += 1
                offset += strides[axis]
                if position[axis] < shape[axis] { break }
                offset -= strides[axis] * shape[axis]
                position[axis] = 0
                axis -= 1
            }
        }
    }
}
