import Foundation
import NorqCore
import NorqTesting
import Testing

/// `norq serve` with the APNs and FCM emulators: one send to an iOS and an Android token goes through both
/// providers, and an FCM `UNREGISTERED` answer lands in the token registry.
@Suite(.serialized) struct ServeFCMTests {
    static let androidToken = "fcm-android-token-" + String(repeating: "b", count: 120)
    static let goneToken = "fcm-android-gone-" + String(repeating: "c", count: 120)

    @Test func androidTokensAreDeliveredThroughTheFCMEmulator() async throws {
        var configuration = FCMEmulator.Configuration()
        let demo = ServedNorq.packageRoot.appendingPathComponent("examples/keys/fcm-service-account-DEMO.json")
        try configuration.trust(serviceAccountJSON: try String(contentsOf: demo, encoding: .utf8))
        configuration.faults = .init(unregisteredTokens: [Self.goneToken])
        let fcm = try FCMEmulator(configuration: configuration)
        try await fcm.start()
        let served = try await ServedNorq.start(fcm: fcm)
        defer { served.cleanupNow() }
        let body: JSONValue = [
            "template": "order-shipped", "sample": "Default",
            "to": [
                ["token": .string(ServeEndToEndTests.token(41)), "platform": "ios"],
                ["token": .string(Self.androidToken), "platform": "android"],
                ["token": .string(Self.goneToken), "platform": "android"],
            ],
        ]
        let answer = try await served.request("POST", "/v1/sends?wait=true&timeout=20", json: body)
        #expect(answer.status == 200, "\(answer.text.prefix(1000))")
        #expect(answer.json?["summary"]?["delivered"]?.intValue == 2, "\(answer.text.prefix(1000))")
        #expect(answer.json?["summary"]?["rejected"]?.intValue == 1)
        let outcomes = answer.json?["outcomes"]?.arrayValue ?? []
        #expect(Set(outcomes.compactMap { $0["provider"]?.stringValue }) == ["apns", "fcm"])
        #expect(!answer.text.contains(Self.androidToken), "answers show tokens shortened")
        // Each token reached its own emulator once.
        #expect(fcm.deliveredMessages.count == 1)
        #expect(fcm.deliveredMessages.first?.target?.value == Self.androidToken)
        #expect(served.emulator.requests.filter { $0.path.hasSuffix(ServeEndToEndTests.token(41)) }.count == 1)
        // FCM's UNREGISTERED is a token-invalid rejection: the registry has it.
        let registry = try await served.request("POST", "/v1/tokens/invalid",
                                                json: ["tokens": [.string(Self.goneToken), .string(Self.androidToken)]])
        #expect(registry.status == 200)
        let flags = registry.json?["tokens"]?.arrayValue?.compactMap { $0["invalid"] } ?? []
        #expect(flags == [.bool(true), .bool(false)], "\(registry.text.prefix(500))")
        try await fcm.shutdown()
    }
}
