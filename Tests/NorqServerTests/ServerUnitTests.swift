import NorqConfig
import NorqCore
@testable import NorqServer
import Synchronization
import Testing

/// The pure parts of the server: the token bucket, the key table, the `server:` block, error statuses.
@Suite struct TokenBucketTests {
    static let second: UInt64 = 1_000_000_000

    @Test func allowsTheBurstThenRefusesWithRetryAfter() {
        var bucket = TokenBucket.full(burst: 3, now: 0)
        for _ in 0..<3 {
            let (next, decision) = TokenBucket.take(bucket, now: 0, ratePerSecond: 1, burst: 3)
            #expect(decision == .allowed)
            bucket = next
        }
        let (_, refused) = TokenBucket.take(bucket, now: 0, ratePerSecond: 1, burst: 3)
        #expect(refused == .limited(retryAfterSeconds: 1))
    }

    @Test func refillsAtTheRateAndNeverAboveTheBurst() {
        var bucket = TokenBucket(tokens: 0, updatedAt: 0)
        var (next, decision) = TokenBucket.take(bucket, now: Self.second / 2, ratePerSecond: 1, burst: 2)
        #expect(decision == .limited(retryAfterSeconds: 1), "half a token after 0.5 s")
        bucket = next
        (next, decision) = TokenBucket.take(bucket, now: Self.second, ratePerSecond: 1, burst: 2)
        #expect(decision == .allowed, "one token after 1 s")
        // A long idle period refills to the burst only.
        (next, _) = TokenBucket.take(next, now: 1000 * Self.second, ratePerSecond: 1, burst: 2)
        #expect(next.tokens == 1)
    }

    @Test func retryAfterReflectsASlowRate() {
        let empty = TokenBucket(tokens: 0, updatedAt: 0)
        let (_, decision) = TokenBucket.take(empty, now: 0, ratePerSecond: 0.1, burst: 1)
        #expect(decision == .limited(retryAfterSeconds: 10))
    }

    @Test func aClockGoingBackwardsDoesNotAddTokens() {
        let bucket = TokenBucket(tokens: 0, updatedAt: 10 * Self.second)
        let (next, decision) = TokenBucket.take(bucket, now: 5 * Self.second, ratePerSecond: 1, burst: 5)
        #expect(decision == .limited(retryAfterSeconds: 1))
        #expect(next.updatedAt == 10 * Self.second)
    }

    @Test func theLimiterKeepsOneBucketPerKeyWithAnInjectedClock() {
        let time = TestClock()
        let limiter = RateLimiter(ratePerSecond: 1, burst: 1, now: { time.now })
        #expect(limiter.take(key: "a") == .allowed)
        #expect(limiter.take(key: "a") == .limited(retryAfterSeconds: 1))
        #expect(limiter.take(key: "b") == .allowed, "another key has its own bucket")
        time.now = 2 * Self.second
        #expect(limiter.take(key: "a") == .allowed)
    }
}

/// A clock the test moves by hand.
final class TestClock: Sendable {
    private let value = Atomic<UInt64>(0)
    var now: UInt64 {
        get { value.load(ordering: .relaxed) }
        set { value.store(newValue, ordering: .relaxed) }
    }
}

@Suite struct APIKeyTableTests {
    let table = APIKeyTable([
        .init(name: "billing", secret: "billing-secret-0123456789", templates: ["order-shipped"]),
        .init(name: "ops", secret: "ops-secret-0123456789abcdef"),
    ])

    @Test func findsTheKeyByItsBearerToken() {
        #expect(table.authenticate(authorization: "Bearer billing-secret-0123456789")?.name == "billing")
        #expect(table.authenticate(authorization: "bearer ops-secret-0123456789abcdef")?.name == "ops")
        #expect(table.authenticate(authorization: "Bearer billing-secret-0123456789")?.templates == ["order-shipped"])
    }

    @Test func refusesWrongMissingOrMalformedKeys() {
        #expect(table.authenticate(authorization: nil) == nil)
        #expect(table.authenticate(authorization: "Bearer ") == nil)
        #expect(table.authenticate(authorization: "Bearer billing-secret-012345678") == nil)
        #expect(table.authenticate(authorization: "Basic billing-secret-0123456789") == nil)
        #expect(table.authenticate(authorization: "billing-secret-0123456789") == nil)
    }

    @Test func keepsOnlyDigests() {
        #expect(table.entries.allSatisfy { $0.digest.count == 32 })
        #expect(!"\(table.entries)".contains("billing-secret"))
    }

    @Test func comparesEqualLengthDigestsOnly() {
        #expect(APIKeyTable.constantTimeEqual([1, 2, 3], [1, 2, 3]))
        #expect(!APIKeyTable.constantTimeEqual([1, 2, 3], [1, 2, 4]))
        #expect(!APIKeyTable.constantTimeEqual([1, 2], [1, 2, 3]))
    }
}

@Suite struct ServerConfigurationTests {
    func load(_ yaml: String, environment: [String: String] = [:]) throws(NorqError) -> NorqConfiguration {
        try ConfigurationLoader(registry: ProviderTypeRegistry(), environment: environment)
            .load(yaml: yaml, file: "norq.yaml", baseDirectory: ".")
    }

    @Test func parsesHostPortKeysAndLimits() throws {
        let configuration = try load("""
            server:
              host: 0.0.0.0
              port: 9090
              apiKeys:
                - { name: billing, key: "${KEY_A}", templates: [order-shipped], providers: [apns] }
                - { name: ops, key: "${KEY_B}" }
              limits: { bodyBytes: 4096, recipients: 50, ratePerSecond: 2.5, burst: 5, waitTimeout: 3s, idleTimeout: 10s }
            """, environment: ["KEY_A": "secret-a-0123456789abcdef", "KEY_B": "secret-b-0123456789abcdef"])
        let server = try #require(configuration.server)
        #expect(server.host == "0.0.0.0")
        #expect(server.port == 9090)
        #expect(server.apiKeys.map(\.name) == ["billing", "ops"])
        #expect(server.apiKeys[0].templates == ["order-shipped"])
        #expect(server.apiKeys[0].providers == ["apns"])
        #expect(server.limits.bodyBytes == 4096)
        #expect(server.limits.recipients == 50)
        #expect(server.limits.ratePerSecond == 2.5)
        #expect(server.limits.burst == 5)
        #expect(server.limits.waitTimeout == .seconds(3))
        #expect(!"\(server)".contains("secret"), "the description never prints a key")
        #expect(!"\(server.apiKeys[0])".contains("secret"))
    }

    @Test(arguments: [
        ("server: { port: 70000 }", "config/invalid-server"),
        ("server: { apiKeys: [{ key: abcdefabcdefabcdef }] }", "config/invalid-server"),
        ("server: { apiKeys: [{ name: a }] }", "config/invalid-server"),
        ("server: { apiKeys: [{ name: a, key: short }] }", "config/invalid-server"),
        ("server: { apiKeys: [{ name: a, key: abcdefabcdefabcdef }, { name: a, key: bcdefabcdefabcdefa }] }", "config/invalid-server"),
        ("server: { apiKeys: nope }", "config/invalid-server"),
        ("server: { limits: { bodyBytes: 10 } }", "config/invalid-server"),
        ("server: { limits: { ratePerSecond: 0 } }", "config/invalid-server"),
        ("server: { limits: { idleTimeout: 10ms } }", "config/invalid-server"),
        ("server: { limits: { bodyTimeout: 10ms } }", "config/invalid-server"),
        ("server: { tls: { certPath: ./a.pem } }", "config/invalid-server"),
        ("server: { tls: { certPath: ./a.pem, keyPath: ./a.key, password: x } }", "config/unknown-key"),
        ("server: { portt: 1 }", "config/unknown-key"),
        ("server: { apiKeys: [{ name: a, key: abcdefabcdefabcdef, scopes: [everything] }] }", "config/invalid-server"),
        ("server: { apiKeys: [{ name: a, key: abcdefabcdefabcdef, scope: [admin] }] }", "config/unknown-key"),
        // The same secret twice: the second key's scopes would never apply.
        ("server: { apiKeys: [{ name: a, key: abcdefabcdefabcdef }, { name: b, key: abcdefabcdefabcdef, templates: [x] }] }", "config/duplicate-api-key"),
    ])
    func refusesInvalidBlocks(yaml: String, code: String) {
        #expect {
            _ = try load(yaml)
        } throws: { error in
            guard let error = error as? NorqError else { return false }
            return error.code.rawValue == code && !error.message.contains("abcdefabcdef")
        }
    }

    @Test func parsesScopes() throws {
        let configuration = try load("""
            server:
              apiKeys:
                - { name: ops, key: abcdefabcdefabcdef, scopes: [metrics, register-tokens] }
                - { name: root, key: bcdefabcdefabcdefa, scopes: [admin] }
                - { name: app, key: cdefabcdefabcdefab }
            """)
        let keys = try #require(configuration.server?.apiKeys)
        #expect(keys[0].scopes == ["metrics", "register-tokens"])
        let table = APIKeyTable(keys)
        #expect(table.entries[0].has("metrics") && !table.entries[0].has("read-all"))
        #expect(table.entries[1].has("read-all") && table.entries[1].has("metrics"), "admin holds every scope")
        #expect(!table.entries[2].has("metrics"), "no scope unless given")
    }

    @Test func aDuplicateSecretNamesBothKeysAndNotTheSecret() {
        do {
            _ = try load("server: { apiKeys: [{ name: first, key: abcdefabcdefabcdef }, { name: second, key: abcdefabcdefabcdef }] }")
            Issue.record("a duplicate secret was accepted")
        } catch {
            #expect(error.code == .configDuplicateAPIKey)
            #expect(error.message.contains("first") && error.message.contains("second"))
            #expect(!error.message.contains("abcdef"))
        }
    }

    /// `--no-auth` needs an address that is loopback without a name lookup: a name that merely starts with
    /// `127.` is refused.
    @Test(arguments: [
        ("127.0.0.1", true), ("127.1.2.3", true), ("localhost", true), ("LOCALHOST", true), ("::1", true),
        ("[::1]", true), ("0:0:0:0:0:0:0:1", true),
        ("127.example.invalid", false), ("127.0.0.1.example.com", false), ("127.0.0.256", false), ("127.0.0", false),
        ("127.0.0.1.", false), ("localhost.example.com", false), ("0.0.0.0", false), ("::", false), ("10.0.0.1", false),
        ("128.0.0.1", false), ("", false),
    ])
    func noAuthOnlyOnLiteralLoopback(host: String, allowed: Bool) {
        #expect(NorqServer.isLoopback(host) == allowed, "\(host)")
        do {
            try NorqServer.checkSecurity(ServerConfiguration(host: host), noAuth: true)
            #expect(allowed, "\(host) was allowed")
        } catch {
            #expect(!allowed, "\(host) was refused")
            #expect(error.code == .serverInsecure)
        }
    }

    @Test func anUnsetKeyVariableNamesTheVariable() {
        #expect {
            _ = try load("server: { apiKeys: [{ name: a, key: \"${NORQ_MISSING_KEY}\" }] }")
        } throws: { error in
            (error as? NorqError)?.code == .configUnsetVariable
        }
    }

    @Test func refusesAnInsecureStart() {
        #expect(throws: NorqError.self) { try NorqServer.checkSecurity(ServerConfiguration(), noAuth: false) }
        #expect(throws: NorqError.self) { try NorqServer.checkSecurity(ServerConfiguration(host: "0.0.0.0"), noAuth: true) }
        #expect(throws: Never.self) { try NorqServer.checkSecurity(ServerConfiguration(host: "127.0.0.1"), noAuth: true) }
        #expect(throws: Never.self) { try NorqServer.checkSecurity(ServerConfiguration(host: "::1"), noAuth: true) }
        let keyed = ServerConfiguration(host: "0.0.0.0", apiKeys: [.init(name: "a", secret: "abcdefabcdefabcdef")])
        #expect(throws: Never.self) { try NorqServer.checkSecurity(keyed, noAuth: false) }
        do {
            try NorqServer.checkSecurity(ServerConfiguration(host: "10.0.0.1"), noAuth: true)
        } catch {
            #expect(error.code == .serverInsecure)
        }
    }

    @Test func clientMistakesAreNeverServerErrors() {
        #expect(NorqError(.serverUnauthorized, "").httpStatus == 401)
        #expect(NorqError(.serverForbidden, "").httpStatus == 403)
        #expect(NorqError(.storeSendNotFound, "").httpStatus == 404)
        #expect(NorqError(.serverIdempotencyInProgress, "").httpStatus == 409)
        #expect(NorqError(.serverBodyTooLarge, "").httpStatus == 413)
        #expect(NorqError(.serverUnsupportedMediaType, "").httpStatus == 415)
        #expect(NorqError(.serverRateLimited, "").httpStatus == 429)
        #expect(NorqError("template/not-found", "").httpStatus == 422)
        #expect(NorqError("idempotency/key-reused", "").httpStatus == 422)
        #expect(NorqError("push/invalid-recipient", "").httpStatus == 422)
        #expect(NorqError("store/unreachable", "").httpStatus == 503)
    }
}

@Suite struct ServerHardeningUnitTests {
    @Test func parsesTLSPathsAgainstTheConfigDirectoryAndTheBodyTimeout() throws {
        let configuration = try ConfigurationLoader(registry: ProviderTypeRegistry(), environment: [:]).load(
            yaml: "server: { tls: { certPath: tls/server.pem, keyPath: /etc/norq/server.key }, limits: { bodyTimeout: 2s } }",
            file: "/srv/norq/norq.yaml", baseDirectory: "/srv/norq")
        let server = try #require(configuration.server)
        #expect(server.tls == ServerConfiguration.TLS(certificatePath: "/srv/norq/tls/server.pem", keyPath: "/etc/norq/server.key"))
        #expect(server.limits.bodyTimeout == .seconds(2))
        #expect("\(server)".hasPrefix("server https://"))
        #expect(ServerConfiguration().tls == nil)
        #expect(ServerConfiguration().limits.bodyTimeout == .seconds(10))
    }

    @Test func aMissingCertificateIsInvalidTLS() {
        var settings = ServerConfiguration()
        settings.tls = .init(certificatePath: "/nonexistent/norq-server.pem", keyPath: "/nonexistent/norq-server.key")
        #expect {
            try NorqServer.checkTLS(settings)
        } throws: { error in
            (error as? NorqError)?.code == .serverInvalidTLS
        }
        #expect(throws: Never.self) { try NorqServer.checkTLS(ServerConfiguration()) }
    }

    @Test func theBodyDeadlineClosesOnlyWhileABodyIsOutstanding() {
        var deadline = BodyDeadline()
        #expect(deadline.head() == .arm)
        let first = deadline.generation
        #expect(deadline.end() == .disarm)
        #expect(deadline.timerFired(generation: first) == .none, "the body arrived: a late timer does nothing")
        #expect(deadline.head() == .arm)
        #expect(deadline.timerFired(generation: first) == .none, "a timer of an earlier body does nothing")
        #expect(deadline.timerFired(generation: deadline.generation) == .close)
        // Pipelined heads: the timer is disarmed only when every body has arrived.
        var pipelined = BodyDeadline()
        _ = pipelined.head()
        _ = pipelined.head()
        #expect(pipelined.end() == .none)
        #expect(pipelined.end() == .disarm)
        #expect(pipelined.end() == .disarm, "an end without a head never goes below zero")
        #expect(pipelined.receiving == 0)
    }

    @Test func theLimiterHoldsAtMostItsBoundOfKeysAndEvictsRefilledOnes() {
        let clock = Atomic<UInt64>(0)
        let limiter = RateLimiter(ratePerSecond: 1, burst: 2, maximumKeys: 3, now: { clock.load(ordering: .relaxed) })
        for address in ["a", "b", "c"] { #expect(limiter.take(key: address) == .allowed) }
        #expect(limiter.count == 3)
        // Full of partly used buckets: a fourth address is refused rather than growing the table.
        #expect(limiter.take(key: "d") == .limited(retryAfterSeconds: 1))
        #expect(limiter.count == 3)
        // Once they have refilled, they are forgotten to make room.
        clock.store(5 * TokenBucketTests.second, ordering: .relaxed)
        #expect(limiter.take(key: "d") == .allowed)
        #expect(limiter.count == 1)
    }
}
