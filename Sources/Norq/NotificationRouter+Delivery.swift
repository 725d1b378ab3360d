import Logging
import NorqCore

extension NotificationRouter {
    /// Delivers one routed target: dedup reservation, prepare, attempts under the provider's retry policy,
    /// record, invalid-token event, metrics and logs. Always returns exactly one outcome.
    func deliver(target: DeliveryTarget, recipientID: String?, provider: any PushProvider, content: PushContent,
                 plan: SendPlan) async -> PushOutcome {
        let requestID = RequestID.make(idempotencyKey: plan.key, token: target.identity)
        // The per-request logger (metadata: provider, redacted token, apns-id, template) is built only on the
        // paths that log: building it for every token cost a metadata dictionary and four strings each.
        func requestLogger() -> Logger {
            var log = logger
            log[metadataKey: "norq.provider"] = "\(provider.name)"
            log[metadataKey: "norq.token"] = "\(target.redacted)"
            log[metadataKey: "apns.id"] = "\(requestID)"
            if let template = plan.templateName { log[metadataKey: "norq.template"] = "\(template)" }
            return log
        }

        func outcome(_ result: PushOutcome.Result, attempts: Int) -> PushOutcome {
            PushOutcome(target: target, recipientID: recipientID, provider: provider.name, attempts: attempts,
                        result: result)
        }

        let dedupKey = plan.callerKey ? DeduplicationKey(idempotencyKey: plan.key, target: target.identity) : nil
        if let dedupKey {
            switch await deduplication.reserve(dedupKey) {
            case .completed(let first):
                metrics.count("deduplicated", provider: provider.name)
                requestLogger().debug("duplicate of an earlier send with the same idempotency key", metadata: ["norq.first": "\(first.kind)"])
                return outcome(.duplicate(of: first), attempts: 0)
            case .inFlight:
                let skip = PushOutcome.Skipped(code: .duplicateInFlight,
                                               reason: "another send with the same idempotency key is delivering this token")
                metrics.count("deduplicated", provider: provider.name)
                return outcome(.skipped(skip), attempts: 0)
            case .reserved:
                break
            }
        }

        let request: PreparedRequest
        do {
            request = try prepareRequest(content, target: target, provider: provider, plan: plan, requestID: requestID)
        } catch {
            requestLogger().notice("could not prepare the request", metadata: ["norq.error": "\(error.code)"])
            if let dedupKey { await deduplication.release(dedupKey) }
            countFinal(.failed(error), provider: provider.name)
            return outcome(.failed(error), attempts: 0)
        }

        let (result, attempts, lastResponse) = await attempt(request, provider: provider, plan: plan, log: requestLogger)
        if let dedupKey {
            if Self.isDefinitive(result) {
                await deduplication.record(dedupKey, result: result)
            } else {
                await deduplication.release(dedupKey)
            }
        }
        countFinal(result, provider: provider.name)
        if let lastResponse, case .token(let token) = target,
           let event = InvalidTokenEvent.from(response: lastResponse, token: token, provider: provider.name,
                                              environment: request.environment, recipientID: recipientID) {
            requestLogger().info("device token is invalid", metadata: ["apns.reason": "\(event.reason)"])
            publish(event)
        }
        return outcome(result, attempts: attempts)
    }

    /// Sends `request` until it is delivered, the policy gives up or the deadline passes.
    func attempt(_ request: PreparedRequest, provider: any PushProvider, plan: SendPlan,
                 log: () -> Logger) async -> (PushOutcome.Result, attempts: Int, lastResponse: DeliveryResponse?) {
        let policy = provider.policy.retry
        let deadline = clock.now().advanced(by: plan.options.deadline)
        var attempts = 0
        while true {
            if isStopped && attempts > 0 {
                return (.failed(NorqError(.providerShutDown, "the router shut down before a retry")), attempts, nil)
            }
            attempts += 1
            metrics.count("sent", provider: provider.name)
            metrics.inFlightChanged(by: 1)
            let started = clock.now()
            let failure: DeliveryFailure
            var lastResponse: DeliveryResponse?
            var lastError: NorqError?
            do {
                let response = try await provider.deliver(request, deadline: deadline)
                metrics.inFlightChanged(by: -1)
                metrics.recordLatency(started.duration(to: clock.now()), provider: provider.name)
                if response.classification == .delivered || (200..<300).contains(response.status) {
                    if logger.logLevel <= .trace { log().trace("delivered", metadata: ["norq.attempts": "\(attempts)"]) }
                    let delivered = PushOutcome.Delivered(status: response.status,
                                                          messageID: response.messageID ?? request.requestID,
                                                          uniqueID: response.uniqueID)
                    return (.delivered(delivered), attempts, response)
                }
                lastResponse = response
                failure = DeliveryFailure(response)
            } catch {
                metrics.inFlightChanged(by: -1)
                lastError = error
                failure = .transport(error)
            }
            let remaining = clock.now().duration(to: deadline)
            let decision = policy.decision(afterAttempt: attempts, failure: failure, remaining: remaining,
                                           randomUnit: clock.random())
            var failureLog = log()
            if let reason = lastResponse?.reason { failureLog[metadataKey: "apns.reason"] = "\(reason)" }
            if let status = lastResponse?.status { failureLog[metadataKey: "norq.status"] = "\(status)" }
            if let lastError { failureLog[metadataKey: "norq.error"] = "\(lastError.code)" }
            switch decision {
            case .retry(let delay):
                metrics.count("retried", provider: provider.name)
                failureLog.debug("retrying", metadata: ["norq.attempt": "\(attempts)", "norq.delay": "\(delay)"])
                do {
                    try await clock.sleep(delay)
                } catch {
                    return (Self.finalResult(lastResponse, lastError, request: request), attempts, lastResponse)
                }
            case .giveUp(let reason):
                failureLog.notice("delivery did not succeed", metadata: ["norq.give-up": "\(reason)",
                                                                         "norq.attempts": "\(attempts)"])
                return (Self.finalResult(lastResponse, lastError, request: request), attempts, lastResponse)
            }
        }
    }

    static func finalResult(_ response: DeliveryResponse?, _ error: NorqError?,
                            request: PreparedRequest) -> PushOutcome.Result {
        if let response {
            return .rejected(PushOutcome.Rejected(
                status: response.status, reason: response.reason, code: .rejectedByProvider,
                classification: response.classification, invalidSince: response.invalidSince,
                messageID: response.messageID ?? request.requestID))
        }
        return .failed(error ?? NorqError(.transportFailed, "no answer from the provider"))
    }

    /// Outcomes worth remembering for an idempotency key: a delivery, or a rejection that a retry cannot fix.
    static func isDefinitive(_ result: PushOutcome.Result) -> Bool {
        switch result {
        case .delivered: true
        case .rejected(let rejected): !rejected.classification.isRetryable
        default: false
        }
    }

    func countFinal(_ result: PushOutcome.Result, provider: String?) {
        switch result {
        case .delivered: metrics.count("delivered", provider: provider)
        case .rejected(let rejected):
            let reason = rejected.code == .rejectedByProvider ? (rejected.reason ?? "none") : rejected.code.rawValue
            metrics.count("rejected", provider: provider, reason: reason)
        case .failed(let error): metrics.count("failed", provider: provider, reason: error.code.rawValue)
        case .skipped(let skipped): metrics.count("skipped", provider: provider, reason: skipped.code.rawValue)
        case .duplicate: metrics.count("deduplicated", provider: provider)
        }
    }
}
