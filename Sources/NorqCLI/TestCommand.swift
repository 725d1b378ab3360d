import ArgumentParser
import Foundation
import NorqConfig
import NorqCore
import NorqTemplates

/// `norq test [template]`: runs the templates' tests.yaml.
struct TestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Run the templates' tests.yaml and report passed and failed cases.",
        discussion: """
            Each case renders a sample (or its own data) and checks assertions on subject/title, body, image, \
            action_url, push_type, payload_bytes and diagnostics. A template that does not compile counts as a \
            failure. Exits 1 when any case fails. payload_bytes is measured by the configured providers (every \
            built-in one without a configuration), each for the platforms routed to it; a payload over a provider's \
            limit fails the case, naming the provider and the bytes over (docs/templates.md).

            Examples:
              norq test                       # every template
              norq test order-shipped -c examples/quickstart/norq.yaml
              norq test --templates ./templates --json

            \(ExitCodes.help)
            """
    )

    @Argument(help: "Only this template (default: all).")
    var template: String?

    @OptionGroup var configOptions: ConfigOptions

    @Flag(name: .long, help: "Print one JSON document on stdout.")
    var json = false

    func run() async throws {
        let failures: Int
        do {
            failures = try runTests()
        } catch {
            if json { Console.out(JSONValue.object(["error": Console.json(error)]).prettyPrinted() + "\n") }
            throw Console.fail(error)
        }
        if failures > 0 { throw ExitCode(1) }
    }

    /// `{"provider":"fcm","platform":"android","what":"message","bytes":4210,"limit":4096,"over":114}`.
    static func json(_ size: PayloadSize) -> JSONValue {
        ["provider": .string(size.provider), "platform": .optional(size.platform?.rawValue), "what": .string(size.what),
         "bytes": .int(Int64(size.bytes)), "limit": size.limit.map { .int(Int64($0)) } ?? .null,
         "over": .int(Int64(size.excess))]
    }

    func runTests() throws(NorqError) -> Int {
        let configuration = try configOptions.loadConfigurationIfPresent()
        let library = try configOptions.library(configuration)
        let names: [String]
        if let template {
            _ = try library.compile(template)  // unknown template: template/not-found
            names = [template]
        } else {
            names = library.templateNames
        }
        let style = Style.stdout
        var passed = 0, failed = 0
        var out = ""
        var documents: [JSONValue] = []
        for name in names {
            let compiled: CompiledTemplate
            do {
                compiled = try library.compile(name)
            } catch {
                failed += 1
                Console.report(error)
                out += style.red("FAIL") + " \(name): does not compile\n"
                documents.append(["template": .string(name), "compiled": false, "error": Console.json(error), "cases": []])
                continue
            }
            let report = compiled.runTests()
            if report.cases.isEmpty {
                out += style.dim("  -- \(name): no tests") + "\n"
            }
            var cases: [JSONValue] = []
            for testCase in report.cases {
                let sample = testCase.sample.map { " [\($0)]" } ?? ""
                if testCase.passed {
                    passed += 1
                    out += style.green("PASS") + " \(name) › \(testCase.name)\(sample)\n"
                } else {
                    failed += 1
                    out += style.red("FAIL") + " \(name) › \(testCase.name)\(sample)\n"
                    for message in testCase.messages { out += "       \(message)\n" }
                }
                let messages = JSONValue.array(testCase.messages.map(JSONValue.string))
                if testCase.payloadSizes.isEmpty {
                    cases.append(["name": .string(testCase.name), "sample": .optional(testCase.sample),
                                  "passed": .bool(testCase.passed), "messages": messages])
                } else {
                    cases.append(["name": .string(testCase.name), "sample": .optional(testCase.sample),
                                  "passed": .bool(testCase.passed), "messages": messages,
                                  "payloadSizes": .array(testCase.payloadSizes.map(Self.json))])
                }
            }
            documents.append(["template": .string(name), "compiled": true, "cases": .array(cases)])
        }
        if json {
            Console.out(JSONValue.object([
                "passed": .int(Int64(passed)), "failed": .int(Int64(failed)), "templates": .array(documents),
            ]).prettyPrinted() + "\n")
        } else {
            let summary = "\(passed) passed, \(failed) failed (\(names.count) templates)"
            Console.out(out + (failed == 0 ? style.green(summary) : style.red(summary)) + "\n")
        }
        return failed
    }
}
