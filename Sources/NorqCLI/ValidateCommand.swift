import ArgumentParser
import Foundation
import Norq
import NorqAPNs
import NorqWebPush
import NorqConfig
import NorqCore
import NorqTemplates

/// `norq validate [--config PATH] [--json]`: loads and validates the configuration, prints each provider
/// (type, origin, safe summary) and the routing table. Exit 0 when valid; 1 with
/// `path:line:col: error[code]: message` on stderr. Secrets are never printed.
struct ValidateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Validate norq.yaml (or norq.config.yaml, or NORQ_* env vars) and every template.",
        discussion: """
            Loads the configuration and prints each provider (type, origin, a summary without secrets) and the \
            routing table; then compiles every template of the templates directory, checks each sample against \
            the notification's data.schema.yaml, and renders it with each of its samples. Errors go to stderr as \
            `path:line:col: error[code]: message`, warnings (template/raw-expression, template/nullable-access, \
            push/implausible-expiration) as `... warning[code]: ...`. Warnings do not fail the run unless \
            --strict is given. A Norq project's providers and routes of other channels (email: resend, \
            sms: twilio, ...) and its notifications without push.md are listed as not served by this router.

            Examples:
              norq validate
              norq validate --config examples/quickstart/norq.yaml
              norq validate --config ./my-norq-project        # the folder holding norq.config.yaml
              norq validate --config norq.yaml --json --strict    # for CI

            \(ExitCodes.help)
            """
    )

    @Option(name: [.customShort("c"), .long], help: ArgumentHelp("Config file, or the folder holding it (default: norq.yaml or norq.config.yaml found walking up from the current directory, else up to 5 levels below it).", valueName: "PATH"))
    var config: String?

    @Option(name: .long, help: "Templates directory (default: `templates:` or `notifications:` of the config, else ./templates).")
    var templates: String?

    @Flag(name: .long, help: "Print the result as JSON on stdout.")
    var json = false

    @Flag(name: .long, help: "Fail (exit 1) on warnings too.")
    var strict = false

    /// The CLI's one registry (`ConfigOptions.registry`).
    static var registry: ProviderTypeRegistry { ConfigOptions.registry }

    func run() async throws {
        let loader = ConfigurationLoader(registry: Self.registry)
        let loaded: NorqConfiguration
        do {
            if let config {
                loaded = try loader.load(path: config)
            } else {
                loaded = try loader.discover(from: FileManager.default.currentDirectoryPath)
            }
        } catch {
            FileHandle.standardError.write(Data((error.description + "\n").utf8))
            if json {
                let report: JSONValue = ["valid": false, "errors": [Self.json(error)]]
                print(report.prettyPrinted())
            }
            throw ExitCode(1)
        }
        let directory = ConfigOptions(config: config, templates: templates).templatesDirectory(loaded)
        let report = await TemplateCheck.lint(directory: directory,
                                              required: templates != nil || loaded.templatesDirectory != nil,
                                              idStyle: ConfigOptions.idStyle(loaded), configuration: loaded)
        for finding in report.findings { Console.print(finding) }
        let checks = report.templates.map(TemplateCheck.init)
        let warnings = report.warningCount
        let valid = report.passes(strict: strict)
        if json {
            guard case .object(var object) = Self.json(loaded) else { return }
            object["valid"] = .bool(valid)
            object["warnings"] = .int(Int64(warnings))
            object["templateChecks"] = .array(checks.map(\.json))
            object["providerChecks"] = .array(report.configuration.map(\.json))
            print(JSONValue.object(object).prettyPrinted())
        } else {
            var text = Self.text(loaded)
            if text.hasSuffix("valid\n") { text.removeLast("valid\n".count) }
            for failure in report.configuration {
                text += "provider \(failure.provider ?? "?"): " + Style.stdout.red("cannot be made (\(failure.code))") + "\n"
            }
            text += TemplateCheck.text(checks, directory: directory, style: .stdout)
            if warnings > 0 {
                text += "\(warnings) warning\(warnings == 1 ? "" : "s")\(strict ? " (--strict: warnings fail)" : "")\n"
            }
            text += valid ? "valid\n" : "invalid\n"
            print(text, terminator: "")
        }
        if !valid { throw ExitCode(1) }
    }

    static func json(_ error: NorqError) -> JSONValue {
        var location: JSONValue = .null
        if let at = error.location {
            location = ["file": at.file.map(JSONValue.string) ?? .null, "line": .int(Int64(at.line)),
                        "column": .int(Int64(at.column))]
        }
        return ["code": .string(error.code.rawValue), "message": .string(error.message),
                "hint": error.hint.map(JSONValue.string) ?? .null, "location": location]
    }

    static func json(_ configuration: NorqConfiguration) -> JSONValue {
        let providers: [JSONValue] = configuration.providers.map { provider in
            [
                "name": .string(provider.name),
                "type": .string(provider.typeName),
                "origin": .string(provider.origin.description),
                "summary": .array(provider.configuration.summary.map { ["key": .string($0.key), "value": .string($0.value)] }),
                "retry": [
                    "on": .array(provider.retry.retryOn.sorted().map { .int(Int64($0)) }),
                    "retries": .int(Int64(provider.retry.retries)),
                    "backoff": .string(format(provider.retry.backoff)),
                    "max_backoff": .string(format(provider.retry.maxBackoff)),
                ],
                "maxInFlight": .int(Int64(provider.maxInFlight)),
            ]
        }
        let routes: [JSONValue] = routingLines(configuration.routing).map { ["key": .string($0.key), "provider": .string($0.provider)] }
        let unserved: [JSONValue] = configuration.unservedProviders.map {
            ["name": .string($0.name), "type": .string($0.typeName), "channels": .array($0.channels.map(JSONValue.string)),
             "served": false]
        }
        let otherRoutes: [JSONValue] = configuration.routing.otherChannels.sorted(by: { $0.key < $1.key }).map {
            ["channel": .string($0.key), "provider": .string($0.value), "served": false]
        }
        return [
            "valid": true,
            "file": configuration.file.map(JSONValue.string) ?? .null,
            "templates": configuration.templatesDirectory.map(JSONValue.string) ?? .null,
            "templatesKey": configuration.templatesKey.map { .string($0.rawValue) } ?? .null,
            "providers": .array(providers),
            "notServedProviders": .array(unserved),
            "routing": .array(routes),
            "otherChannelRouting": .array(otherRoutes),
            "ignoredKeys": .array(configuration.ignoredKeys.map(JSONValue.string)),
        ]
    }

    static func text(_ configuration: NorqConfiguration) -> String {
        var out = "config: \(configuration.file ?? "(none; environment variables only)")\n"
        if let templates = configuration.templatesDirectory {
            out += "\(configuration.templatesKey?.rawValue ?? "templates"): \(templates)\n"
        }
        out += "providers:\n"
        if configuration.providers.isEmpty { out += "  (none)\n" }
        for provider in configuration.providers {
            out += "  \(provider.name) (type \(provider.typeName), from \(provider.origin))\n"
            for line in provider.configuration.summary { out += "    \(line.key): \(line.value)\n" }
            let statuses = provider.retry.retryOn.sorted().map(String.init).joined(separator: ",")
            out += "    retry: on [\(statuses)], retries \(provider.retry.retries), backoff \(format(provider.retry.backoff)), max \(format(provider.retry.maxBackoff))\n"
            out += "    maxInFlight: \(provider.maxInFlight)\n"
        }
        for provider in configuration.unservedProviders {
            out += "  \(provider.name) (type \(provider.typeName), \(provider.channels.joined(separator: ", "))): not served by this router\n"
        }
        out += "routing:\n"
        let routes = routingLines(configuration.routing)
        if routes.isEmpty { out += "  (none; each token goes to the only provider for its platform)\n" }
        for route in routes { out += "  \(route.key): \(route.provider)\n" }
        for (channel, provider) in configuration.routing.otherChannels.sorted(by: { $0.key < $1.key }) {
            out += "  \(channel): \(provider) (not served by this router: it sends push only)\n"
        }
        if !configuration.ignoredKeys.isEmpty {
            out += "ignored (Norq settings for other channels): \(configuration.ignoredKeys.joined(separator: ", "))\n"
        }
        out += "valid\n"
        return out
    }

    static func routingLines(_ routing: RoutingTable) -> [(key: String, provider: String)] {
        var lines: [(key: String, provider: String)] = []
        if let fallback = routing.defaultProvider { lines.append(("push", fallback)) }
        for (platform, provider) in routing.byPlatform.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            lines.append(("push.\(platform.rawValue)", provider))
        }
        return lines
    }

    static func format(_ duration: Duration) -> String {
        let millis = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        if millis % 60_000 == 0 && millis >= 60_000 { return "\(millis / 60_000)m" }
        if millis % 1000 == 0 && millis >= 1000 { return "\(millis / 1000)s" }
        return "\(millis)ms"
    }
}
