import Synchronization
import Norq
import NorqCore
import Testing

@Suite("Send API")
struct SendTests {
    @Test("a template is rendered once per send, not per token")
    func renderOnce() async throws {
        let templates = FakeTemplates()
        let apns = FakeProvider(name: "apns")
        let r = try NotificationRouter(providers: [apns], templates: templates, clock: SleepRecorder().clock)
        let tokens = (0..<50).map { ios(hexToken($0)) }
        let report = try await r.send(template: "hello", data: ["name": "Ada"], to: recipients(tokens))
        #expect(templates.renders.count == 1)
        #expect(report.delivered == 50)
        #expect(report.allDelivered)
        #expect(report.outcomes.map(\.target) == tokens.map(DeliveryTarget.token))
        #expect(apns.requests.allSatisfy { $0.body == Array("Hello Ada|b".utf8) })
    }

    @Test("template errors are thrown; strict can be turned off")
    func strict() async throws {
        let r = try NotificationRouter(providers: [FakeProvider(name: "apns")], templates: FakeTemplates())
        await #expect(throws: NorqError.self) {
            _ = try await r.send(template: "hello", data: [:], to: recipients([ios("t1")]))
        }
        let report = try await r.send(template: "hello", data: [:], to: recipients([ios("t1")]),
                                      options: RouterSendOptions(strict: false))
        #expect(report.delivered == 1)
    }

    @Test("a disabled template skips every token")
    func disabled() async throws {
        let apns = FakeProvider(name: "apns")
        let r = try NotificationRouter(providers: [apns], templates: FakeTemplates())
        let report = try await r.send(template: "disabled", data: [:], to: recipients([ios("t1"), ios("t2")]))
        #expect(report.skipped == 2)
        guard case .skipped(let skipped) = report.outcomes[0].result else { Issue.record("not skipped"); return }
        #expect(skipped.code == .templateDisabled)
        #expect(apns.requestCount == 0)
    }

    @Test("sending by template name without templates is routing/no-templates")
    func noTemplates() async throws {
        let r = try NotificationRouter(providers: [FakeProvider(name: "apns")])
        do {
            _ = try await r.send(template: "hello", data: [:], to: recipients([ios("t1")]))
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .noTemplates)
        }
    }

    struct Order: Encodable, Sendable { var name: String }
    struct Broken: Encodable, Sendable {
        func encode(to encoder: any Encoder) throws { throw EncodingError.invalidValue(1, .init(codingPath: [], debugDescription: "no")) }
    }

    @Test("data may be an Encodable; encoding failures are routing/invalid-data")
    func encodable() async throws {
        let apns = FakeProvider(name: "apns")
        let r = try NotificationRouter(providers: [apns], templates: FakeTemplates())
        let report = try await r.send(template: "hello", data: Order(name: "Bo"), to: recipients([ios("t1")]))
        #expect(report.delivered == 1)
        #expect(apns.requests.first?.body == Array("Hello Bo|b".utf8))
        do {
            _ = try await r.send(template: "hello", data: Broken(), to: recipients([ios("t1")]))
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .invalidData)
        }
    }

    @Test("the dry run returns the exact requests with stable request ids and sends nothing")
    func dryRun() throws {
        let apns = FakeProvider(name: "apns")
        let r = try NotificationRouter(providers: [apns], templates: FakeTemplates())
        let options = RouterSendOptions(idempotencyKey: "k1", environment: .production)
        let plans = try r.prepare(template: "hello", data: ["name": "Ada"], to: recipients([ios("aaaa"), ios("bbbb", provider: "x")]),
                                  options: options)
        #expect(plans.count == 2)
        let request = try #require(plans[0].request)
        #expect(request.requestID == RequestID.make(idempotencyKey: "k1", token: "aaaa"))
        #expect(request.header("x-request-id") == request.requestID)
        #expect(request.environment == .production)
        #expect(plans[1].request == nil)
        #expect(apns.requestCount == 0)
        // A provider's prepare error is the dry run's outcome.
        let failing = r.prepare(content: PushContent(title: "too-large"), to: recipients([ios("aaaa")]))
        guard case .noRequest(.failed(let error)) = failing[0].plan else { Issue.record("expected failure"); return }
        #expect(error.code.rawValue == "apns/payload-too-large")
    }

    @Test("collapse: .idempotency derives a collapse id from the key when none is set")
    func collapseFromKey() async throws {
        let apns = FakeProvider(name: "apns")
        let r = try NotificationRouter(providers: [apns])
        _ = try await r.send(content: PushContent(title: "t"), to: recipients([ios("a"), ios("b")]),
                             options: RouterSendOptions(idempotencyKey: "k", collapse: .idempotency))
        let collapses = Set(apns.requests.compactMap { $0.header("x-collapse") })
        #expect(collapses == [RequestID.make(idempotencyKey: "k", token: "")])
        var content = PushContent(title: "t")
        content.headers.collapseID = "mine"
        _ = try await r.send(content: content, to: recipients([ios("c")]),
                             options: RouterSendOptions(idempotencyKey: "k2", collapse: .idempotency))
        #expect(apns.requests.last?.header("x-collapse") == "mine")
    }

    @Test("the streaming variant yields exactly one outcome per token")
    func streaming() async throws {
        let apns = FakeProvider(name: "apns", maxInFlight: 7)
        let r = try NotificationRouter(providers: [apns])
        let tokens = (0..<300).map { ios(hexToken($0)) }
        var seen: Set<DeliveryTarget> = []
        for await outcome in try r.sendStreaming(content: PushContent(title: "t"), to: recipients(tokens)) {
            #expect(outcome.result.kind == "delivered")
            #expect(seen.insert(outcome.target).inserted)
        }
        #expect(seen.count == 300)
    }

    @Test("recipients from an async sequence: read one chunk at a time, one outcome per token")
    func streamingInput() async throws {
        let apns = FakeProvider(name: "apns", maxInFlight: 7)
        let r = try NotificationRouter(providers: [apns])
        #expect(r.recipientChunkSize == 1_024)
        let total = 2_500
        let source = CountingRecipients(count: total)
        var seen: Set<DeliveryTarget> = []
        var readAtFirstOutcome: Int?
        for await outcome in try r.sendStreaming(content: PushContent(title: "t"), to: source) {
            if readAtFirstOutcome == nil { readAtFirstOutcome = source.read }
            #expect(outcome.result.kind == "delivered")
            #expect(seen.insert(outcome.target).inserted)
        }
        #expect(seen.count == total)
        #expect(Set(apns.requests.map(\.path)).count == total)
        // Only the first chunk (plus the one element that does not fit yet) was read before outcomes flowed.
        #expect((readAtFirstOutcome ?? .max) <= r.recipientChunkSize + 1)
        #expect(source.read == total)
    }

    @Test("recipients from an async sequence: cancelling stops reading it")
    func streamingInputCancelled() async throws {
        let apns = FakeProvider(name: "apns", maxInFlight: 4)
        let r = try NotificationRouter(providers: [apns])
        let source = CountingRecipients(count: 100_000)
        var outcomes = 0
        for await _ in try r.sendStreaming(content: PushContent(title: "t"), to: source) {
            outcomes += 1
            if outcomes == 10 { break }
        }
        // Give the send task a moment to see the cancellation; it must not read the whole sequence.
        try await Task.sleep(for: .milliseconds(200))
        #expect(source.read <= 2 * r.recipientChunkSize)
    }

    @Test("fan-out is bounded by the provider's maxInFlight and every token gets one outcome")
    func boundedFanOut() async throws {
        let apns = FakeProvider(name: "apns", maxInFlight: 8) { _, _ throws(NorqError) in
            await Task.yield()
            await Task.yield()
            return FakeProvider.ok()
        }
        let other = FakeProvider(name: "apns-2", maxInFlight: 3)
        let r = try NotificationRouter(providers: [apns, other], defaultProvider: "apns")
        let tokens = (0..<2000).map { ios(hexToken($0), provider: $0 % 10 == 0 ? "apns-2" : nil) }
        let report = try await r.send(content: PushContent(title: "t"), to: recipients(tokens))
        #expect(report.outcomes.count == 2000)
        #expect(report.delivered == 2000)
        #expect(apns.peakInFlight <= 8)
        #expect(other.peakInFlight <= 3)
        #expect(apns.requestCount == 1800)
        #expect(other.requestCount == 200)
    }

    @Test("cancelling a send fails the tokens not yet started with routing/cancelled")
    func cancellation() async throws {
        let started = Gate()
        let apns = FakeProvider(name: "apns", maxInFlight: 1) { _, _ throws(NorqError) in
            started.open()
            try? await Task.sleep(for: .seconds(10))
            return FakeProvider.ok()
        }
        let r = try NotificationRouter(providers: [apns])
        let task = Task { try await r.send(content: PushContent(title: "t"), to: recipients((0..<5).map { ios(hexToken($0)) })) }
        await started.wait()
        task.cancel()
        let report = try await task.value
        #expect(report.outcomes.count == 5)
        #expect(apns.requestCount == 1)
        let cancelled = report.outcomes.filter {
            if case .failed(let error) = $0.result { return error.code == .sendCancelled }
            return false
        }
        #expect(cancelled.count == 4)
    }
}

/// An async sequence of one-token recipients that counts how many were read.
final class CountingRecipients: AsyncSequence, Sendable {
    typealias Element = Recipient
    typealias Failure = Never
    let count: Int
    private let counter = Mutex(0)
    init(count: Int) { self.count = count }
    var read: Int { counter.withLock { $0 } }

    struct AsyncIterator: AsyncIteratorProtocol {
        typealias Failure = Never
        let source: CountingRecipients
        mutating func next() async -> Recipient? {
            let index = source.counter.withLock { n -> Int? in
                guard n < source.count else { return nil }
                n += 1
                return n - 1
            }
            guard let index else { return nil }
            return Recipient(id: "r\(index)", tokens: [ios(hexToken(index))])
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(source: self) }
}
