import Crypto
import Foundation
@testable import NorqAPNs
import NorqCore
import Testing

@Suite struct APNsJWTTests {
    @Test func tokenShapeAndSignatureVerify() throws {
        let key = P256.Signing.PrivateKey()
        let signer = try APNsJWTSigner(keyID: "ABC123DEFG", teamID: "TEAM123456", privateKeyPEM: key.pemRepresentation)
        let jwt = signer.sign(issuedAt: 1_800_000_123)
        let parts = jwt.split(separator: ".")
        #expect(parts.count == 3)
        #expect(!jwt.contains("=") && !jwt.contains("+") && !jwt.contains("/"))
        let header = String(decoding: try #require(Base64URL.decode(parts[0])), as: UTF8.self)
        let claims = String(decoding: try #require(Base64URL.decode(parts[1])), as: UTF8.self)
        #expect(header == #"{"alg":"ES256","kid":"ABC123DEFG"}"#)
        #expect(claims == #"{"iss":"TEAM123456","iat":1800000123}"#)
        let signature = try #require(Base64URL.decode(parts[2]))
        #expect(signature.count == 64)
        let ecdsa = try P256.Signing.ECDSASignature(rawRepresentation: signature)
        #expect(key.publicKey.isValidSignature(ecdsa, for: Array("\(parts[0]).\(parts[1])".utf8)))
        let other = P256.Signing.PrivateKey()
        #expect(!other.publicKey.isValidSignature(ecdsa, for: Array("\(parts[0]).\(parts[1])".utf8)))
    }

    @Test func invalidKeyIsTyped() {
        #expect(errorCode { _ = try APNsJWTSigner(keyID: "K", teamID: "T", privateKeyPEM: "not a key") } == "apns/invalid-key")
    }

    @Test func base64URLRoundTrip() {
        for length in 0..<20 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 250) }
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
            let foundation = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes) == foundation)
        }
    }

    @Test func refreshPolicy() {
        let policy = JWTRefreshPolicy(refreshInterval: .seconds(50 * 60))
        #expect(policy.decide(issuedAt: nil, now: 0) == .renew)
        #expect(policy.decide(issuedAt: 0, now: 49 * 60) == .reuse)
        #expect(policy.decide(issuedAt: 0, now: 50 * 60) == .renew)
        #expect(policy.decide(issuedAt: 0, now: 60, reportedExpired: true) == .renew)
        #expect(policy.decide(issuedAt: 1000, now: 900) == .renew)
        #expect(policy.decide(issuedAt: 1000, now: 990) == .reuse)
        // Clamped to 20...55 minutes.
        #expect(JWTRefreshPolicy(refreshInterval: .seconds(60)).refreshInterval == 20 * 60)
        #expect(JWTRefreshPolicy(refreshInterval: .seconds(3 * 3600)).refreshInterval == 55 * 60)
        #expect(JWTRefreshPolicy(refreshInterval: .seconds(60)).decide(issuedAt: 0, now: 19 * 60) == .reuse)
    }

    @Test func cacheSharesOneTokenAndRenewsOnSchedule() throws {
        let key = P256.Signing.PrivateKey()
        let signer = try APNsJWTSigner(keyID: "ABC123DEFG", teamID: "TEAM123456", privateKeyPEM: key.pemRepresentation)
        let again = try APNsJWTSigner(keyID: "ABC123DEFG", teamID: "TEAM123456", privateKeyPEM: key.pemRepresentation)
        let cache = APNsTokenCache()
        let policy = JWTRefreshPolicy()
        let first = cache.token(for: signer, policy: policy, now: 1000)
        #expect(cache.token(for: again, policy: policy, now: 1000 + 49 * 60) == first)
        // A reported expiry of an older token does nothing; of the current one renews once.
        cache.reportExpired("old", signer: signer)
        #expect(cache.token(for: signer, policy: policy, now: 1100) == first)
        cache.reportExpired(first.jwt, signer: signer)
        let renewed = cache.token(for: signer, policy: policy, now: 1200)
        #expect(renewed.issuedAt == 1200 && renewed != first)
        #expect(cache.token(for: signer, policy: policy, now: 1300) == renewed)
        // Two simulated hours: renewed every 50 minutes, never twice within 20.
        var issued: [Int64] = [renewed.issuedAt]
        var now: Int64 = 1200
        while now < 1200 + 7200 {
            now += 30
            let token = cache.token(for: signer, policy: policy, now: now)
            if token.issuedAt != issued.last { issued.append(token.issuedAt) }
        }
        #expect(issued.count == 3)
        for (a, b) in zip(issued, issued.dropFirst()) { #expect(b - a >= 20 * 60 && b - a <= 50 * 60) }
        #expect(cache.renewals(for: signer) == 3)
    }
}
