package import NorqCore

/// The pure rules of segments (no I/O; every store applies them, so they behave alike): cutting a send into
/// segments, the rows a claimed segment hands to a worker, how a checkpoint's completions change a segment (and
/// which retry segments and registry entries they produce), and the rows a status read shows.
///
/// A target's id (`OutboxRow.id`, `Lease.rowID`) is its segment's id shifted left by ``indexBits`` plus its index
/// in the segment: unique across the store and stable for the segment's life; a lease's token is its segment's.
package enum SegmentLedger {
    /// Bits of a target id that hold the index in its segment.
    package static let indexBits = 20
    /// The largest segment (`DeliveryStoreSettings.segmentSize` is clamped to it).
    package static let maximumSize = 100_000

    package static func targetID(segment: Int64, index: Int) -> Int64 { segment << Int64(indexBits) | Int64(index) }

    package static func split(_ id: Int64) -> (segment: Int64, index: Int) {
        (id >> Int64(indexBits), Int(id & ((1 << Int64(indexBits)) - 1)))
    }

    /// Completions grouped by segment, each group in the order given; segments in id order (the one lock order).
    package static func bySegment(_ completions: [RowCompletion]) -> [(segment: Int64, completions: [RowCompletion])] {
        var groups: [Int64: [RowCompletion]] = [:]
        for completion in completions { groups[split(completion.lease.rowID).segment, default: []].append(completion) }
        return groups.keys.sorted().map { ($0, groups[$0]!) }
    }

    /// Leases grouped by segment (one token per segment), in id order.
    package static func bySegment(_ leases: [Lease]) -> [(segment: Int64, token: String, rows: [Int64])] {
        var groups: [Int64: (String, [Int64])] = [:]
        for lease in leases {
            let segment = split(lease.rowID).segment
            groups[segment, default: (lease.token, [])].1.append(lease.rowID)
        }
        return groups.keys.sorted().map { ($0, groups[$0]!.0, groups[$0]!.1) }
    }

    // MARK: enqueue

    /// The segments of a new send, cut to `size` (its `SendTargets` are reused when already cut to it). A target
    /// whose outcome is decided already (routing, a disabled template, or `invalid` finds its token in the
    /// registry: the target and its environment) is done at once; a segment whose targets are all done goes to
    /// history at once. With `invalid` nil the registry is not consulted (it holds nothing) and no blob is decoded.
    package static func segments(of send: NewSend, now: Int64, size: Int,
                                 invalid: ((SegmentTarget, String?) -> InvalidTokenRecord?)?) -> [NewSegment] {
        pendingSegments(of: send, size: size).map { pending in
            segment(pending, sendID: send.id, now: now, targets: invalid == nil ? nil : pending.targets,
                    invalid: invalid ?? { _, _ in nil })
        }
    }

    /// Targets whose identities are consulted in the registry together: at most this many are held at once.
    package static let registryGroup = 16_384

    /// `segments(of:now:size:invalid:)` for stores whose registry is read with I/O, for several sends at once (a
    /// group commit): `registry` gets the open identities of up to `registryGroup` targets at a time (never a whole
    /// large send's: a million identities would be ~110 MB; small sends share a lookup) and returns their entries.
    /// With `registryMayMatch` false nothing is decoded or read. The segments come in the order of `sends`.
    package static func segments(
        of sends: [(send: NewSend, now: Int64)], size: Int, registryMayMatch: Bool,
        registry: ([String]) async throws -> [String: [InvalidTokenRecord]]
    ) async rethrows -> [NewSegment] {
        let pendings = sends.flatMap { send, now in
            pendingSegments(of: send, size: size).map { (pending: $0, sendID: send.id, now: now) }
        }
        guard registryMayMatch else {
            return pendings.map { segment($0.pending, sendID: $0.sendID, now: $0.now, targets: nil) { _, _ in nil } }
        }
        var segments: [NewSegment] = []
        segments.reserveCapacity(pendings.count)
        var start = 0
        while start < pendings.count {
            var end = start + 1, held = pendings[start].pending.count
            while end < pendings.count, held + pendings[end].pending.count <= registryGroup {
                held += pendings[end].pending.count
                end += 1
            }
            let group = pendings[start..<end]
            start = end
            let decoded = group.map { $0.pending.hasUndecided ? $0.pending.targets : [] }
            var identities = Set<String>()
            for (item, targets) in zip(group, decoded) {
                for (index, target) in targets.enumerated() where item.pending.decided[index] == nil {
                    identities.insert(target.identity)
                }
            }
            let entries = identities.isEmpty ? [:] : try await registry(Array(identities))
            for (item, targets) in zip(group, decoded) {
                segments.append(segment(item.pending, sendID: item.sendID, now: item.now,
                                        targets: targets.isEmpty ? nil : targets) { target, environment in
                    DeliveryStoreRules.newestInvalid(entries[target.identity] ?? [], provider: target.provider,
                                                     environment: environment)
                })
            }
        }
        return segments
    }

    /// The send's segments at `size`: its own when cut to that size, else cut again.
    private static func pendingSegments(of send: NewSend, size: Int) -> [SendSegment] {
        let size = min(max(1, size), maximumSize)
        return send.targets.segmentSize == size ? send.targets.segments
            : SendTargets(send.targets, segmentSize: size).segments
    }

    /// One segment of a new send. `targets` are its decoded targets when the registry is consulted (nil: it is
    /// not); they are decoded here anyway when routing finished a target other than delivered (its outcome is
    /// kept with the target).
    private static func segment(_ pending: SendSegment, sendID: String, now: Int64, targets decoded: [SegmentTarget]?,
                                invalid: (SegmentTarget, String?) -> InvalidTokenRecord?) -> NewSegment {
        var progress = SegmentProgress(count: pending.count)
        var counts = SegmentCounts()
        var open = pending.count
        let keepsTargets = pending.decided.values.contains { $0.state != .delivered }
        let targets = decoded ?? (keepsTargets ? pending.targets : nil)
        for index in 0..<pending.count {
            var outcome = pending.decided[index]
            if outcome == nil, let decoded, let record = invalid(decoded[index], pending.environment(at: index)) {
                outcome = DeliveryStoreRules.invalidTokenOutcome(record)
            }
            guard var outcome else { continue }
            outcome.environment = nil
            progress.markDone(index)
            counts.add(outcome.state)
            open -= 1
            if outcome.state != .delivered, let targets {
                progress.entries[index] = .finished(outcome, targets[index], at: now)
            }
        }
        return NewSegment(sendID: sendID, encodedTargets: pending.encodedTargets, positions: pending.positions,
                          count: pending.count, open: open, counts: counts, progress: progress, nextAttemptAt: now)
    }

    // MARK: claim

    /// The rows a worker gets for a segment it claimed (its open targets), under the segment's lease.
    package static func claimedRows(_ record: SegmentRecord, targets: [SegmentTarget]) -> [OutboxRow] {
        var rows: [OutboxRow] = []
        rows.reserveCapacity(record.open)
        for (index, target) in targets.enumerated() where !record.progress.isDone(index) {
            rows.append(openRow(record, target: target, index: index))
        }
        return rows
    }

    /// An open target's row: in the segment's state for a worker that claimed it; for a reader (`shown`), a
    /// target waiting for its receipt is `accepted` (it has its outcome; the receipt decides the final one).
    private static func openRow(_ record: SegmentRecord, target: SegmentTarget, index: Int,
                                shown: Bool = false) -> OutboxRow {
        OutboxRow(id: targetID(segment: record.id, index: index), sendID: record.sendID, position: target.position,
                  target: target.target, identity: target.identity, provider: target.provider,
                  recipientID: target.recipientID, state: shown && target.awaitsReceipt ? .accepted : record.state,
                  attempts: target.attempts + record.attempts,
                  nextAttemptAt: record.nextAttemptAt, leaseOwner: record.leaseOwner, leaseToken: record.leaseToken,
                  leaseExpiresAt: record.leaseExpiresAt, messageID: target.messageID,
                  mayHaveBeenDelivered: target.mayHaveBeenDelivered || record.mayHaveBeenDelivered, last: target.last,
                  acceptedAt: target.acceptedAt)
    }

    // MARK: completions

    /// Whether applying `completions` needs the segment's targets: anything but a delivery does (an outcome kept
    /// with its target, a retry segment, a registry entry).
    package static func needsTargets(_ completions: [RowCompletion]) -> Bool {
        completions.contains { completion in
            if case .finish(_, let outcome) = completion, outcome.state == .delivered { return false }
            return true
        }
    }

    /// What applying a segment's completions did.
    package struct Application: Sendable, Hashable {
        package var applied: [Int64] = []
        /// Completions whose lease is not the segment's current one, or whose target is done already.
        package var lost: [Int64] = []
        /// Retry segments (and a segment of targets given back while others of the lease are still in flight).
        package var newSegments: [NewSegment] = []
        /// Token-invalid finishes for the registry.
        package var registry: [RegistryUpdate] = []
        /// Every target of the segment is done: it moves to history.
        package var finished = false
        /// The segment's row changed (progress, counts, or its lease was given back).
        package var changed: Bool { !applied.isEmpty }
    }

    /// Applies completions (all for `record`'s segment) under compare-and-set on its lease: a completion whose
    /// token is not the segment's current lease, or whose target is done already, is lost and changes nothing.
    /// `targets` is needed when `needsTargets(completions)`; without it those completions are lost.
    package static func apply(_ completions: [RowCompletion], to record: inout SegmentRecord,
                              targets: [SegmentTarget]?, now: Int64) -> Application {
        var result = Application()
        var retries: [(at: Int64, target: SegmentTarget)] = []
        var receipts: [(at: Int64, target: SegmentTarget)] = []
        var released: [(index: Int, target: SegmentTarget)] = []
        var seen = Set<Int>()
        for completion in completions {
            let lease = completion.lease
            let (segment, index) = split(lease.rowID)
            guard segment == record.id, record.state == .leased, record.leaseToken == lease.token, index < record.count,
                  !record.progress.isDone(index), seen.insert(index).inserted else {
                result.lost.append(lease.rowID)
                continue
            }
            let target = targets.flatMap { index < $0.count ? $0[index] : nil }
            switch completion {
            case .finish(_, var outcome):
                let environment = outcome.environment
                outcome.environment = nil
                if outcome.state == .delivered {
                    let status = outcome.status == 200 ? nil : outcome.status
                    let may = outcome.mayHaveBeenDelivered || record.mayHaveBeenDelivered
                    let accepted = outcome.isAccepted
                    if outcome.messageID != nil || status != nil || may || accepted {
                        progress(&record, index, .delivered(messageID: outcome.messageID, status: status,
                                                            mayHaveBeenDelivered: may, accepted: accepted))
                    } else {
                        record.progress.markDone(index)
                    }
                } else {
                    guard var target else { result.lost.append(lease.rowID); seen.remove(index); continue }
                    target.attempts += record.attempts
                    outcome.mayHaveBeenDelivered = outcome.mayHaveBeenDelivered || target.mayHaveBeenDelivered
                        || record.mayHaveBeenDelivered
                    progress(&record, index, .finished(outcome, target, at: now))
                    if outcome.classification == "token-invalid" {
                        result.registry.append(RegistryUpdate(token: target.identity, provider: target.provider,
                                                              environment: environment, outcome: outcome))
                    }
                }
                record.counts.add(outcome.state)
            case .retry(_, let at, var last):
                guard var target else { result.lost.append(lease.rowID); seen.remove(index); continue }
                last.environment = nil
                target.attempts += record.attempts
                target.mayHaveBeenDelivered = target.mayHaveBeenDelivered || record.mayHaveBeenDelivered
                    || last.mayHaveBeenDelivered
                target.last = last
                if last.isAccepted {
                    // Accepted by the service (a ticket): it waits for its receipt in a receipt segment, from the
                    // first acceptance on (a poll that found no receipt yet keeps that time).
                    target.acceptedAt = target.acceptedAt ?? now
                    receipts.append((at, target))
                } else {
                    target.acceptedAt = nil
                    retries.append((at, target))
                }
                progress(&record, index, .moved)
            case .release:
                guard let target else { result.lost.append(lease.rowID); seen.remove(index); continue }
                released.append((index, target))
                continue  // applied below
            }
            record.open -= 1
            result.applied.append(lease.rowID)
        }
        if !released.isEmpty {
            if released.count == record.open {
                // Every target still open is given back: the segment itself goes back, its claim uncounted.
                record.state = .pending
                record.attempts = max(0, record.attempts - 1)
                record.leaseOwner = nil
                record.leaseToken = nil
                record.leaseExpiresAt = nil
                record.nextAttemptAt = now
            } else {
                // Others of this lease are still in flight: the given-back targets move to a segment of their own,
                // due now, with their attempts as before this claim.
                var moved: [SegmentTarget] = []
                for (index, var target) in released {
                    target.attempts += max(0, record.attempts - 1)
                    target.mayHaveBeenDelivered = target.mayHaveBeenDelivered || record.mayHaveBeenDelivered
                    moved.append(target)
                    progress(&record, index, .moved)
                    record.open -= 1
                }
                result.newSegments.append(NewSegment(sendID: record.sendID, targets: moved, open: moved.count,
                                                     progress: SegmentProgress(count: moved.count), nextAttemptAt: now,
                                                     awaitsReceipts: moved.allSatisfy(\.awaitsReceipt)))
            }
            result.applied += released.map { targetID(segment: record.id, index: $0.index) }
        }
        result.newSegments += grouped(retries, sendID: record.sendID, awaitingReceipts: false)
        result.newSegments += grouped(receipts, sendID: record.sendID, awaitingReceipts: true)
        result.finished = record.open == 0
        return result
    }

    /// Retry (or receipt) segments of `moves`: targets due within a second of each other share one, due at the
    /// latest of their times.
    private static func grouped(_ moves: [(at: Int64, target: SegmentTarget)], sendID: String,
                                awaitingReceipts: Bool) -> [NewSegment] {
        var segments: [NewSegment] = []
        var group: [SegmentTarget] = []
        var groupStart: Int64 = 0
        var groupAt: Int64 = 0
        func flush() {
            guard !group.isEmpty else { return }
            segments.append(NewSegment(sendID: sendID, targets: group, open: group.count,
                                       progress: SegmentProgress(count: group.count), nextAttemptAt: groupAt,
                                       awaitsReceipts: awaitingReceipts))
            group = []
        }
        for move in moves.sorted(by: { $0.at < $1.at }) {
            if !group.isEmpty && move.at > groupStart + 1000 { flush() }
            if group.isEmpty { groupStart = move.at }
            group.append(move.target)
            groupAt = move.at
        }
        flush()
        return segments
    }

    private static func progress(_ record: inout SegmentRecord, _ index: Int, _ entry: SegmentProgress.Entry) {
        record.progress.markDone(index)
        record.progress.entries[index] = entry
    }

    /// A finished segment as history keeps it.
    package static func history(of record: SegmentRecord, finishedAt: Int64) -> SegmentHistoryRecord {
        var progress = record.progress
        progress.done = []  // every target is done
        return SegmentHistoryRecord(id: record.id, sendID: record.sendID, count: record.count,
                                    attempts: record.attempts, counts: record.counts, progress: progress,
                                    positions: record.positions, finishedAt: finishedAt)
    }

    // MARK: reading

    /// The rows of a hot segment at `positions` (a target moved to a retry segment is shown there, not here).
    package static func rows(_ record: SegmentRecord, targets: [SegmentTarget], positions: Range<Int>) -> [OutboxRow] {
        var rows: [OutboxRow] = []
        for (index, target) in targets.enumerated() where positions.contains(target.position) {
            guard record.progress.isDone(index) else {
                rows.append(openRow(record, target: target, index: index, shown: true))
                continue
            }
            if let row = finishedRow(segment: record.id, sendID: record.sendID, index: index, position: target.position,
                                     entry: record.progress.entries[index], target: target, claims: record.attempts,
                                     finishedAt: nil) {
                rows.append(row)
            }
        }
        return rows
    }

    /// The rows of a finished segment at `positions`, with its targets while they are kept (until the send is
    /// pruned); without them a delivered target's row has an empty target and identity.
    package static func rows(_ history: SegmentHistoryRecord, targets: [SegmentTarget]? = nil,
                             positions: Range<Int>) -> [OutboxRow] {
        var rows: [OutboxRow] = []
        var index = 0
        for range in history.positions.ranges {
            for position in range {
                defer { index += 1 }
                guard positions.contains(position) else { continue }
                let target = targets.flatMap { index < $0.count ? $0[index] : nil }
                if let row = finishedRow(segment: history.id, sendID: history.sendID, index: index, position: position,
                                         entry: history.progress.entries[index], target: target,
                                         claims: history.attempts, finishedAt: history.finishedAt) {
                    rows.append(row)
                }
            }
        }
        return rows
    }

    private static func finishedRow(segment: Int64, sendID: String, index: Int, position: Int,
                                    entry: SegmentProgress.Entry?, target: SegmentTarget?, claims: Int,
                                    finishedAt: Int64?) -> OutboxRow? {
        let id = targetID(segment: segment, index: index)
        switch entry {
        case .moved:
            return nil
        case .finished(let outcome, let kept, let at):
            return OutboxRow(id: id, sendID: sendID, position: position, target: kept.target, identity: kept.identity,
                             provider: kept.provider, recipientID: kept.recipientID, state: outcome.state,
                             attempts: kept.attempts, nextAttemptAt: 0, messageID: kept.messageID,
                             mayHaveBeenDelivered: outcome.mayHaveBeenDelivered, last: outcome,
                             finishedAt: finishedAt ?? at)
        case .delivered(let messageID, let status, let may, let accepted):
            return deliveredRow(id: id, sendID: sendID, position: position, target: target, messageID: messageID,
                                status: status ?? 200, may: may, accepted: accepted, claims: claims,
                                finishedAt: finishedAt)
        case nil:
            return deliveredRow(id: id, sendID: sendID, position: position, target: target, messageID: nil,
                                status: 200, may: false, accepted: false, claims: claims, finishedAt: finishedAt)
        }
    }

    private static func deliveredRow(id: Int64, sendID: String, position: Int, target: SegmentTarget?,
                                     messageID: String?, status: Int, may: Bool, accepted: Bool, claims: Int,
                                     finishedAt: Int64?) -> OutboxRow {
        OutboxRow(id: id, sendID: sendID, position: position, target: target?.target ?? "",
                  identity: target?.identity ?? "", provider: target?.provider, recipientID: target?.recipientID,
                  state: .delivered, attempts: (target?.attempts ?? 0) + claims, nextAttemptAt: 0,
                  messageID: target?.messageID ?? messageID, mayHaveBeenDelivered: may,
                  last: StoredOutcome(state: .delivered, status: status,
                                      classification: accepted ? StoredOutcome.acceptedClassification : nil,
                                      messageID: messageID, mayHaveBeenDelivered: may),
                  finishedAt: finishedAt)
    }
}

extension SegmentLedger {
    /// The rows of a store before segments (a row per push) as one-target segments, for the migration: a hot row
    /// becomes a pending segment due when its lease (if any) ends, carrying its attempts and, when it was leased,
    /// may-have-been-delivered (its worker may have sent it); a finished row becomes a history segment (id 0: the
    /// store assigns one).
    package static func legacy(hot: [OutboxRow], finished: [OutboxRow])
        -> (segments: [(NewSegment, OutboxRow)], history: [(SegmentHistoryRecord, SegmentTarget)]) {
        var segments: [(NewSegment, OutboxRow)] = []
        for row in hot {
            let target = SegmentTarget(position: row.position, target: row.target, identity: row.identity,
                                       provider: row.provider, recipientID: row.recipientID, messageID: row.messageID,
                                       attempts: row.attempts,
                                       mayHaveBeenDelivered: row.mayHaveBeenDelivered || row.state == .leased,
                                       last: row.last)
            let due = max(row.nextAttemptAt, row.state == .leased ? (row.leaseExpiresAt ?? 0) : 0)
            segments.append((NewSegment(sendID: row.sendID, targets: [target], open: 1,
                                        progress: SegmentProgress(count: 1), nextAttemptAt: due), row))
        }
        var history: [(SegmentHistoryRecord, SegmentTarget)] = []
        for row in finished {
            let kept = SegmentTarget(position: row.position, target: row.target, identity: row.identity,
                                     provider: row.provider, recipientID: row.recipientID, messageID: row.messageID,
                                     attempts: max(0, row.attempts - 1))
            var counts = SegmentCounts()
            counts.add(row.state)
            var progress = SegmentProgress(count: 0)
            progress.done = []
            if row.state == .delivered {
                let messageID = row.last?.messageID ?? row.messageID
                let status = row.last?.status == 200 ? nil : row.last?.status
                let accepted = row.last?.isAccepted ?? false
                if messageID != nil || status != nil || row.mayHaveBeenDelivered || accepted {
                    progress.entries[0] = .delivered(messageID: messageID, status: status,
                                                     mayHaveBeenDelivered: row.mayHaveBeenDelivered, accepted: accepted)
                }
            } else {
                let target = SegmentTarget(position: row.position, target: row.target, identity: row.identity,
                                           provider: row.provider, recipientID: row.recipientID,
                                           messageID: row.messageID, attempts: row.attempts,
                                           mayHaveBeenDelivered: row.mayHaveBeenDelivered)
                var outcome = row.last ?? StoredOutcome(state: row.state)
                outcome.state = row.state
                outcome.mayHaveBeenDelivered = outcome.mayHaveBeenDelivered || row.mayHaveBeenDelivered
                progress.entries[0] = .finished(outcome, target, at: row.finishedAt ?? 0)
            }
            history.append((SegmentHistoryRecord(id: 0, sendID: row.sendID, count: 1, attempts: 1, counts: counts,
                                                 progress: progress,
                                                 positions: PositionRanges([row.position..<(row.position + 1)]),
                                                 finishedAt: row.finishedAt ?? 0), kept))
        }
        return (segments, history)
    }
}

extension SegmentLedger {
    /// What a checkpoint (one `DeliveryStore.complete` call) writes: the outcome report, the segments still open
    /// with their new state, the finished ones as history, the new retry / give-back segments and the registry
    /// entries. Every store applies the same decision and only does the I/O.
    package struct Checkpoint: Sendable {
        package var report = CompletionReport()
        package var updated: [SegmentRecord] = []
        package var finished: [SegmentHistoryRecord] = []
        package var newSegments: [NewSegment] = []
        package var registry: [RegistryUpdate] = []
    }

    /// Applies `completions` to the segments read for them (`records`, by id; a missing one is lost), with the
    /// targets of those that `needsTargets` (`targets`: nil for a segment whose targets were not read).
    package static func checkpoint(_ completions: [RowCompletion], records: [Int64: SegmentRecord],
                                   targets: (Int64) throws(NorqError) -> [SegmentTarget]?,
                                   now: Int64) throws(NorqError) -> Checkpoint {
        var result = Checkpoint()
        for group in bySegment(completions) {
            guard var record = records[group.segment] else {
                result.report.lost.formUnion(group.completions.map(\.lease.rowID))
                continue
            }
            let application = apply(group.completions, to: &record, targets: try targets(group.segment), now: now)
            result.report.applied.formUnion(application.applied)
            result.report.lost.formUnion(application.lost)
            guard application.changed else { continue }
            result.registry += application.registry
            result.newSegments += application.newSegments
            if application.finished {
                result.finished.append(history(of: record, finishedAt: now))
            } else {
                result.updated.append(record)
            }
        }
        return result
    }

    /// Decodes a segment's targets blob when it was read (for `checkpoint`'s `targets`).
    package static func decodedTargets(_ blobs: [Int64: [UInt8]]) -> (Int64) throws(NorqError) -> [SegmentTarget]? {
        { (id: Int64) throws(NorqError) -> [SegmentTarget]? in
            guard let bytes = blobs[id] else { return nil }
            return try SegmentCodec.decodeTargets(bytes)
        }
    }

    /// The segments of `completions` whose checkpoint needs their targets (read only those blobs).
    package static func segmentsNeedingTargets(_ completions: [RowCompletion],
                                               present: (Int64) -> Bool) -> [Int64] {
        bySegment(completions).filter { present($0.segment) && needsTargets($0.completions) }.map(\.segment)
    }
}
