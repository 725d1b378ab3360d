import NorqCore
import NorqExpo
import Testing

@Suite("Expo tokens")
struct ExpoTokenTests {
    @Test("ExponentPushToken, ExpoPushToken and bare UUIDs are Expo tokens; native and malformed tokens are not")
    func tokenForms() throws {
        for token in ["ExponentPushToken[xxxxxxxxxxxxxxxxxxxxxx]", "ExpoPushToken[my-token]",
                      "F5741A13-BCDA-434B-A316-5DC0E6FFA94F", "f5741a13-bcda-434b-a316-5dc0e6ffa94f"] {
            #expect(ExpoToken.isValid(token), "\(token)")
        }
        for token in ["", "ExponentPushToken[]", "ExponentPushToken[abc", "ExpoPushToken[a\"b]", "exponentpushtoken[abc]",
                      String(repeating: "ab", count: 32), "fcm:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx",
                      "F5741A13-BCDA-434B-A316-5DC0E6FFA94", "G5741A13-BCDA-434B-A316-5DC0E6FFA94F"] {
            #expect(!ExpoToken.isValid(token), "\(token)")
        }
        #expect(throws: NorqError.self) { try ExpoToken.check(PushToken(token: "abcd", platform: .ios)) }
        do {
            try ExpoToken.check(PushToken(token: String(repeating: "ab", count: 32), platform: .ios))
            Issue.record("a native APNs token passed")
        } catch {
            #expect(error.code == .expoInvalidToken)
        }
    }
}
