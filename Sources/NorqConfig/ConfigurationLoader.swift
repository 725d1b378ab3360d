public import NorqCore
public import Foundation

/// Loads `norq.yaml`: finds it, parses YAML, substitutes `${VAR}`, lets each registered provider type
/// parse its own `config:` block, adds env-var fallback instances, and validates routing.
/// Every failure is a `NorqError` with a `config/...` code and, where it applies, file:line:col.
public struct ConfigurationLoader: Sendable {
    /// File names looked for in each directory, in order.
    public static let fileNames = ["norq.yaml", "norq.config.yaml"]

    public var registry: ProviderTypeRegistry
    public var environment: [String: String]
    /// Where env-var fallback paths (`NORQ_APNS_KEY_PATH`) resolve; the process's working directory by default.
    public var workingDirectory: String

    public init(registry: ProviderTypeRegistry,
                environment: [String: String] = ProcessInfo.processInfo.environment,
                workingDirectory: String? = nil) {
        self.registry = registry
        self.environment = environment
        self.workingDirectory = workingDirectory ?? FileManager.default.currentDirectoryPath
    }

    /// Loads the config file at `path` (an explicit path always wins over discovery).
    public func load(path: String) throws(NorqError) -> NorqConfiguration {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw NorqError(.configNotFound, "config file \(path) does not exist", at: SourceLocation(file: path))
        }
        guard !isDirectory.boolValue else {
            throw NorqError(.configNotFound, "\(path) is a directory, not a config file", at: SourceLocation(file: path))
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw NorqError(.configNotFound, "config file \(path) cannot be read", at: SourceLocation(file: path))
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw NorqError(.configInvalidYAML, "config file \(path) is not valid UTF-8",
                            at: SourceLocation(file: path, line: 1, column: 1))
        }
        let base = (path as NSString).deletingLastPathComponent
        return try load(yaml: text, file: path, baseDirectory: base.isEmpty ? "." : base)
    }

    /// Walks up from `directory` to the filesystem root looking for `norq.yaml` or `norq.config.yaml`.
    /// With none found, returns the env-var-only configuration when some provider type found its variables,
    /// else throws `config/not-found`.
    public func discover(from directory: String) throws(NorqError) -> NorqConfiguration {
        if let path = Self.find(from: directory) { return try load(path: path) }
        let configuration = try load(yaml: "", file: nil, baseDirectory: workingDirectory)
        guard !configuration.providers.isEmpty else {
            throw NorqError(.configNotFound,
                            "no norq.yaml or norq.config.yaml in \(directory) or its parents, and no provider env vars set",
                            hint: "pass --config PATH or set \(registry.typeNames.map { "\($0.uppercased())" }.first.map { "NORQ_\($0)_*" } ?? "provider env vars")")
        }
        return configuration
    }

    /// The first config file found walking up from `directory`, or nil.
    public static func find(from directory: String) -> String? {
        var current = URL(fileURLWithPath: directory).standardizedFileURL
        for _ in 0..<256 {
            for name in fileNames {
                let candidate = current.appendingPathComponent(name).path
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: candidate, isDirectory: &isDirectory), !isDirectory.boolValue {
                    return candidate
                }
            }
            let parent = current.deletingLastPathComponent().standardizedFileURL
            if parent.path == current.path { return nil }
            current = parent
        }
        return nil
    }

    /// Loads configuration text. `file` is used in error locations; relative paths in the file
    /// (`templates:`, key files) resolve against `baseDirectory`.
    public func load(yaml: String, file: String?, baseDirectory: String) throws(NorqError) -> NorqConfiguration {
        let parsed = try YAMLReader(file: file).read(yaml)
        let root = try Interpolation.apply(to: parsed, environment: environment)
        let top = try root.mapping(allowedKeys: ["templates", "providers", "routing", "store"], path: "the config file")

        var configuration = NorqConfiguration(file: file)
        if let templates = top["templates"] {
            let path = try templates.string(path: "templates")
            configuration.templatesDirectory = Self.resolve(path, against: baseDirectory)
        }
        if let providers = top["providers"] {
            configuration.providers = try parseProviders(providers, file: file, baseDirectory: baseDirectory)
        }
        configuration.providers += try environmentProviders(excluding: Set(configuration.providers.map(\.name)))
        if let routing = top["routing"] {
            configuration.routing = try parseRouting(routing, providers: configuration.providers)
        }
        if let store = top["store"] {
            configuration.store = try StoreConfiguration.parse(store, baseDirectory: baseDirectory)
        }
        return configuration
    }

    /// `path` when absolute, else `base/path`.
    public static func resolve(_ path: String, against base: String) -> String {
        if path.hasPrefix("/") { return path }
        if base.isEmpty || base == "." { return path }
        return (base as NSString).appendingPathComponent(path)
    }
}
