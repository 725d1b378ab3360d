import OrderedCollections

// The one way a stored or printed value becomes JSON and back: its synthesized `Codable` conformance, run through
// `JSONValueEncoder` / `JSONValueDecoder`. Both keep the order of object keys (a custom-data dictionary decoded from
// the store must serialize to the same bytes it was rendered with), and both treat `JSONValue` and
// `OrderedDictionary<String, JSONValue>` as JSON objects in place (not as `OrderedDictionary`'s generic
// key/value array). A field added to a `Codable` type later is encoded and decoded without touching this file.

/// Encodes an `Encodable` value into a `JSONValue` tree, keeping the order in which keys were encoded.
package struct JSONValueEncoder: Sendable {
    package init() {}

    package func encode(_ value: some Encodable) throws(NorqError) -> JSONValue {
        let node = EncodingNode()
        do {
            try node.store(value, codingPath: [])
        } catch {
            throw NorqError(.invalidJSON, "a value could not be encoded as JSON: \(error)")
        }
        return node.resolved()
    }

    /// `value` as compact JSON, appended to `bytes`: the same bytes as `encode(value).write(into:)`, written straight
    /// from the encoder's tree (no `JSONValue` tree with a hashed dictionary per object is made first). A durable
    /// send's stored plan and its fingerprint are encoded so.
    package func encode(_ value: some Encodable, into bytes: inout [UInt8]) throws(NorqError) {
        let node = EncodingNode()
        do {
            try node.store(value, codingPath: [])
        } catch {
            throw NorqError(.invalidJSON, "a value could not be encoded as JSON: \(error)")
        }
        node.write(into: &bytes)
    }
}

/// Decodes a `Decodable` value from a `JSONValue` tree (numbers convert when exact: `1` reads as `1.0`, `2.0` as `2`).
package struct JSONValueDecoder: Sendable {
    package init() {}

    package func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws(NorqError) -> T {
        do {
            return try ValueDecoder.decode(T.self, from: value, codingPath: [])
        } catch {
            throw NorqError(.invalidJSON, "a JSON value does not have the expected shape: \(Self.describe(error))")
        }
    }

    private static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        }
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .keyNotFound(_, let context),
             .dataCorrupted(let context):
            return "\(path(context)): \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}

extension JSONValue: Codable {
    /// Outside `JSONValueEncoder` (which stores the value as it is): a JSON value through the encoder's containers.
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .int(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .double(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .string(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .array(let items):
            var container = encoder.unkeyedContainer()
            for item in items { try container.encode(item) }
        case .object(let object):
            var container = encoder.container(keyedBy: AnyCodingKey.self)
            for (key, value) in object { try container.encode(value, forKey: AnyCodingKey(key)) }
        }
    }

    /// Outside `JSONValueDecoder` (which hands over the value as it is): read through the decoder's containers
    /// (object key order is then the decoder's).
    public init(from decoder: any Decoder) throws {
        if let container = try? decoder.container(keyedBy: AnyCodingKey.self) {
            var object: OrderedDictionary<String, JSONValue> = [:]
            for key in container.allKeys { object[key.stringValue] = try container.decode(JSONValue.self, forKey: key) }
            self = .object(object)
        } else if var container = try? decoder.unkeyedContainer() {
            var items: [JSONValue] = []
            while !container.isAtEnd { items.append(try container.decode(JSONValue.self)) }
            self = .array(items)
        } else {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let value = try? container.decode(Bool.self) {
                self = .bool(value)
            } else if let value = try? container.decode(Int64.self) {
                self = .int(value)
            } else if let value = try? container.decode(Double.self) {
                self = .double(value)
            } else {
                self = .string(try container.decode(String.self))
            }
        }
    }
}

/// A coding key made from any string or index.
package struct AnyCodingKey: CodingKey, Sendable {
    package var stringValue: String
    package var intValue: Int?
    package init(_ string: String) { stringValue = string; intValue = nil }
    package init(stringValue: String) { self.init(stringValue) }
    package init(intValue: Int) { stringValue = String(intValue); self.intValue = intValue }
}

// MARK: - encoding

/// One value being encoded: a leaf, an object or an array whose children are encoded into nodes of their own.
private final class EncodingNode {
    enum Content {
        case value(JSONValue)
        case object(OrderedDictionary<String, EncodingNode>)
        case array([EncodingNode])
    }
    var content: Content = .value(.null)

    func resolved() -> JSONValue {
        switch content {
        case .value(let value): value
        case .object(let children): .object(children.mapValues { $0.resolved() })
        case .array(let children): .array(children.map { $0.resolved() })
        }
    }

    /// Appends the node as compact JSON: what `resolved().write(into:)` appends.
    func write(into out: inout [UInt8]) {
        switch content {
        case .value(let value):
            value.write(into: &out)
        case .object(let children):
            out.append(UInt8(ascii: "{"))
            var first = true
            for (key, child) in children {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                JSONValue.writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                child.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        case .array(let children):
            out.append(UInt8(ascii: "["))
            for (index, child) in children.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                child.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
    }

    /// Encodes `value` into this node: JSON values in place, everything else through its `encode(to:)`.
    func store(_ value: some Encodable, codingPath: [any CodingKey]) throws {
        switch value {
        case let json as JSONValue: content = .value(json)
        case let object as OrderedDictionary<String, JSONValue>: content = .value(.object(object))
        case let duration as Duration:
            // `Duration`'s own form is [high, low] attoseconds, whose low half does not fit in a JSON integer.
            let (seconds, attoseconds) = duration.components
            content = .value(["seconds": .int(seconds), "attoseconds": .int(attoseconds)])
        default: try value.encode(to: NodeEncoder(node: self, codingPath: codingPath))
        }
    }

    /// The child at `key` (made when missing). The children are taken out of `content` while they change, so that
    /// adding one mutates them in place: copied out and assigned back, each key added copied the whole object.
    func child(forKey key: String) -> EncodingNode {
        if case .object(let existing) = content, let node = existing[key] { return node }
        var children = takeObject()
        let node = EncodingNode()
        children[key] = node
        content = .object(children)
        return node
    }

    /// A new last element (the elements are changed in place, as ``child(forKey:)``'s).
    func appendChild() -> EncodingNode {
        var children = takeArray()
        let node = EncodingNode()
        children.append(node)
        content = .array(children)
        return node
    }

    /// The object's children, moved out of `content` (left null until they are put back): the only reference.
    private func takeObject() -> OrderedDictionary<String, EncodingNode> {
        guard case .object(let children) = content else { return [:] }
        content = .value(.null)
        return children
    }

    /// The array's children, moved out of `content` as ``takeObject()``'s.
    private func takeArray() -> [EncodingNode] {
        guard case .array(let children) = content else { return [] }
        content = .value(.null)
        return children
    }

    var count: Int {
        if case .array(let children) = content { return children.count }
        return 0
    }

    func becomeObject() { if case .object = content {} else { content = .object([:]) } }
    func becomeArray() { if case .array = content {} else { content = .array([]) } }
}

private struct NodeEncoder: Encoder {
    let node: EncodingNode
    var codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        node.becomeObject()
        return KeyedEncodingContainer(KeyedNodeContainer<Key>(node: node, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        node.becomeArray()
        return UnkeyedNodeContainer(node: node, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleNodeContainer(node: node, codingPath: codingPath)
    }
}

/// `value` as a JSON integer; the coding path is made only for the error (most integers fit).
private func integer(_ value: some BinaryInteger, _ codingPath: @autoclosure () -> [any CodingKey]) throws -> JSONValue {
    guard let exact = Int64(exactly: value) else {
        throw EncodingError.invalidValue(value, .init(codingPath: codingPath(), debugDescription: "\(value) does not fit in 64 bits"))
    }
    return .int(exact)
}

private struct KeyedNodeContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: EncodingNode
    var codingPath: [any CodingKey]

    private func set(_ value: JSONValue, _ key: Key) { node.child(forKey: key.stringValue).content = .value(value) }

    mutating func encodeNil(forKey key: Key) throws { set(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { set(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { set(.string(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { set(.double(value), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { set(.double(Double(value)), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { set(try integer(value, codingPath + [key]), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { set(try integer(value, codingPath + [key]), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { set(try integer(value, codingPath + [key]), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { set(try integer(value, codingPath + [key]), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { set(.int(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { set(try integer(value, codingPath + [key]), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { set(try integer(value, codingPath + [key]), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { set(try integer(value, codingPath + [key]), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { set(try integer(value, codingPath + [key]), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { set(try integer(value, codingPath + [key]), key) }
    mutating func encode(_ value: some Encodable, forKey key: Key) throws {
        try node.child(forKey: key.stringValue).store(value, codingPath: codingPath + [key])
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type,
                                                       forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let child = node.child(forKey: key.stringValue)
        child.becomeObject()
        return KeyedEncodingContainer(KeyedNodeContainer<NestedKey>(node: child, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = node.child(forKey: key.stringValue)
        child.becomeArray()
        return UnkeyedNodeContainer(node: child, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder {
        NodeEncoder(node: node.child(forKey: "super"), codingPath: codingPath + [AnyCodingKey("super")])
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        NodeEncoder(node: node.child(forKey: key.stringValue), codingPath: codingPath + [key])
    }
}

private struct UnkeyedNodeContainer: UnkeyedEncodingContainer {
    let node: EncodingNode
    var codingPath: [any CodingKey]
    var count: Int { node.count }

    private var nextPath: [any CodingKey] { codingPath + [AnyCodingKey(intValue: count)] }
    private func append(_ value: JSONValue) { node.appendChild().content = .value(value) }

    mutating func encodeNil() throws { append(.null) }
    mutating func encode(_ value: Bool) throws { append(.bool(value)) }
    mutating func encode(_ value: String) throws { append(.string(value)) }
    mutating func encode(_ value: Double) throws { append(.double(value)) }
    mutating func encode(_ value: Float) throws { append(.double(Double(value))) }
    mutating func encode(_ value: Int) throws { append(try integer(value, nextPath)) }
    mutating func encode(_ value: Int8) throws { append(try integer(value, nextPath)) }
    mutating func encode(_ value: Int16) throws { append(try integer(value, nextPath)) }
    mutating func encode(_ value: Int32) throws { append(try integer(value, nextPath)) }
    mutating func encode(_ value: Int64) throws { append(.int(value)) }
    mutating func encode(_ value: UInt) throws { append(try integer(value, nextPath)) }
    mutating func encode(_ value: UInt8) throws { append(try integer(value, nextPath)) }
    mutating func encode(_ value: UInt16) throws { append(try integer(value, nextPath)) }
    mutating func encode(_ value: UInt32) throws { append(try integer(value, nextPath)) }
    mutating func encode(_ value: UInt64) throws { append(try integer(value, nextPath)) }
    mutating func encode(_ value: some Encodable) throws {
        let path = nextPath
        try node.appendChild().store(value, codingPath: path)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let path = nextPath
        let child = node.appendChild()
        child.becomeObject()
        return KeyedEncodingContainer(KeyedNodeContainer<NestedKey>(node: child, codingPath: path))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let path = nextPath
        let child = node.appendChild()
        child.becomeArray()
        return UnkeyedNodeContainer(node: child, codingPath: path)
    }

    mutating func superEncoder() -> any Encoder {
        let path = nextPath
        return NodeEncoder(node: node.appendChild(), codingPath: path)
    }
}

private struct SingleNodeContainer: SingleValueEncodingContainer {
    let node: EncodingNode
    var codingPath: [any CodingKey]

    mutating func encodeNil() throws { node.content = .value(.null) }
    mutating func encode(_ value: Bool) throws { node.content = .value(.bool(value)) }
    mutating func encode(_ value: String) throws { node.content = .value(.string(value)) }
    mutating func encode(_ value: Double) throws { node.content = .value(.double(value)) }
    mutating func encode(_ value: Float) throws { node.content = .value(.double(Double(value))) }
    mutating func encode(_ value: Int) throws { node.content = .value(try integer(value, codingPath)) }
    mutating func encode(_ value: Int8) throws { node.content = .value(try integer(value, codingPath)) }
    mutating func encode(_ value: Int16) throws { node.content = .value(try integer(value, codingPath)) }
    mutating func encode(_ value: Int32) throws { node.content = .value(try integer(value, codingPath)) }
    mutating func encode(_ value: Int64) throws { node.content = .value(.int(value)) }
    mutating func encode(_ value: UInt) throws { node.content = .value(try integer(value, codingPath)) }
    mutating func encode(_ value: UInt8) throws { node.content = .value(try integer(value, codingPath)) }
    mutating func encode(_ value: UInt16) throws { node.content = .value(try integer(value, codingPath)) }
    mutating func encode(_ value: UInt32) throws { node.content = .value(try integer(value, codingPath)) }
    mutating func encode(_ value: UInt64) throws { node.content = .value(try integer(value, codingPath)) }
    mutating func encode(_ value: some Encodable) throws { try node.store(value, codingPath: codingPath) }
}

// MARK: - decoding

private struct ValueDecoder: Decoder {
    let value: JSONValue
    var codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// Decodes `type` from `value`: JSON values in place, everything else through its `init(from:)`.
    static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue, codingPath: [any CodingKey]) throws -> T {
        if T.self == JSONValue.self { return value as! T }
        if T.self == OrderedDictionary<String, JSONValue>.self {
            guard case .object(let object) = value else { throw mismatch(T.self, value, codingPath) }
            return object as! T
        }
        if T.self == Duration.self {
            guard case .int(let seconds)? = value["seconds"], case .int(let attoseconds)? = value["attoseconds"] else {
                throw mismatch(T.self, value, codingPath)
            }
            return Duration(secondsComponent: seconds, attosecondsComponent: attoseconds) as! T
        }
        return try T(from: ValueDecoder(value: value, codingPath: codingPath))
    }

    static func mismatch(_ type: Any.Type, _ value: JSONValue, _ codingPath: [any CodingKey]) -> DecodingError {
        .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "expected \(type), found \(value.compactDescription.prefix(40))"))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let object) = value else { throw Self.mismatch([String: JSONValue].self, value, codingPath) }
        return KeyedDecodingContainer(KeyedValueContainer<Key>(object: object, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let items) = value else { throw Self.mismatch([JSONValue].self, value, codingPath) }
        return UnkeyedValueContainer(items: items, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleValueContainer(value: value, codingPath: codingPath)
    }
}

/// Reads a scalar from a JSON value, converting numbers only when exact.
private enum Scalar {
    static func read<T>(_ type: T.Type, _ value: JSONValue, _ codingPath: [any CodingKey]) throws -> T {
        let result: Any?
        switch (type, value) {
        case (is Bool.Type, .bool(let b)): result = b
        case (is String.Type, .string(let s)): result = s
        case (is Double.Type, .double(let d)): result = d
        case (is Double.Type, .int(let i)): result = Double(exactly: i)
        case (is Float.Type, .double(let d)): result = Float(d)
        case (is Float.Type, .int(let i)): result = Float(exactly: i)
        case (is Int.Type, _): result = integer(value).flatMap(Int.init(exactly:))
        case (is Int8.Type, _): result = integer(value).flatMap(Int8.init(exactly:))
        case (is Int16.Type, _): result = integer(value).flatMap(Int16.init(exactly:))
        case (is Int32.Type, _): result = integer(value).flatMap(Int32.init(exactly:))
        case (is Int64.Type, _): result = integer(value)
        case (is UInt.Type, _): result = integer(value).flatMap(UInt.init(exactly:))
        case (is UInt8.Type, _): result = integer(value).flatMap(UInt8.init(exactly:))
        case (is UInt16.Type, _): result = integer(value).flatMap(UInt16.init(exactly:))
        case (is UInt32.Type, _): result = integer(value).flatMap(UInt32.init(exactly:))
        case (is UInt64.Type, _): result = integer(value).flatMap(UInt64.init(exactly:))
        default: result = nil
        }
        guard let typed = result as? T else { throw ValueDecoder.mismatch(T.self, value, codingPath) }
        return typed
    }

    static func integer(_ value: JSONValue) -> Int64? {
        switch value {
        case .int(let i): i
        case .double(let d): Int64(exactly: d)
        default: nil
        }
    }
}

private struct KeyedValueContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let object: OrderedDictionary<String, JSONValue>
    var codingPath: [any CodingKey]
    var allKeys: [Key] { object.keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { object[key.stringValue] != nil }

    private func value(_ key: Key) throws -> JSONValue {
        guard let value = object[key.stringValue] else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no value for \"\(key.stringValue)\""))
        }
        return value
    }

    func decodeNil(forKey key: Key) throws -> Bool { (object[key.stringValue] ?? .null) == .null }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try Scalar.read(type, value(key), codingPath + [key]) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try Scalar.read(type, value(key), codingPath + [key]) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try Scalar.read(type, value(key), codingPath + [key]) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try Scalar.read(type, value(key), codingPath + [key]) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try Scalar.read(type, value(key), codingPath + [key]) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try Scalar.read(type, value(key), codingPath + [key]) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try Scalar.read(type, value(key), codingPath + [key]) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try Scalar.read(type, value(key), codingPath + [key]) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try Scalar.read(type, value(key), codingPath + [key]) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try Scalar.read(type, value(key), codingPath + [key]) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try Scalar.read(type, value(key), codingPath + [key]) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try Scalar.read(type, value(key), codingPath + [key]) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try Scalar.read(type, value(key), codingPath + [key]) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try Scalar.read(type, value(key), codingPath + [key]) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try ValueDecoder.decode(type, from: value(key), codingPath: codingPath + [key])
    }

    /// A `JSONValue?` keeps an explicit `null` (`.some(.null)`), as the encoder wrote it; only a missing key is nil.
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let value = object[key.stringValue] else { return nil }
        if value == .null, T.self != JSONValue.self { return nil }
        return try ValueDecoder.decode(type, from: value, codingPath: codingPath + [key])
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type,
                                               forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try ValueDecoder(value: value(key), codingPath: codingPath + [key]).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try ValueDecoder(value: value(key), codingPath: codingPath + [key]).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        ValueDecoder(value: object["super"] ?? .null, codingPath: codingPath + [AnyCodingKey("super")])
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        ValueDecoder(value: object[key.stringValue] ?? .null, codingPath: codingPath + [key])
    }
}

private struct UnkeyedValueContainer: UnkeyedDecodingContainer {
    let items: [JSONValue]
    var codingPath: [any CodingKey]
    var currentIndex = 0
    var count: Int? { items.count }
    var isAtEnd: Bool { currentIndex >= items.count }

    private var path: [any CodingKey] { codingPath + [AnyCodingKey(intValue: currentIndex)] }

    private mutating func next() throws -> JSONValue {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(JSONValue.self, .init(codingPath: path, debugDescription: "the array has ended"))
        }
        defer { currentIndex += 1 }
        return items[currentIndex]
    }

    private mutating func scalar<T>(_ type: T.Type) throws -> T {
        let path = self.path
        return try Scalar.read(type, next(), path)
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, items[currentIndex] == .null else { return false }
        currentIndex += 1
        return true
    }
    mutating func decode(_ type: Bool.Type) throws -> Bool { try scalar(type) }
    mutating func decode(_ type: String.Type) throws -> String { try scalar(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try scalar(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try scalar(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try scalar(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try scalar(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try scalar(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try scalar(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try scalar(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try scalar(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try scalar(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try scalar(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try scalar(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try scalar(type) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let path = self.path
        return try ValueDecoder.decode(type, from: next(), codingPath: path)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        let path = self.path
        return try ValueDecoder(value: next(), codingPath: path).container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let path = self.path
        return try ValueDecoder(value: next(), codingPath: path).unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder {
        let path = self.path
        return ValueDecoder(value: try next(), codingPath: path)
    }
}

private struct SingleValueContainer: SingleValueDecodingContainer {
    let value: JSONValue
    var codingPath: [any CodingKey]

    func decodeNil() -> Bool { value == .null }
    func decode(_ type: Bool.Type) throws -> Bool { try Scalar.read(type, value, codingPath) }
    func decode(_ type: String.Type) throws -> String { try Scalar.read(type, value, codingPath) }
    func decode(_ type: Double.Type) throws -> Double { try Scalar.read(type, value, codingPath) }
    func decode(_ type: Float.Type) throws -> Float { try Scalar.read(type, value, codingPath) }
    func decode(_ type: Int.Type) throws -> Int { try Scalar.read(type, value, codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try Scalar.read(type, value, codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try Scalar.read(type, value, codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try Scalar.read(type, value, codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try Scalar.read(type, value, codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try Scalar.read(type, value, codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try Scalar.read(type, value, codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try Scalar.read(type, value, codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try Scalar.read(type, value, codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try Scalar.read(type, value, codingPath) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try ValueDecoder.decode(type, from: value, codingPath: codingPath) }
}
