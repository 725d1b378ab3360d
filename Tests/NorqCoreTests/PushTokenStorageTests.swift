@testable import NorqCore
import Testing

@Suite("PushToken storage: rare fields out of line, value semantics kept")
struct PushTokenStorageTests {
    @Test("a token is 40 bytes: the token, the platform and one reference for provider, environment and keys")
    func compactLayout() {
        #expect(MemoryLayout<PushToken>.stride == 40)
    }

    @Test("setting, changing and clearing the rare fields; copies do not share changes")
    func valueSemantics() {
        var token = PushToken(token: "abcd", platform: .ios)
        #expect(token.provider == nil && token.environment == nil && token.keys == nil)
        let plain = token
        token.provider = "apns-b"
        token.environment = .production
        #expect(token.provider == "apns-b" && token.environment == .production)
        #expect(plain.provider == nil && plain.environment == nil)
        var copy = token
        copy.environment = .sandbox
        #expect(token.environment == .production && copy.environment == .sandbox && copy.provider == "apns-b")
        copy.keys = WebPushKeys(p256dh: "p", auth: "a")
        #expect(copy.keys?.auth == "a" && token.keys == nil)
        copy.provider = nil
        copy.environment = nil
        copy.keys = nil
        #expect(copy == plain)
    }

    @Test("equality and hashing cover every field")
    func equalityAndHashing() {
        let base = PushToken(token: "abcd", platform: .ios, provider: "p", environment: .sandbox)
        let same = PushToken(token: "abcd", platform: .ios, provider: "p", environment: .sandbox)
        #expect(base == same && base.hashValue == same.hashValue)
        let variants = [
            PushToken(token: "abce", platform: .ios, provider: "p", environment: .sandbox),
            PushToken(token: "abcd", platform: .android, provider: "p", environment: .sandbox),
            PushToken(token: "abcd", platform: .ios, provider: "q", environment: .sandbox),
            PushToken(token: "abcd", platform: .ios, provider: "p", environment: .production),
            PushToken(token: "abcd", platform: .ios, provider: "p", environment: .sandbox,
                      keys: WebPushKeys(p256dh: "k", auth: "a")),
        ]
        for variant in variants { #expect(variant != base) }
        #expect(Set(variants + [base, same]).count == 6)
    }
}
