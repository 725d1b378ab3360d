import Foundation
import Norq
import NorqAPNs
import NorqCore
import NorqTemplates
import NorqHostileTesting
import NorqTesting
import Testing

/// Issue 30: a server draining gracefully must not fail pushes. NotificationRouter -> APNsProvider -> the hostile
/// HTTP/2 server over TLS, as a new user would run it: `retry: { retries: 2 }`, 2,000 tokens, 1,000 in flight (the
/// server allows 1,000 streams), no collapse id. Every stream the server refuses or leaves above a GOAWAY's
/// last-stream-id was not processed; the router re-queues it without spending the budget. Every token must be
/// delivered, and processed by the server exactly once (it counts each stream it processed).
@Suite("A server draining gracefully (issue 30)", .serialized, .timeLimit(.minutes(1)))
struct HostileDrainEndToEndTests {
    static let tokens = 2_000
    static let deadline = Duration.seconds(20)

    /// The invariants of all three drains.
    func checkDrained(_ run: HostileRun, sourceLocation: Testing.SourceLocation = #_sourceLocation) {
        run.checkInvariants(sourceLocation: sourceLocation)
        #expect(run.report?.delivered == Self.tokens, "\(run)", sourceLocation: sourceLocation)
        #expect(run.statistics.processedTwice.isEmpty,
                "processed twice: \(run.statistics.processedTwice.count) tokens; \(run)", sourceLocation: sourceLocation)
        #expect(run.statistics.processedByToken.count == Self.tokens && run.statistics.processed == Self.tokens,
                "\(run)", sourceLocation: sourceLocation)
        // The server received streams it did not process, and the client sent them again.
        #expect(run.statistics.requests > Self.tokens, "\(run)", sourceLocation: sourceLocation)
    }

    @Test("(a) GOAWAY with a last-stream-id below streams already sent, then close, on every connection")
    func goAwayBelowSent() async throws {
        let run = try await HostileRun.send(.goAwayBelowSent(answered: 100, held: 300), tokens: Self.tokens,
                                            deadline: Self.deadline, maxConcurrentStreams: 1_000)
        checkDrained(run)
        #expect(run.statistics.connections > 1, "\(run)")
        #expect((run.report?.requeues ?? 0) > 0, "\(run)")
    }

    @Test("(b) double GOAWAY: 2^31-1 first, then the real last stream id, then close, on every connection")
    func doubleGoAway() async throws {
        let run = try await HostileRun.send(.doubleGoAway(answered: 100, held: 300), tokens: Self.tokens,
                                            deadline: Self.deadline, maxConcurrentStreams: 1_000)
        checkDrained(run)
        #expect(run.statistics.connections > 1, "\(run)")
        #expect((run.report?.requeues ?? 0) > 0, "\(run)")
    }

    @Test("(c) REFUSED_STREAM on every 7th stream")
    func refuseEverySeventh() async throws {
        let run = try await HostileRun.send(.refuseEvery(nth: 7), tokens: Self.tokens, deadline: Self.deadline,
                                            maxConcurrentStreams: 1_000)
        checkDrained(run)
        // Each refusal was re-queued (a token refused twice counts twice).
        let refused = run.statistics.requests - run.statistics.processed
        #expect(refused >= Self.tokens / 7, "\(run)")
        #expect(run.report?.requeues == refused, "\(run)")
    }

    @Test("a CR/LF from template data in apns-collapse-id is refused before the network: no connection, no request")
    func crlfHeaderValueRefusedBeforeTheNetwork() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("norq-invoice-\(UInt64.random(in: 0...UInt64.max))").path
        try FileManager.default.createDirectory(atPath: directory + "/invoice", withIntermediateDirectories: true)
        try "---\ntitle: \"Invoice\"\nheaders:\n  apns-collapse-id: \"inv-{{invoice.number}}\"\n---\nReady.\n"
            .write(toFile: directory + "/invoice/push.md", atomically: true, encoding: .utf8)
        let server = try HostileHTTP2Server()
        try await server.start()
        var configuration = APNsConfiguration(authentication: HostileRun.credentials.authentication,
                                              bundleID: "com.example.app")
        configuration.sandboxEndpoint = APNsEndpoint(host: "localhost", port: server.port)
        configuration.additionalTrustRootsPEM = server.caCertificatePEM
        let provider = try APNsProvider(name: "apns", configuration: configuration,
                                        policy: DeliveryPolicy(retry: HostileRun.retry), tokenCache: APNsTokenCache())
        let router = try NotificationRouter(providers: [provider], templates: try TemplateLibrary(directory: directory))
        let data: JSONValue = ["invoice": ["number": "A-17\r\napns-topic: evil"]]
        let report = try await router.send(template: "invoice", data: data,
                                           to: recipients([ios(HostileRun.token(1)), ios(HostileRun.token(2))]))
        await router.shutdown(gracePeriod: .milliseconds(200))
        let statistics = server.statistics
        await server.stop()
        #expect(report.failed == 2)
        for outcome in report.outcomes {
            guard case .failed(let error) = outcome.result else {
                Issue.record("not failed: \(outcome.result)")
                continue
            }
            #expect(error.code.rawValue == "template/invalid-header-value")
            #expect(error.message.contains("apns-collapse-id") && error.message.contains("\"invoice\""), "\(error)")
            #expect(!outcome.mayHaveBeenDelivered)
            #expect(outcome.attempts == 0)
        }
        #expect(statistics.requests == 0, "a request reached the server")
        #expect(statistics.connections == 0, "a connection was opened for a request that cannot be sent")
    }
}
