import Foundation
@testable import NorqFCM
import NorqCore
import Crypto
import _CryptoExtras
import Synchronization
import Testing

func base64URLDecode(_ text: Substring) -> Data? {
    var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while s.count % 4 != 0 { s += "=" }
    return Data(base64Encoded: s)
}

@Suite struct FCMAssertionTests {
    @Test func assertionIsAnRS256JWTTheServiceAccountKeyVerifies() throws {
        let account = try FCMServiceAccount(json: FCMPaths.demoAccountJSON)
        let signer = try FCMAssertionSigner(serviceAccount: account, audience: "https://oauth2.googleapis.com/token")
        let jwt = try signer.sign(issuedAt: 1_800_000_000)
        let parts = jwt.split(separator: ".")
        #expect(parts.count == 3)
        let header = try JSONValue(parsing: Array(try #require(base64URLDecode(parts[0]))))
        #expect(header["alg"] == "RS256")
        #expect(header["typ"] == "JWT")
        #expect(header["kid"]?.stringValue == account.privateKeyID)
        let claims = try JSONValue(parsing: Array(try #require(base64URLDecode(parts[1]))))
        #expect(claims["iss"]?.stringValue == account.clientEmail)
        #expect(claims["scope"] == "https://www.googleapis.com/auth/firebase.messaging")
        #expect(claims["aud"] == "https://oauth2.googleapis.com/token")
        #expect(claims["iat"] == .int(1_800_000_000))
        #expect(claims["exp"] == .int(1_800_003_600))
        let publicKey = try _RSA.Signing.PrivateKey(pemRepresentation: account.privateKeyPEM).publicKey
        let signature = _RSA.Signing.RSASignature(rawRepresentation: try #require(base64URLDecode(parts[2])))
        let input = Array("\(parts[0]).\(parts[1])".utf8)
        #expect(publicKey.isValidSignature(signature, for: input, padding: .insecurePKCS1v1_5))
        #expect(!publicKey.isValidSignature(signature, for: Array("x".utf8) + input, padding: .insecurePKCS1v1_5))
        let body = String(decoding: FCMAssertionSigner.tokenRequestBody(assertion: jwt), as: UTF8.self)
        #expect(body == "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(jwt)")
    }

    @Test func base64URLHasNoPadding() {
        #expect(Base64URL.encode([0xfb, 0xff]) == "-_8")
        #expect(Base64URL.encode(Array("ab".utf8)) == "YWI")
        #expect(Base64URL.encode(Array("abc".utf8)) == "YWJj")
        #expect(Base64URL.encode(Array("a".utf8)) == "YQ")
    }
}

@Suite struct FCMTokenRefreshPolicyTests {
    let policy = FCMTokenRefreshPolicy()

    @Test func noTokenRenews() {
        #expect(policy.decide(nil, now: 100) == .renew)
    }

    @Test func oneHourTokenIsRenewedFiveMinutesEarly() {
        let token = FCMAccessToken(value: "t", issuedAt: 1000, expiresAt: 4600)
        #expect(policy.renewalTime(of: token) == 4300)
        #expect(policy.decide(token, now: 1000) == .reuse)
        #expect(policy.decide(token, now: 4299) == .reuse)
        #expect(policy.decide(token, now: 4300) == .renew)
        #expect(policy.decide(token, now: 9999) == .renew)
    }

    @Test func shortTokensAreRenewedAtThreeQuartersOfTheirLife() {
        let token = FCMAccessToken(value: "t", issuedAt: 1000, expiresAt: 1120)
        #expect(policy.decide(token, now: 1089) == .reuse)
        #expect(policy.decide(token, now: 1090) == .renew)
    }

    @Test func rejectedTokenRenewsAtOnce() {
        let token = FCMAccessToken(value: "t", issuedAt: 1000, expiresAt: 4600)
        #expect(policy.decide(token, now: 1001, rejected: true) == .renew)
    }

    @Test func clockSteppedBackRenews() {
        let token = FCMAccessToken(value: "t", issuedAt: 1000, expiresAt: 4600)
        #expect(policy.decide(token, now: 941) == .reuse)
        #expect(policy.decide(token, now: 939) == .renew)
    }

    @Test func tokenDescriptionIsRedacted() {
        let token = FCMAccessToken(value: "ya29.secret", issuedAt: 1, expiresAt: 2)
        #expect(!token.description.contains("secret"))
        #expect(token.headerValue == "Bearer ya29.secret")
    }
}

@Suite struct FCMAccessTokenCacheTests {
    /// A fetch that is held until released, counting calls.
    final class HeldFetch: Sendable {
        let calls = Atomic<Int>(0)
        let pending = Mutex<[@Sendable (Result<FCMAccessToken, NorqError>) -> Void]>([])
        func fetch(_ completion: @escaping @Sendable (Result<FCMAccessToken, NorqError>) -> Void) {
            calls.add(1, ordering: .relaxed)
            pending.withLock { $0.append(completion) }
        }
        func release(_ result: Result<FCMAccessToken, NorqError>) {
            let waiting = pending.withLock { p in defer { p.removeAll() }; return p }
            for completion in waiting { completion(result) }
        }
    }

    @Test func oneFetchHoweverManyWaiters() {
        let held = HeldFetch()
        let clock = TestWallClock(1000)
        let cache = FCMAccessTokenCache(clock: clock.clock) { held.fetch($0) }
        let results = Mutex<[String]>([])
        for _ in 0..<50 {
            cache.withToken { result in results.withLock { $0.append((try? result.get().value) ?? "error") } }
        }
        #expect(held.calls.load(ordering: .relaxed) == 1)
        #expect(results.withLock { $0.isEmpty })
        held.release(.success(FCMAccessToken(value: "a", issuedAt: 1000, expiresAt: 4600)))
        #expect(results.withLock { $0 } == Array(repeating: "a", count: 50))
        // Cached: no second fetch.
        cache.withToken { _ in }
        #expect(held.calls.load(ordering: .relaxed) == 1)
        // Early renewal.
        clock.advance(3400)
        cache.withToken { _ in }
        #expect(held.calls.load(ordering: .relaxed) == 2)
    }

    @Test func failureReachesEveryWaiterAndTheNextRequestFetchesAgain() {
        let held = HeldFetch()
        let cache = FCMAccessTokenCache(clock: TestWallClock(1000).clock) { held.fetch($0) }
        let failures = Atomic<Int>(0)
        for _ in 0..<3 {
            cache.withToken { result in if case .failure = result { failures.add(1, ordering: .relaxed) } }
        }
        held.release(.failure(NorqError(.fcmTokenRequestFailed, "refused")))
        #expect(failures.load(ordering: .relaxed) == 3)
        cache.withToken { _ in }
        #expect(held.calls.load(ordering: .relaxed) == 2)
    }

    @Test func rejectionRenewsOnlyTheCurrentToken() {
        let held = HeldFetch()
        let cache = FCMAccessTokenCache(clock: TestWallClock(1000).clock) { held.fetch($0) }
        cache.withToken { _ in }
        held.release(.success(FCMAccessToken(value: "a", issuedAt: 1000, expiresAt: 4600)))
        cache.reportRejected("old-token")  // not the current one: ignored
        cache.withToken { _ in }
        #expect(held.calls.load(ordering: .relaxed) == 1)
        cache.reportRejected("a")
        cache.withToken { _ in }
        #expect(held.calls.load(ordering: .relaxed) == 2)
    }
}

@Suite struct FCMTokenEndpointTests {
    let endpoint = FCMURL.googleToken

    @Test func parsesAGoogleTokenAnswer() throws {
        let answer = jsonResponse(200, #"{"access_token":"ya29.abc","expires_in":3599,"token_type":"Bearer"}"#)
        let token = try FCMProvider.parseTokenResponse(answer, now: 100, endpoint: endpoint).get()
        #expect(token.value == "ya29.abc")
        #expect(token.expiresAt == 3699)
    }

    @Test func refusalIsATokenRequestFailure() {
        let answer = jsonResponse(400, #"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#)
        guard case .failure(let error) = FCMProvider.parseTokenResponse(answer, now: 100, endpoint: endpoint) else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.code == "fcm/token-request-failed")
        #expect(error.message.contains("invalid_grant"))
        #expect(!error.possiblyProcessed)
    }
}
