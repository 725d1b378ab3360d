import NorqCore
import NorqStore
import Testing

/// The behaviour every `DeliveryStore` must have, run against the in-memory, SQLite and PostgreSQL stores.
/// Each check gets a fresh, migrated store.
enum StoreConformance {
    static func send(_ id: String = RequestID.random(), key: String? = nil, fingerprint: String = "f1",
                     tokens: [String], scope: String = "") -> NewSend {
        NewSend(id: id, scope: scope, idempotencyKey: key, fingerprint: fingerprint, content: #"{"title":"hi"}"#,
                targets: tokens.enumerated().map { index, token in
                    NewDelivery(position: index, target: #"{"token":"\#(token)","platform":"ios"}"#, identity: token,
                                provider: "apns", recipientID: "u\(index)", messageID: "m-\(token)")
                })
    }

    static let window = Duration.seconds(3600)

    static func enqueueClaimComplete(_ store: any DeliveryStore) async throws {
        let sendID = try await store.enqueue(send(tokens: ["a", "b", "c"]), now: 1_000, idempotencyWindow: window).sendID
        let claimed = try await store.claim(owner: "w1", limit: 10, now: 1_000, leaseUntil: 31_000)
        #expect(claimed.count == 3)
        #expect(claimed.allSatisfy { $0.state == .leased && $0.attempts == 1 && $0.leaseOwner == "w1" })
        #expect(Set(claimed.compactMap(\.leaseToken)).count == 1, "a send's segment is held under one lease")
        #expect(Set(claimed.compactMap(\.messageID)) == ["m-a", "m-b", "m-c"])
        // Nothing else is claimable while the leases hold.
        #expect(try await store.claim(owner: "w2", limit: 10, now: 2_000, leaseUntil: 32_000).isEmpty)
        let outcome = StoredOutcome(state: .delivered, status: 200, messageID: "m")
        let report = try await store.complete(claimed.map { .finish($0.lease!, outcome) }, now: 3_000)
        #expect(report.applied == Set(claimed.map(\.id)))
        #expect(report.lost.isEmpty)
        let rows = try await store.deliveries(ofSend: sendID)
        #expect(rows.map(\.state) == [.delivered, .delivered, .delivered])
        #expect(rows.map(\.position) == [0, 1, 2])
        #expect(rows.allSatisfy { $0.finishedAt == 3_000 && $0.leaseToken == nil })
        let counts = try await store.counts()
        #expect(counts[.delivered] == 3 && counts[.pending] == nil && counts[.leased] == nil)
        #expect(try await store.send(id: sendID)?.targetCount == 3)
    }

    static func compareAndSetOnLease(_ store: any DeliveryStore) async throws {
        _ = try await store.enqueue(send(tokens: ["a"]), now: 0, idempotencyWindow: window)
        let first = try await store.claim(owner: "w1", limit: 10, now: 0, leaseUntil: 100)
        #expect(first.count == 1)
        // The lease expires; another worker takes the row over: the re-send may duplicate, so the flag is set.
        let second = try await store.claim(owner: "w2", limit: 10, now: 100, leaseUntil: 200)
        #expect(second.count == 1)
        #expect(second[0].attempts == 2)
        #expect(second[0].mayHaveBeenDelivered)
        #expect(second[0].messageID == first[0].messageID, "a re-send carries the same message id")
        #expect(second[0].leaseToken != first[0].leaseToken)
        // The first worker wakes up: it can neither renew nor finish the row.
        #expect(try await store.renew([first[0].lease!], until: 500).isEmpty)
        let lost = try await store.complete([.finish(first[0].lease!, StoredOutcome(state: .failed))], now: 150)
        #expect(lost.applied.isEmpty && lost.lost == [first[0].id])
        #expect(try await store.renew([second[0].lease!], until: 500) == [second[0].id])
        let won = try await store.complete([.finish(second[0].lease!, StoredOutcome(state: .delivered, status: 200))],
                                           now: 160)
        #expect(won.applied == [second[0].id])
        // Finished once: a late duplicate completion of the winner is lost too.
        let again = try await store.complete([.finish(second[0].lease!, StoredOutcome(state: .failed))], now: 170)
        #expect(again.lost == [second[0].id])
        let rows = try await store.deliveries(ofSend: first[0].sendID)
        #expect(rows.count == 1 && rows[0].state == .delivered && rows[0].mayHaveBeenDelivered)
    }

    static func retryAndRelease(_ store: any DeliveryStore) async throws {
        _ = try await store.enqueue(send(tokens: ["a", "b"]), now: 0, idempotencyWindow: window)
        let claimed = try await store.claim(owner: "w", limit: 10, now: 0, leaseUntil: 1_000)
        let last = StoredOutcome(state: .rejected, status: 503, reason: "ServiceUnavailable", classification: "retryable")
        let report = try await store.complete([.retry(claimed[0].lease!, at: 500, last: last),
                                               .release(claimed[1].lease!)], now: 10)
        #expect(report.applied.count == 2)
        // The released row is due at once with its attempt given back; the retried one waits until 500.
        let now = try await store.claim(owner: "w", limit: 10, now: 20, leaseUntil: 1_000)
        #expect(now.map(\.id) == [claimed[1].id])
        #expect(now[0].attempts == 1)
        #expect(!now[0].mayHaveBeenDelivered)
        let later = try await store.claim(owner: "w", limit: 10, now: 500, leaseUntil: 1_500)
        // The retried target moved to a retry segment (a new id), due at its own time.
        #expect(later.map(\.identity) == [claimed[0].identity])
        #expect(later.map(\.position) == [claimed[0].position])
        #expect(later[0].attempts == 2)
        #expect(later[0].last?.status == 503)
        #expect(later[0].last?.reason == "ServiceUnavailable")
    }

    /// A claim takes whole segments (a send of up to `segmentSize` targets is one), as many as hold up to `limit`
    /// targets, and at least one.
    static func claimLimit(_ store: any DeliveryStore) async throws {
        for index in 0..<5 {
            _ = try await store.enqueue(send(tokens: (0..<5).map { "t\(index)-\($0)" }), now: 0, idempotencyWindow: window)
        }
        let a = try await store.claim(owner: "w1", limit: 10, now: 0, leaseUntil: 100)
        let b = try await store.claim(owner: "w2", limit: 7, now: 0, leaseUntil: 100)
        let c = try await store.claim(owner: "w3", limit: 3, now: 0, leaseUntil: 100)
        let d = try await store.claim(owner: "w4", limit: 10, now: 0, leaseUntil: 100)
        let e = try await store.claim(owner: "w5", limit: 10, now: 0, leaseUntil: 100)
        // The last segment may pass the limit: a segment is taken when the ones before it hold fewer than `limit`.
        #expect(a.count == 10 && b.count == 10 && c.count == 5 && d.isEmpty && e.isEmpty)
        #expect(Set(a.map(\.id) + b.map(\.id) + c.map(\.id)).count == 25, "no row claimed twice")
        #expect(Set(a.map(\.sendID)).count == 2, "two whole segments")
    }

    static func idempotency(_ store: any DeliveryStore) async throws {
        let first = try await store.enqueue(send(key: "k1", tokens: ["a"]), now: 0, idempotencyWindow: window)
        guard case .created = first else { Issue.record("first enqueue must create"); return }
        let repeated = try await store.enqueue(send(key: "k1", tokens: ["a"]), now: 1_000, idempotencyWindow: window)
        #expect(repeated == .existing(sendID: first.sendID))
        // Other scope: another send.
        let scoped = try await store.enqueue(send(key: "k1", tokens: ["a"], scope: "tenant-2"), now: 1_000,
                                             idempotencyWindow: window)
        #expect(scoped.sendID != first.sendID)
        do {
            _ = try await store.enqueue(send(key: "k1", fingerprint: "other", tokens: ["a"]), now: 2_000,
                                        idempotencyWindow: window)
            Issue.record("a reused key with another fingerprint must throw")
        } catch {
            #expect(error.code == .idempotencyKeyReused)
        }
        // After the window the key is free again.
        let expired = try await store.enqueue(send(key: "k1", fingerprint: "other", tokens: ["a"]),
                                              now: 3_600_000, idempotencyWindow: window)
        guard case .created = expired else { Issue.record("an expired key must create a new send"); return }
        #expect(try await store.send(id: first.sendID)?.idempotencyKey == nil)
        #expect(try await store.deliveries(ofSend: first.sendID).count == 1)
    }

    static func concurrentSameKey(_ store: any DeliveryStore, count: Int = 1_000) async throws {
        let results = try await withThrowingTaskGroup(of: EnqueueResult.self) { group in
            for _ in 0..<count {
                group.addTask {
                    try await store.enqueue(send(key: "same", tokens: ["a", "b"]), now: 0, idempotencyWindow: window)
                }
            }
            var results: [EnqueueResult] = []
            for try await result in group { results.append(result) }
            return results
        }
        #expect(results.count == count)
        #expect(Set(results.map(\.sendID)).count == 1, "\(count) concurrent enqueues of one key make one send")
        #expect(results.filter { if case .created = $0 { true } else { false } }.count == 1)
        let counts = try await store.counts()
        #expect(counts[.pending] == 2)
    }

    /// Many different enqueues at once (stores may commit them together): each gets its own answer, a refused
    /// one writes nothing and fails no other, invalid tokens and routing outcomes apply per send.
    static func concurrentMixedEnqueues(_ store: any DeliveryStore) async throws {
        // "dead" is in the registry before the burst.
        _ = try await store.enqueue(send(tokens: ["dead"]), now: 0, idempotencyWindow: window)
        let first = try await store.claim(owner: "w", limit: 10, now: 0, leaseUntil: 100)
        _ = try await store.complete(first.map {
            .finish($0.lease!, StoredOutcome(state: .rejected, status: 410, reason: "Unregistered",
                                             code: "provider/rejected", classification: "token-invalid", invalidSince: 5))
        }, now: 10)
        _ = try await store.enqueue(send(key: "taken", fingerprint: "original", tokens: ["t"]), now: 20,
                                    idempotencyWindow: window)
        enum Kind: Sendable { case plain, keyed, sameKeyOtherData, registryHit, routed }
        let kinds: [Kind] = (0..<200).map { [.plain, .keyed, .sameKeyOtherData, .registryHit, .routed][$0 % 5] }
        let results = await withTaskGroup(of: (Int, Result<EnqueueResult, NorqError>).self) { group in
            for (index, kind) in kinds.enumerated() {
                group.addTask {
                    var new: NewSend
                    switch kind {
                    case .plain: new = send(tokens: ["p\(index)"])
                    case .keyed: new = send(key: "k\(index)", tokens: ["k\(index)a", "k\(index)b"])
                    case .sameKeyOtherData: new = send(key: "taken", fingerprint: "other-\(index)", tokens: ["x\(index)"])
                    case .registryHit: new = send(tokens: ["dead", "live\(index)"])
                    case .routed:
                        new = send(tokens: ["r\(index)", "android\(index)"])
                        new.targets[1].provider = nil
                        new.targets[1].outcome = StoredOutcome(state: .failed, reason: "no provider", code: "routing/no-provider")
                    }
                    do throws(NorqError) {
                        return (index, .success(try await store.enqueue(new, now: 30, idempotencyWindow: window)))
                    } catch {
                        return (index, .failure(error))
                    }
                }
            }
            var results: [Int: Result<EnqueueResult, NorqError>] = [:]
            for await (index, result) in group { results[index] = result }
            return results
        }
        #expect(results.count == kinds.count)
        for (index, kind) in kinds.enumerated() {
            let result = try #require(results[index])
            switch kind {
            case .sameKeyOtherData:
                guard case .failure(let error) = result else { Issue.record("send \(index) must be refused"); continue }
                #expect(error.code == .idempotencyKeyReused)
            case .plain, .keyed, .registryHit, .routed:
                guard case .success(.created(let id)) = result else { Issue.record("send \(index): \(result)"); continue }
                let rows = try await store.deliveries(ofSend: id)
                switch kind {
                case .plain: #expect(rows.map(\.state) == [.pending])
                case .keyed: #expect(rows.map(\.identity) == ["k\(index)a", "k\(index)b"])
                case .registryHit:
                    #expect(rows.map(\.state) == [.skipped, .pending])
                    #expect(rows.first?.last?.code == "token/invalid")
                case .routed:
                    #expect(rows.map(\.state) == [.pending, .failed])
                    #expect(rows.last?.finishedAt != nil)
                case .sameKeyOtherData: break
                }
            }
        }
        // A repeat of a key made in the burst returns that send.
        let again = try await store.enqueue(send(key: "k1", tokens: ["k1a", "k1b"]), now: 40, idempotencyWindow: window)
        guard case .success(.created(let original)) = results[1] else { Issue.record("send 1 was not created"); return }
        #expect(again == .existing(sendID: original))
        let counts = try await store.counts()
        // pending: 40 plain + 80 keyed + 40 live + 40 routed + 1 "taken"; refused sends wrote nothing.
        #expect(counts[.pending] == 40 + 80 + 40 + 40 + 1)
        #expect(counts[.skipped] == 40 && counts[.failed] == 40)
    }

    /// A batch of sends read at once: the ones that exist, by id, each once.
    static func readSendsByID(_ store: any DeliveryStore) async throws {
        let a = try await store.enqueue(send(tokens: ["a"]), now: 1, idempotencyWindow: window).sendID
        let b = try await store.enqueue(send(key: "kb", fingerprint: "fb", tokens: ["b", "c"]), now: 2,
                                        idempotencyWindow: window).sendID
        let found = try await store.sends(ids: [a, "missing", b, a])
        #expect(Set(found.keys) == [a, b])
        #expect(found[b]?.idempotencyKey == "kb" && found[b]?.fingerprint == "fb" && found[b]?.targetCount == 2)
        #expect(found[a]?.createdAt == 1 && found[a]?.content == #"{"title":"hi"}"#)
        #expect(try await store.sends(ids: []).isEmpty)
        let many = try await (0..<600).asyncMap { index in
            try await store.enqueue(send(tokens: ["m\(index)"]), now: 3, idempotencyWindow: window).sendID
        }
        #expect(try await store.sends(ids: many).count == 600, "more ids than one statement binds")
    }

    /// A send larger than one insert statement applies the registry and routing outcomes like a small one.
    static func largeSendAppliesRegistryAndRoutingOutcomes(_ store: any DeliveryStore) async throws {
        let plainTokens = (0..<1_200).map { "bulk\($0)" }
        let plain = try await store.enqueue(send(tokens: plainTokens), now: 0, idempotencyWindow: window).sendID
        #expect(try await store.deliveries(ofSend: plain).allSatisfy { $0.state == .pending && $0.finishedAt == nil })
        // "bulk7" becomes invalid; a later large send skips it.
        let claimed = try await store.claim(owner: "w", limit: 2_000, now: 0, leaseUntil: 100)
        let dead = try #require(claimed.first { $0.identity == "bulk7" })
        _ = try await store.complete([.finish(dead.lease!, StoredOutcome(
            state: .rejected, status: 410, reason: "Unregistered", code: "provider/rejected",
            classification: "token-invalid", invalidSince: 5))], now: 10)
        let skipping = try await store.enqueue(send(tokens: plainTokens), now: 20, idempotencyWindow: window).sendID
        let rows = try await store.deliveries(ofSend: skipping)
        #expect(rows.count == 1_200)
        #expect(rows.filter { $0.state == .skipped }.map(\.identity) == ["bulk7"])
        #expect(rows.first { $0.identity == "bulk7" }?.finishedAt != nil, "the skipped row is finished (history)")
        #expect(rows.filter { $0.state == .pending }.count == 1_199)
        // Routing outcomes in a large send finish at enqueue too.
        var routed = send(tokens: (0..<1_200).map { "r\($0)" })
        routed.targets[1_100].provider = nil
        routed.targets[1_100].outcome = StoredOutcome(state: .failed, reason: "no provider", code: "routing/no-provider")
        let routedID = try await store.enqueue(routed, now: 30, idempotencyWindow: window).sendID
        let routedRows = try await store.deliveries(ofSend: routedID)
        #expect(routedRows.filter { $0.state == .failed }.map(\.position) == [1_100])
        #expect(routedRows[1_100].finishedAt != nil)
    }

    static func tokenRegistry(_ store: any DeliveryStore) async throws {
        _ = try await store.enqueue(send(tokens: ["dead", "alive"]), now: 0, idempotencyWindow: window)
        let claimed = try await store.claim(owner: "w", limit: 10, now: 0, leaseUntil: 100)
        let dead = try #require(claimed.first { $0.identity == "dead" })
        let alive = try #require(claimed.first { $0.identity == "alive" })
        _ = try await store.complete([
            .finish(dead.lease!, StoredOutcome(state: .rejected, status: 410, reason: "Unregistered",
                                               code: "provider/rejected", classification: "token-invalid",
                                               invalidSince: 50)),
            .finish(alive.lease!, StoredOutcome(state: .delivered, status: 200)),
        ], now: 60)
        let registry = try await store.invalidTokens(limit: 10)
        #expect(registry.map(\.token) == ["dead"])
        #expect(registry.first?.reason == "Unregistered" && registry.first?.invalidSince == 50)
        #expect(registry.first?.provider == "apns")
        // A later send skips the invalid token at enqueue.
        let later = try await store.enqueue(send(tokens: ["dead", "alive"]), now: 100, idempotencyWindow: window)
        let rows = try await store.deliveries(ofSend: later.sendID)
        #expect(rows.map(\.state) == [.skipped, .pending])
        #expect(rows[0].last?.code == "token/invalid")
        #expect(rows[0].finishedAt != nil)
        // Registered again before the invalid time: still skipped; after it: delivered again.
        try await store.registerToken("dead", at: 40)
        let stillSkipped = try await store.enqueue(send(tokens: ["dead"]), now: 110, idempotencyWindow: window)
        #expect(try await store.deliveries(ofSend: stillSkipped.sendID).map(\.state) == [.skipped])
        try await store.registerToken("dead", at: 70)
        let reachable = try await store.enqueue(send(tokens: ["dead"]), now: 120, idempotencyWindow: window)
        #expect(try await store.deliveries(ofSend: reachable.sendID).map(\.state) == [.pending])
        #expect(try await store.invalidTokens(limit: 10).first?.registeredAt == 70)
    }

    static func routingOutcomesFinishAtEnqueue(_ store: any DeliveryStore) async throws {
        var new = send(tokens: ["a", "b"])
        new.targets[1].provider = nil
        new.targets[1].outcome = StoredOutcome(state: .failed, reason: "no provider serves android",
                                               code: "routing/no-provider")
        let id = try await store.enqueue(new, now: 0, idempotencyWindow: window).sendID
        let rows = try await store.deliveries(ofSend: id)
        #expect(rows.map(\.state) == [.pending, .failed])
        #expect(rows[1].last?.code == "routing/no-provider")
        #expect(try await store.claim(owner: "w", limit: 10, now: 0, leaseUntil: 10).count == 1)
    }

    static func pruneByAge(_ store: any DeliveryStore) async throws {
        let old = try await store.enqueue(send(tokens: ["a", "b", "c"]), now: 0, idempotencyWindow: window).sendID
        let claimed = try await store.claim(owner: "w", limit: 10, now: 0, leaseUntil: 100)
        _ = try await store.complete(claimed.map { .finish($0.lease!, StoredOutcome(state: .delivered)) }, now: 10)
        let fresh = try await store.enqueue(send(tokens: ["d"]), now: 1_000, idempotencyWindow: window).sendID
        // Pruned by finished segment: the old send's three targets are one.
        #expect(try await store.prune(finishedBefore: 500, limit: 2) == 1)
        #expect(try await store.prune(finishedBefore: 500, limit: 2) == 0)
        #expect(try await store.deliveries(ofSend: old).isEmpty)
        #expect(try await store.send(id: old) == nil, "a send with no rows left is pruned too")
        #expect(try await store.deliveries(ofSend: fresh).count == 1, "pending rows are never pruned")
    }

    static func migrateTwice(_ store: any DeliveryStore) async throws {
        try await store.migrate()
        try await store.migrate()
    }

    /// A send's progress by state and a page of its rows by target position, hot and finished rows alike, without
    /// another send's rows.
    static func progressAndPages(_ store: any DeliveryStore) async throws {
        let sendID = try await store.enqueue(send(tokens: ["a", "b", "c", "d", "e"]), now: 0, idempotencyWindow: window).sendID
        _ = try await store.enqueue(send(tokens: ["x", "y"]), now: 0, idempotencyWindow: window)
        // A claim takes the send's whole segment (at least one, though it holds more than the limit).
        let claimed = try await store.claim(owner: "w", limit: 3, now: 0, leaseUntil: 100).filter { $0.sendID == sendID }
        #expect(claimed.count == 5)
        let finished = claimed.prefix(2)
        _ = try await store.complete(finished.map { .finish($0.lease!, StoredOutcome(state: .delivered, status: 200)) },
                                     now: 10)
        #expect(try await store.stateCounts(ofSend: sendID) == [.delivered: 2, .leased: 3])
        #expect(try await store.stateCounts(ofSend: "no-such-send").isEmpty)
        let page = try await store.deliveries(ofSend: sendID, positions: 1..<4)
        #expect(page.map(\.position) == [1, 2, 3])
        #expect(page.allSatisfy { $0.sendID == sendID })
        let all = try await store.deliveries(ofSend: sendID)
        #expect(page == Array(all[1..<4]), "a page holds the same rows as the full read")
        #expect(try await store.deliveries(ofSend: sendID, positions: 5..<10).isEmpty)
        #expect(try await store.deliveries(ofSend: sendID, positions: 0..<0).isEmpty)
    }

    static let all: [(String, @Sendable (any DeliveryStore) async throws -> Void)] = [
        ("progressAndPages", progressAndPages),
        ("enqueueClaimComplete", enqueueClaimComplete),
        ("concurrentMixedEnqueues", concurrentMixedEnqueues),
        ("readSendsByID", readSendsByID),
        ("largeSendAppliesRegistryAndRoutingOutcomes", largeSendAppliesRegistryAndRoutingOutcomes),
        ("compareAndSetOnLease", compareAndSetOnLease),
        ("retryAndRelease", retryAndRelease),
        ("claimLimit", claimLimit),
        ("idempotency", idempotency),
        ("tokenRegistry", tokenRegistry),
        ("routingOutcomesFinishAtEnqueue", routingOutcomesFinishAtEnqueue),
        ("pruneByAge", pruneByAge),
        ("migrateTwice", migrateTwice),
        ("queueDepth", queueDepth),
    ] + environmentChecks + tokenBatchChecks
}

extension Sequence {
    /// `map` with an async transform, in order.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
