import Foundation
import NorqCore
import Testing

/// `POST /v1/tokens/invalid` with the registry per (token, provider instance, environment) (issue 29).
@Suite(.serialized) struct ServeTokenEnvironmentTests {
    @Test func queriesAndRegistrationsByEnvironment() async throws {
        let contract = try OpenAPIContract.load()
        let bad = ServeEndToEndTests.token(4242)
        // The served config's APNs provider is sandbox by default: the emulator answers BadDeviceToken there.
        let served = try await ServedNorq.start(faults: .init(badTokens: [bad]))
        defer { served.cleanupNow() }
        func post(_ body: JSONValue, _ status: Int, sourceLocation: Testing.SourceLocation = #_sourceLocation)
            async throws -> ServedNorq.Answer {
            let answer = try await served.request("POST", "/v1/tokens/invalid", json: body)
            #expect(answer.status == status, "\(answer.text)", sourceLocation: sourceLocation)
            contract.check("POST", "/v1/tokens/invalid", answer, sourceLocation: sourceLocation)
            return answer
        }
        func invalid(_ environment: String?) async throws -> JSONValue? {
            let body: JSONValue = environment.map { ["tokens": [.string(bad)], "environment": .string($0)] }
                ?? ["tokens": [.string(bad)]]
            return try await post(body, 200).json?["tokens"]?.arrayValue?.first?["invalid"]
        }
        let sent = try await served.request("POST", "/v1/sends?wait=true", json: ServeEndToEndTests.sendBody([bad]))
        #expect(sent.status == 200, "\(sent.text)")
        let listed = try await post([:], 200)
        let entry = listed.json?["tokens"]?.arrayValue?.first
        #expect(entry?["environment"]?.stringValue == "sandbox" && entry?["reason"]?.stringValue == "BadDeviceToken",
                "\(listed.text)")
        #expect(!listed.text.contains(bad), "tokens are shortened in answers")
        #expect(try await invalid(nil) == .bool(true))
        #expect(try await invalid("sandbox") == .bool(true))
        #expect(try await invalid("production") == .bool(false))
        _ = try await post(["register": [.string(bad)], "environment": "staging"], 400)
        _ = try await post(["register": [.string(bad)], "environment": "production"], 200)
        #expect(try await invalid("sandbox") == .bool(true), "registered in production only")
        _ = try await post(["register": [.string(bad)], "environment": "sandbox", "provider": "apns"], 200)
        #expect(try await invalid("sandbox") == .bool(false))
    }
}
