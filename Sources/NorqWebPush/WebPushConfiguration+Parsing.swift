public import NorqCore
import Crypto
import Foundation

extension WebPushConfiguration {
    /// Every key a `webpush` `config:` block accepts.
    public static let allowedKeys = [
        "vapidPublicKey", "vapidPrivateKey", "subject", "allowedHosts", "allowPrivateEndpoints", "caPath",
        "caPem", "connections", "maxOrigins", "timeout", "ttl", "padding", "vapidLifetime",
    ]

    /// The env vars of the fallback, without the `NORQ_WEBPUSH_` prefix, and the config key each stands for.
    public static let environmentKeys: [(variable: String, key: String)] = [
        ("VAPID_PUBLIC_KEY", "vapidPublicKey"), ("VAPID_PRIVATE_KEY", "vapidPrivateKey"), ("SUBJECT", "subject"),
        ("ALLOWED_HOSTS", "allowedHosts"), ("ALLOW_PRIVATE_ENDPOINTS", "allowPrivateEndpoints"), ("CA_PATH", "caPath"),
    ]

    /// Parses and validates a `webpush` `config:` block. The three VAPID values take Norq's secret forms: a
    /// `${ENV}` reference (substituted at load time), a file path, or an inline value; keys are base64url (as
    /// web-push tools print them) or PEM. A public key that is not the private key's is a config error.
    public static func parse(_ node: ConfigNode, context: ProviderConfigurationContext,
                             origin: String = "config") throws(NorqError) -> WebPushConfiguration {
        let path = "providers.\(context.instanceName).config"
        let keys = try node.mapping(allowedKeys: allowedKeys, path: path)
        func required(_ key: String) throws(NorqError) -> ConfigNode {
            guard let value = keys[key] else {
                throw NorqError(.configMissingKey, "\(path) is missing \(key)", at: node.location,
                                hint: "webpush needs vapidPublicKey, vapidPrivateKey and subject")
            }
            return value
        }
        let privateNode = try required("vapidPrivateKey")
        let publicNode = try required("vapidPublicKey")
        let subjectNode = try required("subject")

        let (privateText, privateSource) = try secret(privateNode, path: "\(path).vapidPrivateKey", context: context)
        let privateKey = try parsePrivateKey(privateText, source: privateSource, location: privateNode.location)
        let (publicText, publicSource) = try secret(publicNode, path: "\(path).vapidPublicKey", context: context)
        let publicKey = try parsePublicKey(publicText, source: publicSource, location: publicNode.location)
        let pair: VAPIDKeyPair
        do {
            pair = try VAPIDKeyPair(privateKey: privateKey, publicKey: publicKey)
        } catch {
            throw NorqError(error.code, error.message, at: publicNode.location,
                            hint: "generate a pair with `npx web-push generate-vapid-keys` or openssl; keep both halves together")
        }
        let (subjectText, _) = try secret(subjectNode, path: "\(path).subject", context: context, fileAllowed: false)
        let subject = subjectText.trimmingWhitespace()
        guard isValidSubject(subject) else {
            throw NorqError(.webPushInvalidSubject,
                            "\(path).subject must be a mailto: address or an https: URL (no spaces or <>), got \(subjectNode.describe)",
                            at: subjectNode.location)
        }
        var configuration = WebPushConfiguration(vapidKeys: pair, keySource: privateSource, subject: subject, origin: origin)
        if let value = keys["allowedHosts"] {
            configuration.allowedHosts = try hostList(value, path: "\(path).allowedHosts")
        }
        if let value = keys["allowPrivateEndpoints"] {
            configuration.allowPrivateEndpoints = try value.bool(path: "\(path).allowPrivateEndpoints")
        }
        if let roots = try context.trustRoots(keys, path: path) {
            configuration.caPath = roots.label
            configuration.additionalTrustRootsPEM = roots.pem
        }
        if let value = keys["connections"] {
            configuration.connectionsPerOrigin = try value.int(path: "\(path).connections", in: 1...64)
        }
        if let value = keys["maxOrigins"] {
            configuration.maxOrigins = try value.int(path: "\(path).maxOrigins", in: 1...10_000)
        }
        if let value = keys["timeout"] {
            configuration.requestTimeout = try value.duration(path: "\(path).timeout", in: .milliseconds(1)...(.seconds(3600)))
        }
        if let value = keys["ttl"] {
            let ttl = try value.duration(path: "\(path).ttl")
            guard ttl >= .zero, ttl.components.seconds <= Int64(Int32.max) else {
                throw NorqError(.webPushInvalidTTL, "\(path).ttl must be between 0s and 2^31-1 seconds", at: value.location)
            }
            configuration.defaultTTL = Int(ttl.components.seconds)
        }
        if let value = keys["padding"] {
            configuration.paddingBlock = try value.int(path: "\(path).padding", in: 0...WebPushEncryption.maxPlaintextBytes)
        }
        if let value = keys["vapidLifetime"] {
            let lifetime = try value.duration(path: "\(path).vapidLifetime", in: .seconds(600)...(.seconds(24 * 3600)))
            configuration.vapidRenewal = VAPIDRenewalPolicy(lifetime: lifetime, renewBefore: min(.seconds(3600), lifetime / 4))
        }
        return configuration
    }

    /// Builds a configuration from `NORQ_WEBPUSH_*`, or nil when none is set. The three VAPID variables are
    /// then all required.
    public static func fromEnvironment(_ environment: [String: String], prefix: String = "NORQ_WEBPUSH_",
                                       context: ProviderConfigurationContext) throws(NorqError) -> WebPushConfiguration? {
        try ProviderConfigurationContext.rejectUnknownVariables(in: environment, prefix: prefix,
                                                                known: environmentKeys.map { prefix + $0.variable })
        var pairs: [(key: ConfigNode, value: ConfigNode)] = []
        for entry in environmentKeys {
            let name = prefix + entry.variable
            guard var value = environment[name], !value.isEmpty else { continue }
            let location = SourceLocation(file: "env \(name)")
            var node = ConfigNode(.scalar(value, quoted: true), at: location)
            switch entry.key {
            case "allowPrivateEndpoints":
                if value == "1" { value = "true" } else if value == "0" { value = "false" }
                node = ConfigNode(.scalar(value, quoted: false), at: location)
            case "allowedHosts":
                let items = value.split(separator: ",").map { ConfigNode(.scalar($0.trimmingWhitespace(), quoted: true), at: location) }
                node = ConfigNode(.sequence(items), at: location)
            case "vapidPrivateKey", "vapidPublicKey":
                if value.contains("\\n"), !value.contains("\n") { value = value.replacingOccurrences(of: "\\n", with: "\n") }
                node = ConfigNode(.scalar(value, quoted: true), at: location)
            default: break
            }
            pairs.append((ConfigNode(.scalar(entry.key, quoted: false), at: location), node))
        }
        guard !pairs.isEmpty else { return nil }
        let present = Set(pairs.compactMap { $0.key.scalar })
        for required in ["vapidPublicKey", "vapidPrivateKey", "subject"] where !present.contains(required) {
            let variable = prefix + (environmentKeys.first { $0.key == required }?.variable ?? "")
            throw NorqError(.configMissingKey, "\(variable) is not set (needed for the \(prefix)* fallback)",
                            at: SourceLocation(file: "env \(variable)"))
        }
        return try parse(ConfigNode(.mapping(pairs), at: SourceLocation(file: "env \(prefix)*")), context: context, origin: "env")
    }

    // MARK: - Pieces

    /// The value of a secret field and where it came from: inline text (base64url, PEM or a subject), or the
    /// content of the file it names. `${ENV}` references were substituted by the loader already.
    static func secret(_ node: ConfigNode, path: String, context: ProviderConfigurationContext,
                       fileAllowed: Bool = true) throws(NorqError) -> (text: String, source: String) {
        let text = try node.string(path: path).trimmingWhitespace()
        let fromEnv = node.location.file?.hasPrefix("env ") == true
        let inlineSource = fromEnv ? "\(node.location.file ?? "env") (inline)" : "inline"
        if !fileAllowed || text.contains("-----BEGIN") || looksLikeBase64URLKey(text) || text.hasPrefix("mailto:")
            || text.hasPrefix("https://") {
            return (text, inlineSource)
        }
        // A file path: it must exist (a value that is neither a key nor a file is reported as a missing file,
        // naming the path, never echoing a would-be secret beyond 40 characters).
        let resolved = context.resolve(text)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: resolved, isDirectory: &isDirectory), !isDirectory.boolValue,
              let data = FileManager.default.contents(atPath: resolved) else {
            throw NorqError("config/key-not-found",
                            "\(path) is neither a base64url or PEM key nor a readable file (looked for \(resolved.prefix(200)))",
                            at: node.location)
        }
        return (String(decoding: data, as: UTF8.self).trimmingWhitespace(), text)
    }

    static func looksLikeBase64URLKey(_ text: String) -> Bool {
        (text.utf8.count == 43 || text.utf8.count == 87 || text.utf8.count == 44 || text.utf8.count == 88)
            && text.utf8.allSatisfy { c in
                (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c == 45 || c == 95 || c == 61
                    || c == 43 || c == 47
            }
    }

    /// A P-256 private key: base64url of the 32-byte scalar, or PEM (PKCS#8 or SEC1 `EC PRIVATE KEY`).
    static func parsePrivateKey(_ text: String, source: String, location: SourceLocation) throws(NorqError) -> P256.Signing.PrivateKey {
        if text.contains("-----BEGIN") {
            if let key = try? P256.Signing.PrivateKey(pemRepresentation: text) { return key }
        } else if let raw = Base64URL.decode(text), raw.count == 32,
                  let key = try? P256.Signing.PrivateKey(rawRepresentation: raw) {
            return key
        }
        throw NorqError(.webPushInvalidVAPIDKey,
                        "vapidPrivateKey (\(source)) is not a P-256 private key (base64url of 32 bytes, or PEM)",
                        at: location)
    }

    /// A P-256 public key as 65 uncompressed bytes: base64url (as browsers' `applicationServerKey`) or PEM.
    static func parsePublicKey(_ text: String, source: String, location: SourceLocation) throws(NorqError) -> [UInt8] {
        if text.contains("-----BEGIN") {
            if let key = try? P256.Signing.PublicKey(pemRepresentation: text) { return Array(key.x963Representation) }
        } else if let raw = Base64URL.decode(text), raw.count == 65, raw[0] == 4,
                  let key = try? P256.Signing.PublicKey(x963Representation: raw) {
            return Array(key.x963Representation)
        }
        throw NorqError(.webPushInvalidVAPIDKey,
                        "vapidPublicKey (\(source)) is not a P-256 public key (base64url of the 65-byte uncompressed point, or PEM)",
                        at: location)
    }

    static func hostList(_ node: ConfigNode, path: String) throws(NorqError) -> [String] {
        let items: [ConfigNode]
        switch node.value {
        case .sequence(let list): items = list
        case .scalar: items = [node]
        default: throw NorqError(.configInvalidType, "\(path) must be a list of host names or suffixes", at: node.location)
        }
        var hosts: [String] = []
        for item in items {
            let host = try item.string(path: path).lowercased()
            let bare = host.hasPrefix(".") ? String(host.dropFirst()) : host
            guard !bare.isEmpty, bare.utf8.allSatisfy({ c in
                (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c == 45 || c == 46 || c == 58
            }) else {
                throw NorqError(.configInvalidValue, "\(path): \(item.describe) is not a host name or suffix", at: item.location)
            }
            hosts.append(bare)
        }
        return hosts
    }
}
