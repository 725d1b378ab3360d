import Foundation
import NorqConfig
import NorqCore
import NorqTemplates

/// `norq validate`'s template pass: compile every template, validate each sample against the data schema,
/// render it with each sample, and collect warnings (`template/raw-expression`, `template/nullable-access`,
/// `push/implausible-expiration`).
struct TemplateCheck {
    var name: String
    var samples: [String] = []
    var errors: [NorqError] = []
    var warnings: [NorqError] = []
    /// Set for a notification that has no push template (only other channels' files).
    var otherChannels: [String]? = nil

    /// Each rendered sample's payloads are measured by the providers of `configuration` (every built-in type when
    /// it declares none, see `ConfigOptions.templateRules(_:)`): one over a provider's limit is an error,
    /// `template/payload-too-large`, naming the provider and the bytes over.
    /// - Parameter required: false when the directory is only the default guess (then a missing one is fine).
    static func run(directory: String, required: Bool, idStyle: TemplateIDStyle = .flat,
                    configuration: NorqConfiguration? = nil) -> [TemplateCheck] {
        let library: TemplateLibrary
        if !required, !FileManager.default.fileExists(atPath: directory) { return [] }
        do {
            library = try TemplateLibrary(directory: directory, idStyle: idStyle,
                                          rules: ConfigOptions.templateRules(configuration))
        } catch {
            return [TemplateCheck(name: "(templates directory)", errors: [error])]
        }
        var checks = library.templateNames.map { name -> TemplateCheck in
            var check = TemplateCheck(name: name)
            let compiled: CompiledTemplate
            do throws(NorqError) {
                compiled = try library.compile(name)
            } catch {
                check.errors.append(error)
                return check
            }
            check.warnings = compiled.warnings
            let samples: [(String, JSONValue)] = compiled.samples.isEmpty
                ? [("(no sample: empty data)", .object([:]))]
                : compiled.samples.map { ($0.key, $0.value) }
            for (sample, data) in samples {
                check.samples.append(sample)
                if !compiled.samples.isEmpty {
                    for var error in compiled.schemaErrors(data) {
                        error.message += " (sample \"\(sample)\")"
                        check.errors.append(error)
                    }
                }
                do throws(NorqError) {
                    let content = try compiled.render(data: data)
                    try library.rules.checkPayloadSize(content)
                } catch {
                    var error = error
                    error.message += " (sample \"\(sample)\")"
                    check.errors.append(error)
                }
            }
            return check
        }
        for (name, channels) in library.otherChannelNotifications.sorted(by: { $0.key < $1.key }) {
            var check = TemplateCheck(name: name, otherChannels: channels)
            if let error = library.invalidIDs[name] { check.errors.append(error) }
            checks.append(check)
        }
        return checks.sorted { $0.name < $1.name }
    }

    var json: JSONValue {
        [
            "template": .string(name),
            "ok": .bool(errors.isEmpty),
            "push": .bool(otherChannels == nil),
            "otherChannels": .array((otherChannels ?? []).map(JSONValue.string)),
            "samples": .array(samples.map(JSONValue.string)),
            "errors": .array(errors.map(Console.json)),
            "warnings": .array(warnings.map(Console.json)),
        ]
    }

    static func text(_ checks: [TemplateCheck], directory: String, style: Style) -> String {
        var out = "templates (\(directory)):\n"
        if checks.isEmpty { out += "  (none)\n" }
        for check in checks {
            let warned = check.warnings.isEmpty
                ? "" : ", " + style.yellow("\(check.warnings.count) warning\(check.warnings.count == 1 ? "" : "s")")
            if let channels = check.otherChannels, check.errors.isEmpty {
                out += "  \(check.name): " + style.dim("no push template (\(channels.joined(separator: ", ")) not served by this router)") + "\n"
            } else if check.errors.isEmpty {
                out += "  \(check.name): " + style.green("ok") + " (rendered with \(check.samples.count) sample\(check.samples.count == 1 ? "" : "s"))\(warned)\n"
            } else {
                out += "  \(check.name): " + style.red("\(check.errors.count) error\(check.errors.count == 1 ? "" : "s")") + "\(warned)\n"
            }
        }
        return out
    }
}
