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

    /// Loads the config file at `path` (an explicit path always wins over discovery). `path` may also be the
    /// folder holding it (`--config ./my-project`, as Norq accepts): then `norq.yaml` or `norq.config.yaml`
    /// in that folder is loaded.
    public func load(path: String) throws(NorqError) -> NorqConfiguration {
        var path = path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw NorqError(.configNotFound, "config file \(path) does not exist", at: SourceLocation(file: path))
        }
        if isDirectory.boolValue {
            try Self.checkOneConfigFile(in: path)
            guard let file = Self.configFile(in: path) else {
                throw NorqError(.configNotFound,
                                "\(path) is a folder without \(Self.fileNames.joined(separator: " or "))",
                                at: SourceLocation(file: path),
                                hint: "--config takes the config file or the folder that holds it")
            }
            path = file
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

    /// Finds the config as Norq does (``find(from:)``: walk up, then scan down) and loads it. With none
    /// found, returns the env-var-only configuration when some provider type found its variables, else throws
    /// `config/not-found`.
    public func discover(from directory: String) throws(NorqError) -> NorqConfiguration {
        if let path = Self.find(from: directory) {
            let folder = (path as NSString).deletingLastPathComponent
            try Self.checkOneConfigFile(in: folder.isEmpty ? "." : folder)
            return try load(path: path)
        }
        let configuration = try load(yaml: "", file: nil, baseDirectory: workingDirectory)
        guard !configuration.providers.isEmpty else {
            throw NorqError(.configNotFound,
                            "no norq.yaml or norq.config.yaml in \(directory), its parents, or \(Self.maximumScanDepth) levels below it, and no provider env vars set",
                            hint: "pass --config PATH or set \(registry.typeNames.map { "\($0.uppercased())" }.first.map { "NORQ_\($0)_*" } ?? "provider env vars")")
        }
        return configuration
    }

    /// The config file found from `directory` as Norq finds it: (1) walking up to the filesystem root, the
    /// first folder holding `norq.yaml` or `norq.config.yaml` wins; (2) if none, scanning down at most
    /// ``maximumScanDepth`` levels, shallowest first (breadth first, folders in name order), skipping
    /// ``skippedFolders``, dot-folders and `_`-prefixed folders. Nil when neither finds one.
    public static func find(from directory: String) -> String? {
        findUpward(from: directory) ?? findDownward(from: directory)
    }

    /// How many folder levels below the starting folder the downward scan looks (Norq: 5).
    public static let maximumScanDepth = 5
    /// Most folders the downward scan visits (bounds the time on a huge tree such as a home folder).
    public static let maximumScannedFolders = 20_000
    /// Folders the downward scan never enters (besides dot-folders and `_`-prefixed ones), as in Norq.
    public static let skippedFolders: Set<String> = ["node_modules", "target", ".git", "vendor", "dist", "build",
                                                     "__pycache__"]

    /// Throws `config/both-config-files`, naming both, when `folder` holds both `norq.yaml` and
    /// `norq.config.yaml`: which one is meant is not ours to guess (an explicit `--config FILE` chooses).
    public static func checkOneConfigFile(in folder: String) throws(NorqError) {
        let present = fileNames.map { (folder as NSString).appendingPathComponent($0) }.filter { candidate in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: candidate, isDirectory: &isDirectory) && !isDirectory.boolValue
        }
        guard present.count > 1 else { return }
        throw NorqError(.configBothFiles, "both \(present.joined(separator: " and ")) exist; which one is meant is ambiguous",
                        at: SourceLocation(file: present[0]),
                        hint: "keep one (Norq's name is norq.config.yaml), or pass --config with the file to use")
    }

    /// The config file of `folder` itself (`norq.yaml` first, then `norq.config.yaml`), or nil.
    public static func configFile(in folder: String) -> String? {
        for name in fileNames {
            let candidate = (folder as NSString).appendingPathComponent(name)
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: candidate, isDirectory: &isDirectory), !isDirectory.boolValue {
                return candidate
            }
        }
        return nil
    }

    /// The first config file found walking up from `directory`, or nil.
    public static func findUpward(from directory: String) -> String? {
        var current = URL(fileURLWithPath: directory).standardizedFileURL
        for _ in 0..<256 {
            if let file = configFile(in: current.path) { return file }
            let parent = current.deletingLastPathComponent().standardizedFileURL
            if parent.path == current.path { return nil }
            current = parent
        }
        return nil
    }

    /// The shallowest config file below `directory` (at most ``maximumScanDepth`` levels down), or nil.
    public static func findDownward(from directory: String) -> String? {
        let root = URL(fileURLWithPath: directory).standardizedFileURL.path
        var level = [root]
        var visited = 0
        for _ in 1...maximumScanDepth {
            var next: [String] = []
            for folder in level {
                guard let entries = try? FileManager.default.contentsOfDirectory(atPath: folder) else { continue }
                for entry in entries.sorted() where !entry.hasPrefix(".") && !entry.hasPrefix("_")
                    && !skippedFolders.contains(entry) {
                    let child = (folder as NSString).appendingPathComponent(entry)
                    var isDirectory: ObjCBool = false
                    guard FileManager.default.fileExists(atPath: child, isDirectory: &isDirectory), isDirectory.boolValue,
                          !isSymbolicLink(child) else { continue }
                    visited += 1
                    if visited > maximumScannedFolders { return nil }
                    next.append(child)
                }
            }
            for folder in next { if let file = configFile(in: folder) { return file } }
            level = next
            if level.isEmpty { return nil }
        }
        return nil
    }

    static func isSymbolicLink(_ path: String) -> Bool {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) != nil
    }

    /// Loads configuration text. `file` is used in error locations; relative paths in the file
    /// (`templates:`, key files) resolve against `baseDirectory`.
    public func load(yaml: String, file: String?, baseDirectory: String) throws(NorqError) -> NorqConfiguration {
        let parsed = try YAMLReader(file: file).read(yaml)
        let root = try Interpolation.apply(to: parsed, environment: environment)
        let top = try root.mapping(allowedKeys: Self.topLevelKeys, path: "the config file")

        var configuration = NorqConfiguration(file: file)
        if let templates = top["templates"], let notifications = top["notifications"] {
            throw NorqError(.configConflictingKeys,
                            "the config sets both templates: (line \(templates.location.line)) and notifications:; they are the same key, use one",
                            at: notifications.location)
        }
        for key in ["templates", "notifications"] {
            guard let node = top[key] else { continue }
            let path = try node.string(path: key)
            configuration.templatesDirectory = Self.resolve(path, against: baseDirectory)
            configuration.templatesKey = key == "notifications" ? .notifications : .templates
        }
        configuration.ignoredKeys = Self.ignoredTopLevelKeys.filter { top[$0] != nil }
        if let providers = top["providers"] {
            (configuration.providers, configuration.unservedProviders)
                = try parseProviders(providers, file: file, baseDirectory: baseDirectory)
        }
        configuration.providers += try environmentProviders(excluding: Set(configuration.providers.map(\.name)))
        if let routing = top["routing"] {
            configuration.routing = try parseRouting(routing, providers: configuration.providers,
                                                     unserved: configuration.unservedProviders)
        }
        if let store = top["store"] {
            configuration.store = try StoreConfiguration.parse(store, baseDirectory: baseDirectory)
        }
        if let server = top["server"] { configuration.server = try ServerConfiguration.parse(server, baseDirectory: baseDirectory) }
        if let telemetry = top["telemetry"] { configuration.telemetry = try TelemetryConfiguration.parse(telemetry) }
        return configuration
    }

    /// Top-level keys of a config file. `notifications:` is Norq's name for our `templates:`.
    public static let topLevelKeys = ["templates", "notifications", "providers", "routing", "store", "server", "telemetry"] + ignoredTopLevelKeys
    /// Norq keys this router reads past (they configure email branding and code generation): accepted, kept
    /// in ``NorqConfiguration/ignoredKeys`` and shown by `norq validate`.
    public static let ignoredTopLevelKeys = ["brand", "codegen", "theme", "fonts"]

    /// `path` when absolute, else `base/path` (`ProviderConfigurationContext.resolve(_:against:)`, the rule
    /// provider types use for their files too).
    public static func resolve(_ path: String, against base: String) -> String {
        ProviderConfigurationContext.resolve(path, against: base)
    }
}
