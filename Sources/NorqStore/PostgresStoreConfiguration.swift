public import NorqCore

/// Where the PostgreSQL store connects: from a URL (`postgres://user:password@host:5432/db?sslmode=disable`)
/// or from separate keys. Its `description` never shows the password.
public struct PostgresStoreConfiguration: Sendable, Hashable, CustomStringConvertible {
    /// TLS to the server. An open set.
    public struct TLSMode: Sendable, Hashable, RawRepresentable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// Plain TCP (loopback, a private network).
        public static let disable = TLSMode(rawValue: "disable")
        /// TLS when the server offers it (PostgreSQL's default).
        public static let prefer = TLSMode(rawValue: "prefer")
        /// TLS or fail.
        public static let require = TLSMode(rawValue: "require")
        public static let all: [TLSMode] = [.disable, .prefer, .require]
    }

    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String?
    public var tls: TLSMode
    /// Use LISTEN/NOTIFY as a wake-up hint (always backed by polling). False for connection poolers in
    /// transaction mode, where LISTEN does not work: poll only.
    public var listen: Bool

    public init(host: String = "127.0.0.1", port: Int = 5432, username: String = "postgres", password: String? = nil,
                database: String? = nil, tls: TLSMode = .prefer, listen: Bool = true) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.tls = tls
        self.listen = listen
    }

    /// Parses `postgres://` or `postgresql://` URLs; percent-escapes in user and password are decoded.
    /// Throws `config/invalid-store` naming what is wrong (never the password).
    public init(url: String) throws(NorqError) {
        var rest = Substring(url)
        guard let scheme = ["postgresql://", "postgres://"].first(where: { rest.hasPrefix($0) }) else {
            throw NorqError(.configInvalidStore, "a PostgreSQL URL must start with postgres:// or postgresql://")
        }
        rest = rest.dropFirst(scheme.count)
        var query: Substring = ""
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        var database: String?
        if let slash = rest.firstIndex(of: "/") {
            let name = rest[rest.index(after: slash)...]
            database = name.isEmpty ? nil : Self.percentDecoded(name)
            rest = rest[..<slash]
        }
        var username = "postgres"
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = userinfo.firstIndex(of: ":") {
                username = Self.percentDecoded(userinfo[..<colon])
                password = Self.percentDecoded(userinfo[userinfo.index(after: colon)...])
            } else {
                username = Self.percentDecoded(userinfo)
            }
        }
        var host = String(rest)
        var port = 5432
        if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
            host = String(rest[..<colon])
            guard let value = Int(rest[rest.index(after: colon)...]), (1...65535).contains(value) else {
                throw NorqError(.configInvalidStore, "the port in the PostgreSQL URL is not a number from 1 to 65535")
            }
            port = value
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw NorqError(.configInvalidStore, "the PostgreSQL URL has no host") }
        var tls = TLSMode.prefer
        var listen = true
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            let key = parts.first.map(String.init) ?? ""
            let value = parts.count > 1 ? String(parts[1]) : ""
            switch key {
            case "sslmode":
                guard let mode = TLSMode.all.first(where: { $0.rawValue == value }) else {
                    throw NorqError(.configInvalidStore, "sslmode must be disable, prefer or require, not \"\(value)\"")
                }
                tls = mode
            case "listen":
                listen = value != "false" && value != "0"
            default:
                continue
            }
        }
        self.init(host: host, port: port, username: username, password: password, database: database, tls: tls,
                  listen: listen)
    }

    /// `postgres://user:***@host:port/db`: safe to print.
    public var description: String {
        "postgres://\(username)\(password == nil ? "" : ":***")@\(host):\(port)/\(database ?? "")"
    }

    static func percentDecoded(_ text: Substring) -> String {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%"), let high = iterator.next(), let low = iterator.next(),
               let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) {
                bytes.append(value)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
