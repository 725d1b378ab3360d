import NorqCore
import OrderedCollections

/// Encodes a value of a type generated from docs/openapi.yaml (NorqAPI) into a `JSONValue` with its object keys
/// sorted. A nil optional property is written as `null` where the spec allows null for it (`nullable`: the
/// property names of a value of a generated type, `APIDocuments.nullProperties`) and left out everywhere else: the
/// generated types' synthesized `Codable` leaves out every nil, which would drop the `null`s the answers have always
/// had (`page.next`, a row's `recipient`, a channel's `pushType` ...).
struct SpecJSONEncoder {
    /// The properties of `value` written as `null` when nil.
    typealias NullProperties = (_ value: any Encodable) -> Set<String>

    let nullable: NullProperties

    func encode(_ value: some Encodable) throws -> JSONValue {
        let node = SpecNode()
        try node.store(value, nullable: nullable, codingPath: [])
        return node.resolved()
    }
}

/// One value being encoded: a leaf, or an object or array whose children are nodes of their own.
private final class SpecNode {
    enum Content {
        case value(JSONValue)
        case object([String: SpecNode])
        case array([SpecNode])
    }
    var content: Content = .value(.null)

    /// The JSON value, object keys sorted (as `JSONEncoder`'s `.sortedKeys`).
    func resolved() -> JSONValue {
        switch content {
        case .value(let value):
            return value
        case .object(let children):
            return .object(OrderedDictionary(uniqueKeysWithValues: children.sorted { $0.key < $1.key }
                .map { ($0.key, $0.value.resolved()) }))
        case .array(let children):
            return .array(children.map { $0.resolved() })
        }
    }

    /// Encodes `value` into this node: a `JSONValue` in place, anything else through its `encode(to:)` with the
    /// nullable properties of its own type.
    func store(_ value: some Encodable, nullable: @escaping SpecJSONEncoder.NullProperties, codingPath: [any CodingKey]) throws {
        if let json = value as? JSONValue {
            content = .value(json)
            return
        }
        let encoder = SpecNodeEncoder(node: self, table: nullable, nullable: nullable(value),
                                      codingPath: codingPath)
        try value.encode(to: encoder)
    }

    /// The child at `key` (made when missing). The children are moved out of `content` while they change, so that
    /// adding one mutates them in place (copied out and assigned back, each key added copied the whole object).
    func child(forKey key: String) -> SpecNode {
        if case .object(let existing) = content, let node = existing[key] { return node }
        var children = takeObject()
        let node = SpecNode()
        children[key] = node
        content = .object(children)
        return node
    }

    /// A new last element (the elements are changed in place, as ``child(forKey:)``'s).
    func appendChild() -> SpecNode {
        var children = takeArray()
        let node = SpecNode()
        children.append(node)
        content = .array(children)
        return node
    }

    /// The object's children, moved out of `content` (left null until they are put back): the only reference.
    private func takeObject() -> [String: SpecNode] {
        guard case .object(let children) = content else { return [:] }
        content = .value(.null)
        return children
    }

    /// The array's children, moved out of `content` as ``takeObject()``'s.
    private func takeArray() -> [SpecNode] {
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

/// `value` as a JSON integer; the coding path is made only for the error.
private func integer(_ value: some BinaryInteger, _ codingPath: @autoclosure () -> [any CodingKey]) throws -> JSONValue {
    guard let exact = Int64(exactly: value) else {
        throw EncodingError.invalidValue(value, .init(codingPath: codingPath(), debugDescription: "\(value) does not fit in 64 bits"))
    }
    return .int(exact)
}

private struct SpecNodeEncoder: Encoder {
    let node: SpecNode
    let table: SpecJSONEncoder.NullProperties
    /// The nullable properties of the type encoding itself into `node`.
    let nullable: Set<String>
    var codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        node.becomeObject()
        return KeyedEncodingContainer(SpecKeyedContainer<Key>(node: node, table: table, nullable: nullable,
                                                              codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        node.becomeArray()
        return SpecUnkeyedContainer(node: node, table: table, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SpecSingleContainer(node: node, table: table, codingPath: codingPath)
    }
}

private struct SpecKeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: SpecNode
    let table: SpecJSONEncoder.NullProperties
    let nullable: Set<String>
    var codingPath: [any CodingKey]

    private func set(_ value: JSONValue, _ key: Key) { node.child(forKey: key.stringValue).content = .value(value) }

    /// A nil optional: `null` when the spec allows it for this property, else nothing.
    private mutating func present<T: Encodable>(_ value: T?, _ key: Key) throws {
        if let value {
            try encode(value, forKey: key)
        } else if nullable.contains(key.stringValue) {
            set(.null, key)
        }
    }

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
        try node.child(forKey: key.stringValue).store(value, nullable: table, codingPath: codingPath + [key])
    }

    // Every `encodeIfPresent` (the synthesized `Codable` of an optional property calls the one of its type).
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws { try present(value, key) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type,
                                                       forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let child = node.child(forKey: key.stringValue)
        child.becomeObject()
        return KeyedEncodingContainer(SpecKeyedContainer<NestedKey>(node: child, table: table, nullable: [],
                                                                    codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = node.child(forKey: key.stringValue)
        child.becomeArray()
        return SpecUnkeyedContainer(node: child, table: table, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder {
        SpecNodeEncoder(node: node.child(forKey: "super"), table: table, nullable: [],
                        codingPath: codingPath + [AnyCodingKey("super")])
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        SpecNodeEncoder(node: node.child(forKey: key.stringValue), table: table, nullable: [], codingPath: codingPath + [key])
    }
}

private struct SpecUnkeyedContainer: UnkeyedEncodingContainer {
    let node: SpecNode
    let table: SpecJSONEncoder.NullProperties
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
        try node.appendChild().store(value, nullable: table, codingPath: path)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let path = nextPath
        let child = node.appendChild()
        child.becomeObject()
        return KeyedEncodingContainer(SpecKeyedContainer<NestedKey>(node: child, table: table, nullable: [], codingPath: path))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let path = nextPath
        let child = node.appendChild()
        child.becomeArray()
        return SpecUnkeyedContainer(node: child, table: table, codingPath: path)
    }

    mutating func superEncoder() -> any Encoder {
        let path = nextPath
        return SpecNodeEncoder(node: node.appendChild(), table: table, nullable: [], codingPath: path)
    }
}

private struct SpecSingleContainer: SingleValueEncodingContainer {
    let node: SpecNode
    let table: SpecJSONEncoder.NullProperties
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
    mutating func encode(_ value: some Encodable) throws { try node.store(value, nullable: table, codingPath: codingPath) }
}
