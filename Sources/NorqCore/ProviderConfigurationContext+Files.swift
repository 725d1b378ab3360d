import FoundationEssentials

extension NorqError.Code {
    /// A file a provider's config names (`keyPath`, `certPath`, `pfxPath`, `caPath`, `serviceAccount`) does not
    /// exist or cannot be read.
    public static let configFileNotFound: Self = "config/file-not-found"
    /// A certificate PEM (`certPath`, `certPem`, `caPath`, `caPem`) has no CERTIFICATE block.
    public static let configInvalidCertificate: Self = "config/invalid-certificate"
}

/// What every provider type reads the same way: files named relative to the config file, the extra CA of
/// `caPath` / `caPem`, and the unknown variables of an env fallback.
extension ProviderConfigurationContext {
    /// `path` against the config file's directory (an absolute path stays as it is).
    public func resolve(_ path: String) -> String {
        Self.resolve(path, against: baseDirectory)
    }

    /// `path` when absolute (or when `base` is empty or `.`), else `base/path`: the one rule for every path a
    /// config file names (`ConfigurationLoader.resolve(_:against:)` is this).
    public static func resolve(_ path: String, against base: String) -> String {
        if path.hasPrefix("/") || base.isEmpty || base == "." { return path }
        return base.hasSuffix("/") ? base + path : base + "/" + path
    }

    /// The bytes of the file `path` (relative to the config file) that `node` names; `missing` is the error code
    /// when it does not exist or cannot be read, and `what` names it in the message (never its content).
    public func readBytes(_ path: String, node: ConfigNode, missing code: NorqError.Code = .configFileNotFound,
                          what: String) throws(NorqError) -> [UInt8] {
        let resolved = resolve(path)
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: resolved, isDirectory: &isDirectory) else {
            throw NorqError(code, "\(what) \(resolved) does not exist", at: node.location)
        }
        guard !isDirectory, FileManager.default.isReadableFile(atPath: resolved),
              let data = FileManager.default.contents(atPath: resolved) else {
            throw NorqError(code, "\(what) \(resolved) cannot be read", at: node.location)
        }
        return [UInt8](data)
    }

    /// The text of the file `path`, as ``readBytes(_:node:missing:what:)`` reads it.
    public func readText(_ path: String, node: ConfigNode, missing code: NorqError.Code = .configFileNotFound,
                         what: String) throws(NorqError) -> String {
        String(decoding: try readBytes(path, node: node, missing: code, what: what), as: UTF8.self)
    }

    /// The extra trust roots of a `config:` block: `caPath` (a PEM file) or `caPem` (inline PEM), at most one of
    /// them; nil when neither is set. `label` is what `norq validate` may print (the path, or "caPem (inline)").
    public func trustRoots(_ keys: [String: ConfigNode], path: String) throws(NorqError) -> (label: String, pem: String)? {
        switch (keys["caPath"], keys["caPem"]) {
        case (nil, nil):
            return nil
        case (let pathNode?, let pemNode?):
            throw NorqError(.configConflictingKeys,
                            "\(path) sets both caPath and caPem (line \(pathNode.location.line)); use exactly one",
                            at: pemNode.location)
        case (let pathNode?, nil):
            let caPath = try pathNode.string(path: "\(path).caPath")
            let text = try readText(caPath, node: pathNode, what: "CA file")
            guard text.contains("-----BEGIN CERTIFICATE-----") else {
                throw NorqError(.configInvalidCertificate, "CA file \(caPath) contains no PEM CERTIFICATE block",
                                at: pathNode.location)
            }
            return (caPath, text)
        case (nil, let pemNode?):
            let text = try pemNode.string(path: "\(path).caPem")
            guard text.contains("-----BEGIN CERTIFICATE-----") else {
                throw NorqError(.configInvalidCertificate, "\(path).caPem contains no PEM CERTIFICATE block",
                                at: pemNode.location)
            }
            return ("caPem (inline)", text)
        }
    }

    /// Refuses a variable that starts with `prefix` but is none of `known` (a typo would otherwise be ignored),
    /// with the closest known name as a hint.
    public static func rejectUnknownVariables(in environment: [String: String], prefix: String,
                                              known: [String]) throws(NorqError) {
        for name in environment.keys.sorted() where name.hasPrefix(prefix) && !known.contains(name) {
            let suggestion = ConfigNode.suggestion(for: name, among: known)
            throw NorqError(.configUnknownKey, "unknown environment variable \(name)",
                            at: SourceLocation(file: "env \(name)"),
                            hint: suggestion.map { "did you mean \($0)?" } ?? "known: \(known.joined(separator: ", "))")
        }
    }
}
