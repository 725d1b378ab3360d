import Norq
import NorqCore
import NorqPreview
import Testing

/// The page's findings are `norq lint`'s, provider pass included (issue 32: "the preview's findings are the template
/// checks without the provider pass"), with the providers of the project's own dry-run router.
@Suite struct PreviewLintTests {
    @Test func aProvidersRefusalOfASampleIsAFindingOnThePage() async throws {
        let fixture = try PreviewFixture()
        defer { fixture.remove() }
        // A background push at priority 10: APNs' prepare refuses it (`apns/bad-priority`); the template checks alone
        // do not.
        try fixture.write("bg/push.md", """
            ---
            ios:
              content-available: true
            headers:
              apns-push-type: background
              apns-priority: 10
            ---

            """)
        try fixture.write("bg/data.samples.yaml", "Default: {}\n")
        let project = try fixture.loader(nil)
        let router = try #require(project.router)
        let findings = TemplateLintPreviewLinter().findings(library: project.library,
                                                            configuration: project.configuration, router: router)
        let bg = findings["bg"] ?? []
        #expect(bg.contains { $0.code == "apns/bad-priority" && $0.severity == .error && $0.line == 6 }, "\(bg)")
        // The welcome template passes every provider.
        #expect((findings["welcome"] ?? []).allSatisfy { $0.severity != .error }, "\(findings["welcome"] ?? [])")
        // Without a router: the template checks only.
        let templateOnly = TemplateLintPreviewLinter().findings(library: project.library,
                                                                configuration: project.configuration, router: nil)
        #expect(!(templateOnly["bg"] ?? []).contains { $0.code == "apns/bad-priority" })
        await router.shutdown(gracePeriod: .seconds(1))
    }
}
