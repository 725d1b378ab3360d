import NorqAPNs
import NorqCore
import Testing

/// `PushProvider.environment(for:options:)` (the token registry's key, issue 29) names the environment `prepare`
/// sends to: the token's own, else the options', else the configured one.
@Suite struct APNsEnvironmentOfTargetTests {
    @Test(arguments: [false, true])
    func environmentOfATargetIsTheOnePrepareSendsTo(production: Bool) throws {
        let provider = try Fixtures.provider(Fixtures.tokenConfiguration(production: production))
        let content = PushContent(title: "x")
        var seen: Set<PushEnvironment> = []
        for tokenEnvironment in [nil, PushEnvironment.sandbox, .production] {
            for optionsEnvironment in [nil, PushEnvironment.sandbox, .production] {
                let token = Fixtures.iosToken(environment: tokenEnvironment)
                let options = SendOptions(environment: optionsEnvironment)
                let request = try provider.prepare(content, for: token, options: options)
                let environment = provider.environment(for: .token(token), options: options)
                #expect(environment == request.environment, "token \(String(describing: tokenEnvironment)), options \(String(describing: optionsEnvironment))")
                #expect(environment == (tokenEnvironment ?? optionsEnvironment ?? (production ? .production : .sandbox)))
                if let environment { seen.insert(environment) }
            }
        }
        #expect(seen == [.sandbox, .production])
    }
}
