import Foundation
public import NorqCore
import Synchronization

/// A `templates/` directory: one folder per template, partials in `_shared/`.
/// Templates are compiled on first use and cached (thread-safe).
public struct TemplateLibrary: Sendable {
    final class Cache: Sendable {
        let compiled = Mutex<[String: CompiledTemplate]>([:])
    }

    public let directory: String
    /// Template names, sorted, without `_shared`.
    public let templateNames: [String]
    private let cache = Cache()

    /// Lists the templates of `directory`. A missing directory is `template/missing-directory`.
    public init(directory: String) throws(NorqError) {
        self.directory = directory
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw NorqError(.templateMissingDirectory, "templates directory '\(directory)' does not exist",
                            at: SourceLocation(file: directory))
        }
        let entries: [String]
        do { entries = try FileManager.default.contentsOfDirectory(atPath: directory) } catch {
            throw NorqError(.templateMissingDirectory, "cannot read templates directory '\(directory)'",
                            at: SourceLocation(file: directory))
        }
        templateNames = entries.filter { entry in
            guard entry != "_shared", !entry.hasPrefix(".") else { return false }
            var dir: ObjCBool = false
            return FileManager.default.fileExists(atPath: directory + "/" + entry, isDirectory: &dir) && dir.boolValue
        }.sorted()
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
            throw NorqError(.templateNotFound, "no template '\(name)' in \(directory)", at: SourceLocation(file: directory),
                            hint: templateNames.isEmpty ? nil : "templates: " + templateNames.joined(separator: ", "))
        }
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
        return try CompiledTemplate.compile(
            source: source, name: name, file: md != nil ? mdPath : jsonPath, format: md != nil ? .markdown : .json,
            partials: partials, samplesSource: Self.read(samplesPath), samplesFile: samplesPath,
            testsSource: Self.read(testsPath), testsFile: testsPath)
    }
}
