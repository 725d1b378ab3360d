import ArgumentParser
import Foundation
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
            routing table; then compiles every template of the templates directory and renders it with each of \
            its samples. Errors go to stderr as `path:line:col: error[code]: message`.

            Examples:
              norq validate
              norq validate --config examples/quickstart/norq.yaml
              norq validate --config norq.yaml --json       # for CI

            \(ExitCodes.help)
            """
    )

    @Option(name: [.customShort("c"), .long], help: "Config file (default: norq.yaml or norq.config.yaml found walking up from the current directory).")
    var config: String?

    @Option(name: .long, help: "Templates directory (default: `templates:` of the config, else ./templates).")
    var templates: String?

    @Flag(name: .long, help: "Print the result as JSON on stdout.")
    var json = false

    /// The provider types the CLI knows.
    static var registry: ProviderTypeRegistry { ProviderTypeRegistry([APNsProviderType(), WebPushProviderType()]) }

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
        let checks = TemplateCheck.run(directory: directory,
                                       required: templates != nil || loaded.templatesDirectory != nil)
        for check in checks { for error in check.errors { Console.report(error) } }
        let valid = checks.allSatisfy { $0.errors.isEmpty }
        if json {
            guard case .object(var object) = Self.json(loaded) else { return }
            object["valid"] = .bool(valid)
            object["templateChecks"] = .array(checks.map(\.json))
            print(JSONValue.object(object).prettyPrinted())
        } else {
            var text = Self.text(loaded)
            if text.hasSuffix("valid\n") { text.removeLast("valid\n".count) }
            text += TemplateCheck.text(checks, directory: directory, style: .stdout)
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
        return [
            "valid": true,
            "file": configuration.file.map(JSONValue.string) ?? .null,
            "templates": configuration.templatesDirectory.map(JSONValue.string) ?? .null,
            "providers": .array(providers),
            "routing": .array(routes),
        ]
    }

    static func text(_ configuration: NorqConfiguration) -> String {
        var out = "config: \(configuration.file ?? "(none; environment variables only)")\n"
        if let templates = configuration.templatesDirectory { out += "templates: \(templates)\n" }
        out += "providers:\n"
        if configuration.providers.isEmpty { out += "  (none)\n" }
        for provider in configuration.providers {
            out += "  \(provider.name) (type \(provider.typeName), from \(provider.origin))\n"
            for line in provider.configuration.summary { out += "    \(line.key): \(line.value)\n" }
            let statuses = provider.retry.retryOn.sorted().map(String.init).joined(separator: ",")
            out += "    retry: on [\(statuses)], retries \(provider.retry.retries), backoff \(format(provider.retry.backoff)), max \(format(provider.retry.maxBackoff))\n"
            out += "    maxInFlight: \(provider.maxInFlight)\n"
        }
        out += "routing:\n"
        let routes = routingLines(configuration.routing)
        if routes.isEmpty { out += "  (none; each token goes to the only provider for its platform)\n" }
        for route in routes { out += "  \(route.key): \(route.provider)\n" }
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
