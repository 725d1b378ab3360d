public import NorqCore

/// The provider types a loader knows, by `typeName`. Registering a type with an existing name replaces it.
public struct ProviderTypeRegistry: Sendable {
    private var types: [String: any ProviderType] = [:]
    private var order: [String] = []

    /// A registry holding `types` (later entries replace earlier ones of the same name).
    public init(_ types: [any ProviderType] = []) {
        for type in types { register(type) }
    }

    /// Adds `type`, replacing a type of the same `typeName`.
    public mutating func register(_ type: any ProviderType) {
        if types[type.typeName] == nil { order.append(type.typeName) }
        types[type.typeName] = type
    }

    /// The type registered under `name`, or nil.
    public func type(named name: String) -> (any ProviderType)? {
        types[name]
    }

    /// Registered type names in registration order.
    public var typeNames: [String] { order }

    /// The registered types in registration order.
    public var registeredTypes: [any ProviderType] { order.compactMap { types[$0] } }
}
