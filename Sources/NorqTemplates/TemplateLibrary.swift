import Foundation
public import NorqCore
import Synchronization

/// How template ids are formed.
public enum TemplateIDStyle: Sendable, Hashable {
    /// Our `templates:` projects: a folder name (`order-shipped`), or a nested path of such names.
    case flat
    /// Norq's `notifications:` projects: `type/category/subcategory/name`, 1-4 segments, the first `system`,
    /// `transactional` or `promotional`, each `[a-z0-9]+(-[a-z0-9]+)*`.
    case norq
}

/// A templates (Norq: notifications) directory: one folder per notification, possibly nested
/// (`transactional/orders/order-shipped/push.md`), partials in `_shared/`, other `_`-prefixed folders skipped.
/// A notification folder holds `push.md` or `push.json` and may hold other channels' files (`email.md`,
/// `sms.md`, ...), which are ignored for push, plus `data.schema.yaml`, `data.samples.yaml` and `tests.yaml`.
/// Templates are compiled on first use and cached (thread-safe).
public struct TemplateLibrary: Sendable {
    final class Cache: Sendable {
        let compiled = Mutex<[String: CompiledTemplate]>([:])
    }

    public let directory: String
    public let idStyle: TemplateIDStyle
    /// What the provider types allow templates to say (their push types), applied when compiling.
    public let rules: TemplateRules
    /// Ids of the notifications with a push template, sorted.
    public let templateNames: [String]
    /// Notifications without a push template (only other channels): id -> the channel files found.
    public let otherChannelNotifications: [String: [String]]
    /// Folders that hold a notification but whose id breaks the id rules: id -> `template/invalid-id`.
    public let invalidIDs: [String: NorqError]
    private let cache = Cache()

    /// Files that make a folder a notification (Norq's channel files).
    public static let channelFiles = ["push.md", "push.json", "email.md", "sms.md", "slack.md", "whatsapp.md",
                                      "msteams.md"]
    /// Norq's notification types: the first segment of a Norq id.
    public static let notificationTypes = ["system", "transactional", "promotional"]
    /// Most segments of an id (Norq: type/category/subcategory/name).
    public static let maximumIDSegments = 4
    /// Most notification folders listed (bounds the walk of a huge tree).
    public static let maximumNotifications = 10_000

    /// Lists the notifications of `directory`. A missing directory is `template/missing-directory`.
    public init(directory: String, idStyle: TemplateIDStyle = .flat,
                rules: TemplateRules = TemplateRules()) throws(NorqError) {
        self.directory = directory
        self.idStyle = idStyle
        self.rules = rules
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw NorqError(.templateMissingDirectory, "templates directory '\(directory)' does not exist",
                            at: SourceLocation(file: directory))
        }
        guard (try? FileManager.default.contentsOfDirectory(atPath: directory)) != nil else {
            throw NorqError(.templateMissingDirectory, "cannot read templates directory '\(directory)'",
                            at: SourceLocation(file: directory))
        }
        var push: [String] = []
        var other: [String: [String]] = [:]
        var invalid: [String: NorqError] = [:]
        var pending: [(id: String, depth: Int)] = [("", 0)]
        var found = 0
        while let next = pending.popLast(), found < Self.maximumNotifications {
            let (id, depth) = next
            let folder = id.isEmpty ? directory : directory + "/" + id
            guard let entries = try? FileManager.default.contentsOfDirectory(atPath: folder) else { continue }
            let channels = Self.channelFiles.filter { entries.contains($0) }
            if !id.isEmpty, !channels.isEmpty {
                found += 1
                if let error = Self.checkID(id, style: idStyle, folder: folder) { invalid[id] = error }
                if channels.contains("push.md") || channels.contains("push.json") {
                    push.append(id)
                } else {
                    other[id] = channels
                }
                continue  // a notification folder is a leaf
            }
            var subfolders: [String] = []
            for entry in entries.sorted() where !entry.hasPrefix(".") && !entry.hasPrefix("_") {
                var dir: ObjCBool = false
                let child = folder + "/" + entry
                guard FileManager.default.fileExists(atPath: child, isDirectory: &dir), dir.boolValue else { continue }
                subfolders.append(id.isEmpty ? entry : id + "/" + entry)
            }
            // A top-level folder of a `templates:` project without a template is still listed, so that
            // validation reports it (`template/not-found`: no push.md or push.json) instead of skipping it.
            if idStyle == .flat, depth == 1, subfolders.isEmpty {
                push.append(id)
                continue
            }
            guard depth < Self.maximumIDSegments else { continue }
            for child in subfolders { pending.append((child, depth + 1)) }
        }
        templateNames = push.sorted()
        otherChannelNotifications = other
        invalidIDs = invalid
    }

    /// `template/invalid-id` when `id` breaks the rules of `style`, else nil. Flat ids only need segments that
    /// are safe folder names; Norq ids follow Norq's grammar.
    public static func checkID(_ id: String, style: TemplateIDStyle, folder: String? = nil) -> NorqError? {
        let segments = id.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        let location = SourceLocation(file: folder)
        guard segments.count <= maximumIDSegments else {
            return NorqError(.templateInvalidID, "template id '\(id.prefix(120))' has \(segments.count) segments; at most \(maximumIDSegments) (type/category/subcategory/name)",
                             at: location)
        }
        switch style {
        case .flat:
            for segment in segments where segment.isEmpty || segment == ".." || segment == "."
                || !segment.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_" || $0 == ".") }) {
                return NorqError(.templateInvalidID, "template id '\(id.prefix(120))' has the segment '\(segment.prefix(40))'; use letters, digits, '-', '_' and '.'",
                                 at: location)
            }
        case .norq:
            guard let first = segments.first, notificationTypes.contains(first) else {
                return NorqError(.templateInvalidID,
                                 "template id '\(id.prefix(120))' must start with system, transactional or promotional",
                                 at: location, hint: "Norq ids are type/category/subcategory/name, e.g. transactional/orders/order-shipped")
            }
            guard segments.count >= 2 else {
                return NorqError(.templateInvalidID, "template id '\(id)' names only a type; add the notification's name",
                                 at: location, hint: "e.g. \(id)/order-shipped")
            }
            for segment in segments where !isNorqSegment(segment) {
                return NorqError(.templateInvalidID,
                                 "template id '\(id.prefix(120))' has the segment '\(segment.prefix(40))', which is not [a-z0-9]+(-[a-z0-9]+)*",
                                 at: location)
            }
        }
        return nil
    }

    /// `[a-z0-9]+(-[a-z0-9]+)*`.
    public static func isNorqSegment(_ segment: String) -> Bool {
        var previousDash = true
        for byte in segment.utf8 {
            if byte == 45 {
                if previousDash { return false }
                previousDash = true
            } else if (byte >= 97 && byte <= 122) || (byte >= 48 && byte <= 57) {
                previousDash = false
            } else {
                return false
            }
        }
        return !previousDash
    }

    /// Partials from `<directory>/_shared/<name>.md`.
    public var partials: PartialResolver {
        let shared = directory + "/_shared/"
        return PartialResolver { name in
            guard !name.contains("/"), !name.contains(".."), !name.isEmpty else { return nil }
            let path = shared + name + ".md"
            guard let text = Self.read(path) else { return nil }
            return (text, path)
        }
    }

    static func read(_ path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    /// The compiled template `name` (compiled once, then cached).
    public func template(named name: String) throws(NorqError) -> CompiledTemplate {
        if let cached = cache.compiled.withLock({ $0[name] }) { return cached }
        let compiled = try compile(name)
        cache.compiled.withLock { $0[name] = compiled }
        return compiled
    }

    /// Compiles `name` from disk without the cache.
    public func compile(_ name: String) throws(NorqError) -> CompiledTemplate {
        guard templateNames.contains(name) else {
            if let channels = otherChannelNotifications[name] {
                throw NorqError(.templateNotFound,
                                "notification '\(name)' has no push template (it has \(channels.joined(separator: ", ")))",
                                at: SourceLocation(file: directory + "/" + name),
                                hint: "add push.md beside them (norq new \(name) writes one)")
            }
            let suggestion = ConfigNode.suggestion(for: name, among: templateNames)
                ?? templateNames.first { $0.hasSuffix("/" + name) }
            throw NorqError(.templateNotFound, "no template '\(name)' in \(directory)", at: SourceLocation(file: directory),
                            hint: suggestion.map { "did you mean '\($0)'?" }
                                ?? (templateNames.isEmpty ? nil : "templates: " + templateNames.prefix(20).joined(separator: ", ")))
        }
        if let error = invalidIDs[name] { throw error }
        let folder = directory + "/" + name
        let mdPath = folder + "/push.md", jsonPath = folder + "/push.json"
        let md = Self.read(mdPath), json = Self.read(jsonPath)
        if md != nil, json != nil {
            throw NorqError(.templateBothFormats, "template '\(name)' has both push.md and push.json",
                            at: SourceLocation(file: folder))
        }
        guard let source = md ?? json else {
            throw NorqError(.templateNotFound, "template '\(name)' has no push.md or push.json",
                            at: SourceLocation(file: folder))
        }
        let samplesPath = folder + "/data.samples.yaml", testsPath = folder + "/tests.yaml"
        let compiled = try CompiledTemplate.compile(
            source: source, name: name, file: md != nil ? mdPath : jsonPath, format: md != nil ? .markdown : .json,
            partials: partials, samplesSource: Self.read(samplesPath), samplesFile: samplesPath,
            testsSource: Self.read(testsPath), testsFile: testsPath, rules: rules)
        let schemaPath = folder + "/data.schema.yaml"
        guard let schemaSource = Self.read(schemaPath) else { return compiled }
        return compiled.with(schema: try DataSchema(yaml: schemaSource, file: schemaPath))
    }
}
