public import NorqCore

extension ExpoConfiguration {
    /// Every key an `expo` `config:` block accepts.
    public static let allowedKeys = [
        "accessToken", "endpoint", "caPath", "caPem", "receiptDelay", "rateLimit", "maxConcurrentRequests", "timeout",
        "gzip",
    ]

    /// Parses and validates an `expo` `config:` block. Every key is optional: an empty block is anonymous access to
    /// `https://exp.host`. `accessToken` takes Norq's secret forms: a `${ENV}` reference (substituted at load
    /// time), a file path (a value with a `/`, or starting with `.` or `~`), or the token inline.
    public static func parse(_ node: ConfigNode, context: ProviderConfigurationContext,
                             origin: String = "config") throws(NorqError) -> ExpoConfiguration {
        let path = "providers.\(context.instanceName).config"
        let keys: [String: ConfigNode]
        switch node.value {
        case .null, .scalar("", _): keys = [:]  // `config:` with nothing under it
        default: keys = try node.mapping(allowedKeys: allowedKeys, path: path)
        }
        var configuration = ExpoConfiguration(origin: origin)
        if let value = keys["accessToken"] {
            let (token, source) = try accessToken(value, path: "\(path).accessToken", context: context)
            configuration.accessToken = token
            configuration.accessTokenSource = source
        }
        if let value = keys["endpoint"] {
            let text = try value.string(path: "\(path).endpoint")
            guard let url = ExpoURL.parse(text) else {
                throw NorqError(.configInvalidValue, "\(path).endpoint must be https://host[:port] without a path, got \(value.describe)",
                                at: value.location)
            }
            configuration.endpoint = url
        }
        if let roots = try context.trustRoots(keys, path: path) {
            configuration.caPath = roots.label
            configuration.additionalTrustRootsPEM = roots.pem
        }
        if let value = keys["receiptDelay"] {
            configuration.receiptDelay = try value.duration(path: "\(path).receiptDelay", in: .zero...(.seconds(24 * 3600)))
        }
        if let value = keys["rateLimit"] {
            configuration.rateLimit = try value.int(path: "\(path).rateLimit", in: 0...1_000_000)
        }
        if let value = keys["maxConcurrentRequests"] {
            configuration.maxConcurrentRequests = try value.int(path: "\(path).maxConcurrentRequests", in: 1...1000)
        }
        if let value = keys["timeout"] {
            configuration.requestTimeout = try value.duration(path: "\(path).timeout", in: .milliseconds(1)...(.seconds(3600)))
        }
        if let value = keys["gzip"] {
            configuration.gzipThreshold = try value.bool(path: "\(path).gzip") ? 1024 : nil
        }
        return configuration
    }

    /// The env vars of the fallback, without prefix, and the config key each stands for (`ENABLED` has none).
    public static let environmentKeys: [(variable: String, key: String)] = [
        ("ACCESS_TOKEN", "accessToken"), ("ENDPOINT", "endpoint"), ("CA_PATH", "caPath"),
    ]

    /// Builds a configuration from `<prefix>ACCESS_TOKEN` (authenticated) or `<prefix>ENABLED` (any value:
    /// anonymous), with optional `ENDPOINT` and `CA_PATH`. Nil when none is set. Exactly one of `ACCESS_TOKEN` and
    /// `ENABLED` is needed: `ENDPOINT` alone is an error naming both.
    public static func fromEnvironment(_ environment: [String: String], prefix: String = "NORQ_EXPO_",
                                       context: ProviderConfigurationContext) throws(NorqError) -> ExpoConfiguration? {
        let known = environmentKeys.map { prefix + $0.variable } + [prefix + "ENABLED"]
        try ProviderConfigurationContext.rejectUnknownVariables(in: environment, prefix: prefix, known: known)
        let enabled = environment[prefix + "ENABLED"].map { !$0.isEmpty } ?? false
        var pairs: [(key: ConfigNode, value: ConfigNode)] = []
        for entry in environmentKeys {
            let name = prefix + entry.variable
            guard let value = environment[name], !value.isEmpty else { continue }
            let location = SourceLocation(file: "env \(name)")
            pairs.append((ConfigNode(.scalar(entry.key, quoted: false), at: location),
                          ConfigNode(.scalar(value, quoted: true), at: location)))
        }
        guard enabled || !pairs.isEmpty else { return nil }
        let hasToken = pairs.contains { $0.key.scalar == "accessToken" }
        guard enabled || hasToken else {
            throw NorqError(.configMissingKey,
                            "neither \(prefix)ACCESS_TOKEN nor \(prefix)ENABLED is set (needed for the \(prefix)* fallback)",
                            at: SourceLocation(file: "env \(prefix)*"),
                            hint: "set \(prefix)ACCESS_TOKEN for an authenticated provider, or \(prefix)ENABLED=1 for anonymous access")
        }
        let node = ConfigNode(.mapping(pairs), at: SourceLocation(file: "env \(prefix)*"))
        return try parse(node, context: context, origin: "env")
    }

    /// The access token from one of Norq's secret forms, and its source for display. A value that looks like a
    /// path is read from that file (which must exist); anything else is the token itself.
    static func accessToken(_ node: ConfigNode, path: String,
                            context: ProviderConfigurationContext) throws(NorqError) -> (String, String) {
        let text = try node.string(path: path).trimmingWhitespace()
        let fromEnv = node.location.file?.hasPrefix("env ") == true
        var token = text
        var source = fromEnv ? (node.location.file ?? "env") : "inline"
        if text.contains("/") || text.hasPrefix(".") || text.hasPrefix("~") {
            token = try context.readText(text, node: node, what: "access-token file").trimmingWhitespace()
            source = text
        }
        guard isAccessToken(token) else {
            throw NorqError(.expoInvalidAccessToken,
                            "\(path) (from \(source)) is not an Expo access token: it is empty or has whitespace or control characters",
                            at: node.location, hint: "create one at expo.dev/settings/access-tokens")
        }
        return (token, source)
    }

    /// A plausible access token: 1...512 visible ASCII characters (it goes into a header value).
    public static func isAccessToken(_ text: String) -> Bool {
        let bytes = text.utf8
        return (1...512).contains(bytes.count) && bytes.allSatisfy { $0 > 32 && $0 < 127 }
    }
}
