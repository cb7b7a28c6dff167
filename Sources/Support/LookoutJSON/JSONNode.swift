import CJSONC

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One value inside a ``JSONDocument``. Holds the document alive; reads json-c's representation
/// directly, so looking at a large object costs no conversion.
public struct JSONNode: @unchecked Sendable {
    public enum Kind: Sendable, Equatable {
        case null, bool, int, double, string, array, object
    }

    let document: JSONDocument
    let pointer: OpaquePointer?

    init(document: JSONDocument, pointer: OpaquePointer?) {
        self.document = document
        self.pointer = pointer
    }

    public var kind: Kind {
        switch json_object_get_type(pointer) {
        case json_type_boolean: .bool
        case json_type_int: .int
        case json_type_double: .double
        case json_type_string: .string
        case json_type_array: .array
        case json_type_object: .object
        default: .null
        }
    }

    /// The string, if this is a string (embedded NUL characters are kept).
    public var string: String? {
        guard kind == .string, let bytes = json_object_get_string(pointer) else { return nil }
        let length = Int(json_object_get_string_len(pointer))
        return bytes.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
    }

    /// Calls `body` with the UTF-8 bytes of the string, if this is a string, without copying.
    public func withStringBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R? {
        guard kind == .string, let bytes = json_object_get_string(pointer) else { return nil }
        let length = Int(json_object_get_string_len(pointer))
        return try bytes.withMemoryRebound(to: UInt8.self, capacity: length) {
            try body(UnsafeBufferPointer(start: $0, count: length))
        }
    }

    /// The integer, if this is an integer (json-c saturates values outside Int64).
    public var int: Int64? {
        kind == .int ? json_object_get_int64(pointer) : nil
    }

    /// The number, if this is an integer or a double.
    public var number: Double? {
        switch kind {
        case .int: Double(json_object_get_int64(pointer))
        case .double: json_object_get_double(pointer)
        default: nil
        }
    }

    public var bool: Bool? {
        kind == .bool ? json_object_get_boolean(pointer) != 0 : nil
    }

    /// Number of elements of an array or members of an object; 0 otherwise.
    public var count: Int {
        switch kind {
        case .array: Int(json_object_array_length(pointer))
        case .object: Int(json_object_object_length(pointer))
        default: 0
        }
    }

    /// The array element at `index` (which must be below ``count``).
    public subscript(index: Int) -> JSONNode {
        precondition(kind == .array && index >= 0 && index < count, "JSON array index out of range")
        return JSONNode(document: document, pointer: json_object_array_get_idx(pointer, index))
    }

    /// The object member named `key`, if this is an object that has it.
    public subscript(key: String) -> JSONNode? {
        guard kind == .object else { return nil }
        var member: OpaquePointer?
        guard json_object_object_get_ex(pointer, key, &member) != 0 else { return nil }
        return JSONNode(document: document, pointer: member)
    }

    /// Visits the members of an object in document order, the key as UTF-8 bytes (without copying).
    public func forEachMember(_ body: (UnsafeBufferPointer<UInt8>, JSONNode) throws -> Void) rethrows {
        guard kind == .object else { return }
        var iterator = json_object_iter_begin(pointer)
        var end = json_object_iter_end(pointer)
        while json_object_iter_equal(&iterator, &end) == 0 {
            let name = json_object_iter_peek_name(&iterator)!
            let value = JSONNode(document: document, pointer: json_object_iter_peek_value(&iterator))
            let length = strlen(name)
            try name.withMemoryRebound(to: UInt8.self, capacity: length) {
                try body(UnsafeBufferPointer(start: $0, count: length), value)
            }
            json_object_iter_next(&iterator)
        }
    }

    /// The whole value converted to Swift.
    public var value: JSONValue {
        switch kind {
        case .null: return .null
        case .bool: return .bool(bool!)
        case .int: return .int(int!)
        case .double: return .double(json_object_get_double(pointer))
        case .string: return .string(string!)
        case .array: return .array((0..<count).map { self[$0].value })
        case .object:
            var members: [(String, JSONValue)] = []
            forEachMember { key, node in
                members.append((String(decoding: key, as: UTF8.self), node.value))
            }
            return .object(members)
        }
    }
}
