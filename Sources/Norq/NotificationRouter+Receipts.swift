import NorqCore

/// When to ask for receipts again while some are pending: a pure rule (tested without I/O).
public enum ReceiptPolling {
    /// What a durable worker does with a target whose receipt is not there yet (or could not be fetched).
    public enum Step: Sendable, Hashable {
        /// Ask again at this time (ms).
        case poll(at: Int64)
        /// The service keeps receipts no longer (`receiptRetention` since it accepted the message): the target
        /// stays `accepted`, its final fate unknown.
        case giveUp
    }

    /// The durable rule (pure; tested without I/O): a missing receipt is asked for again after as long as it has
    /// been since the acceptance (so the waits double), at least `delay` (the provider's `receiptDelay`, the wait
    /// before the first poll) and at most an hour (or `delay` when longer); a failed request (`failed`) is tried
    /// again within a minute. No poll later than `acceptedAt + retention`; at or past it, give up.
    public static func next(now: Int64, acceptedAt: Int64, delay: Duration, retention: Duration,
                            failed: Bool = false) -> Step {
        let end = acceptedAt + milliseconds(retention)
        guard now < end else { return .giveUp }
        let least = max(1, milliseconds(delay))
        var wait = min(max(now - acceptedAt, least), max(least, 3_600_000))
        if failed { wait = min(wait, 60_000) }
        return .poll(at: min(now + wait, end))
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }


    /// The wait before poll number `poll` (0 = the first): `first`, then doubling, capped at `maximum`.
    public static func delay(beforePoll poll: Int, first: Duration = .seconds(1),
                             maximum: Duration = .seconds(60)) -> Duration {
        guard poll > 0 else { return first }
        var delay = first
        for _ in 0..<min(poll, 30) where delay < maximum { delay = delay * 2 }
        return min(delay, maximum)
    }
}

extension NotificationRouter {
    /// Waits for the receipts of the `accepted` outcomes of `report` whose provider fetches receipts
    /// (`ReceiptFetchingProvider`), polling with ``ReceiptPolling`` backoff until each has one or `timeout` passes,
    /// and returns the report with those outcomes replaced by their receipts: `delivered` for an ok receipt,
    /// `rejected` (with the provider's code; a token-invalid one raises the invalid-token event) for an error. An
    /// outcome still without a receipt at the timeout stays `accepted`. Without a durable store: `norq send
    /// --wait-receipts`. (A durable worker calls `fetchReceipts` the same way, with ids it stored.)
    public func waitForReceipts(_ report: SendReport, timeout: Duration,
                                firstPoll: Duration = .seconds(1)) async -> SendReport {
        var report = report
        // Pending positions by provider, by message id.
        var pending: [String: [String: [Int]]] = [:]
        for (position, outcome) in report.outcomes.enumerated() {
            guard case .delivered(let delivered) = outcome.result, delivered.accepted, let id = delivered.messageID,
                  let name = outcome.provider, providers[name] is any ReceiptFetchingProvider else { continue }
            pending[name, default: [:]][id, default: []].append(position)
        }
        let deadline = clock.now() + timeout
        var poll = 0
        while !pending.isEmpty {
            let delay = ReceiptPolling.delay(beforePoll: poll, first: firstPoll)
            poll += 1
            if clock.now() + delay > deadline { break }
            do { try await clock.sleep(delay) } catch { break }
            for (name, ids) in pending {
                guard let provider = providers[name] as? any ReceiptFetchingProvider else { continue }
                let states: [String: ReceiptState]
                do {
                    states = try await provider.fetchReceipts(Array(ids.keys), deadline: min(deadline, clock.now() + .seconds(30)))
                } catch {
                    logger.notice("receipts could not be fetched; asking again later",
                                  metadata: ["norq.provider": "\(name)", "norq.error": "\(error.code)"])
                    continue
                }
                for (id, state) in states {
                    guard case .final(let response) = state, let positions = pending[name]?[id] else { continue }
                    pending[name]?[id] = nil
                    for position in positions { settle(&report.outcomes[position], receipt: response, provider: provider) }
                }
                if pending[name]?.isEmpty == true { pending[name] = nil }
            }
        }
        return report
    }

    private func settle(_ outcome: inout PushOutcome, receipt: DeliveryResponse, provider: any PushProvider) {
        outcome.result = receiptResult(receipt, token: outcome.target, recipientID: outcome.recipientID,
                                       provider: provider)
    }

    /// The final result a receipt gives an accepted message: `delivered` for an ok receipt, else `rejected` with the
    /// provider's code and classification; a token-invalid receipt raises the invalid-token event (and, on the
    /// durable path, reaches the token registry through its classification). Shared by ``waitForReceipts(_:timeout:firstPoll:)``
    /// and the durable worker's receipt polls.
    func receiptResult(_ receipt: DeliveryResponse, token target: DeliveryTarget, recipientID: String?,
                       provider: any PushProvider) -> PushOutcome.Result {
        if receipt.classification == .delivered {
            return .delivered(PushOutcome.Delivered(status: receipt.status, messageID: receipt.messageID))
        }
        if provider.isInvalidTokenAnswer(receipt), case .token(let token) = target,
           let event = InvalidTokenEvent.from(response: receipt, token: token, provider: provider.name,
                                              environment: nil, recipientID: recipientID) {
            publish(event)
        }
        return .rejected(PushOutcome.Rejected(
            status: receipt.status, reason: receipt.reason, code: receipt.code ?? .rejectedByProvider,
            classification: receipt.classification, messageID: receipt.messageID))
    }
}
