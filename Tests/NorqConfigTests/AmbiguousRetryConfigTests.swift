import NorqConfig
import NorqCore
import Testing

@Suite("retry.ambiguous configuration")
struct AmbiguousRetryConfigTests {
    func load(_ retry: String) throws -> RetryPolicy {
        let configuration = try loader().load(yaml: "providers:\n  fake:\n    config: {apiKey: k}\n    retry: \(retry)\n",
                                              file: "norq.yaml", baseDirectory: ".")
        return configuration.providers[0].retry
    }

    @Test("collapsible is the default; never, collapsible and always parse")
    func values() throws {
        #expect(RetryPolicy.default.ambiguous == .collapsible)
        #expect(try load("{retries: 1}").ambiguous == .collapsible)
        #expect(try load("{ambiguous: never}").ambiguous == .never)
        #expect(try load("{ambiguous: collapsible}").ambiguous == .collapsible)
        #expect(try load("{ambiguous: always, retries: 4}") == RetryPolicy(retries: 4, ambiguous: .always))
    }

    @Test("a bad value is config/invalid-ambiguous-retry with its line", arguments: ["sometimes", "Always", "[never]", "1", "{a: b}"])
    func badValue(value: String) {
        let thrown = error { _ = try load("\n      ambiguous: \(value)") }
        #expect(thrown?.code == .configInvalidAmbiguousRetry)
        #expect(thrown?.code.rawValue == "config/invalid-ambiguous-retry")
        #expect(thrown?.location?.line == 5)
        #expect(thrown?.message.contains("never, collapsible, always") == true)
    }
}
