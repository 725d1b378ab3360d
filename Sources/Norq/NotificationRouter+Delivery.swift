import Logging
import NorqCore

extension NotificationRouter {
    /// Delivers one routed target: dedup reservation, prepare, attempts under the provider's retry policy,
    /// record, invalid-token event, metrics and logs. Always returns exactly one outcome.
    ///
    /// Memory note: with 1,000 requests in flight there are 1,000 suspended copies of this function's async frame
    /// (and of `attempt`'s). Only what must live across an `await` is kept here; logging, preparing and
    /// finishing run in synchronous helpers, whose locals live on the thread's stack instead of in every frame.
    func deliver(_ job: DeliveryJob) async -> PushOutcome {
        if let dedupKey = job.dedupKey, let early = await reserve(dedupKey, job: job) {
            return early
        }
        let request: PreparedRequest
        switch prepare(job) {
        case .success(let prepared):
            request = prepared
        case .failure(let failure):
            if let dedupKey = job.dedupKey { await deduplication.release(dedupKey) }
            return failure.outcome
        }
        let (result, attempts, lastResponse) = await attempt(request, job: job)
        if let dedupKey = job.dedupKey {
            if Self.isDefinitive(result) {
                await deduplication.record(dedupKey, result: result)
            } else {
                await deduplication.release(dedupKey)
            }
        }
        return finish(job, request: request, result: result, attempts: attempts, lastResponse: lastResponse)
    }

    /// Asks the dedup store; returns the outcome when this target must not be sent (a duplicate or in flight).
    private func reserve(_ key: DeduplicationKey, job: DeliveryJob) async -> PushOutcome? {
        switch await deduplication.reserve(key) {
        case .completed(let first):
            metrics.count("deduplicated", provider: job.provider.name)
            requestLogger(job).debug("duplicate of an earlier send with the same idempotency key",
                                     metadata: ["norq.first": "\(first.kind)"])
            return job.outcome(.duplicate(of: first), attempts: 0)
        case .inFlight:
            let skip = PushOutcome.Skipped(code: .duplicateInFlight,
                                           reason: "another send with the same idempotency key is delivering this token")
            metrics.count("deduplicated", provider: job.provider.name)
            return job.outcome(.skipped(skip), attempts: 0)
        case .reserved:
            return nil
        }
    }

    /// A prepare failure, carried as an `Error` so that `prepare` can return a `Result`.
    private struct PrepareFailure: Error {
        var outcome: PushOutcome
    }

    @inline(never)
    private func prepare(_ job: DeliveryJob) -> Result<PreparedRequest, PrepareFailure> {
        do {
            return .success(try prepareRequest(target: job.target, provider: job.provider, plan: job.plan,
                                               requestID: job.requestID))
        } catch {
            requestLogger(job).notice("could not prepare the request", metadata: ["norq.error": "\(error.code)"])
            countFinal(.failed(error), provider: job.provider.name)
            return .failure(PrepareFailure(outcome: job.outcome(.failed(error), attempts: 0)))
        }
    }

    /// Metrics, the invalid-token event and the outcome of a finished delivery.
    @inline(never)
    private func finish(_ job: DeliveryJob, request: PreparedRequest, result: PushOutcome.Result, attempts: Int,
                        lastResponse: DeliveryResponse?) -> PushOutcome {
        countFinal(result, provider: job.provider.name)
        if let lastResponse, case .token(let token) = job.target,
           let event = InvalidTokenEvent.from(response: lastResponse, token: token, provider: job.provider.name,
                                              environment: request.environment, recipientID: job.recipientID) {
            requestLogger(job).info("device token is invalid", metadata: ["apns.reason": "\(event.reason)"])
            publish(event)
        }
        return job.outcome(result, attempts: attempts)
    }

    /// The per-request logger (metadata: provider, redacted token, apns-id, template), built only on the paths
    /// that log: building it for every token cost a metadata dictionary and four strings each.
    @inline(never)
    func requestLogger(_ job: DeliveryJob) -> Logger {
        var log = logger
        log[metadataKey: "norq.provider"] = "\(job.provider.name)"
        log[metadataKey: "norq.token"] = "\(job.target.redacted)"
        log[metadataKey: "apns.id"] = "\(job.requestID)"
        if let template = job.plan.templateName { log[metadataKey: "norq.template"] = "\(template)" }
        return log
    }

    /// Sends `request` until it is delivered, the policy gives up or the deadline passes. Inlined into
    /// `deliver`: one async frame per request in flight instead of two.
    @inline(__always)
    func attempt(_ request: PreparedRequest, job: DeliveryJob) async
        -> (PushOutcome.Result, attempts: Int, lastResponse: DeliveryResponse?)
    {
        let provider = job.provider
        let deadline = clock.now().advanced(by: job.plan.options.deadline)
        var attempts = 0
        while true {
            if isStopped && attempts > 0 {
                return (.failed(NorqError(.providerShutDown, "the router shut down before a retry")), attempts, nil)
            }
            attempts += 1
            metrics.count("sent", provider: provider.name)
            metrics.inFlightChanged(by: 1)
            let started = clock.now()
            let answer: Result<DeliveryResponse, NorqError>
            do {
                answer = .success(try await provider.deliver(request, deadline: deadline))
            } catch {
                answer = .failure(error)
            }
            metrics.inFlightChanged(by: -1)
            switch afterAttempt(answer, request: request, job: job, attempts: attempts, started: started,
                                deadline: deadline) {
            case .done(let result, let lastResponse):
                return (result, attempts, lastResponse)
            case .retry(let delay, let lastResponse, let lastError):
                do {
                    try await clock.sleep(delay)
                } catch {
                    return (Self.finalResult(lastResponse, lastError, request: request), attempts, lastResponse)
                }
            }
        }
    }

    private enum AttemptStep {
        case done(PushOutcome.Result, lastResponse: DeliveryResponse?)
        case retry(after: Duration, lastResponse: DeliveryResponse?, lastError: NorqError?)
    }

    /// Classifies one attempt's answer and asks the retry policy what comes next (synchronous: see `deliver`).
    @inline(never)
    private func afterAttempt(_ answer: Result<DeliveryResponse, NorqError>, request: PreparedRequest,
                              job: DeliveryJob, attempts: Int, started: ContinuousClock.Instant,
                              deadline: ContinuousClock.Instant) -> AttemptStep {
        let provider = job.provider
        let failure: DeliveryFailure
        var lastResponse: DeliveryResponse?
        var lastError: NorqError?
        switch answer {
        case .success(let response):
            metrics.recordLatency(started.duration(to: clock.now()), provider: provider.name)
            if response.classification == .delivered || (200..<300).contains(response.status) {
                if logger.logLevel <= .trace {
                    requestLogger(job).trace("delivered", metadata: ["norq.attempts": "\(attempts)"])
                }
                let delivered = PushOutcome.Delivered(status: response.status,
                                                      messageID: response.messageID ?? request.requestID,
                                                      uniqueID: response.uniqueID)
                return .done(.delivered(delivered), lastResponse: response)
            }
            lastResponse = response
            failure = DeliveryFailure(response)
        case .failure(let error):
            lastError = error
            failure = .transport(error)
        }
        let remaining = clock.now().duration(to: deadline)
        let decision = provider.policy.retry.decision(afterAttempt: attempts, failure: failure, remaining: remaining,
                                                      randomUnit: clock.random())
        var failureLog = requestLogger(job)
        if let reason = lastResponse?.reason { failureLog[metadataKey: "apns.reason"] = "\(reason)" }
        if let status = lastResponse?.status { failureLog[metadataKey: "norq.status"] = "\(status)" }
        if let lastError { failureLog[metadataKey: "norq.error"] = "\(lastError.code)" }
        switch decision {
        case .retry(let delay):
            metrics.count("retried", provider: provider.name)
            failureLog.debug("retrying", metadata: ["norq.attempt": "\(attempts)", "norq.delay": "\(delay)"])
            return .retry(after: delay, lastResponse: lastResponse, lastError: lastError)
        case .giveUp(let reason):
            failureLog.notice("delivery did not succeed", metadata: ["norq.give-up": "\(reason)",
                                                                     "norq.attempts": "\(attempts)"])
            return .done(Self.finalResult(lastResponse, lastError, request: request), lastResponse: lastResponse)
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

/// One routed target on its way: what `deliver` and `attempt` share, by reference (one allocation per target
/// instead of the same values copied into several async frames).
final class DeliveryJob: Sendable {
    let target: DeliveryTarget
    let recipientID: String?
    let provider: any PushProvider
    let plan: SendPlan
    /// The stable per-target request id (UUIDv5 of the idempotency key and the target).
    let requestID: String
    /// Set when the caller gave an idempotency key: only then is the dedup store consulted.
    let dedupKey: DeduplicationKey?

    init(target: DeliveryTarget, recipientID: String?, provider: any PushProvider, plan: SendPlan) {
        self.target = target
        self.recipientID = recipientID
        self.provider = provider
        self.plan = plan
        self.requestID = RequestID.make(idempotencyKey: plan.key, token: target.identity)
        self.dedupKey = plan.callerKey ? DeduplicationKey(idempotencyKey: plan.key, target: target.identity) : nil
    }

    func outcome(_ result: PushOutcome.Result, attempts: Int) -> PushOutcome {
        PushOutcome(target: target, recipientID: recipientID, provider: provider.name, attempts: attempts,
                    result: result)
    }
}
