public import NorqCore
import Foundation
import Crypto

extension NorqError.Code {
    /// APNs `keyId` is not exactly 10 characters of A-Z and 0-9.
    public static let configInvalidKeyID: Self = "config/invalid-key-id"
    /// APNs `teamId` is not exactly 10 characters of A-Z and 0-9.
    public static let configInvalidTeamID: Self = "config/invalid-team-id"
    /// A private key file (`keyPath`, `certKeyPath`) does not exist or cannot be read.
    public static let configKeyNotFound: Self = "config/key-not-found"
    /// A private key is not what it must be (token auth: a PKCS#8 P-256 `.p8` key).
    public static let configInvalidPrivateKey: Self = "config/invalid-private-key"
}

extension APNsConfiguration {
    static let tokenKeys = ["keyId", "teamId", "keyPath", "keyPem"]
    static let certificateKeys = ["certPath", "certPem", "certKeyPath", "certKeyPem", "pfxPath", "pfxBase64"]
    /// Every key an APNs `config:` block accepts.
    public static let allowedKeys = tokenKeys + certificateKeys + [
        "passphrase", "bundleId", "production", "endpoint", "sandboxEndpoint", "productionEndpoint",
        "managementEndpoint", "managementSandboxEndpoint", "managementProductionEndpoint",
        "broadcastEndpoint", "broadcastSandboxEndpoint", "broadcastProductionEndpoint", "caPath", "caPem", "proxy",
        "connections", "timeout", "tokenRefresh", "pingInterval", "maxConcurrentStreams",
        "connectionRetryLimit", "idleTimeout",
    ]

    /// Parses and validates an APNs `config:` block. Key material is read and checked here; errors name
    /// files and keys but never print key material.
    public static func parse(_ node: ConfigNode, context: ProviderConfigurationContext,
                             origin: String = "config") throws(NorqError) -> APNsConfiguration {
        let path = "providers.\(context.instanceName).config"
        let keys = try node.mapping(allowedKeys: allowedKeys, path: path)
        func required(_ key: String) throws(NorqError) -> ConfigNode {
            guard let value = keys[key] else {
                throw NorqError(.configMissingKey, "\(path) is missing \(key)", at: node.location)
            }
            return value
        }

        let bundleNode = try required("bundleId")
        let bundleID = try bundleNode.string(path: "\(path).bundleId")
        guard bundleID.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "." || $0 == "-") }) else {
            throw NorqError(.configInvalidValue, "\(path).bundleId \"\(bundleID.prefix(60))\" is not a bundle identifier",
                            at: bundleNode.location)
        }

        let presentToken = tokenKeys.filter { keys[$0] != nil }
        let presentCertificate = certificateKeys.filter { keys[$0] != nil }
        if let token = presentToken.first, let certificate = presentCertificate.first {
            throw NorqError(.configConflictingKeys,
                            "\(path) mixes token auth (\(token)) and certificate auth (\(certificate)); use one",
                            at: keys[certificate]?.location ?? node.location)
        }
        let authentication: APNsAuthentication
        if presentCertificate.isEmpty {
            authentication = try parseToken(keys, path: path, node: node, context: context)
        } else {
            authentication = .certificate(try parseCertificate(keys, path: path, node: node, context: context))
        }

        var configuration = APNsConfiguration(authentication: authentication, bundleID: bundleID, origin: origin)
        if let value = keys["production"] { configuration.production = try value.bool(path: "\(path).production") }
        if let value = keys["endpoint"] {
            let endpoint = try endpoint(value, path: "\(path).endpoint", scheme: "https")
            configuration.sandboxEndpoint = endpoint
            configuration.productionEndpoint = endpoint
        }
        if let value = keys["sandboxEndpoint"] {
            configuration.sandboxEndpoint = try endpoint(value, path: "\(path).sandboxEndpoint", scheme: "https")
        }
        if let value = keys["productionEndpoint"] {
            configuration.productionEndpoint = try endpoint(value, path: "\(path).productionEndpoint", scheme: "https")
        }
        if let value = keys["managementEndpoint"] {
            let endpoint = try endpoint(value, path: "\(path).managementEndpoint", scheme: "https")
            configuration.managementSandboxEndpoint = endpoint
            configuration.managementProductionEndpoint = endpoint
        }
        if let value = keys["managementSandboxEndpoint"] {
            configuration.managementSandboxEndpoint = try endpoint(value, path: "\(path).managementSandboxEndpoint", scheme: "https")
        }
        if let value = keys["managementProductionEndpoint"] {
            configuration.managementProductionEndpoint = try endpoint(value, path: "\(path).managementProductionEndpoint", scheme: "https")
        }
        try parseBroadcastEndpoints(keys, path: path, into: &configuration)
        if let roots = try context.trustRoots(keys, path: path) {
            configuration.caPath = roots.label
            configuration.additionalTrustRootsPEM = roots.pem
        }
        if let value = keys["proxy"] { configuration.proxy = try endpoint(value, path: "\(path).proxy", scheme: "http") }
        if let value = keys["connections"] {
            configuration.connectionsPerEndpoint = try value.int(path: "\(path).connections", in: 1...64)
        }
        if let value = keys["maxConcurrentStreams"] {
            configuration.maxConcurrentStreamsPerConnection = try value.int(path: "\(path).maxConcurrentStreams", in: 1...100_000)
        }
        if let value = keys["timeout"] {
            configuration.requestTimeout = try value.duration(path: "\(path).timeout",
                                                        in: .milliseconds(1)...(.seconds(3600)))
        }
        if let value = keys["tokenRefresh"] {
            configuration.tokenRefreshInterval = try value.duration(path: "\(path).tokenRefresh",
                                                              in: .seconds(20 * 60)...(.seconds(55 * 60)))
        }
        if let value = keys["pingInterval"] {
            configuration.pingInterval = try value.duration(path: "\(path).pingInterval",
                                                      in: .seconds(1)...(.seconds(3600)))
        }
        if let value = keys["connectionRetryLimit"] {
            // 0: no limit (requests wait for a connection until their deadline).
            let limit = try value.int(path: "\(path).connectionRetryLimit", in: 0...1_000)
            configuration.connectionRetryLimit = limit == 0 ? nil : limit
        }
        if let value = keys["idleTimeout"] {
            configuration.idleTimeout = try value.duration(path: "\(path).idleTimeout", in: .seconds(1)...(.seconds(86_400)))
        }
        return configuration
    }

    /// The env vars of the fallback, without prefix, and the config key each stands for.
    public static let environmentKeys: [(variable: String, key: String)] = [
        ("KEY_ID", "keyId"), ("TEAM_ID", "teamId"), ("BUNDLE_ID", "bundleId"), ("KEY_PATH", "keyPath"),
        ("KEY_PEM", "keyPem"), ("PRODUCTION", "production"), ("ENDPOINT", "endpoint"), ("CA_PATH", "caPath"),
        ("CA_PEM", "caPem"),
    ]

    /// Builds a configuration from `<prefix>KEY_ID`, `TEAM_ID`, `BUNDLE_ID`, one of `KEY_PATH` / `KEY_PEM`,
    /// and optional `PRODUCTION` (true/false/1/0), `ENDPOINT`, `CA_PATH`. Nil when none is set. Relative paths
    /// resolve against `context.baseDirectory`. A `KEY_PEM` may use `\n` escapes for newlines.
    public static func fromEnvironment(_ environment: [String: String], prefix: String = "NORQ_APNS_",
                                       context: ProviderConfigurationContext) throws(NorqError) -> APNsConfiguration? {
        try ProviderConfigurationContext.rejectUnknownVariables(in: environment, prefix: prefix,
                                                                known: environmentKeys.map { prefix + $0.variable })
        var pairs: [(key: ConfigNode, value: ConfigNode)] = []
        for entry in environmentKeys {
            let name = prefix + entry.variable
            guard var value = environment[name], !value.isEmpty else { continue }
            let location = SourceLocation(file: "env \(name)")
            var quoted = true
            switch entry.key {
            case "production":
                quoted = false
                if value == "1" { value = "true" } else if value == "0" { value = "false" }
            case "keyPem", "caPem":
                if !value.contains("\n") { value = value.replacingOccurrences(of: "\\n", with: "\n") }
            default: break
            }
            pairs.append((ConfigNode(.scalar(entry.key, quoted: false), at: location),
                          ConfigNode(.scalar(value, quoted: quoted), at: location)))
        }
        guard !pairs.isEmpty else { return nil }
        let present = Set(pairs.compactMap { $0.key.scalar })
        for required in ["keyId", "teamId", "bundleId"] where !present.contains(required) {
            let variable = prefix + (environmentKeys.first { $0.key == required }?.variable ?? "")
            throw NorqError(.configMissingKey, "\(variable) is not set (needed for the \(prefix)* fallback)",
                            at: SourceLocation(file: "env \(variable)"))
        }
        let node = ConfigNode(.mapping(pairs), at: SourceLocation(file: "env \(prefix)*"))
        return try parse(node, context: context, origin: "env")
    }

    // MARK: - Pieces

    static func parseToken(_ keys: [String: ConfigNode], path: String, node: ConfigNode,
                           context: ProviderConfigurationContext) throws(NorqError) -> APNsAuthentication {
        func required(_ key: String) throws(NorqError) -> ConfigNode {
            guard let value = keys[key] else {
                throw NorqError(.configMissingKey, "\(path) is missing \(key)", at: node.location,
                                hint: key == "keyId" ? "token auth needs keyId, teamId and keyPath or keyPem; certificate auth needs certPath or pfxPath" : nil)
            }
            return value
        }
        let keyIDNode = try required("keyId")
        let keyID = try keyIDNode.string(path: "\(path).keyId")
        guard isAppleIdentifier(keyID) else {
            throw NorqError(.configInvalidKeyID,
                            "\(path).keyId must be exactly 10 characters of A-Z and 0-9, got \(keyIDNode.describe)",
                            at: keyIDNode.location)
        }
        let teamIDNode = try required("teamId")
        let teamID = try teamIDNode.string(path: "\(path).teamId")
        guard isAppleIdentifier(teamID) else {
            throw NorqError(.configInvalidTeamID,
                            "\(path).teamId must be exactly 10 characters of A-Z and 0-9, got \(teamIDNode.describe)",
                            at: teamIDNode.location)
        }
        let pem: String
        let source: String
        switch (keys["keyPath"], keys["keyPem"]) {
        case (let pathNode?, nil):
            source = try pathNode.string(path: "\(path).keyPath")
            pem = try context.readText(source, node: pathNode, missing: .configKeyNotFound, what: "key file")
            try checkP256(pem, source: "key file \(source)", location: pathNode.location)
        case (nil, let pemNode?):
            guard case .scalar(let text, _) = pemNode.value, !text.isEmpty else {
                throw NorqError(.configInvalidType, "\(path).keyPem must be a PEM string", at: pemNode.location)
            }
            pem = text
            source = pemNode.location.file?.hasPrefix("env ") == true ? "\(pemNode.location.file ?? "") (inline)" : "keyPem (inline)"
            try checkP256(pem, source: "\(path).keyPem", location: pemNode.location)
        case (let pathNode?, _?):
            throw NorqError(.configConflictingKeys, "\(path) sets both keyPath and keyPem; use exactly one",
                            at: pathNode.location)
        case (nil, nil):
            throw NorqError(.configMissingKey, "\(path) needs keyPath or keyPem", at: node.location)
        }
        return .token(keyID: keyID, teamID: teamID, privateKeyPEM: pem, keySource: source)
    }

    static func parseCertificate(_ keys: [String: ConfigNode], path: String, node: ConfigNode,
                                 context: ProviderConfigurationContext) throws(NorqError) -> APNsCertificateCredentials {
        let passphrase = try keys["passphrase"].map { value throws(NorqError) in try value.string(path: "\(path).passphrase") }
        if let pfxNode = keys["pfxBase64"] {
            if let other = ["pfxPath", "certPath", "certPem", "certKeyPath", "certKeyPem"].first(where: { keys[$0] != nil }) {
                throw NorqError(.configConflictingKeys, "\(path) sets both pfxBase64 and \(other); use one", at: pfxNode.location)
            }
            let text = try pfxNode.string(path: "\(path).pfxBase64")
            guard let bytes = decodeBase64(text), !bytes.isEmpty else {
                throw NorqError(.configInvalidCertificate,
                                "\(path).pfxBase64 is not base64 (a PKCS#12 file encoded with `base64 -w0 cert.p12`)",
                                at: pfxNode.location)
            }
            return APNsCertificateCredentials(material: .pkcs12(bytes: bytes), passphrase: passphrase,
                                              source: "pfxBase64 (inline)")
        }
        if let pfxNode = keys["pfxPath"] {
            if let other = ["certPath", "certPem", "certKeyPath", "certKeyPem"].first(where: { keys[$0] != nil }) {
                throw NorqError(.configConflictingKeys, "\(path) sets both pfxPath and \(other); use one", at: pfxNode.location)
            }
            let pfxPath = try pfxNode.string(path: "\(path).pfxPath")
            let bytes = try context.readBytes(pfxPath, node: pfxNode, missing: .configFileNotFound, what: "PKCS#12 file")
            guard !bytes.isEmpty else {
                throw NorqError(.configInvalidCertificate, "PKCS#12 file \(pfxPath) is empty", at: pfxNode.location)
            }
            return APNsCertificateCredentials(material: .pkcs12(bytes: bytes), passphrase: passphrase, source: pfxPath)
        }
        let certificatePEM: String
        let source: String
        let certificateLocation: SourceLocation
        switch (keys["certPath"], keys["certPem"]) {
        case (let pathNode?, nil):
            source = try pathNode.string(path: "\(path).certPath")
            certificatePEM = try context.readText(source, node: pathNode, missing: .configFileNotFound, what: "certificate file")
            certificateLocation = pathNode.location
        case (nil, let pemNode?):
            certificatePEM = try pemNode.string(path: "\(path).certPem")
            source = "certPem (inline)"
            certificateLocation = pemNode.location
        case (let pathNode?, _?):
            throw NorqError(.configConflictingKeys, "\(path) sets both certPath and certPem; use exactly one", at: pathNode.location)
        case (nil, nil):
            throw NorqError(.configMissingKey, "\(path) needs certPath or certPem (or pfxPath) for certificate auth",
                            at: node.location)
        }
        guard certificatePEM.contains("-----BEGIN CERTIFICATE-----") else {
            throw NorqError(.configInvalidCertificate, "\(source) contains no PEM CERTIFICATE block", at: certificateLocation)
        }
        let keyPEM: String
        let keyLocation: SourceLocation
        switch (keys["certKeyPath"], keys["certKeyPem"]) {
        case (let pathNode?, nil):
            let keyPath = try pathNode.string(path: "\(path).certKeyPath")
            keyPEM = try context.readText(keyPath, node: pathNode, missing: .configKeyNotFound, what: "key file")
            keyLocation = pathNode.location
        case (nil, let pemNode?):
            keyPEM = try pemNode.string(path: "\(path).certKeyPem")
            keyLocation = pemNode.location
        case (let pathNode?, _?):
            throw NorqError(.configConflictingKeys, "\(path) sets both certKeyPath and certKeyPem; use exactly one",
                            at: pathNode.location)
        case (nil, nil):
            // A combined PEM (certificate and key in one file) is accepted.
            guard certificatePEM.contains("PRIVATE KEY-----") else {
                throw NorqError(.configMissingKey, "\(path) needs certKeyPath or certKeyPem with certificate auth",
                                at: certificateLocation)
            }
            keyPEM = certificatePEM
            keyLocation = certificateLocation
        }
        guard keyPEM.contains("-----BEGIN") && keyPEM.contains("PRIVATE KEY-----") else {
            throw NorqError(.configInvalidPrivateKey, "the certificate key contains no PEM PRIVATE KEY block", at: keyLocation)
        }
        return APNsCertificateCredentials(material: .pem(certificateChainPEM: certificatePEM, privateKeyPEM: keyPEM),
                                          passphrase: passphrase, source: source)
    }

    /// Standard or URL-safe base64, with or without padding and line breaks; nil when malformed. Bounded by the
    /// config file's own size limit.
    static func decodeBase64(_ text: String) -> [UInt8]? {
        var cleaned = text.filter { !$0.isWhitespace }
        cleaned = String(cleaned.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        while cleaned.count % 4 != 0 { cleaned += "=" }
        guard let data = Data(base64Encoded: cleaned) else { return nil }
        return [UInt8](data)
    }

    /// Exactly 10 characters of A-Z and 0-9 (Apple key and team identifiers).
    public static func isAppleIdentifier(_ text: String) -> Bool {
        text.utf8.count == 10 && text.utf8.allSatisfy { ($0 >= 65 && $0 <= 90) || ($0 >= 48 && $0 <= 57) }
    }

    /// Checks that `pem` is a PKCS#8 P-256 private key; the error names `source`, never the content.
    static func checkP256(_ pem: String, source: String, location: SourceLocation) throws(NorqError) {
        guard pem.contains("-----BEGIN PRIVATE KEY-----") else {
            throw NorqError(.configInvalidPrivateKey,
                            "\(source) is not a PKCS#8 private key (expected a -----BEGIN PRIVATE KEY----- block, as in Apple's .p8 files)",
                            at: location)
        }
        do {
            _ = try P256.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw NorqError(.configInvalidPrivateKey, "\(source) is not a valid PKCS#8 P-256 private key", at: location)
        }
    }

    /// `scheme://host[:port]`.
    static func endpoint(_ node: ConfigNode, path: String, scheme: String) throws(NorqError) -> APNsEndpoint {
        let text = try node.string(path: path)
        let invalid = NorqError(.configInvalidValue, "\(path) must be \(scheme)://host:port, got \(node.describe)",
                                at: node.location)
        guard text.hasPrefix("\(scheme)://") else { throw invalid }
        var rest = Substring(text.dropFirst(scheme.count + 3))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        var host = rest
        var port = scheme == "https" ? 443 : 80
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw invalid }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let number = Int(after.dropFirst()) else { throw invalid }
                port = number
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            guard let number = Int(rest[rest.index(after: colon)...]) else { throw invalid }
            port = number
        }
        guard !host.isEmpty, (1...65535).contains(port),
              !host.contains(where: { $0 == "/" || $0 == " " || $0 == "@" || $0 == "?" || $0 == "#" }) else { throw invalid }
        return APNsEndpoint(host: String(host), port: port)
    }
}
