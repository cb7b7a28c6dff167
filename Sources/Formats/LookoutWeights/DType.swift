/// Element types found in weight files. All floating types are converted to Float32 when read.
public enum DType: String, Sendable, CaseIterable {
    case float32 = "F32"
    case float16 = "F16"
    case bfloat16 = "BF16"
    case float64 = "F64"
    case int64 = "I64"
    case int32 = "I32"
    case int16 = "I16"
    case int8 = "I8"
    case uint8 = "U8"
    case bool = "BOOL"

    public var size: Int {
        switch self {
        case .float64, .int64: 8
        case .float32, .int32: 4
        case .float16, .bfloat16, .int16: 2
        case .int8, .uint8, .bool: 1
        }
    }

    /// The dtype of a PyTorch storage class (`torch.HalfStorage` → F16).
    init?(torchStorage name: String) {
        switch name {
        case "FloatStorage": self = .float32
        case "HalfStorage": self = .float16
        case "BFloat16Storage": self = .bfloat16
        case "DoubleStorage": self = .float64
        case "LongStorage": self = .int64
        case "IntStorage": self = .int32
        case "ShortStorage": self = .int16
        case "CharStorage": self = .int8
        case "ByteStorage": self = .uint8
        case "BoolStorage": self = .bool
        default: return nil
        }
    }

    /// Reads element `index` of a buffer of this type as Float (integers converted, may round).
    @inline(__always)
    func float(_ base: UnsafeRawPointer, _ index: Int) -> Float {
        switch self {
        case .float32:
            Float(bitPattern: UInt32(littleEndian: base.loadUnaligned(fromByteOffset: index * 4, as: UInt32.self)))
        case .float16:
            Float(
                Float16(
                    bitPattern: UInt16(littleEndian: base.loadUnaligned(fromByteOffset: index * 2, as: UInt16.self))))
        case .bfloat16:
            Float(
                bitPattern: UInt32(UInt16(littleEndian: base.loadUnaligned(fromByteOffset: index * 2, as: UInt16.self)))
                    << 16)
        case .float64:
            Float(
                Double(bitPattern: UInt64(littleEndian: base.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self)))
            )
        case .int64: Float(Int64(littleEndian: base.loadUnaligned(fromByteOffset: index * 8, as: Int64.self)))
        case .int32: Float(Int32(littleEndian: base.loadUnaligned(fromByteOffset: index * 4, as: Int32.self)))
        case .int16: Float(Int16(littleEndian: base.loadUnaligned(fromByteOffset: index * 2, as: Int16.self)))
        case .int8: Float(base.load(fromByteOffset: index, as: Int8.self))
        case .uint8, .bool: Float(base.load(fromByteOffset: index, as: UInt8.self))
        }
    }

    /// Reads element `index` as Int64 (floating values truncated).
    @inline(__always)
    func int64(_ base: UnsafeRawPointer, _ index: Int) -> Int64 {
        switch self {
        case .int64: return Int64(littleEndian: base.loadUnaligned(fromByteOffset: index * 8, as: Int64.self))
        case .int32: return Int64(Int32(littleEndian: base.loadUnaligned(fromByteOffset: index * 4, as: Int32.self)))
        case .int16: return Int64(Int16(littleEndian: base.loadUnaligned(fromByteOffset: index * 2, as: Int16.self)))
        case .int8: return Int64(base.load(fromByteOffset: index, as: Int8.self))
        case .uint8, .bool: return Int64(base.load(fromByteOffset: index, as: UInt8.self))
        default:
            let value = float(base, index)
            return value.isFinite && abs(value) < 9e18 ? Int64(value) : 0
        }
    }

    public var isFloatingPoint: Bool { self == .float32 || self == .float16 || self == .bfloat16 || self == .float64 }
}
