import NorqCore
import PropertyBased
import Testing

@testable import NorqStore

/// The segment values' binary forms (every field round-trips) and `SegmentLedger`'s rules, without a database.
@Suite struct SegmentCodecTests {
    static func text<R: RandomNumberGenerator>(_ rng: inout R) -> String {
        let alphabet = Array("abcXYZ019-_\u{0}\u{7f}é😀\"\\{}")
        return String((0..<Int.random(in: 0...12, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! })
    }

    static func maybe<T>(_ present: Bool, _ value: @autoclosure () -> T) -> T? {
        present ? value() : nil
    }

    static func outcome<R: RandomNumberGenerator>(_ rng: inout R) -> StoredOutcome {
        StoredOutcome(state: [DeliveryState.delivered, .rejected, .failed, .skipped].randomElement(using: &rng)!,
                      status: maybe(Bool.random(using: &rng), Int.random(in: -1...600, using: &rng)), reason: maybe(Bool.random(using: &rng), text(&rng)),
                      code: maybe(Bool.random(using: &rng), text(&rng)), classification: maybe(Bool.random(using: &rng), text(&rng)),
                      invalidSince: maybe(Bool.random(using: &rng), Int64.random(in: Int64.min...Int64.max, using: &rng)),
                      messageID: maybe(Bool.random(using: &rng), text(&rng)), mayHaveBeenDelivered: Bool.random(using: &rng))
    }

    /// Identities of every shape the codec tells apart: hex of even length in lower or upper case (stored as
    /// bytes), mixed case, odd length, anything else.
    static func identity<R: RandomNumberGenerator>(_ rng: inout R) -> String {
        let length = Int.random(in: 0...34, using: &rng)
        switch Int.random(in: 0...3, using: &rng) {
        case 0: return String((0..<length).map { _ in Array("0123456789abcdef").randomElement(using: &rng)! })
        case 1: return String((0..<length).map { _ in Array("0123456789ABCDEF").randomElement(using: &rng)! })
        case 2: return String((0..<length).map { _ in Array("0123456789aBcDeF").randomElement(using: &rng)! })
        default: return text(&rng)
        }
    }

    static func target<R: RandomNumberGenerator>(_ rng: inout R) -> SegmentTarget {
        SegmentTarget(position: Int.random(in: 0...1_000_000, using: &rng), target: text(&rng), identity: identity(&rng),
                      provider: maybe(Bool.random(using: &rng), text(&rng)), recipientID: maybe(Bool.random(using: &rng), text(&rng)), messageID: maybe(Bool.random(using: &rng), text(&rng)),
                      attempts: Int.random(in: 0...50, using: &rng), mayHaveBeenDelivered: Bool.random(using: &rng),
                      last: maybe(Bool.random(using: &rng), outcome(&rng)),
                      acceptedAt: maybe(Bool.random(using: &rng), Int64.random(in: Int64.min...Int64.max, using: &rng)))
    }

    static let targets = Generator<[SegmentTarget], Shrink.None<[SegmentTarget]>>(run: { rng in
        (0..<Int.random(in: 0...20, using: &rng)).map { _ in target(&rng) }
    })

    static let progresses = Generator<SegmentProgress, Shrink.None<SegmentProgress>>(run: { rng in
        let count = Int.random(in: 0...300, using: &rng)
        var progress = SegmentProgress(count: count)
        for index in 0..<count where Bool.random(using: &rng) {
            progress.markDone(index)
            switch Int.random(in: 0...3, using: &rng) {
            case 0: progress.entries[index] = .finished(outcome(&rng), target(&rng),
                                                         at: Int64.random(in: 0...Int64.max, using: &rng))
            case 1: progress.entries[index] = .moved
            case 2: progress.entries[index] = .delivered(messageID: maybe(Bool.random(using: &rng), text(&rng)),
                                                          status: maybe(Bool.random(using: &rng), Int.random(in: 0...600, using: &rng)),
                                                          mayHaveBeenDelivered: Bool.random(using: &rng),
                                                          accepted: Bool.random(using: &rng))
            default: break
            }
        }
        return progress
    })

    @Test func everyFieldOfRandomTargetsRoundTrips() async {
        await propertyCheck(count: 200, input: Self.targets) { targets in
            let bytes = SegmentCodec.encode(targets: targets)
            #expect((try? SegmentCodec.decodeTargets(bytes)) == targets)
        }
    }

    @Test func everyEntryOfRandomProgressRoundTrips() async {
        await propertyCheck(count: 200, input: Self.progresses) { progress in
            let bytes = SegmentCodec.encode(progress: progress)
            #expect((try? SegmentCodec.decodeProgress(bytes)) == progress)
        }
    }

    /// Version 1's blobs (stop 30) are still read, field for field.
    @Test func versionOneTargetsAreStillRead() throws {
        var rng = SystemRandomNumberGenerator()
        // Version 1 had no acceptance time (stop 33 added it to version 2 as a presence bit).
        let targets = (0..<30).map { _ in
            var target = Self.target(&rng)
            target.acceptedAt = nil
            return target
        }
        var writer = SegmentWriter()
        writer.byte(1)
        writer.varint(UInt64(targets.count))
        for target in targets {
            writer.int(target.position)
            writer.string(target.target)
            writer.string(target.identity)
            writer.optional(target.provider) { $0.string($1) }
            writer.optional(target.recipientID) { $0.string($1) }
            writer.optional(target.messageID) { $0.string($1) }
            writer.int(target.attempts)
            writer.bool(target.mayHaveBeenDelivered)
            writer.optional(target.last) { SegmentCodec.write($1, into: &$0) }
        }
        #expect(try SegmentCodec.decodeTargets(writer.bytes) == targets)
    }

    /// A fresh APNs target (a 64-digit hex token, its provider, no message id: the worker makes it again) costs
    /// its segment's blob at most 45 bytes: the database grows by well under issue 29's 100 bytes per push.
    @Test func aFreshAPNsTargetIsSmall() throws {
        let targets = (0..<1_000).map { position in
            SegmentTarget(position: 40_000 + position, target: "tios",
                          identity: String(repeating: "0123456789abcdef", count: 4), provider: "apns-production",
                          recipientID: nil, messageID: nil)
        }
        let bytes = SegmentCodec.encode(targets: targets)
        #expect(bytes.count <= 45 * targets.count, "\(bytes.count) bytes for \(targets.count) targets")
        #expect(try SegmentCodec.decodeTargets(bytes) == targets)
    }

    @Test func positionsRoundTripAsRanges() throws {
        let scattered = PositionRanges(positions: [7, 8, 9, 3, 100, 101, 0])
        #expect(scattered.ranges == [7..<10, 3..<4, 100..<102, 0..<1])
        #expect(try SegmentCodec.decodePositions(SegmentCodec.encode(positions: scattered)) == scattered)
        #expect(scattered.positions == [7, 8, 9, 3, 100, 101, 0])
        #expect(scattered.lowest == 0 && scattered.highest == 101)
    }

    /// A truncated or foreign blob is `store/corrupt`, never a crash.
    @Test func damagedBlobsAreCorrupt() {
        let bytes = SegmentCodec.encode(targets: [SegmentTarget(position: 1, target: "{}", identity: "t", provider: nil,
                                                                recipientID: nil, messageID: "m")])
        for cut in [0, 1, 2, bytes.count / 2, bytes.count - 1] {
            #expect(throws: NorqError.self) { try SegmentCodec.decodeTargets(Array(bytes.prefix(cut))) }
        }
        #expect(throws: NorqError.self) { try SegmentCodec.decodeProgress([9, 9, 9]) }
        #expect(throws: NorqError.self) { try SegmentCodec.decodePositions([1, 1, 0, 0]) }
    }
}

@Suite struct SegmentLedgerTests {
    static func send(_ count: Int) -> NewSend {
        NewSend(id: "s", idempotencyKey: nil, fingerprint: "f", content: "{}",
                targets: (0..<count).map {
                    NewDelivery(position: $0, target: "{\"token\":\"t\($0)\"}", identity: "t\($0)", provider: "apns",
                                messageID: "m\($0)")
                })
    }

    static func leased(_ segment: NewSegment, id: Int64 = 1, attempts: Int = 1) -> SegmentRecord {
        SegmentRecord(id: id, sendID: segment.sendID, count: segment.count, open: segment.open, state: .leased,
                      attempts: attempts, nextAttemptAt: 0, leaseOwner: "w", leaseToken: "L", leaseExpiresAt: 100,
                      counts: segment.counts, progress: segment.progress, positions: segment.positions, createdAt: 0)
    }

    @Test func sendsAreCutInOrderAndDecidedTargetsAreDoneAtOnce() {
        var new = Self.send(5)
        new.targets[3].outcome = StoredOutcome(state: .failed, code: "routing/no-provider")
        let segments = SegmentLedger.segments(of: new, now: 7, size: 2) { target, _ in target.identity == "t4" ? InvalidTokenRecord(
            token: "t4", provider: nil, reason: "Unregistered", invalidSince: 3, recordedAt: 3) : nil }
        #expect(segments.map(\.count) == [2, 2, 1])
        #expect(segments.map { $0.positions.ranges } == [[0..<2], [2..<4], [4..<5]])
        #expect(segments.map(\.open) == [2, 1, 0])
        #expect(segments[1].counts == SegmentCounts(failed: 1))
        #expect(segments[2].isFinished && segments[2].counts == SegmentCounts(skipped: 1))
        if case .finished(let outcome, let target, let at)? = segments[2].progress.entries[0] {
            #expect(outcome.code == "token/invalid" && target.identity == "t4" && at == 7)
        } else {
            Issue.record("the skipped target keeps its outcome")
        }
    }

    /// A service that only accepted a target (a ticket, as Expo's) is shown as such, hot and in history: never as
    /// delivered.
    @Test func anAcceptedTargetStaysAcceptedInHistory() {
        let segment = SegmentLedger.segments(of: Self.send(2), now: 0, size: 10, invalid: nil)[0]
        var record = Self.leased(segment)
        let rows = SegmentLedger.claimedRows(record, targets: segment.targets)
        let accepted = StoredOutcome(state: .delivered, status: 200,
                                     classification: StoredOutcome.acceptedClassification, messageID: "ticket-0")
        let delivered = StoredOutcome(state: .delivered, status: 200)
        let applied = SegmentLedger.apply([.finish(rows[0].lease!, accepted), .finish(rows[1].lease!, delivered)],
                                          to: &record, targets: nil, now: 5)
        #expect(applied.finished && record.counts.delivered == 2)
        let shown = SegmentLedger.rows(SegmentLedger.history(of: record, finishedAt: 6), targets: segment.targets,
                                       positions: 0..<10)
        #expect(shown.map { $0.last?.isAccepted } == [true, false])
        #expect(shown[0].last?.messageID == "ticket-0")
        // And through the stored progress's bytes.
        let decoded = try? SegmentCodec.decodeProgress(SegmentCodec.encode(progress: record.progress))
        #expect(decoded == record.progress)
    }

    /// A target the service accepted moves to a receipt segment (flagged, so stores count it as `accepted`), with
    /// the acceptance time; a poll that finds no receipt moves it again keeping that time; its receipt finishes it.
    @Test func anAcceptedTargetWaitsForItsReceiptInAReceiptSegment() throws {
        let segment = SegmentLedger.segments(of: Self.send(3), now: 0, size: 10, invalid: nil)[0]
        var record = Self.leased(segment)
        let rows = SegmentLedger.claimedRows(record, targets: segment.targets)
        let ticket = StoredOutcome(state: .delivered, status: 200,
                                   classification: StoredOutcome.acceptedClassification, messageID: "ticket-0")
        let busy = StoredOutcome(state: .rejected, status: 503, classification: "retryable")
        let applied = SegmentLedger.apply([.retry(rows[0].lease!, at: 900_000, last: ticket),
                                           .retry(rows[1].lease!, at: 900_000, last: busy),
                                           .finish(rows[2].lease!, StoredOutcome(state: .delivered, status: 200))],
                                          to: &record, targets: segment.targets, now: 50)
        #expect(applied.finished && record.counts.delivered == 1, "moved targets count where they end")
        let receipts = applied.newSegments.filter(\.awaitsReceipts)
        let retries = applied.newSegments.filter { !$0.awaitsReceipts }
        #expect(receipts.count == 1 && retries.count == 1, "a retry and a receipt never share a segment")
        let waiting = try #require(receipts.first?.targets.first)
        #expect(waiting.identity == "t0" && waiting.acceptedAt == 50 && waiting.awaitsReceipt)
        #expect(waiting.last?.messageID == "ticket-0")
        #expect(retries.first?.targets.first?.acceptedAt == nil)
        // Shown to a reader as accepted (with its ticket); claimed by a worker as leased.
        var receipt = SegmentRecord(id: 2, sendID: "s", count: 1, open: 1, state: .pending, attempts: 0,
                                    nextAttemptAt: 900_000, counts: SegmentCounts(),
                                    progress: SegmentProgress(count: 1), positions: receipts[0].positions, createdAt: 50)
        let shown = SegmentLedger.rows(receipt, targets: receipts[0].targets, positions: 0..<10)
        #expect(shown.map(\.state) == [.accepted] && shown[0].acceptedAt == 50)
        receipt.state = .leased
        receipt.leaseToken = "R"
        receipt.attempts = 1
        let polled = SegmentLedger.claimedRows(receipt, targets: receipts[0].targets)
        #expect(polled.map(\.state) == [.leased] && polled[0].last?.isAccepted == true)
        // No receipt yet: moved again, the acceptance time kept.
        var again = receipt
        let later = SegmentLedger.apply([.retry(polled[0].lease!, at: 2_000_000, last: ticket)], to: &again,
                                        targets: receipts[0].targets, now: 1_000_000)
        #expect(later.newSegments.map(\.awaitsReceipts) == [true])
        #expect(later.newSegments.first?.targets.first?.acceptedAt == 50)
        // The receipt: finished where it is.
        let gone = StoredOutcome(state: .rejected, status: 200, reason: "DeviceNotRegistered",
                                 classification: "token-invalid", messageID: "ticket-0")
        let done = SegmentLedger.apply([.finish(polled[0].lease!, gone)], to: &receipt, targets: receipts[0].targets,
                                       now: 1_000_000)
        #expect(done.finished && receipt.counts.rejected == 1 && done.registry.map(\.token) == ["t0"])
    }

    @Test func aCheckpointAppliesUnderTheLeaseOnlyOnce() {
        let segment = SegmentLedger.segments(of: Self.send(3), now: 0, size: 10, invalid: nil)[0]
        var record = Self.leased(segment)
        let rows = SegmentLedger.claimedRows(record, targets: segment.targets)
        #expect(rows.map(\.id) == [1 << 20, 1 << 20 | 1, 1 << 20 | 2])
        #expect(rows.allSatisfy { $0.leaseToken == "L" && $0.attempts == 1 })
        let delivered = StoredOutcome(state: .delivered, status: 200, messageID: "m0")
        var applied = SegmentLedger.apply([.finish(rows[0].lease!, delivered),
                                           .finish(Lease(rowID: rows[1].id, token: "other"), delivered)],
                                          to: &record, targets: nil, now: 5)
        #expect(applied.applied == [rows[0].id] && applied.lost == [rows[1].id])
        #expect(record.open == 2 && record.counts.delivered == 1 && !applied.finished)
        // The same target again: lost, nothing changes.
        applied = SegmentLedger.apply([.finish(rows[0].lease!, delivered)], to: &record, targets: nil, now: 6)
        #expect(applied.lost == [rows[0].id] && record.counts.delivered == 1)
        // A rejection needs the targets (the kept target, the registry entry).
        let gone = StoredOutcome(state: .rejected, status: 410, reason: "Unregistered", classification: "token-invalid",
                                 invalidSince: 4, environment: "production")
        applied = SegmentLedger.apply([.finish(rows[1].lease!, gone)], to: &record, targets: nil, now: 7)
        #expect(applied.lost == [rows[1].id], "without the targets a non-delivery is not applied")
        #expect(SegmentLedger.needsTargets([.finish(rows[1].lease!, gone)]))
        applied = SegmentLedger.apply([.finish(rows[1].lease!, gone), .finish(rows[2].lease!, delivered)],
                                      to: &record, targets: segment.targets, now: 8)
        #expect(applied.finished && record.open == 0)
        #expect(applied.registry == [RegistryUpdate(token: "t1", provider: "apns", environment: "production",
                                                    outcome: StoredOutcome(state: .rejected, status: 410,
                                                                           reason: "Unregistered",
                                                                           classification: "token-invalid",
                                                                           invalidSince: 4))])
        let history = SegmentLedger.history(of: record, finishedAt: 9)
        let shown = SegmentLedger.rows(history, targets: segment.targets, positions: 0..<10)
        #expect(shown.map(\.state) == [.delivered, .rejected, .delivered])
        #expect(shown.map(\.identity) == ["t0", "t1", "t2"])
        #expect(shown[1].finishedAt == 9 && shown[1].last?.reason == "Unregistered")
        // Without the targets (pruned), history still says each position's state.
        #expect(SegmentLedger.rows(history, positions: 0..<10).map(\.state) == [.delivered, .rejected, .delivered])
    }

    @Test func retriesMoveToRetrySegmentsAndReleasesGiveTheClaimBack() {
        let segment = SegmentLedger.segments(of: Self.send(5), now: 0, size: 10, invalid: nil)[0]
        var record = Self.leased(segment, attempts: 2)
        let rows = SegmentLedger.claimedRows(record, targets: segment.targets)
        let busy = StoredOutcome(state: .rejected, status: 503, classification: "retryable", mayHaveBeenDelivered: true)
        // Two retries a second apart share a segment; one a minute later gets its own. One target is given back
        // while the fifth is still in flight: it moves to a segment due now, its claim uncounted.
        let applied = SegmentLedger.apply([.retry(rows[0].lease!, at: 1_000, last: busy),
                                           .retry(rows[1].lease!, at: 1_900, last: busy),
                                           .retry(rows[2].lease!, at: 61_000, last: busy),
                                           .release(rows[3].lease!)], to: &record, targets: segment.targets, now: 10)
        #expect(!applied.finished && record.open == 1 && applied.applied.count == 4)
        let retries = applied.newSegments.filter { $0.nextAttemptAt > 10 }
        #expect(retries.map(\.nextAttemptAt) == [1_900, 61_000])
        #expect(retries.map { $0.targets.map(\.identity) } == [["t0", "t1"], ["t2"]])
        #expect(retries[0].targets.allSatisfy { $0.attempts == 2 && $0.mayHaveBeenDelivered && $0.last?.status == 503 })
        let givenBack = applied.newSegments.filter { $0.nextAttemptAt == 10 }
        #expect(givenBack.map { $0.targets.map(\.identity) } == [["t3"]])
        #expect(givenBack.first?.targets.first?.attempts == 1, "the claim that did not send it is not counted")
        // Every open target given back: the segment itself goes back, its claim uncounted.
        var whole = Self.leased(segment, attempts: 1)
        let all = SegmentLedger.claimedRows(whole, targets: segment.targets)
        let released = SegmentLedger.apply(all.map { .release($0.lease!) }, to: &whole, targets: segment.targets,
                                           now: 20)
        #expect(released.newSegments.isEmpty && !released.finished)
        #expect(whole.state == .pending && whole.attempts == 0 && whole.leaseToken == nil && whole.open == 5)
    }

    @Test func legacyRowsBecomeOneTargetSegments() {
        let pending = OutboxRow(id: 1, sendID: "s", position: 0, target: "{}", identity: "a", provider: "apns",
                                recipientID: nil, state: .pending, attempts: 1, nextAttemptAt: 5, messageID: "m-a")
        var leased = pending
        leased.position = 1
        leased.state = .leased
        leased.leaseExpiresAt = 90
        var done = pending
        done.position = 2
        done.state = .failed
        done.last = StoredOutcome(state: .failed, reason: "gone")
        done.finishedAt = 40
        let (segments, history) = SegmentLedger.legacy(hot: [pending, leased], finished: [done])
        #expect(segments.map(\.0.nextAttemptAt) == [5, 90])
        #expect(segments.map { $0.0.targets[0].mayHaveBeenDelivered } == [false, true])
        #expect(segments.map { $0.0.targets[0].attempts } == [1, 1])
        #expect(history.count == 1 && history[0].0.counts == SegmentCounts(failed: 1) && history[0].0.finishedAt == 40)
    }
}

/// A new send's targets held as encoded segments (`SendTargets`): every field of every target comes back, in
/// order, at any segment size; the stores' grouped registry lookup decides the same targets as the per-target one.
@Suite struct SendTargetsTests {
    static func delivery<R: RandomNumberGenerator>(_ rng: inout R, position: Int) -> NewDelivery {
        func maybe<T>(_ present: Bool, _ value: @autoclosure () -> T) -> T? { present ? value() : nil }
        return NewDelivery(position: position, target: SegmentCodecTests.text(&rng),
                           identity: SegmentCodecTests.identity(&rng),
                           provider: maybe(Bool.random(using: &rng), SegmentCodecTests.text(&rng)),
                           recipientID: maybe(Bool.random(using: &rng), SegmentCodecTests.text(&rng)),
                           messageID: maybe(Bool.random(using: &rng), SegmentCodecTests.text(&rng)),
                           outcome: maybe(Int.random(in: 0...5, using: &rng) == 0, SegmentCodecTests.outcome(&rng)),
                           environment: [nil, "sandbox", "production", SegmentCodecTests.text(&rng)]
                               .randomElement(using: &rng)!)
    }

    static let sends = Generator<([NewDelivery], Int), Shrink.None<([NewDelivery], Int)>>(run: { rng in
        let deliveries = (0..<Int.random(in: 0...40, using: &rng)).map { delivery(&rng, position: $0) }
        return (deliveries, Int.random(in: 1...12, using: &rng))
    })

    @Test func everyFieldOfEveryTargetComesBackInOrder() async {
        await propertyCheck(count: 200, input: Self.sends) { input in
            let (deliveries, size) = input
            let targets = SendTargets(deliveries, segmentSize: size)
            #expect(targets.count == deliveries.count)
            #expect(Array(targets) == deliveries)
            #expect(targets.segments.map(\.count) == stride(from: 0, to: deliveries.count, by: size).map {
                min(size, deliveries.count - $0)
            })
            // Cut again to another size: the same targets.
            #expect(Array(SendTargets(targets, segmentSize: size + 1)) == deliveries)
        }
    }

    @Test func theGroupedRegistryLookupDecidesWhatThePerTargetOneDoes() async throws {
        var rng = SystemRandomNumberGenerator()
        let deliveries = (0..<2_000).map { Self.delivery(&rng, position: $0) }
        let send = NewSend(id: "s", idempotencyKey: nil, fingerprint: "f", content: "{}",
                           targets: SendTargets(deliveries, segmentSize: 7))
        // Every third identity is in the registry, for every provider and environment.
        let invalid = Set(deliveries.enumerated().filter { $0.offset % 3 == 0 }.map(\.element.identity))
        func record(_ token: String) -> InvalidTokenRecord {
            InvalidTokenRecord(token: token, provider: nil, reason: "Unregistered", invalidSince: 3, recordedAt: 3)
        }
        let one = SegmentLedger.segments(of: send, now: 9, size: 7) { target, _ in
            invalid.contains(target.identity) ? record(target.identity) : nil
        }
        var lookups = 0
        let grouped = await SegmentLedger.segments(of: [(send, 9)], size: 7, registryMayMatch: true) { tokens in
            lookups += 1
            return Dictionary(uniqueKeysWithValues: tokens.filter(invalid.contains).map { ($0, [record($0)]) })
        }
        #expect(grouped == one)
        #expect(lookups == 1, "2,000 targets are one group")
        #expect(one.reduce(0) { $0 + $1.counts.skipped } > 0)
        let skippedNothing = await SegmentLedger.segments(of: [(send, 9)], size: 7, registryMayMatch: false) { _ in
            Issue.record("an empty registry is not read")
            return [:]
        }
        // Only routing's outcomes: the same segments as without a registry.
        #expect(skippedNothing == SegmentLedger.segments(of: send, now: 9, size: 7, invalid: nil))
        #expect(skippedNothing.reduce(0) { $0 + $1.counts.skipped } < one.reduce(0) { $0 + $1.counts.skipped })
    }
}
