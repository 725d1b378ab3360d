import Norq
import NorqCore
import Synchronization
import Testing

@Suite("Idempotency and deduplication")
struct IdempotencyTests {
    @Test("a repeated send with the same key is deduplicated and carries the first outcome")
    func repeatSend() async throws {
        let apns = FakeProvider(name: "apns")
        let r = try NotificationRouter(providers: [apns])
        let options = RouterSendOptions(idempotencyKey: "order-42")
        let first = try await r.send(content: PushContent(title: "t"), to: recipients([ios("a"), ios("b")]), options: options)
        #expect(first.delivered == 2)
        let second = try await r.send(content: PushContent(title: "t"), to: recipients([ios("a"), ios("b"), ios("c")]),
                                      options: options)
        #expect(second.duplicates == 2)
        #expect(second.delivered == 1)
        #expect(second.allDelivered)
        guard case .duplicate(of: .delivered(let delivered)) = second.outcomes[0].result else {
            Issue.record("expected a duplicate")
            return
        }
        #expect(delivered.messageID == RequestID.make(idempotencyKey: "order-42", token: "a"))
        #expect(apns.requestCount == 3)
        // Without a key nothing is deduplicated.
        let third = try await r.send(content: PushContent(title: "t"), to: recipients([ios("a")]))
        #expect(third.delivered == 1)
    }

    /// A store elsewhere (like a database): every call suspends. The router reaches it from tasks of its own.
    actor SlowStore: DeduplicationStore {
        let inner = InMemoryDeduplicationStore()
        private(set) var calls = 0
        func reserve(_ key: DeduplicationKey) async -> DeduplicationLookup {
            calls += 1
            try? await Task.sleep(for: .milliseconds(1))
            return inner.reserveImmediately(key)
        }
        func record(_ key: DeduplicationKey, result: PushOutcome.Result) async {
            calls += 1
            try? await Task.sleep(for: .milliseconds(1))
            inner.recordImmediately(key, result: result)
        }
        func release(_ key: DeduplicationKey) async {
            calls += 1
            try? await Task.sleep(for: .milliseconds(1))
            inner.releaseImmediately(key)
        }
    }

    @Test("a store that suspends: repeats are still deduplicated, prepare failures release their reservation")
    func suspendingStore() async throws {
        let store = SlowStore()
        let apns = FakeProvider(name: "apns", maxInFlight: 8)
        let r = try NotificationRouter(providers: [apns], deduplication: store)
        let options = RouterSendOptions(idempotencyKey: "order-7")
        let tokens = (0..<40).map { ios(hexToken($0)) }
        let first = try await r.send(content: PushContent(title: "t"), to: recipients(tokens), options: options)
        #expect(first.delivered == 40)
        let second = try await r.send(content: PushContent(title: "t"), to: recipients(tokens), options: options)
        #expect(second.duplicates == 40)
        #expect(apns.requestCount == 40)
        #expect(await store.calls == 40 * 2 + 40)
        // A prepare failure releases the key: the same key delivers once the content is fixed.
        let refused = try await r.send(content: PushContent(title: "too-large"), to: recipients([ios("ab")]),
                                       options: RouterSendOptions(idempotencyKey: "order-8"))
        #expect(refused.outcomes.first?.result.kind == "failed")
        let fixed = try await r.send(content: PushContent(title: "t"), to: recipients([ios("ab")]),
                                     options: RouterSendOptions(idempotencyKey: "order-8"))
        #expect(fixed.delivered == 1)
    }

    @Test("a send without a definitive answer is not remembered")
    func failedNotRecorded() async throws {
        let calls = CallCounter()
        let apns = FakeProvider(name: "apns", retry: .none) { _, _ throws(NorqError) in
            calls.increment()
            if calls.count == 1 { throw NorqError(.transportFailed, "reset") }
            return FakeProvider.ok()
        }
        let r = try NotificationRouter(providers: [apns])
        let options = RouterSendOptions(idempotencyKey: "k")
        #expect(try await r.send(content: PushContent(title: "t"), to: recipients([ios("a")]), options: options).failed == 1)
        #expect(try await r.send(content: PushContent(title: "t"), to: recipients([ios("a")]), options: options).delivered == 1)
        #expect(try await r.send(content: PushContent(title: "t"), to: recipients([ios("a")]), options: options).duplicates == 1)
    }

    @Test("concurrent sends of one (key, token) deliver once")
    func concurrentDuplicates() async throws {
        let gate = Gate()
        let entered = Gate()
        let apns = FakeProvider(name: "apns") { _, _ throws(NorqError) in
            entered.open()
            await gate.wait()
            return FakeProvider.ok()
        }
        let r = try NotificationRouter(providers: [apns])
        let options = RouterSendOptions(idempotencyKey: "k")
        let first = Task { try await r.send(content: PushContent(title: "t"), to: recipients([ios("a")]), options: options) }
        await entered.wait()
        let second = try await r.send(content: PushContent(title: "t"), to: recipients([ios("a")]), options: options)
        gate.open()
        #expect(try await first.value.delivered == 1)
        guard case .skipped(let skipped) = second.outcomes.first?.result else { Issue.record("expected a skip"); return }
        #expect(skipped.code == .duplicateInFlight)
        #expect(apns.requestCount == 1)
    }

    @Test("the in-memory store expires entries after the TTL and stays bounded")
    func storeTTLAndBound() async {
        let now = ManualNow()
        let store = InMemoryDeduplicationStore(ttl: .seconds(60), maxEntries: 3, now: { now.instant })
        let key = DeduplicationKey(idempotencyKey: "k", target: "a")
        #expect(await store.reserve(key) == .reserved)
        #expect(await store.reserve(key) == .inFlight)
        await store.record(key, result: .delivered(.init()))
        #expect(await store.reserve(key) == .completed(.delivered(.init())))
        now.advance(by: .seconds(61))
        #expect(await store.reserve(key) == .reserved)
        await store.release(key)
        #expect(await store.reserve(key) == .reserved)
        for index in 0..<10 {
            let other = DeduplicationKey(idempotencyKey: "k", target: "t\(index)")
            _ = await store.reserve(other)
            await store.record(other, result: .delivered(.init()))
        }
        #expect(store.count <= 3)
        // The live reservation is never evicted.
        #expect(await store.reserve(key) == .inFlight)
        // The newest completed entry is kept.
        #expect(await store.reserve(DeduplicationKey(idempotencyKey: "k", target: "t9")) == .completed(.delivered(.init())))
    }
}
