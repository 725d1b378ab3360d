import ArgumentParser
import Foundation
import Norq
import NorqBuiltIns
import NorqConfig
import NorqCore
import NorqTemplates

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Colours (ANSI) only when the stream is a terminal and `NO_COLOR` is unset.
struct Style: Sendable {
    let enabled: Bool

    static let stdout = Style(enabled: isatty(1) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil)
    static let stderr = Style(enabled: isatty(2) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil)

    private func paint(_ text: String, _ code: String) -> String {
        enabled ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text
    }
    func bold(_ text: String) -> String { paint(text, "1") }
    func dim(_ text: String) -> String { paint(text, "2") }
    func red(_ text: String) -> String { paint(text, "31") }
    func green(_ text: String) -> String { paint(text, "32") }
    func yellow(_ text: String) -> String { paint(text, "33") }
    func cyan(_ text: String) -> String { paint(text, "36") }
}

/// Output helpers: results on stdout, errors on stderr.
enum Console {
    static func out(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    static func err(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }

    /// Prints `path:line:col: error[code]: message` on stderr.
    static func report(_ error: NorqError) {
        let style = Style.stderr
        var text = ""
        if let location = error.location { text += style.bold("\(location): ") }
        text += style.red("error[\(error.code.rawValue)]") + ": " + error.message
        if let hint = error.hint { text += " (\(hint))" }
        err(text + "\n")
    }

    /// Prints `path:line:col: warning[code]: message` on stderr.
    static func warn(_ warning: NorqError) {
        let style = Style.stderr
        var text = ""
        if let location = warning.location { text += style.bold("\(location): ") }
        text += style.yellow("warning[\(warning.code.rawValue)]") + ": " + warning.message
        if let hint = warning.hint { text += " (\(hint))" }
        err(text + "\n")
    }

    /// Prints a lint finding as `path:line:col: severity[code]: message` on stderr.
    static func print(_ finding: LintFinding) {
        finding.severity == .error ? report(finding.error) : warn(finding.error)
    }

    /// Reports the error and returns exit code 1.
    static func fail(_ error: NorqError) -> ExitCode {
        report(error)
        return ExitCode(1)
    }

    /// A `NorqError` as JSON (`code`, `message`, `hint`, `location`).
    static func json(_ error: NorqError) -> JSONValue {
        ValidateCommand.json(error)
    }
}

/// The exit codes every command documents.
enum ExitCodes {
    static let help = """
        Exit codes:
          0   success (send: every token delivered)
          1   error: bad input, config or template error, failed test
          2   send/render --to: some tokens not delivered (rejected/failed/skipped)
          64  usage error (unknown option, missing argument)
        """
}

/// `--config`, shared by the commands that read norq.yaml.
struct ConfigOptions: ParsableArguments {
    @Option(name: [.customShort("c"), .long], help: ArgumentHelp("Config file, or the folder holding it (default: norq.yaml or norq.config.yaml found walking up from the current directory, else up to 5 levels below it).", valueName: "PATH"))
    var config: String?

    @Option(name: .long, help: "Templates directory (default: `templates:` or `notifications:` of the config, else ./templates).")
    var templates: String?

    /// The provider types the CLI knows: `ProviderTypeRegistry.builtIn` (APNs, FCM, Web Push and Norq's `console`),
    /// the one registry every command uses.
    static var registry: ProviderTypeRegistry { registry(consoleToStandardError: false) }

    /// The registry, with the `console` provider printing on stderr when stdout must stay one JSON document.
    /// What the provider types allow templates to say: the push types of every built-in type, and the payload
    /// sizes (`payload_bytes`, `norq validate`) of the providers `configuration` declares, for the platforms its
    /// routing sends them (`NorqConfiguration.payloadSizers`); of every built-in type when it declares none.
    static func templateRules(_ configuration: NorqConfiguration?) -> TemplateRules {
        let registry = registry(consoleToStandardError: true)
        var rules = TemplateRules(providerTypes: registry.registeredTypes)
        if let configuration, !configuration.providers.isEmpty {
            rules.payloadSizers = configuration.payloadSizers(registry: registry)
        }
        return rules
    }

    static func registry(consoleToStandardError: Bool) -> ProviderTypeRegistry {
        let output: @Sendable (String) -> Void
        if consoleToStandardError {
            output = { text in Console.err(text) }
        } else {
            output = { text in Console.out(text) }
        }
        return ProviderTypeRegistry.builtIn(consoleOutput: output)
    }

    /// Loads the configuration (explicit path or discovery).
    func loadConfiguration() throws(NorqError) -> NorqConfiguration {
        let loader = ConfigurationLoader(registry: Self.registry)
        if let config { return try loader.load(path: config) }
        return try loader.discover(from: FileManager.default.currentDirectoryPath)
    }

    /// The configuration when one is found; nil when there is none at all (render without `--to` needs none).
    func loadConfigurationIfPresent() throws(NorqError) -> NorqConfiguration? {
        if config != nil { return try loadConfiguration() }
        guard ConfigurationLoader.find(from: FileManager.default.currentDirectoryPath) != nil else { return nil }
        return try loadConfiguration()
    }

    /// The templates directory: `--templates`, else the config's `templates:` / `notifications:`, else
    /// `templates` beside the config file (or in the current directory).
    func templatesDirectory(_ configuration: NorqConfiguration?) -> String {
        if let templates { return templates }
        if let directory = configuration?.templatesDirectory { return directory }
        if let file = configuration?.file {
            return (file as NSString).deletingLastPathComponent.isEmpty
                ? "templates" : (file as NSString).deletingLastPathComponent + "/templates"
        }
        return "templates"
    }

    /// Norq ids (`transactional/orders/order-shipped`) for a `notifications:` project, else flat ones.
    static func idStyle(_ configuration: NorqConfiguration?) -> TemplateIDStyle {
        configuration?.templatesKey == .notifications ? .norq : .flat
    }

    /// The template library of the configuration (see ``templatesDirectory(_:)`` and ``idStyle(_:)``).
    func library(_ configuration: NorqConfiguration?) throws(NorqError) -> TemplateLibrary {
        try TemplateLibrary(directory: templatesDirectory(configuration), idStyle: Self.idStyle(configuration),
                            rules: Self.templateRules(configuration))
    }
}

/// `--data`, `--sample`: the data a template is rendered with.
struct DataOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("Template data: a JSON file path or inline JSON.", valueName: "FILE|JSON"))
    var data: String?

    @Option(name: .long, help: "A named sample from the template's data.samples.yaml (default: the first sample when --data is not given).")
    var sample: String?

    /// The data to render with: the sample (or the default sample when `--data` is absent) with `--data`
    /// merged on top, checked against the template's `data.schema.yaml` (`template/data-schema`).
    func resolve(for template: CompiledTemplate) throws(NorqError) -> JSONValue {
        let data = try merged(for: template)
        let errors = template.schemaErrors(data)
        if var first = errors.first {
            if errors.count > 1 { first.message += " (and \(errors.count - 1) more)" }
            first.message = (self.data != nil ? "--data: " : "sample: ") + first.message
            throw first
        }
        return data
    }

    func merged(for template: CompiledTemplate) throws(NorqError) -> JSONValue {
        var base: JSONValue?
        if let sample {
            guard let found = Self.findSample(sample, in: template) else {
                let names = template.samples.keys.map { "\"\($0)\"" }.joined(separator: ", ")
                throw NorqError(.cliUnknownSample, "template \"\(template.name)\" has no sample \"\(sample)\"",
                                hint: names.isEmpty ? "it has no data.samples.yaml" : "samples: " + names)
            }
            base = found
        } else if data == nil {
            base = template.defaultSample
        }
        guard let data else { return base ?? .object([:]) }
        let given = try JSONInput.load(data, option: "--data")
        guard let base else { return given }
        return Self.merge(base, given)
    }

    /// Exact name, then case-insensitive, then with spaces/underscores as dashes.
    static func findSample(_ name: String, in template: CompiledTemplate) -> JSONValue? {
        if let exact = template.samples[name] { return exact }
        func slug(_ s: String) -> String {
            String(s.lowercased().map { $0 == " " || $0 == "_" ? "-" : $0 })
        }
        let wanted = slug(name)
        for (key, value) in template.samples where slug(key) == wanted { return value }
        return nil
    }

    /// Deep merge: objects merge key by key, anything else in `top` wins.
    static func merge(_ base: JSONValue, _ top: JSONValue) -> JSONValue {
        guard case .object(var result) = base, case .object(let overlay) = top else { return top }
        for (key, value) in overlay {
            result[key] = result[key].map { merge($0, value) } ?? value
        }
        return .object(result)
    }
}

/// `--data` and `--to` values: a path to a JSON file, or inline JSON.
enum JSONInput {
    static func load(_ argument: String, option: String) throws(NorqError) -> JSONValue {
        let trimmed = argument.drop { $0 == " " || $0 == "\n" || $0 == "\t" }
        if trimmed.hasPrefix("{") || trimmed.hasPrefix("[") {
            return try JSONValue(parsing: argument, file: option)
        }
        guard let contents = FileManager.default.contents(atPath: argument) else {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: argument, isDirectory: &isDirectory), isDirectory.boolValue {
                throw NorqError(.cliFileNotFound, "\(option): '\(argument)' is a directory, not a JSON file")
            }
            throw NorqError(.cliFileNotFound, "\(option): no such file '\(argument)'",
                            hint: "give a path to a JSON file or inline JSON starting with { or [")
        }
        return try JSONValue(parsing: Array(contents), file: argument)
    }

    /// Recipients from `--to`: a recipient, a list of them, `{"recipients": [...]}`, or a bare list of
    /// token objects / hex strings (iOS tokens).
    /// An error about a recipient names the file (or `--to`) and the JSON path: `recipients.json: [3].push.tokens[1]`.
    static func recipients(_ argument: String) throws(NorqError) -> [Recipient] {
        let json = try load(argument, option: "--to")
        do throws(NorqError) {
            return try recipients(json)
        } catch {
            guard error.location == nil else { throw error }
            var error = error
            let inline = argument.drop { $0 == " " || $0 == "\n" || $0 == "\t" }
            error.location = SourceLocation(file: inline.hasPrefix("{") || inline.hasPrefix("[") ? "--to" : argument)
            throw error
        }
    }

    static func recipients(_ json: JSONValue) throws(NorqError) -> [Recipient] {
        if case .array(let items) = json, !items.isEmpty,
           items.allSatisfy({ item in
               if case .string = item { return true }
               return item["token"] != nil
           }) {
            var tokens: [PushToken] = []
            for (index, item) in items.enumerated() {
                if case .string(let token) = item {
                    tokens.append(PushToken(token: token, platform: .ios))
                } else {
                    do throws(NorqError) {
                        tokens.append(try PushToken(json: item))
                    } catch {
                        throw error.at(path: "[\(index)]")
                    }
                }
            }
            return [Recipient(tokens: tokens)]
        }
        let recipients = try Recipient.list(from: json)
        guard recipients.contains(where: { !$0.tokens.isEmpty || !$0.channels.isEmpty }) else {
            throw NorqError(.cliMissingRecipients, "--to: the recipient list is empty")
        }
        return recipients
    }
}

extension JSONValue {
    /// A string or nil as JSON.
    static func optional(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
}

/// Byte counts as `1,234`.
func grouped(_ value: Int) -> String {
    let digits = String(value)
    var out = ""
    for (index, character) in digits.enumerated() {
        if index > 0, (digits.count - index) % 3 == 0 { out.append(",") }
        out.append(character)
    }
    return out
}
