import Crypto
import NorqCore
import NorqTesting
import Testing
@testable import NorqWebPush

/// The emulator's own RFC 8291 implementation (swift-crypto's HKDF) against the RFC vector and the provider's.
@Suite struct WebPushEmulatorCryptoTests {
    @Test func emulatorDecryptsTheRFCVector() throws {
        let v = RFC8291Vector.self
        let ua = try P256.KeyAgreement.PrivateKey(rawRepresentation: v.bytes(v.uaPrivate))
        let plaintext = try WebPushEmulator.decrypt(body: v.bytes(v.body), userAgentPrivateKey: ua,
                                                    authSecret: v.bytes(v.authSecret))
        #expect(String(decoding: plaintext, as: UTF8.self) == "When I grow up, I want to be a watermelon")
    }

    @Test func emulatorDecryptsProviderOutputWithPadding() throws {
        let ua = P256.KeyAgreement.PrivateKey()
        let auth = (0..<16).map { UInt8($0) }
        let keys = try WebPushSubscriptionKeys(WebPushKeys(p256dh: Base64URL.encode(Array(ua.publicKey.x963Representation)),
                                                           auth: Base64URL.encode(auth)))
        for (size, padding) in [(0, 0), (1, 0), (100, 27), (3993, 0), (3000, 2000)] {
            let message = (0..<size).map { UInt8(truncatingIfNeeded: $0 * 7 + 1) }
            let body = try WebPushEncryption.encrypt(message, keys: keys, paddingBytes: padding)
            #expect(body.count <= 4096)
            #expect(try WebPushEmulator.decrypt(body: body, userAgentPrivateKey: ua, authSecret: auth) == message)
        }
        // A wrong auth secret does not decrypt.
        let body = try WebPushEncryption.encrypt(Array("secret".utf8), keys: keys)
        #expect(throws: (any Error).self) {
            try WebPushEmulator.decrypt(body: body, userAgentPrivateKey: ua, authSecret: [UInt8](repeating: 0, count: 16))
        }
    }
}
