import NorqCore
import NorqStore

// Receipts on the durable path (issue 31): a target the service only accepted (an Expo ticket) is not finished as
// delivered. Its completion moves it to a *receipt segment* due after the provider's `receiptDelay`, its last answer
// the accepted one (the ticket id as message id). A claim of such a segment is a receipt poll, not a send: the
// worker asks the provider for the receipts of its targets (`ReceiptFetchingProvider.fetchReceipts`, at most
// `maxReceiptIDsPerRequest` ids a request) and records the final outcome of each one that has its receipt; one
// without a receipt yet (or whose request failed) goes to a new receipt segment due at `ReceiptPolling.next`, and
// after the provider's `receiptRetention` stays `accepted` for good. Polls are not attempts: they spend no retry
// budget and are not bounded by `allowedClaims`.

extension DurableWorker {
    /// The completion of an attempt the service accepted, when its provider fetches receipts: on to a receipt
    /// segment, due after the provider's `receiptDelay`. Nil for every other answer (finished as it is).
    func awaitingReceipt(_ stored: StoredOutcome, lease: Lease, provider: any PushProvider) -> RowCompletion? {
        guard stored.isAccepted, stored.messageID != nil, let fetching = provider as? any ReceiptFetchingProvider else {
            return nil
        }
        let now = delivery.clock.nowMillis()
        return .retry(lease, at: now + ReceiptPolling.milliseconds(fetching.receiptDelay), last: stored)
    }

    /// Polls the receipts of claimed rows waiting for theirs (`row.last` accepted) and hands each row's completion
    /// to `batch`. Rows of a provider that fetches no receipts here (not configured in this instance, or no
    /// longer receipt-capable) keep `accepted` as their final outcome.
    func pollReceipts(_ rows: [(row: OutboxRow, lease: Lease)], router: NotificationRouter,
                      batch: AttemptBatch) async {
        var byProvider: [String: [(row: OutboxRow, lease: Lease)]] = [:]
        for item in rows {
            guard let name = item.row.provider, router.providers[name] is any ReceiptFetchingProvider,
                  item.row.last?.messageID != nil else {
                logger.notice("a receipt cannot be fetched here: the target stays accepted",
                              metadata: ["norq.provider": "\(item.row.provider ?? "?")"])
                batch.complete(givenUp(item.row, lease: item.lease))
                continue
            }
            byProvider[name, default: []].append(item)
        }
        for (name, items) in byProvider {
            guard let provider = router.providers[name] as? any ReceiptFetchingProvider else { continue }
            let size = max(1, provider.maxReceiptIDsPerRequest)
            var start = 0
            while start < items.count {
                let chunk = Array(items[start..<min(start + size, items.count)])
                start += size
                let ids = Array(Set(chunk.compactMap { $0.row.last?.messageID }))
                let states: [String: ReceiptState]?
                do {
                    states = try await provider.fetchReceipts(ids, deadline: router.clock.now() + .seconds(30))
                    router.metrics.count("receipts_fetched", provider: name)
                } catch {
                    logger.notice("receipts could not be fetched; asking again later",
                                  metadata: ["norq.provider": "\(name)", "norq.error": "\(error.code)"])
                    states = nil
                }
                for item in chunk {
                    batch.complete(completion(of: item.row, lease: item.lease, state: states.map {
                        $0[item.row.last?.messageID ?? ""] ?? .pending
                    }, provider: provider, router: router))
                }
            }
        }
    }

    /// A polled row's completion: its receipt's outcome, another poll, or `accepted` for good. `state` nil: the
    /// request failed.
    private func completion(of row: OutboxRow, lease: Lease, state: ReceiptState?, provider: any ReceiptFetchingProvider,
                            router: NotificationRouter) -> RowCompletion {
        guard let accepted = row.last else { return givenUp(row, lease: lease) }
        if case .final(var receipt) = state {
            if receipt.messageID == nil { receipt.messageID = accepted.messageID }
            let target: DeliveryTarget
            do { target = try DurableCodec.decodeTarget(row.target, identity: row.identity) } catch {
                return givenUp(row, lease: lease)
            }
            let result = router.receiptResult(receipt, token: target, recipientID: row.recipientID, provider: provider)
            // The ticket was counted when it was accepted; the receipt has its own counters.
            router.metrics.count(result.kind == "delivered" ? "receipts_delivered" : "receipts_rejected",
                                 provider: provider.name)
            return .finish(lease, DurableCodec.stored(result, messageID: accepted.messageID,
                                                      mayHaveBeenDelivered: row.mayHaveBeenDelivered))
        }
        let now = delivery.clock.nowMillis()
        switch ReceiptPolling.next(now: now, acceptedAt: row.acceptedAt ?? now, delay: provider.receiptDelay,
                                   retention: provider.receiptRetention, failed: state == nil) {
        case .poll(let at):
            return .retry(lease, at: at, last: accepted)
        case .giveUp:
            logger.info("no receipt within the provider's retention: the target stays accepted",
                        metadata: ["norq.provider": "\(provider.name)"])
            return givenUp(row, lease: lease)
        }
    }

    /// Finished as `accepted`: the service took it; its receipt will not be known.
    private func givenUp(_ row: OutboxRow, lease: Lease) -> RowCompletion {
        let accepted = row.last ?? StoredOutcome(state: .delivered, classification: StoredOutcome.acceptedClassification,
                                                 messageID: row.messageID)
        return .finish(lease, accepted)
    }
}
