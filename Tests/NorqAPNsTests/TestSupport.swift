import Crypto
import NorqAPNs
import NorqCore
import Synchronization

/// A settable wall clock for JWT tests.
final class TestClock: Sendable {
    let seconds: Mutex<Int64>
    init(_ start: Int64 = 1_800_000_000) { seconds = Mutex(start) }
    func advance(_ by: Int64) { seconds.withLock { $0 += by } }
    var now: Int64 { seconds.withLock { $0 } }
    var apnsClock: APNsClock { APNsClock { self.now } }
}

enum Fixtures {
    static let keyID = "ABC123DEFG"
    static let teamID = "TEAM123456"
    static let bundleID = "com.example.app"
    static let token = String(repeating: "ab", count: 32)

    static func tokenConfiguration(key: P256.Signing.PrivateKey = P256.Signing.PrivateKey(),
                                   production: Bool = false) -> APNsConfiguration {
        APNsConfiguration(authentication: .token(keyID: keyID, teamID: teamID, privateKeyPEM: key.pemRepresentation,
                                                 keySource: "test"),
                          bundleID: bundleID, production: production)
    }

    static func provider(_ configuration: APNsConfiguration = tokenConfiguration(),
                         clock: TestClock = TestClock(), cache: APNsTokenCache = APNsTokenCache()) throws -> APNsProvider {
        try APNsProvider(name: "apns", configuration: configuration, clock: clock.apnsClock, tokenCache: cache)
    }

    static func iosToken(_ token: String = token, environment: PushEnvironment? = nil) -> PushToken {
        PushToken(token: token, platform: .ios, environment: environment)
    }
}

func payloadText(_ content: PushContent, _ type: APNsPushType, sendTime: Int64 = 1_800_000_000) throws -> String {
    String(decoding: try APNsPayload.encode(content, pushType: type, sendTime: sendTime), as: UTF8.self)
}

/// The error code a throwing expression fails with.
func errorCode(_ body: () throws -> Void) -> String? {
    do {
        try body()
        return nil
    } catch let error as NorqError {
        return error.code.rawValue
    } catch {
        return "unexpected \(error)"
    }
}
