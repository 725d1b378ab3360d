import Foundation
import Norq
import NorqAPNs
import NorqConfig
import NorqCore
import NorqTemplates
import Testing

/// The library API `norq lint` and the preview page share (issue 32): structured findings from each routed
/// provider's own `prepare`, for a template's samples or for pasted data.
@Suite struct TemplateLinterTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// A templates folder with template `bg` (a background push at `priority`), and providers of a configuration
    /// with one token-auth APNs instance.
    func linter(priority: Int) throws -> (TemplateLinter, LintProviders) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("norq-lint-\(UUID().uuidString)")
        let folder = dir.appendingPathComponent("bg")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data("---\nios:\n  content-available: true\nheaders:\n  apns-push-type: background\n  apns-priority: \(priority)\n---\n".utf8)
            .write(to: folder.appendingPathComponent("push.md"))
        try Data("First: {}\nSecond: {}\n".utf8).write(to: folder.appendingPathComponent("data.samples.yaml"))
        let registry = ProviderTypeRegistry([APNsProviderType()])
        let configuration = try ConfigurationLoader(registry: registry).load(yaml: """
            providers:
              apns:
                config:
                  keyId: DEMO000000
                  teamId: TEAM123ABC
                  keyPath: \(Self.root.path)/examples/keys/AuthKey_DEMO000000.p8
                  bundleId: com.example.MyApp
            """, file: "norq.yaml", baseDirectory: dir.path)
        let providers = LintProviders.make(configuration: configuration, registry: registry)
        let library = try TemplateLibrary(directory: dir.path, rules: TemplateRules(providerTypes: registry.registeredTypes))
        return (TemplateLinter(library: library, providers: providers), providers)
    }

    @Test func aProvidersRefusalIsOneFindingAtTheKeysLine() async throws {
        let (linter, providers) = try linter(priority: 10)
        #expect(providers.failures.isEmpty)
        #expect(providers.entries.map(\.name) == ["apns"] && providers.entries.first?.platforms == [.ios])
        let report = linter.lint()
        await providers.shutdown()
        #expect(report.errorCount == 1 && report.warningCount == 0, "\(report.findings)")
        let finding = try #require(report.findings.first)
        #expect(finding.code == .apnsBadPriority && finding.severity == .error)
        #expect(finding.file?.hasSuffix("bg/push.md") == true && finding.line == 6 && finding.column == 3, "\(finding)")
        #expect(finding.template == "bg" && finding.provider == "apns" && finding.platform == .ios)
        #expect(finding.sample == "First")
        #expect(report.templates.first?.samples == ["First", "Second"])
        #expect(!report.passes(strict: false))
    }

    @Test func pastedDataIsLintedWithoutTheSamples() async throws {
        let (linter, providers) = try linter(priority: 5)
        let compiled = try linter.library.template(named: "bg")
        let result = linter.lint(compiled: compiled, data: ["anything": 1], dataName: "pasted")
        await providers.shutdown()
        #expect(result.samples == ["pasted"])
        #expect(result.findings.isEmpty, "\(result.findings)")
    }
}
