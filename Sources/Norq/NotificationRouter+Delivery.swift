import Logging
import NorqCore

extension NotificationRouter {
    /// Metrics, the invalid-token event and the outcome of a finished delivery.
    /// `requeues`: how many of `attempts` were re-queues (free of the retry budget), for the outcome.
    func finish(_ prepared: PreparedJob, result: PushOutcome.Result, attempts: Int,
                lastResponse: DeliveryResponse?, instruments: RouterMetrics.ProviderInstruments? = nil,
                requeues: Int = 0) -> PushOutcome {
        // `prepared.job` is read in place, not copied (a copy retains each of its references).
        finish(prepared.job, environment: prepared.request.environment, result: result, attempts: attempts,
               lastResponse: lastResponse, instruments: instruments, requeues: requeues)
    }

    /// ``finish(_:result:attempts:lastResponse:instruments:requeues:)`` of a job whose request went to
    /// `environment` (read only for an invalid-token answer), without a ``PreparedJob``: the per-batch path.
    func finish(_ job: DeliveryJob, environment: PushEnvironment?, result: PushOutcome.Result, attempts: Int,
                lastResponse: DeliveryResponse?, instruments: RouterMetrics.ProviderInstruments? = nil,
                requeues: Int = 0) -> PushOutcome {
        if case .delivered = result, let instruments {
            instruments.delivered.increment()
        } else {
            countFinal(result, provider: job.provider.name)
        }
        if let lastResponse, job.provider.isInvalidTokenAnswer(lastResponse),
           case .token(let token) = job.target,
           let event = InvalidTokenEvent.from(response: lastResponse, token: token, provider: job.provider.name,
                                              environment: environment, recipientID: job.recipientID) {
            requestLogger(job).info("device token is invalid", metadata: ["norq.reason": "\(event.reason)"])
            publish(event)
        }
        return job.outcome(result, attempts: attempts, requeues: requeues)
    }

    /// The per-request logger (metadata: provider, redacted token, request id, template), built only on the paths
    /// that log: building it for every token cost a metadata dictionary and four strings each.
    @inline(never)
    func requestLogger(_ job: DeliveryJob) -> Logger {
        var log = logger
        log[metadataKey: "norq.provider"] = "\(job.provider.name)"
        log[metadataKey: "norq.token"] = "\(job.target.redacted)"
        log[metadataKey: "norq.request-id"] = "\(job.requestID)"
        if let template = job.plan.templateName { log[metadataKey: "norq.template"] = "\(template)" }
        return log
    }

    enum AttemptStep {
        case done(PushOutcome.Result, lastResponse: DeliveryResponse?)
        /// `possiblyProcessed`: this or an earlier attempt may have been processed by the server (carried to the
        /// final outcome: a retry that then fails cleanly does not undo an earlier possible delivery).
        case retry(after: Duration, lastResponse: DeliveryResponse?, lastError: NorqError?, possiblyProcessed: Bool)
    }

    /// Classifies one attempt's answer and asks the retry policy what comes next. `earlierPossiblyProcessed`: an
    /// earlier attempt of this target may have been processed (it was re-sent under `retry.ambiguous`).
    ///
    /// `requeues`: how many of `attempts` were re-queues, when the caller counts them. Then an attempt known not to
    /// have been processed (`NorqError.notProcessed`) is re-queued without spending the retry budget, bounded by
    /// the deadline (`AttemptStep.retry` whose `lastError.notProcessed` is true: the caller counts it as a
    /// re-queue, see ``isRequeue(_:)``); nil keeps the rule without re-queues (every attempt spends the budget).
    func afterAttempt(_ answer: Result<DeliveryResponse, NorqError>, attempt prepared: PreparedJob, attempts: Int,
                      started: ContinuousClock.Instant, earlierPossiblyProcessed: Bool = false,
                      instruments: RouterMetrics.ProviderInstruments? = nil, requeues: Int? = nil) -> AttemptStep {
        // The delivered path reads `prepared` in place: a copy of its request or of the provider retained each
        // of their references once more per push.
        if case .success(let response) = answer {
            recordLatency(since: started, provider: prepared.job.provider, instruments: instruments)
            if let delivered = delivered(response, job: prepared.job, requestID: prepared.request.requestID,
                                         attempts: attempts) {
                // A delivered answer is no invalid-token answer: `finish` needs no answer to look at.
                return .done(.delivered(delivered), lastResponse: nil)
            }
        }
        return afterUndeliveredAttempt(answer, attempt: prepared, attempts: attempts,
                                       earlierPossiblyProcessed: earlierPossiblyProcessed, requeues: requeues)
    }

    /// Records an answer's latency (an attempt started at `started`).
    @inline(__always)
    func recordLatency(since started: ContinuousClock.Instant, provider: any PushProvider,
                       instruments: RouterMetrics.ProviderInstruments?) {
        let latency = started.duration(to: clock.now())
        if let instruments { instruments.recordLatency(latency) } else {
            metrics.recordLatency(latency, provider: provider.name)
        }
    }

    /// The delivery an answer reports (a delivered or accepted answer, or any 2xx), or nil: the retry policy decides.
    /// Its message id is the answer's, else the request's (`requestID`), else the job's stable request id.
    @inline(__always)
    func delivered(_ response: DeliveryResponse, job: DeliveryJob, requestID: String?,
                   attempts: Int) -> PushOutcome.Delivered? {
        guard response.classification == .delivered || response.classification == .accepted
            || (200..<300).contains(response.status) else { return nil }
        if logsTrace {
            requestLogger(job).trace("delivered", metadata: ["norq.attempts": "\(attempts)"])
        }
        return PushOutcome.Delivered(status: response.status, messageID: response.messageID ?? requestID ?? job.requestID,
                                     uniqueID: response.uniqueID, accepted: response.classification == .accepted)
    }

    /// Whether a `.retry` step after `lastError` is a re-queue (the attempt was not processed: it spends no budget),
    /// under `afterAttempt(..., requeues:)` with a count.
    static func isRequeue(_ lastError: NorqError?) -> Bool {
        guard let lastError else { return false }
        return DeliveryFailure.transport(lastError).isUnprocessed
    }

    /// `afterAttempt` for an answer that is not a delivery, or a failure: the retry policy's decision.
    private func afterUndeliveredAttempt(_ answer: Result<DeliveryResponse, NorqError>, attempt prepared: PreparedJob,
                                         attempts: Int, earlierPossiblyProcessed: Bool,
                                         requeues: Int?) -> AttemptStep {
        let request = prepared.request
        let deadline = prepared.deadline
        let provider = prepared.job.provider
        let failure: DeliveryFailure
        var lastResponse: DeliveryResponse?
        var lastError: NorqError?
        switch answer {
        case .success(let response):
            lastResponse = response
            failure = DeliveryFailure(response)
        case .failure(let error):
            lastError = error
            failure = .transport(error)
        }
        let possiblyProcessed = earlierPossiblyProcessed || (lastError?.possiblyProcessed ?? false)
        let remaining = clock.now().duration(to: deadline)
        // The collapse id is asked for only when it matters (a possibly processed failure under `collapsible`).
        let collapsible = lastError?.possiblyProcessed == true && provider.policy.retry.ambiguous == .collapsible
            && provider.collapseID(of: request) != nil
        // Re-queues do not spend the budget: the decision sees the attempts that did.
        let spent = attempts - (requeues ?? 0)
        let decision = provider.policy.retry.decision(afterAttempt: spent, failure: failure, remaining: remaining,
                                                      randomUnit: clock.random(), collapsible: collapsible,
                                                      requeues: requeues)
        var failureLog = requestLogger(prepared.job)
        if let reason = lastResponse?.reason { failureLog[metadataKey: "norq.reason"] = "\(reason)" }
        if let status = lastResponse?.status { failureLog[metadataKey: "norq.status"] = "\(status)" }
        if let lastError { failureLog[metadataKey: "norq.error"] = "\(lastError.code)" }
        switch decision {
        case .retry(let delay):
            if requeues != nil, failure.isUnprocessed {
                metrics.count("requeued", provider: provider.name)
                failureLog.debug("re-queued (not processed by the server)",
                                 metadata: ["norq.attempt": "\(attempts)", "norq.delay": "\(delay)"])
            } else {
                metrics.count("retried", provider: provider.name)
                failureLog.debug("retrying", metadata: ["norq.attempt": "\(attempts)", "norq.delay": "\(delay)"])
            }
            return .retry(after: delay, lastResponse: lastResponse, lastError: lastError,
                          possiblyProcessed: possiblyProcessed)
        case .giveUp(let reason):
            failureLog.notice("delivery did not succeed", metadata: ["norq.give-up": "\(reason)",
                                                                     "norq.attempts": "\(attempts)",
                                                                     "norq.possibly-processed": "\(possiblyProcessed)"])
            return .done(Self.finalResult(lastResponse, lastError, request: request, job: prepared.job,
                                          possiblyProcessed: possiblyProcessed),
                         lastResponse: lastResponse)
        }
    }

    /// The outcome after the last attempt: its rejection, else its failure. `possiblyProcessed` (some attempt may
    /// have been processed) marks a failure as possibly delivered.
    /// The message id of an answer without one is the request's id, made from `job` when the provider did not
    /// take it (`PushProvider.readsRequestID`).
    static func finalResult(_ response: DeliveryResponse?, _ error: NorqError?, request: PreparedRequest,
                            job: DeliveryJob? = nil, possiblyProcessed: Bool = false) -> PushOutcome.Result {
        if let response {
            return .rejected(PushOutcome.Rejected(
                status: response.status, reason: response.reason, code: response.code ?? .rejectedByProvider,
                classification: response.classification, invalidSince: response.invalidSince,
                messageID: response.messageID ?? request.requestID ?? job?.requestID))
        }
        var failure = error ?? NorqError(.transportFailed, "no answer from the provider")
        if possiblyProcessed {
            failure.possiblyProcessed = true
            failure.notProcessed = false
        }
        return .failed(failure)
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
            // A provider's answer is labelled by its reason string (the provider's code says the same); a
            // routing rejection (status 0) by its code.
            let reason = rejected.status != 0 ? (rejected.reason ?? "none") : rejected.code.rawValue
            metrics.count("rejected", provider: provider, reason: reason)
        case .failed(let error):
            metrics.count("failed", provider: provider, reason: error.code.rawValue)
            if error.possiblyProcessed { metrics.count("ambiguous_failed", provider: provider) }
        case .skipped(let skipped): metrics.count("skipped", provider: provider, reason: skipped.code.rawValue)
        case .duplicate: metrics.count("deduplicated", provider: provider)
        }
    }
}
