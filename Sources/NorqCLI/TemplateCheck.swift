import Foundation
import NorqConfig
import NorqCore
import NorqTemplates

import Norq

/// `norq validate`'s and `norq lint`'s template pass, one line per template: the findings of ``TemplateLinter``
/// (the library's checks, shared with `norq preview`) grouped by template.
struct TemplateCheck {
    var name: String
    var samples: [String] = []
    var errors: [NorqError] = []
    var warnings: [NorqError] = []
    /// Set for a notification that has no push template (only other channels' files).
    var otherChannels: [String]? = nil

    init(name: String, samples: [String] = [], errors: [NorqError] = [], warnings: [NorqError] = [],
         otherChannels: [String]? = nil) {
        self.name = name
        self.samples = samples
        self.errors = errors
        self.warnings = warnings
        self.otherChannels = otherChannels
    }

    init(_ result: TemplateLintResult) {
        self.init(name: result.template, samples: result.samples, errors: result.errors.map(\.error),
                  warnings: result.warnings.map(\.error), otherChannels: result.otherChannels)
    }

    /// Lints `directory` with the providers of `configuration` (made, credentials loaded, nothing sent): the
    /// report, whose configuration findings include a provider that cannot be made. A templates directory that
    /// cannot be listed is one finding of a `(templates directory)` result.
    /// - Parameter required: false when the directory is only the default guess (then a missing one is fine).
    static func lint(directory: String, required: Bool, idStyle: TemplateIDStyle = .flat,
                     configuration: NorqConfiguration? = nil, ids: [String]? = nil,
                     sendTime: Int64? = nil) async -> LintReport {
        let providers = LintProviders.make(configuration: configuration,
                                           registry: ConfigOptions.registry(consoleToStandardError: true))
        let report: LintReport
        if !required, !FileManager.default.fileExists(atPath: directory) {
            report = LintReport(configuration: providers.failures)
        } else {
            do {
                let library = try TemplateLibrary(directory: directory, idStyle: idStyle,
                                                  rules: ConfigOptions.templateRules(configuration))
                let linter = TemplateLinter(library: library, providers: providers,
                                            options: TemplateLinter.Options(sendTime: sendTime))
                report = linter.lint(ids)
            } catch {
                report = LintReport(configuration: providers.failures, templates: [
                    TemplateLintResult(template: "(templates directory)",
                                       findings: [LintFinding(error, severity: .error)]),
                ])
            }
        }
        await providers.shutdown()
        return report
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
