import Crypto
import Testing
@testable import NorqWebPush

/// The encryption's own HMAC-SHA-256 (two SHA-256 passes) against swift-crypto's `HMAC<SHA256>`, and the random
/// bytes and ephemeral keys it draws.
@Suite struct WebPushHMACTests {
    @Test(arguments: [0, 1, 16, 32, 63, 64, 65, 100])
    func hmacMatchesSwiftCrypto(keyLength: Int) {
        let key = (0..<keyLength).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        for messageLength in [0, 1, 55, 56, 64, 100, 1_000] {
            let message = (0..<messageLength).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            let expected = Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
            #expect(WebPushEncryption.hmac(key: key, message) == expected, "key \(keyLength), message \(messageLength)")
        }
    }

    @Test func randomBytesAndEphemeralKeys() {
        for count in [0, 1, 7, 8, 9, 16, 32, 33] { #expect(WebPushEncryption.randomBytes(count).count == count) }
        #expect(WebPushEncryption.randomBytes(16) != WebPushEncryption.randomBytes(16))
        let first = WebPushEncryption.freshEphemeralKey(), second = WebPushEncryption.freshEphemeralKey()
        #expect(first.rawRepresentation != second.rawRepresentation)
        // A usable key pair: its public key is its scalar's, and ECDH with it agrees both ways.
        let peer = P256.KeyAgreement.PrivateKey()
        let ours = try? first.sharedSecretFromKeyAgreement(with: peer.publicKey)
        let theirs = try? peer.sharedSecretFromKeyAgreement(with: first.publicKey)
        #expect(ours != nil && ours == theirs)
    }
}
