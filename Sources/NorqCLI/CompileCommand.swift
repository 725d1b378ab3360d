import ArgumentParser
import Foundation
import Norq
import NorqConfig
import NorqCore
import NorqTemplates

/// `norq compile <id>`: Norq's compiled push output (`{title, body, image, action_url, platforms}`), the
/// provider-neutral JSON a template renders to before any provider builds its request.
struct CompileCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compile",
        abstract: "Print a template's compiled push output as Norq shapes it: {title, body, image, action_url, platforms}.",
        discussion: """
            Renders the template with a sample (the first by default) or --data and prints one JSON document: \
            title, body, image and action_url (null when absent), the custom data when there is any, and the \
            platforms the configuration routes push to (ios, android and web without a configuration). A \
            push.json template prints its payload as written. With --all-samples, a JSON array of \
            {"sample", "output"}, one per sample in file order. Nothing is sent; no provider is made. `norq render` shows the \
            provider-side view (headers, iOS fields, the exact request with --to).

            Examples:
              norq compile order-shipped
              norq compile order-shipped --sample "No first name"
              norq compile order-shipped --all-samples

            \(ExitCodes.help)
            """
    )

    @Argument(help: "Template id.")
    var template: String

    @OptionGroup var configOptions: ConfigOptions
    @OptionGroup var dataOptions: DataOptions

    @Flag(name: .long, help: "Compile with every sample of data.samples.yaml: an array of {sample, output}.")
    var allSamples = false

    func run() async throws {
        do {
            Console.out(try compile().prettyPrinted() + "\n")
        } catch {
            throw Console.fail(error)
        }
    }

    func compile() throws(NorqError) -> JSONValue {
        let configuration = try configOptions.loadConfigurationIfPresent()
        let library = try configOptions.library(configuration)
        let compiled = try library.template(named: template)
        let platforms = Self.platforms(configuration)
        guard allSamples else {
            return try Self.output(compiled, data: try dataOptions.resolve(for: compiled), platforms: platforms)
        }
        var outputs: [JSONValue] = []
        for (name, data) in compiled.samples {
            outputs.append(["sample": .string(name), "output": try Self.output(compiled, data: data, platforms: platforms)])
        }
        return .array(outputs)
    }

    /// Norq's shape for `compiled` rendered with `data`.
    static func output(_ compiled: CompiledTemplate, data: JSONValue, platforms: [Platform]) throws(NorqError) -> JSONValue {
        let content = try compiled.render(data: data)
        guard case .object(var object) = TemplateRules.neutralPayload(content), content.nativePayload == nil else {
            return TemplateRules.neutralPayload(content)
        }
        object["platforms"] = .array(platforms.map { .string($0.rawValue) })
        return .object(object)
    }

    /// The platforms routing sends push to (each platform some provider of the configuration serves and routing
    /// reaches); Norq's three without a configuration.
    static func platforms(_ configuration: NorqConfiguration?) -> [Platform] {
        guard let configuration, !configuration.providers.isEmpty else { return Platform.known }
        let registry = ConfigOptions.registry(consoleToStandardError: true)
        var served = Set<Platform>()
        for instance in configuration.providers {
            served.formUnion(registry.type(named: instance.typeName)?.platforms ?? [])
        }
        return Platform.known.filter { served.contains($0) }
    }
}
