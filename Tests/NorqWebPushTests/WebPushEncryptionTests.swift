import Crypto
import NorqCore
import Testing
@testable import NorqWebPush

/// RFC 8291 Appendix A, copied from the RFC (whitespace removed).
enum RFC8291Vector {
    static let plaintext = "V2hlbiBJIGdyb3cgdXAsIEkgd2FudCB0byBiZSBhIHdhdGVybWVsb24"
    static let asPublic = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let asPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
    static let uaPublic = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let uaPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
    static let salt = "DGv6ra1nlYgDCS1FRnbzlw"
    static let authSecret = "BTBZMqHH6r4Tts7J_aSIgg"
    static let ecdhSecret = "kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs"
    static let cek = "oIhVW04MRdy2XN9CiKLxTg"
    static let nonce = "4h_95klXJ5E_qnoN"
    static let header = "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let ciphertext = "8pfeW0KbunFT06SuDKoJH9Ql87S1QUrdirN6GcG7sFz1y1sqLgVi1VhjVkHsUoEsbI_0LpXMuGvnzQ"
    static let body = "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"

    static func bytes(_ text: String) -> [UInt8] { Base64URL.decode(text)! }
}

@Suite struct WebPushEncryptionTests {
    @Test func rfc8291AppendixAVectorByteForByte() throws {
        let v = RFC8291Vector.self
        let ephemeral = try P256.KeyAgreement.PrivateKey(rawRepresentation: v.bytes(v.asPrivate))
        #expect(Array(ephemeral.publicKey.x963Representation) == v.bytes(v.asPublic))
        let keys = try WebPushSubscriptionKeys(WebPushKeys(p256dh: v.uaPublic, auth: v.authSecret))
        let body = try WebPushEncryption.encrypt(v.bytes(v.plaintext), keys: keys, ephemeralKey: ephemeral,
                                                 salt: v.bytes(v.salt))
        #expect(body.count == 144)
        #expect(Array(body.prefix(86)) == v.bytes(v.header))
        #expect(Array(body.dropFirst(86)) == v.bytes(v.ciphertext))
        #expect(body == v.bytes(v.body))
        #expect(Base64URL.encode(body) == v.body)
    }

    @Test func rfc8291IntermediateValues() throws {
        let v = RFC8291Vector.self
        let ephemeral = try P256.KeyAgreement.PrivateKey(rawRepresentation: v.bytes(v.asPrivate))
        let ua = try P256.KeyAgreement.PublicKey(x963Representation: v.bytes(v.uaPublic))
        let secret = try ephemeral.sharedSecretFromKeyAgreement(with: ua).withUnsafeBytes { Array($0) }
        #expect(secret == v.bytes(v.ecdhSecret))
        let (cek, nonce) = WebPushEncryption.deriveKeys(ecdhSecret: secret, authSecret: v.bytes(v.authSecret),
                                                        userAgentPublic: v.bytes(v.uaPublic),
                                                        serverPublic: v.bytes(v.asPublic), salt: v.bytes(v.salt))
        #expect(cek == v.bytes(v.cek))
        #expect(nonce == v.bytes(v.nonce))
    }

    @Test func freshKeyAndSaltPerMessage() throws {
        let ua = P256.KeyAgreement.PrivateKey()
        let keys = try WebPushSubscriptionKeys(WebPushKeys(p256dh: Base64URL.encode(Array(ua.publicKey.x963Representation)),
                                                           auth: Base64URL.encode([UInt8](repeating: 7, count: 16))))
        let a = try WebPushEncryption.encrypt(Array("hello".utf8), keys: keys)
        let b = try WebPushEncryption.encrypt(Array("hello".utf8), keys: keys)
        #expect(a.prefix(16) != b.prefix(16))  // salt
        #expect(a[21..<86] != b[21..<86])  // ephemeral public key
        #expect(a.count == 86 + 5 + 1 + 16)
    }

    @Test func sizeLimitAndPadding() throws {
        let ua = P256.KeyAgreement.PrivateKey()
        let keys = try WebPushSubscriptionKeys(WebPushKeys(p256dh: Base64URL.encode(Array(ua.publicKey.x963Representation)),
                                                           auth: Base64URL.encode([UInt8](repeating: 1, count: 16))))
        let largest = try WebPushEncryption.encrypt([UInt8](repeating: 65, count: 3993), keys: keys)
        #expect(largest.count == 4096)
        #expect(throws: NorqError.self) { try WebPushEncryption.encrypt([UInt8](repeating: 65, count: 3994), keys: keys) }
        do {
            _ = try WebPushEncryption.encrypt([UInt8](repeating: 65, count: 3994), keys: keys)
        } catch {
            #expect(error.code == .webPushPayloadTooLarge)
        }
        let padded = try WebPushEncryption.encrypt(Array("hi".utf8), keys: keys, paddingBytes: 100)
        #expect(padded.count == 86 + 2 + 1 + 100 + 16)
        // Padding never pushes the body over 4,096 bytes.
        let capped = try WebPushEncryption.encrypt([UInt8](repeating: 65, count: 3990), keys: keys, paddingBytes: 100)
        #expect(capped.count == 4096)
    }

    @Test func subscriptionKeyErrors() {
        let ua = P256.KeyAgreement.PrivateKey()
        let good = Base64URL.encode(Array(ua.publicKey.x963Representation))
        var notOnCurve = Array(ua.publicKey.x963Representation)
        notOnCurve[64] ^= 1
        for bad in ["", "!!!", Base64URL.encode([UInt8](repeating: 4, count: 65)), Base64URL.encode(notOnCurve),
                    Base64URL.encode(Array(ua.publicKey.compressedRepresentation))] {
            #expect(throws: NorqError.self) { try WebPushSubscriptionKeys(WebPushKeys(p256dh: bad, auth: "BTBZMqHH6r4Tts7J_aSIgg")) }
            do {
                _ = try WebPushSubscriptionKeys(WebPushKeys(p256dh: bad, auth: "BTBZMqHH6r4Tts7J_aSIgg"))
            } catch {
                #expect(error.code == .webPushInvalidP256DH)
            }
        }
        for bad in ["", "AAAA", Base64URL.encode([UInt8](repeating: 1, count: 15)), Base64URL.encode([UInt8](repeating: 1, count: 17))] {
            do {
                _ = try WebPushSubscriptionKeys(WebPushKeys(p256dh: good, auth: bad))
                Issue.record("auth \(bad) accepted")
            } catch {
                #expect(error.code == .webPushInvalidAuthSecret)
            }
        }
        // Padded standard base64 (what some servers store) is accepted.
        #expect((try? WebPushSubscriptionKeys(WebPushKeys(p256dh: good, auth: "BTBZMqHH6r4Tts7J/aSIgg=="))) != nil)
    }
}
