public import NorqCore
import NorqAPNs
import Foundation

extension FCMConfiguration {
    /// Every key an FCM `config:` block accepts (`serverKey` is recognised only to be refused).
    public static let allowedKeys = [
        "projectId", "serviceAccount", "endpoint", "tokenEndpoint", "caPath", "caPem", "connections", "maxConcurrentStreams",
        "timeout", "proxy", "validateOnly",
    ]

    /// Parses and validates an FCM `config:` block. The service account is read and its RSA key checked here;
    /// errors name keys, files and fields, never key material.
    public static func parse(_ node: ConfigNode, context: ProviderConfigurationContext,
                             origin: String = "config") throws(NorqError) -> FCMConfiguration {
        let path = "providers.\(context.instanceName).config"
        if case .mapping(let pairs) = node.value,
           let legacy = pairs.first(where: { $0.key.scalar == "serverKey" || $0.key.scalar == "server_key" }) {
            throw NorqError(.fcmLegacyServerKey,
                            "\(path).serverKey: FCM's legacy server keys stopped working when Google shut the legacy API down (June 2024)",
                            at: legacy.key.location,
                            hint: "use projectId and serviceAccount (a service-account JSON key) for the HTTP v1 API")
        }
        let keys = try node.mapping(allowedKeys: allowedKeys, path: path)
        func required(_ key: String) throws(NorqError) -> ConfigNode {
            guard let value = keys[key] else {
                throw NorqError(.configMissingKey, "\(path) is missing \(key)", at: node.location,
                                hint: "FCM needs projectId and serviceAccount (a ${ENV} reference, a file path or inline JSON)")
            }
            return value
        }
        let projectNode = try required("projectId")
        let projectID = try projectNode.string(path: "\(path).projectId")
        guard isProjectID(projectID) else {
            throw NorqError(.configInvalidValue,
                            "\(path).projectId \(projectNode.describe) is not a Firebase project id (lowercase letters, digits and hyphens) or number",
                            at: projectNode.location)
        }
        let accountNode = try required("serviceAccount")
        let (account, source) = try serviceAccount(accountNode, path: "\(path).serviceAccount", context: context)

        var configuration = FCMConfiguration(projectID: projectID, serviceAccount: account,
                                             serviceAccountSource: source, origin: origin)
        if let value = keys["endpoint"] {
            configuration.endpoint = try url(value, path: "\(path).endpoint", scheme: "https")
            guard configuration.endpoint.path.isEmpty else {
                throw NorqError(.configInvalidValue, "\(path).endpoint must be https://host[:port] without a path",
                                at: value.location)
            }
        }
        if let value = keys["tokenEndpoint"] {
            configuration.tokenEndpoint = try url(value, path: "\(path).tokenEndpoint", scheme: "https")
        }
        if let roots = try context.trustRoots(keys, path: path) {
            configuration.caPath = roots.label
            configuration.additionalTrustRootsPEM = roots.pem
        }
        if let value = keys["proxy"] { configuration.proxy = try url(value, path: "\(path).proxy", scheme: "http") }
        if let value = keys["connections"] {
            configuration.connections = try value.int(path: "\(path).connections", in: 1...64)
        }
        if let value = keys["maxConcurrentStreams"] {
            configuration.maxConcurrentStreams = try value.int(path: "\(path).maxConcurrentStreams", in: 1...100_000)
        }
        if let value = keys["timeout"] {
            configuration.requestTimeout = try value.duration(path: "\(path).timeout", in: .milliseconds(1)...(.seconds(3600)))
        }
        if let value = keys["validateOnly"] { configuration.validateOnly = try value.bool(path: "\(path).validateOnly") }
        return configuration
    }

    /// The env vars of the fallback, without prefix, and the config key each stands for.
    public static let environmentKeys: [(variable: String, key: String)] = [
        ("PROJECT_ID", "projectId"), ("SERVICE_ACCOUNT", "serviceAccount"), ("ENDPOINT", "endpoint"),
        ("TOKEN_ENDPOINT", "tokenEndpoint"), ("CA_PATH", "caPath"),
    ]

    /// Builds a configuration from `<prefix>PROJECT_ID` and `<prefix>SERVICE_ACCOUNT` (a `${VAR}` reference, a
    /// file path or inline JSON), and optional `ENDPOINT`, `TOKEN_ENDPOINT`, `CA_PATH`. Nil when none is set.
    public static func fromEnvironment(_ environment: [String: String], prefix: String = "NORQ_FCM_",
                                       context: ProviderConfigurationContext) throws(NorqError) -> FCMConfiguration? {
        let known = environmentKeys.map { prefix + $0.variable }
        for name in environment.keys.sorted() where name.hasPrefix(prefix) && !known.contains(name) {
            if name == prefix + "SERVER_KEY" {
                throw NorqError(.fcmLegacyServerKey,
                                "\(name): FCM's legacy server keys stopped working when Google shut the legacy API down (June 2024)",
                                at: SourceLocation(file: "env \(name)"),
                                hint: "set \(prefix)PROJECT_ID and \(prefix)SERVICE_ACCOUNT instead")
            }
        }
        try ProviderConfigurationContext.rejectUnknownVariables(in: environment, prefix: prefix, known: known)
        var pairs: [(key: ConfigNode, value: ConfigNode)] = []
        for entry in environmentKeys {
            let name = prefix + entry.variable
            guard var value = environment[name], !value.isEmpty else { continue }
            let location = SourceLocation(file: "env \(name)")
            // `NORQ_FCM_SERVICE_ACCOUNT=${GOOGLE_KEY_JSON}`: the env-reference form, resolved here.
            if value.hasPrefix("${"), value.hasSuffix("}") {
                let inner = String(value.dropFirst(2).dropLast())
                guard let resolved = environment[inner], !resolved.isEmpty else {
                    throw NorqError(.configMissingKey, "\(name) refers to \(inner), which is not set", at: location)
                }
                value = resolved
            }
            pairs.append((ConfigNode(.scalar(entry.key, quoted: false), at: location),
                          ConfigNode(.scalar(value, quoted: true), at: location)))
        }
        guard !pairs.isEmpty else { return nil }
        let present = Set(pairs.compactMap { $0.key.scalar })
        for required in ["projectId", "serviceAccount"] where !present.contains(required) {
            let variable = prefix + (environmentKeys.first { $0.key == required }?.variable ?? "")
            throw NorqError(.configMissingKey, "\(variable) is not set (needed for the \(prefix)* fallback)",
                            at: SourceLocation(file: "env \(variable)"))
        }
        let node = ConfigNode(.mapping(pairs), at: SourceLocation(file: "env \(prefix)*"))
        return try parse(node, context: context, origin: "env")
    }

    // MARK: - Pieces

    /// The service account from one of Norq's secret forms. `${ENV}` was substituted at load time, so the value
    /// is inline JSON (it starts with `{`) or a path to the JSON key file.
    static func serviceAccount(_ node: ConfigNode, path: String,
                               context: ProviderConfigurationContext) throws(NorqError) -> (FCMServiceAccount, String) {
        if case .mapping = node.value {
            throw NorqError(.configInvalidType,
                            "\(path) must be a string: a ${ENV} reference, a file path or the JSON key as a string",
                            at: node.location)
        }
        let text = try node.string(path: path)
        let trimmed = text.trimmingWhitespace()
        let fromEnv = node.location.file?.hasPrefix("env ") == true
        if trimmed.hasPrefix("{") {
            let account = try FCMServiceAccount(json: trimmed, location: node.location)
            return (account, fromEnv ? (node.location.file ?? "env") : "inline JSON")
        }
        let json = try context.readText(trimmed, node: node, what: "service-account file")
        var location = node.location
        location.file = context.resolve(trimmed)
        location.line = 0
        location.column = 0
        return (try FCMServiceAccount(json: json, location: location), trimmed)
    }

    /// A Firebase project id (6-30 lowercase letters, digits, hyphens) or a project number.
    public static func isProjectID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard (1...64).contains(bytes.count) else { return false }
        return bytes.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 45 }
    }

    static func url(_ node: ConfigNode, path: String, scheme: String) throws(NorqError) -> FCMURL {
        let text = try node.string(path: path)
        guard let url = FCMURL.parse(text, scheme: scheme) else {
            throw NorqError(.configInvalidValue, "\(path) must be \(scheme)://host[:port], got \(node.describe)",
                            at: node.location)
        }
        return url
    }
}
