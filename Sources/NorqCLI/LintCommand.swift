import ArgumentParser
import Foundation
import Norq
import NorqConfig
import NorqCore
import NorqTemplates

/// `norq lint [ids…] [--json] [--strict]`: every template check of `norq validate` (``TemplateLinter``), one
/// finding a line as `path:line:col: severity[code]: message`, with an exit code CI can use.
struct LintCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lint",
        abstract: "Check templates as a send would: push rules, data schema, nullable access, raw expressions, payload size and header values per routed provider.",
        discussion: """
            Compiles each template (all of them, or the ids given), checks each sample of data.samples.yaml \
            against data.schema.yaml, renders it, measures the payload against each configured provider's limit \
            and runs each routed provider's own request builder on it for every platform routing sends the \
            provider, so that what `norq send` would refuse is reported here first, at the template's line. The \
            providers' credentials are loaded (nothing is sent or connected): one that cannot be read is an error.

            One finding a line on stdout, `path:line:col: severity[code]: message`, then a summary. Exit 1 when \
            there is an error, or with --strict a warning. Without a config file the built-in provider types' \
            rules are used and no provider's request builder runs.

            Examples:
              norq lint
              norq lint order-shipped --strict
              norq lint --config examples/quickstart/norq.yaml --json

            \(ExitCodes.help)
            """
    )

    @Argument(help: "Template ids to lint (default: all).")
    var ids: [String] = []

    @OptionGroup var configOptions: ConfigOptions

    @Flag(name: .long, help: "Print one JSON document (findings, counts) on stdout.")
    var json = false

    @Flag(name: .long, help: "Fail (exit 1) on warnings too.")
    var strict = false

    @Option(name: .long, help: ArgumentHelp("Send time in UNIX epoch seconds for relative expirations (default: now).", valueName: "EPOCH"))
    var sendTime: Int64?

    func run() async throws {
        let configuration: NorqConfiguration?
        do {
            configuration = try configOptions.loadConfigurationIfPresent()
        } catch {
            if json { Console.out(JSONValue.object(["error": Console.json(error)]).prettyPrinted() + "\n") }
            throw Console.fail(error)
        }
        let directory = configOptions.templatesDirectory(configuration)
        let report = await TemplateCheck.lint(directory: directory, required: true,
                                              idStyle: ConfigOptions.idStyle(configuration),
                                              configuration: configuration, ids: ids, sendTime: sendTime)
        let passed = report.passes(strict: strict)
        if json {
            let document: JSONValue = [
                "passed": .bool(passed),
                "errors": .int(Int64(report.errorCount)),
                "warnings": .int(Int64(report.warningCount)),
                "strict": .bool(strict),
                "findings": .array(report.findings.map(\.json)),
                "templates": .array(report.templates.map { result in
                    [
                        "template": .string(result.template),
                        "file": result.file.map(JSONValue.string) ?? .null,
                        "samples": .array(result.samples.map(JSONValue.string)),
                        "push": .bool(result.otherChannels == nil),
                        "errors": .int(Int64(result.errors.count)),
                        "warnings": .int(Int64(result.warnings.count)),
                    ]
                }),
            ]
            Console.out(document.prettyPrinted() + "\n")
        } else {
            Console.out(Self.text(report, strict: strict, style: .stdout))
        }
        if !passed { throw ExitCode(1) }
    }

    /// One finding a line, then `N templates: E errors, W warnings`.
    static func text(_ report: LintReport, strict: Bool, style: Style) -> String {
        var out = ""
        for finding in report.findings {
            var line = ""
            if let location = finding.location { line += style.bold("\(location): ") }
            let label = "\(finding.severity.rawValue)[\(finding.code.rawValue)]"
            line += (finding.severity == .error ? style.red(label) : style.yellow(label)) + ": " + finding.message
            if let hint = finding.hint { line += " (\(hint))" }
            out += line + "\n"
        }
        let count = report.templates.count { $0.otherChannels == nil }
        func plural(_ n: Int, _ word: String) -> String { "\(n) \(word)\(n == 1 ? "" : "s")" }
        out += "\(plural(count, "template")): \(plural(report.errorCount, "error")), \(plural(report.warningCount, "warning"))"
        if strict, report.warningCount > 0 { out += " (--strict: warnings fail)" }
        out += "\n"
        return out
    }
}
