import Crypto
package import NorqConfig

/// The configured API keys, kept only as SHA-256 digests. A presented key is hashed and compared with every
/// digest in constant time (no early exit, so the time says nothing about which key or how many bytes matched).
package struct APIKeyTable: Sendable {
    /// One key: its name (for logs and metrics), its digest and its scopes.
    package struct Entry: Sendable {
        package var name: String
        var digest: [UInt8]
        /// Templates this key may use; nil: all.
        package var templates: Set<String>?
        /// Providers this key may send through; nil: all.
        package var providers: Set<String>?
        /// `server.apiKeys[].scopes` (`admin`, `read-all`, `register-tokens`, `metrics`).
        package var scopes: Set<String> = []

        /// Whether the key holds `scope` (`admin` holds every scope).
        package func has(_ scope: String) -> Bool { scopes.contains(scope) || scopes.contains("admin") }
    }

    package let entries: [Entry]

    package init(_ keys: [ServerConfiguration.APIKey]) {
        entries = keys.map { key in
            Entry(name: key.name, digest: Array(SHA256.hash(data: Array(key.secret.utf8))),
                  templates: key.templates.map(Set.init), providers: key.providers.map(Set.init), scopes: key.scopes)
        }
    }

    package var isEmpty: Bool { entries.isEmpty }

    /// The entry whose key is the bearer token of `authorization` (`Bearer <key>`), or nil.
    package func authenticate(authorization: String?) -> Entry? {
        guard let authorization else { return nil }
        let scheme = "bearer "
        guard authorization.count > scheme.count,
              authorization.prefix(scheme.count).lowercased() == scheme else { return nil }
        let presented = Array(SHA256.hash(data: Array(authorization.dropFirst(scheme.count).utf8)))
        var found: Int?
        for (index, entry) in entries.enumerated() where Self.constantTimeEqual(entry.digest, presented) {
            found = found ?? index
        }
        return found.map { entries[$0] }
    }

    /// Compares two digests of equal length touching every byte.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
