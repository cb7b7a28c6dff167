/// A value produced by the restricted unpickler: plain data only.
///
/// Nothing in a pickle is ever imported or called. A `GLOBAL` becomes a ``PickleValue/global(_:_:)``
/// name; `REDUCE`, `NEWOBJ` and `BUILD` on a name build a ``PickleObject`` that records the name, the
/// arguments and the state. The few constructors that matter for weight files are recognised by name
/// and turned into data: `collections.OrderedDict`, `set`, and PyTorch's tensor rebuilders.
public indirect enum PickleValue: Sendable {
    case none
    case bool(Bool)
    case int(Int64)
    /// An integer too large for Int64, as little-endian two's-complement bytes.
    case bigInt([UInt8])
    case float(Double)
    case string(String)
    case bytes([UInt8])
    /// A tuple (held in a box like lists, so that deep nesting is released without recursion).
    case tuple(PickleList)
    case list(PickleList)
    case dict(PickleDict)
    case global(String, String)
    case object(PickleObject)
    case storage(StorageReference)
    case tensor(TensorReference)

    public var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var int: Int64? {
        switch self {
        case .int(let value): value
        case .bool(let value): value ? 1 : 0
        default: nil
        }
    }

    public var double: Double? {
        switch self {
        case .float(let value): value
        case .int(let value): Double(value)
        default: nil
        }
    }

    public var dict: PickleDict? {
        if case .dict(let value) = self { return value }
        return nil
    }

    public var object: PickleObject? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The items of a tuple or list.
    public var tuple: [PickleValue]? {
        switch self {
        case .tuple(let values): values.items
        case .list(let list): list.items
        default: nil
        }
    }

    static func box(_ items: [PickleValue]) -> PickleList {
        let box = PickleList()
        box.items = items
        return box
    }

    public var isNone: Bool {
        if case .none = self { return true }
        return false
    }
}

/// A pickled list, set or tuple (shared by reference, as in Python).
public final class PickleList: @unchecked Sendable {
    public internal(set) var items: [PickleValue] = []

    deinit { PickleGraph.release(&items) }
}

/// Releasing a deeply nested graph recursively would overflow the stack (a pickle can nest a million
/// lists in a few megabytes). Containers therefore hand their children to a work list, and each child
/// that nothing else references gives up its own children the same way before it is freed.
enum PickleGraph {
    static func release(_ values: inout [PickleValue]) {
        guard values.contains(where: \.isContainer) else { return }
        var pending = values
        values = []
        while var value = pending.popLast() {
            switch value {
            case .list(var box), .tuple(var box):
                value = .none
                if isKnownUniquelyReferenced(&box) {
                    pending.append(contentsOf: box.items)
                    box.items = []
                }
            case .dict(var box):
                value = .none
                if isKnownUniquelyReferenced(&box) {
                    for entry in box.entries {
                        pending.append(entry.key)
                        pending.append(entry.value)
                    }
                    box.entries = []
                }
            case .object(var box):
                value = .none
                if isKnownUniquelyReferenced(&box) {
                    pending.append(contentsOf: box.arguments)
                    box.arguments = []
                    if let state = box.state { pending.append(state) }
                    box.state = nil
                }
            default:
                break
            }
        }
    }
}

extension PickleValue {
    var isContainer: Bool {
        switch self {
        case .list, .tuple, .dict, .object: true
        default: false
        }
    }
}

/// A pickled dict or OrderedDict, in insertion order.
public final class PickleDict: @unchecked Sendable {
    public internal(set) var entries: [(key: PickleValue, value: PickleValue)] = []

    deinit {
        guard !entries.isEmpty else { return }
        var values: [PickleValue] = []
        values.reserveCapacity(entries.count * 2)
        for entry in entries {
            values.append(entry.key)
            values.append(entry.value)
        }
        entries = []
        PickleGraph.release(&values)
    }

    /// The value of a string key.
    public subscript(key: String) -> PickleValue? {
        for entry in entries where entry.key.string == key { return entry.value }
        return nil
    }

    func set(_ key: PickleValue, _ value: PickleValue) {
        if let name = key.string, let index = entries.firstIndex(where: { $0.key.string == name }) {
            entries[index].value = value
        } else {
            entries.append((key, value))
        }
    }
}

/// An instance of a named class, never constructed: the class name, the constructor arguments and the
/// state `BUILD` gave it.
public final class PickleObject: @unchecked Sendable {
    public let module: String
    public let name: String
    public internal(set) var arguments: [PickleValue]
    public internal(set) var state: PickleValue?

    deinit {
        var values = arguments
        arguments = []
        if let state { values.append(state) }
        state = nil
        PickleGraph.release(&values)
    }

    init(module: String, name: String, arguments: [PickleValue]) {
        self.module = module
        self.name = name
        self.arguments = arguments
    }

    public var qualifiedName: String { module + "." + name }

    /// The state's attribute dictionary (`__dict__`), when the state is one.
    public var attributes: PickleDict? {
        switch state {
        case .dict(let dict): return dict
        case .tuple(let parts):
            // (state, slotstate) form
            if let first = parts.items.first, case .dict(let dict) = first { return dict }
            return nil
        default: return nil
        }
    }
}

/// A PyTorch storage named by a persistent id `('storage', torch.<Type>Storage, key, location, numel)`.
public struct StorageReference: Sendable {
    public let key: String
    public let dtype: DType
    public let count: Int
}

/// A tensor from `torch._utils._rebuild_tensor_v2`: a strided view of a storage.
public struct TensorReference: Sendable {
    public let storage: StorageReference
    public let offset: Int
    public let shape: [Int]
    public let strides: [Int]
}

/// Errors of the unpickler, with the byte offset of the failing opcode.
public struct PickleError: Error, CustomStringConvertible, Sendable {
    public let offset: Int
    public let message: String
    public var description: String { "pickle byte \(offset): \(message)" }
}

/// The result of unpickling: the root value, and every container built on the way.
///
/// A pickle can build reference cycles (a list that contains itself), which reference counting alone
/// would never free. When the document goes, it empties every container it made, which breaks all
/// cycles; values taken out of the graph (strings, numbers, tensor references) stay valid.
public final class PickleDocument: @unchecked Sendable {
    public let root: PickleValue
    private let containers: [AnyObject]

    init(root: PickleValue, containers: [AnyObject]) {
        self.root = root
        self.containers = containers
    }

    deinit { Self.empty(containers) }

    static func empty(_ containers: [AnyObject]) {
        for container in containers {
            switch container {
            case let list as PickleList: list.items = []
            case let dict as PickleDict: dict.entries = []
            case let object as PickleObject:
                object.arguments = []
                object.state = nil
            default: break
            }
        }
    }
}

/// A restricted unpickler for the opcodes of protocols 0–5 that data files use.
///
/// It never imports or calls anything (see ``PickleValue``). It runs in linear time in the input:
/// every length is checked against the remaining bytes before anything is allocated, so truncated or
/// lying input is an error, and nesting builds no recursion. Extension codes and out-of-band buffers
/// are rejected.
public struct Unpickler {
    private let data: UnsafeRawBufferPointer
    private var position = 0
    private var stack: [PickleValue] = []
    private var marks: [Int] = []
    private var memo: [Int: PickleValue] = [:]
    private let maximumMemo = 10_000_000
    /// Every list, dict and object made, so that cycles can be broken afterwards.
    private var containers: [AnyObject] = []

    public init(_ data: UnsafeRawBufferPointer) {
        self.data = data
    }

    /// Unpickles the whole input: one value ending with STOP.
    public static func load(_ data: UnsafeRawBufferPointer) throws(PickleError) -> PickleDocument {
        var unpickler = Unpickler(data)
        do {
            let root = try unpickler.run()
            return PickleDocument(root: root, containers: unpickler.containers)
        } catch {
            unpickler.memo = [:]
            unpickler.stack = []
            PickleDocument.empty(unpickler.containers)
            throw error
        }
    }

    private mutating func made<T: AnyObject>(_ container: T) -> T {
        containers.append(container)
        return container
    }

    private func fail(_ message: String, at offset: Int? = nil) -> PickleError {
        PickleError(offset: offset ?? position, message: message)
    }

    private mutating func byte() throws(PickleError) -> UInt8 {
        guard position < data.count else { throw fail("unexpected end of data") }
        defer { position += 1 }
        return data[position]
    }

    private mutating func take(_ count: Int) throws(PickleError) -> UnsafeRawBufferPointer {
        guard count >= 0, count <= data.count - position else {
            throw fail("needs \(count) bytes, \(data.count - position) remain")
        }
        defer { position += count }
        return UnsafeRawBufferPointer(rebasing: data[position..<(position + count)])
    }

    private mutating func integer<T: FixedWidthInteger>(_ type: T.Type) throws(PickleError) -> T {
        let bytes = try take(MemoryLayout<T>.size)
        return T(littleEndian: bytes.loadUnaligned(as: T.self))
    }

    private mutating func line() throws(PickleError) -> String {
        var end = position
        while end < data.count && data[end] != 0x0A { end += 1 }
        guard end < data.count else { throw fail("unterminated text argument") }
        let text = String(decoding: data[position..<end], as: UTF8.self)
        position = end + 1
        return text
    }

    private mutating func pop() throws(PickleError) -> PickleValue {
        guard let value = stack.popLast() else { throw fail("stack underflow") }
        if let mark = marks.last, stack.count < mark { throw fail("stack underflow past a mark") }
        return value
    }

    private mutating func popToMark() throws(PickleError) -> [PickleValue] {
        guard let mark = marks.popLast() else { throw fail("no mark") }
        guard mark <= stack.count else { throw fail("mark beyond the stack") }
        let items = Array(stack[mark...])
        stack.removeSubrange(mark...)
        return items
    }

    private mutating func top() throws(PickleError) -> PickleValue {
        guard let value = stack.last else { throw fail("stack underflow") }
        return value
    }

    private mutating func remember(_ index: Int) throws(PickleError) {
        guard index >= 0, index < maximumMemo else { throw fail("memo index \(index) out of range") }
        memo[index] = try top()
    }

    private mutating func recall(_ index: Int) throws(PickleError) {
        guard let value = memo[index] else { throw fail("memo index \(index) was never stored") }
        stack.append(value)
    }

    mutating func run() throws(PickleError) -> PickleValue {
        while true {
            let start = position
            let opcode = try byte()
            switch opcode {
            case 0x80: _ = try byte()  // PROTO
            case 0x95: _ = try integer(UInt64.self)  // FRAME
            case 0x2E:  // STOP
                guard stack.count == 1, marks.isEmpty else {
                    throw fail("STOP with \(stack.count) values on the stack")
                }
                return stack[0]
            case 0x28: marks.append(stack.count)  // MARK
            case 0x30: _ = try pop()  // POP
            case 0x31: _ = try popToMark()  // POP_MARK
            case 0x32: stack.append(try top())  // DUP
            case 0x4E: stack.append(.none)
            case 0x88: stack.append(.bool(true))
            case 0x89: stack.append(.bool(false))
            case 0x4A: stack.append(.int(Int64(try integer(Int32.self))))  // BININT
            case 0x4B: stack.append(.int(Int64(try byte())))  // BININT1
            case 0x4D: stack.append(.int(Int64(try integer(UInt16.self))))  // BININT2
            case 0x8A: stack.append(try long(Int(try byte())))  // LONG1
            case 0x8B:  // LONG4
                let count = try integer(Int32.self)
                guard count >= 0 else { throw fail("negative LONG4 length") }
                stack.append(try long(Int(count)))
            case 0x49:  // INT (text; "01"/"00" are booleans)
                let text = try line()
                if text == "01" || text == "00" {
                    stack.append(.bool(text == "01"))
                } else if let value = Int64(text) {
                    stack.append(.int(value))
                } else {
                    throw fail("bad INT \(text)")
                }
            case 0x4C:  // LONG (text)
                var text = try line()
                if text.hasSuffix("L") { text.removeLast() }
                guard let value = Int64(text) else { throw fail("LONG out of range") }
                stack.append(.int(value))
            case 0x47:  // BINFLOAT (big-endian)
                stack.append(.float(Double(bitPattern: UInt64(bigEndian: try take(8).loadUnaligned(as: UInt64.self)))))
            case 0x46:  // FLOAT (text)
                let text = try line()
                guard let value = Double(text) else { throw fail("bad FLOAT \(text)") }
                stack.append(.float(value))
            case 0x58: stack.append(.string(try text(Int(try integer(UInt32.self)))))  // BINUNICODE
            case 0x8C: stack.append(.string(try text(Int(try byte()))))  // SHORT_BINUNICODE
            case 0x8D: stack.append(.string(try text(try length64())))  // BINUNICODE8
            case 0x54:  // BINSTRING (Python 2 str)
                let count = try integer(Int32.self)
                guard count >= 0 else { throw fail("negative BINSTRING length") }
                stack.append(.string(latin1(try take(Int(count)))))
            case 0x55: stack.append(.string(latin1(try take(Int(try byte())))))  // SHORT_BINSTRING
            case 0x42: stack.append(.bytes(Array(try take(Int(try integer(UInt32.self))))))  // BINBYTES
            case 0x43: stack.append(.bytes(Array(try take(Int(try byte())))))  // SHORT_BINBYTES
            case 0x8E, 0x96: stack.append(.bytes(Array(try take(try length64()))))  // BINBYTES8, BYTEARRAY8
            case 0x56:  // UNICODE (raw-unicode-escape text; kept as is)
                stack.append(.string(try line()))
            case 0x29: stack.append(tuple([]))
            case 0x74: stack.append(tuple(try popToMark()))
            case 0x85: stack.append(tuple([try pop()]))
            case 0x86:
                let second = try pop()
                stack.append(tuple([try pop(), second]))
            case 0x87:
                let third = try pop()
                let second = try pop()
                stack.append(tuple([try pop(), second, third]))
            case 0x5D: stack.append(.list(made(PickleList())))  // EMPTY_LIST
            case 0x6C:  // LIST
                let list = made(PickleList())
                list.items = try popToMark()
                stack.append(.list(list))
            case 0x61:  // APPEND
                let value = try pop()
                try appendItems([value])
            case 0x65: try appendItems(try popToMark())  // APPENDS
            case 0x7D: stack.append(.dict(made(PickleDict())))  // EMPTY_DICT
            case 0x64:  // DICT
                let items = try popToMark()
                let dict = made(PickleDict())
                try setItems(dict, items)
                stack.append(.dict(dict))
            case 0x73:  // SETITEM
                let value = try pop()
                let key = try pop()
                guard case .dict(let dict) = try top() else { throw fail("SETITEM on a non-dict") }
                dict.set(key, value)
            case 0x75:  // SETITEMS
                let items = try popToMark()
                guard case .dict(let dict) = try top() else { throw fail("SETITEMS on a non-dict") }
                try setItems(dict, items)
            case 0x8F: stack.append(.list(made(PickleList())))  // EMPTY_SET
            case 0x90: try appendItems(try popToMark())  // ADDITEMS
            case 0x91:  // FROZENSET
                let set = made(PickleList())
                set.items = try popToMark()
                stack.append(.list(set))
            case 0x63:  // GLOBAL
                let module = try line()
                stack.append(.global(module, try line()))
            case 0x93:  // STACK_GLOBAL
                let name = try pop()
                let module = try pop()
                guard let moduleName = module.string, let className = name.string else {
                    throw fail("STACK_GLOBAL needs two strings")
                }
                stack.append(.global(moduleName, className))
            case 0x52:  // REDUCE
                let arguments = try pop()
                let callable = try pop()
                stack.append(registered(try reduce(callable, arguments.tuple ?? [arguments], at: start)))
            case 0x81:  // NEWOBJ
                let arguments = try pop()
                let type = try pop()
                stack.append(registered(newObject(type, arguments.tuple ?? [])))
            case 0x92:  // NEWOBJ_EX
                _ = try pop()  // kwargs
                let arguments = try pop()
                let type = try pop()
                stack.append(registered(newObject(type, arguments.tuple ?? [])))
            case 0x62:  // BUILD
                let state = try pop()
                try build(try top(), state)
            case 0x69:  // INST
                let module = try line()
                let name = try line()
                stack.append(.object(made(PickleObject(module: module, name: name, arguments: try popToMark()))))
            case 0x6F:  // OBJ
                var items = try popToMark()
                guard !items.isEmpty else { throw fail("OBJ without a class") }
                let type = items.removeFirst()
                stack.append(registered(newObject(type, items)))
            case 0x70:  // PUT
                guard let index = Int(try line()) else { throw fail("bad PUT index") }
                try remember(index)
            case 0x71: try remember(Int(try byte()))  // BINPUT
            case 0x72: try remember(Int(try integer(UInt32.self)))  // LONG_BINPUT
            case 0x94: try remember(memo.count)  // MEMOIZE
            case 0x67:  // GET
                guard let index = Int(try line()) else { throw fail("bad GET index") }
                try recall(index)
            case 0x68: try recall(Int(try byte()))  // BINGET
            case 0x6A: try recall(Int(try integer(UInt32.self)))  // LONG_BINGET
            case 0x51: stack.append(try persistent(try pop(), at: start))  // BINPERSID
            case 0x50: stack.append(try persistent(.string(try line()), at: start))  // PERSID
            case 0x82, 0x83, 0x84: throw fail("extension registry opcodes are not supported", at: start)
            case 0x97, 0x98: throw fail("out-of-band buffers are not supported", at: start)
            default:
                throw fail("unknown opcode 0x\(String(opcode, radix: 16))", at: start)
            }
        }
    }

    private mutating func length64() throws(PickleError) -> Int {
        let count = try integer(UInt64.self)
        guard count <= UInt64(data.count - position) else { throw fail("length \(count) exceeds the data") }
        return Int(count)
    }

    private mutating func text(_ count: Int) throws(PickleError) -> String {
        String(decoding: try take(count), as: UTF8.self)
    }

    private func latin1(_ bytes: UnsafeRawBufferPointer) -> String {
        String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
    }

    private mutating func tuple(_ items: [PickleValue]) -> PickleValue {
        .tuple(made(PickleValue.box(items)))
    }

    /// Records the container a constructor produced (if any).
    private mutating func registered(_ value: PickleValue) -> PickleValue {
        switch value {
        case .list(let box), .tuple(let box): containers.append(box)
        case .dict(let box): containers.append(box)
        case .object(let box): containers.append(box)
        default: break
        }
        return value
    }

    private mutating func long(_ count: Int) throws(PickleError) -> PickleValue {
        let bytes = try take(count)
        if count == 0 { return .int(0) }
        if count <= 8 {
            var value: UInt64 = 0
            for (index, byte) in bytes.enumerated() { value |= UInt64(byte) << (8 * UInt64(index)) }
            if bytes[count - 1] & 0x80 != 0 && count < 8 { value |= UInt64.max << (8 * UInt64(count)) }
            return .int(Int64(bitPattern: value))
        }
        return .bigInt(Array(bytes))
    }

    private mutating func appendItems(_ items: [PickleValue]) throws(PickleError) {
        switch try top() {
        case .list(let list): list.items.append(contentsOf: items)
        case .object(let object):
            // list subclasses: keep the items in the state
            let list = made(PickleList())
            list.items = items
            if object.state == nil { object.state = .list(list) }
        default: throw fail("APPEND to a non-list")
        }
    }

    private func setItems(_ dict: PickleDict, _ items: [PickleValue]) throws(PickleError) {
        guard items.count % 2 == 0 else { throw fail("odd number of dict items") }
        for index in stride(from: 0, to: items.count, by: 2) { dict.set(items[index], items[index + 1]) }
    }

    private func newObject(_ type: PickleValue, _ arguments: [PickleValue]) -> PickleValue {
        if case .global(let module, let name) = type {
            if module == "collections" && name == "OrderedDict" { return .dict(PickleDict()) }
            return .object(PickleObject(module: module, name: name, arguments: arguments))
        }
        return .object(PickleObject(module: "?", name: "?", arguments: arguments))
    }

    private func build(_ target: PickleValue, _ state: PickleValue) throws(PickleError) {
        switch target {
        case .object(let object): object.state = state
        case .dict(let dict):
            if case .dict(let update) = state { for entry in update.entries { dict.set(entry.key, entry.value) } }
        default: break  // tensors and others: state (e.g. tensor hooks) is not needed
        }
    }

    /// `REDUCE`: data constructors are evaluated by name; anything else becomes an inert object.
    private func reduce(
        _ callable: PickleValue, _ arguments: [PickleValue], at offset: Int
    ) throws(PickleError)
        -> PickleValue
    {
        guard case .global(let module, let name) = callable else {
            return .object(PickleObject(module: "?", name: "?", arguments: arguments))
        }
        switch (module, name) {
        case ("collections", "OrderedDict"):
            let dict = PickleDict()
            if let pairs = arguments.first?.tuple {
                for pair in pairs {
                    if let parts = pair.tuple, parts.count == 2 { dict.set(parts[0], parts[1]) }
                }
            }
            return .dict(dict)
        case ("__builtin__", "set"), ("builtins", "set"), ("__builtin__", "frozenset"), ("builtins", "frozenset"):
            let set = PickleList()
            set.items = arguments.first?.tuple ?? []
            return .list(set)
        case ("torch._utils", "_rebuild_tensor_v2"), ("torch._utils", "_rebuild_tensor"):
            return try rebuildTensor(arguments, at: offset)
        case ("torch._utils", "_rebuild_parameter"), ("torch._utils", "_rebuild_parameter_with_state"):
            guard let tensor = arguments.first, case .tensor = tensor else {
                throw fail("_rebuild_parameter without a tensor", at: offset)
            }
            return tensor
        default:
            return .object(PickleObject(module: module, name: name, arguments: arguments))
        }
    }

    private func rebuildTensor(_ arguments: [PickleValue], at offset: Int) throws(PickleError) -> PickleValue {
        guard arguments.count >= 4, case .storage(let storage) = arguments[0], let storageOffset = arguments[1].int,
            let size = arguments[2].tuple, let stride = arguments[3].tuple
        else { throw fail("_rebuild_tensor_v2 arguments are not (storage, offset, size, stride, …)", at: offset) }
        let shape = size.compactMap(\.int)
        let strides = stride.compactMap(\.int)
        guard shape.count == size.count, strides.count == stride.count, shape.count == strides.count,
            shape.count <= 16, storageOffset >= 0, storageOffset < 1 << 48,
            shape.allSatisfy({ $0 >= 0 && $0 < 1 << 40 }), strides.allSatisfy({ $0 >= 0 && $0 < 1 << 48 })
        else { throw fail("tensor size \(size.count) / stride \(stride.count) are not valid", at: offset) }
        return .tensor(
            TensorReference(
                storage: storage, offset: Int(storageOffset), shape: shape.map(Int.init), strides: strides.map(Int.init)
            ))
    }

    /// `persistent_load` of torch.save: `('storage', torch.<Type>Storage, key, location, numel)`.
    private func persistent(_ id: PickleValue, at offset: Int) throws(PickleError) -> PickleValue {
        guard let parts = id.tuple, parts.count >= 5, parts[0].string == "storage",
            case .global(_, let typeName) = parts[1], let key = parts[2].string, let count = parts[4].int,
            count >= 0, count < 1 << 48
        else { throw fail("unsupported persistent id (expected ('storage', type, key, location, numel))", at: offset) }
        guard let dtype = DType(torchStorage: typeName) else {
            throw fail("unsupported storage type \(typeName)", at: offset)
        }
        return .storage(StorageReference(key: key, dtype: dtype, count: Int(count)))
    }
}
