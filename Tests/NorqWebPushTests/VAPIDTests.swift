import Crypto
import Foundation
import NorqCore
import Testing
@testable import NorqWebPush

@Suite struct VAPIDTests {
    @Test func jwtShapeAndSignature() throws {
        let keys = VAPIDKeyPair.generate()
        let signer = VAPIDSigner(keys: keys, subject: "mailto:ops@example.com")
        let jwt = signer.sign(audience: "https://push.example.net", expiresAt: 1_700_000_000)
        let parts = jwt.split(separator: ".")
        #expect(parts.count == 3)
        #expect(String(decoding: Base64URL.decode(parts[0])!, as: UTF8.self) == #"{"typ":"JWT","alg":"ES256"}"#)
        #expect(String(decoding: Base64URL.decode(parts[1])!, as: UTF8.self)
            == #"{"aud":"https://push.example.net","exp":1700000000,"sub":"mailto:ops@example.com"}"#)
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: Base64URL.decode(parts[2])!)
        #expect(keys.privateKey.publicKey.isValidSignature(signature, for: Array("\(parts[0]).\(parts[1])".utf8)))
        #expect(signer.authorization(jwt: jwt) == "vapid t=\(jwt), k=\(keys.publicKeyBase64URL)")
        #expect(Base64URL.decode(keys.publicKeyBase64URL)?.count == 65)
        #expect(!"\(keys)".contains(keys.privateKeyBase64URL))
    }

    /// RFC 8292 §2.4's example token verifies against its key with our base64url and P-256 code.
    @Test func rfc8292ExampleVerifies() throws {
        let t = "eyJ0eXAiOiJKV1QiLCJhbGciOiJFUzI1NiJ9.eyJhdWQiOiJodHRwczovL3B1c2guZXhhbXBsZS5uZXQiLCJleHAiOjE0NTM1MjM3NjgsInN1YiI6Im1haWx0bzpwdXNoQGV4YW1wbGUuY29tIn0.i3CYb7t4xfxCDquptFOepC9GAu_HLGkMlMuCGSK2rpiUfnK9ojFwDXb1JrErtmysazNjjvW2L9OkSSHzvoD1oA"
        let k = "BA1Hxzyi1RUM1b5wjxsn7nGxAszw2u61m164i3MrAIxHF6YK5h4SDYic-dRuU_RCPCfA5aq9ojSwk5Y2EmClBPs"
        let key = try P256.Signing.PublicKey(x963Representation: Base64URL.decode(k)!)
        let parts = t.split(separator: ".")
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: Base64URL.decode(parts[2])!)
        #expect(key.isValidSignature(signature, for: Array("\(parts[0]).\(parts[1])".utf8)))
    }

    @Test func renewalDecision() {
        let policy = VAPIDRenewalPolicy(lifetime: .seconds(12 * 3600), renewBefore: .seconds(3600))
        let now: Int64 = 1_000_000
        #expect(policy.expiry(mintedAt: now) == now + 12 * 3600)
        #expect(policy.needsRenewal(expiresAt: nil, now: now))
        #expect(!policy.needsRenewal(expiresAt: now + 12 * 3600, now: now))
        #expect(!policy.needsRenewal(expiresAt: now + 3601, now: now))
        #expect(policy.needsRenewal(expiresAt: now + 3600, now: now))
        #expect(policy.needsRenewal(expiresAt: now - 5, now: now))
        // A token whose exp is more than 24 h ahead (the clock went back) is replaced.
        #expect(policy.needsRenewal(expiresAt: now + 25 * 3600, now: now))
        // The lifetime never exceeds 24 h.
        #expect(VAPIDRenewalPolicy(lifetime: .seconds(48 * 3600)).lifetime == .seconds(24 * 3600))
    }

    @Test func cachedPerOriginAndRenewed() {
        let signer = VAPIDSigner(keys: .generate(), subject: "https://example.com/contact")
        let cache = VAPIDTokenCache(signer: signer, policy: VAPIDRenewalPolicy(lifetime: .seconds(7200), renewBefore: .seconds(600)),
                                    capacity: 2)
        let a1 = cache.token(forOrigin: "https://a.example", now: 0)
        #expect(cache.token(forOrigin: "https://a.example", now: 6599) == a1)
        let a2 = cache.token(forOrigin: "https://a.example", now: 6600)
        #expect(a2 != a1)
        #expect(a2.expiresAt == 6600 + 7200)
        let b = cache.token(forOrigin: "https://b.example", now: 6600)
        #expect(b.jwt != a2.jwt)
        #expect(cache.count == 2)
        _ = cache.token(forOrigin: "https://c.example", now: 6600)
        #expect(cache.count <= 2)
    }
}
