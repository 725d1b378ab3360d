public import NorqCore
public import NorqStore
public import Logging
import Synchronization
import Tracing
import NorqSpanAttributes

/// Durable delivery on a `DeliveryStore`: sends are committed to the store (idempotency checked there) and
/// delivered by `DurableWorker`s, in this process or in others on the same database, through the router's
/// providers, prepare step and retry classification.
///
/// ```swift
/// let durable = DurableDelivery(router: router, store: store)
/// let receipt = try await durable.enqueue(template: "order-shipped", data: data, to: recipients,
///                                         options: RouterSendOptions(idempotencyKey: "order-42"))
/// let report = try await durable.wait(for: receipt.sendID, timeout: .seconds(60))
/// ```
///
/// Guarantees: at-least-once delivery with stable ids. Every target has exactly one final outcome (every state
/// change is a compare-and-set on its lease). A target is sent again only when the instance that held it lost its
/// lease (crash, pause, lost database) after it may have sent it; the re-send carries the same message id
/// (`apns-id`) and collapse id, and the row says it may have been delivered.
public final class DurableDelivery: Sendable {
    /// The router sends are rendered, routed and delivered through: the one given at init, or the last one given
    /// to `replaceRouter(with:)` (a configuration reload). Each attempt keeps the router it started on.
    public var router: NotificationRouter { current.withLock { $0 } }
    private let current: Mutex<NotificationRouter>
    public let store: any DeliveryStore
    public let settings: DeliveryStoreSettings
    /// The idempotency scope of sends enqueued here (keys are unique per scope).
    public let scope: String
    let clock: StoreClock
    let logger: Logger
    /// In-process hint: a send was enqueued (workers here look at once instead of at the next poll).
    let enqueued = WakeSignal()
    /// In-process hint: rows were completed (waiters here look at once).
    let completed = WakeSignal()
    /// The plans of the sends enqueued here most recently: workers here deliver them without reading them back.
    let recentPlans = SendPlanCache(capacity: 2_048)

    public init(router: NotificationRouter, store: any DeliveryStore,
                settings: DeliveryStoreSettings = DeliveryStoreSettings(), scope: String = "",
                clock: StoreClock = .system, logger: Logger = Logger(label: "norq.durable")) {
        self.current = Mutex(router)
        self.store = store
        self.settings = settings
        self.scope = scope
        self.clock = clock
        self.logger = logger
    }

    /// Makes `next` the router of every send enqueued and every attempt started from now on (a reload with new
    /// providers or routing), and returns the one it replaces. Attempts already started finish on the old router's
    /// providers: call `shutdown()` on the returned router, which waits for them (up to its grace period) before
    /// closing its connections. Nothing queued is dropped: rows not yet attempted are delivered through `next`.
    @discardableResult
    public func replaceRouter(with next: NotificationRouter) -> NotificationRouter {
        current.withLock { router in
            defer { router = next }
            return router
        }
    }

    /// The current router with one attempt counted on it (its `shutdown()` waits for the attempt), or nil when it
    /// is shutting down. A router replaced meanwhile stops accepting: the one that replaced it is taken instead.
    func enterRouter() -> NotificationRouter? {
        for _ in 0..<4 {
            let router = self.router
            if (try? router.beginSend()) != nil { return router }
            if router === self.router { return nil }  // shutting down for good, not replaced
        }
        return nil
    }

    /// What an enqueue returns.
    public struct Receipt: Sendable, Hashable {
        public var sendID: String
        /// False when the idempotency key named an earlier send (which is returned instead).
        public var created: Bool
        public var targetCount: Int
    }

    /// Renders `template` once with `data` and commits the send and one outbox row per target.
    /// Throws template errors, `idempotency/key-reused`, and store errors (`store/...`).
    /// - Parameters:
    ///   - template: the template id.
    ///   - data: the template's data, rendered once for the whole send.
    ///   - recipients: any sequence: a lazy one (streamed from your database) is read once and never held whole.
    ///   - options: the send's options (idempotency key, deadline, priority, ...).
    ///   - scope: the send's idempotency scope, stored with the send (`StoredSend.scope`); nil: ``scope``.
    ///     `norq serve` gives each API key its own, so a key's idempotency keys and sends are its own.
    public func enqueue(template: String, data: JSONValue, to recipients: some Sequence<Recipient>,
                        options: RouterSendOptions = RouterSendOptions(),
                        scope: String? = nil) async throws(NorqError) -> Receipt {
        let content = try router.render(template: template, data: data, strict: options.strict)
        var fingerprint: [UInt8] = Array("template\u{0}\(template)\u{0}".utf8)
        data.write(into: &fingerprint)
        return try await enqueue(content: content, templateName: template, fingerprint: fingerprint,
                                 recipients: recipients, options: options, scope: scope)
    }

    /// Commits pre-built content for every target of `recipients`.
    public func enqueue(content: PushContent, to recipients: some Sequence<Recipient>,
                        options: RouterSendOptions = RouterSendOptions()) async throws(NorqError) -> Receipt {
        var fingerprint: [UInt8] = Array("content\u{0}".utf8)
        try DurableCodec.fingerprint(content, into: &fingerprint)
        return try await enqueue(content: content, templateName: nil, fingerprint: fingerprint,
                                 recipients: recipients, options: options)
    }

    func enqueue(content: PushContent?, templateName: String?, fingerprint prefix: [UInt8],
                 recipients: some Sequence<Recipient>,
                 options: RouterSendOptions, scope sendScope: String? = nil) async throws(NorqError) -> Receipt {
        let router = self.router
        guard let recorder = router.spanRecorder else {
            return try await enqueue(content: content, templateName: templateName, fingerprint: prefix,
                                     recipients: recipients, options: options, scope: sendScope, router: router,
                                     trace: nil)
        }
        // `norq.enqueue`, a child of the caller's context (the API request's span). The context stored with the
        // send is the caller's, so that the worker's claim is the request's child too; a caller without one gets
        // the enqueue's.
        let caller = InstrumentationContext.current
        let span = recorder.startSpan(DeliveryTracing.enqueueSpan, context: caller ?? .topLevel, ofKind: .producer)
        // The attributes are given once, with the span's end.
        let recording = span.isRecording
        var attributes = SpanAttributeList(capacity: recording ? 4 : 0)
        if recording, let templateName { attributes.add("norq.template", .string(templateName)) }
        do {
            let receipt = try await enqueue(content: content, templateName: templateName, fingerprint: prefix,
                                            recipients: recipients, options: options, scope: sendScope, router: router,
                                            trace: (caller ?? recorder.context(of: span, in: .topLevel), recorder.tracer))
            if recording {
                attributes.add("norq.send.id", .string(receipt.sendID))
                attributes.add("norq.send.created", .bool(receipt.created))
                attributes.add("norq.targets", .int(Int64(receipt.targetCount)))
                recorder.end(span, attributes: attributes)
            } else {
                recorder.end(span)
            }
            return receipt
        } catch {
            if recording {
                attributes.add("norq.error.code", .string(error.code.rawValue))
                recorder.end(span, attributes: attributes, status: SpanStatus(code: .error))
            } else {
                recorder.end(span)
            }
            throw error
        }
    }

    private func enqueue(content: PushContent?, templateName: String?, fingerprint prefix: [UInt8],
                         recipients: some Sequence<Recipient>, options: RouterSendOptions, scope sendScope: String?,
                         router: NotificationRouter,
                         trace: (context: InstrumentationContext, tracer: any Tracer)?) async throws(NorqError) -> Receipt {
        let now = clock.nowMillis()
        var options = options
        let callerKey = options.idempotencyKey
        let callerSendTime = options.sendTime
        // The send's key names every message id; the send time makes relative expirations identical on re-sends.
        options.idempotencyKey = callerKey ?? RequestID.random()
        if options.sendTime == nil { options.sendTime = now / 1000 }
        // The fingerprint is hashed as it is made: a million targets never hold their bytes at once.
        var fingerprint = RequestID.V5(namespace: RequestID.namespace)
        fingerprint.update(prefix)
        fingerprint.update("\u{0}recipients\u{0}")
        // Encoded into the store's segments as they are made: a million targets are held as ~44 MB, not as
        // values (`SendTargets`), and `recipients` may be a lazy sequence the caller never holds whole.
        var targets = SendTargets(segmentSize: store.segmentSize)
        let plan = SendPlan(content: content, templateName: templateName, options: options, trace: trace?.context)
        let disabled = plan.templateDisabled ? NotificationRouter.disabledSkip(plan) : nil
        var position = 0
        func add(_ target: DeliveryTarget, of recipient: Recipient) {
            let stored = DurableCodec.encode(target)
            let identity = target.identity
            fingerprint.update(identity)
            fingerprint.update(byte: 0)
            fingerprint.update(stored)
            fingerprint.update(byte: 0)
            // No message id is stored: it is `RequestID.make(idempotencyKey: plan.key, token: identity)`, made
            // again by the worker that sends it and by whoever reads the row (`DurableCodec.withMessageIDs`).
            var row = NewDelivery(position: position, target: stored, identity: identity, provider: nil,
                                  recipientID: recipient.id)
            switch router.route(target) {
            case .outcome(let result, let provider, _):
                row.provider = provider
                row.outcome = DurableCodec.stored(result, messageID: nil, mayHaveBeenDelivered: false)
            case .provider(let provider, _):
                row.provider = provider.name
                // The token registry is keyed by (token, provider, environment).
                row.environment = provider.environment(for: target, options: plan.sendOptions)?.rawValue
                if let disabled {
                    row.outcome = DurableCodec.stored(.skipped(disabled), messageID: nil, mayHaveBeenDelivered: false)
                }
            }
            targets.append(row)
            position += 1
        }
        for recipient in recipients {
            for token in recipient.tokens { add(.token(token), of: recipient) }
            for channel in recipient.channels { add(.channel(channel), of: recipient) }
        }
        var optionsForFingerprint = options
        optionsForFingerprint.idempotencyKey = nil
        optionsForFingerprint.sendTime = callerSendTime
        var optionBytes: [UInt8] = []
        try DurableCodec.fingerprint(optionsForFingerprint, into: &optionBytes)
        fingerprint.update(optionBytes)
        // Time-ordered: the stores' indexes of send ids then grow at their right edge.
        let send = NewSend(id: RequestID.timeOrdered(unixMillis: now), scope: sendScope ?? scope, idempotencyKey: callerKey,
                           fingerprint: fingerprint.finalize(),
                           content: try DurableCodec.encode(content: content, templateName: templateName, options: options,
                                                            trace: trace.flatMap { DeliveryTracing.carrier(of: $0.context, tracer: $0.tracer) }),
                           targets: targets)
        // Cached before the commit: a worker here may claim the rows before the store call returns.
        recentPlans.insert(plan, for: send.id)
        let result: EnqueueResult
        do {
            result = try await store.enqueue(send, now: now, idempotencyWindow: settings.idempotencyWindow)
        } catch {
            recentPlans.remove(send.id)
            throw error
        }
        enqueued.signal()
        if case .existing = result { recentPlans.remove(send.id) }
        switch result {
        case .created(let id):
            logger.debug("send enqueued", metadata: ["norq.send": "\(id)", "norq.targets": "\(targets.count)"])
            return Receipt(sendID: id, created: true, targetCount: targets.count)
        case .existing(let id):
            logger.debug("idempotency key repeated: the original send", metadata: ["norq.send": "\(id)"])
            let count = try await store.send(id: id)?.targetCount ?? targets.count
            return Receipt(sendID: id, created: false, targetCount: count)
        }
    }

    /// The progress of a send.
    public struct Status: Sendable, Hashable {
        public var sendID: String
        public var targetCount: Int
        /// Rows by state.
        public var states: [DeliveryState: Int]
        /// The outcomes of the finished targets, in target order (the same shape a send without a store returns).
        public var report: SendReport
        /// Every row (state, attempts, lease, message id), in target order.
        public var rows: [OutboxRow]
        /// True when every target has its final outcome.
        public var isFinished: Bool { report.outcomes.count == targetCount }
    }

    /// The progress and outcomes of a send; throws `store/send-not-found` for an unknown id.
    public func status(of sendID: String) async throws(NorqError) -> Status {
        let send = try await existingSend(sendID)
        let rows = DurableCodec.withMessageIDs(try await store.deliveries(ofSend: sendID), of: send)
        var states: [DeliveryState: Int] = [:]
        for row in rows { states[row.state, default: 0] += 1 }
        return Status(sendID: sendID, targetCount: send.targetCount, states: states,
                      report: SendReport(outcomes: rows.compactMap(DurableCodec.outcome(of:))), rows: rows)
    }

    /// The progress of a send without its rows: how many targets are in each state.
    public struct Progress: Sendable, Hashable {
        public var sendID: String
        public var targetCount: Int
        /// Rows by state.
        public var states: [DeliveryState: Int]
        /// Targets with their final outcome.
        public var finished: Int { states.reduce(0) { $0 + ($1.key.isFinal ? $1.value : 0) } }
        /// True when every target has its final outcome.
        public var isFinished: Bool { finished >= targetCount }
        /// Targets the service accepted whose receipts are still to come (state `accepted`: an Expo ticket whose
        /// receipt the worker fetches after the provider's `receiptDelay`). They count as `finished`.
        public var awaitingReceipts: Int { states[.accepted] ?? 0 }
    }

    /// The progress of a send, counted by the store (cheap for any size); throws `store/send-not-found` for an
    /// unknown id.
    public func progress(of sendID: String) async throws(NorqError) -> Progress {
        let send = try await existingSend(sendID)
        return Progress(sendID: sendID, targetCount: send.targetCount,
                        states: try await store.stateCounts(ofSend: sendID))
    }

    /// The stored send, or `store/send-not-found`.
    private func existingSend(_ sendID: String) async throws(NorqError) -> StoredSend {
        guard let send = try await store.send(id: sendID) else {
            throw NorqError(.storeSendNotFound, "no send with id \(sendID)",
                            hint: "sends are kept for the retention period after they finish")
        }
        return send
    }

    /// The rows of a send at target positions `positions` (one page), in target order.
    public func rows(of sendID: String, positions: Range<Int>) async throws(NorqError) -> [OutboxRow] {
        try await Self.rows(of: sendID, positions: positions, in: store)
    }

    /// Every row of a send in `store`, in target order, each with its message id (see `rows(of:positions:in:)`).
    public static func rows(of sendID: String, in store: any DeliveryStore) async throws(NorqError) -> [OutboxRow] {
        try await withMessageIDs(try await store.deliveries(ofSend: sendID), of: sendID, in: store)
    }

    /// The rows of a send at target positions `positions` in `store`, in target order, each with its message id
    /// (the stores keep only the ids a provider chose; the id every attempt sent is made again from the send's key).
    public static func rows(of sendID: String, positions: Range<Int>,
                            in store: any DeliveryStore) async throws(NorqError) -> [OutboxRow] {
        try await withMessageIDs(try await store.deliveries(ofSend: sendID, positions: positions), of: sendID, in: store)
    }

    /// `rows` with their message ids; the send is read only when a row lacks one (rows enqueued before stop 31
    /// carry theirs).
    private static func withMessageIDs(_ rows: [OutboxRow], of sendID: String,
                                       in store: any DeliveryStore) async throws(NorqError) -> [OutboxRow] {
        guard rows.contains(where: { $0.messageID == nil }), let send = try await store.send(id: sendID) else { return rows }
        return DurableCodec.withMessageIDs(rows, of: send)
    }

    /// Waits until every target of the send has its outcome (woken by completions in this process, else every
    /// poll interval), then returns the report. Throws `store/deadline-exceeded` after `timeout`. Polls the
    /// progress (counts), and reads the rows once, when the send has finished.
    ///
    /// With `receipts`, it waits also for the receipts of the targets the service only accepted (see
    /// ``Progress/awaitingReceipts``), so that the report holds their final outcomes (a receipt that does not come
    /// within the provider's retention leaves `accepted`).
    public func wait(for sendID: String, timeout: Duration, receipts: Bool = false) async throws(NorqError) -> SendReport {
        let end = ContinuousClock.now.advanced(by: timeout)
        while true {
            let current = try await progress(of: sendID)
            if current.isFinished, !receipts || current.awaitingReceipts == 0 {
                return try await status(of: sendID).report
            }
            let left = ContinuousClock.now.duration(to: end)
            guard left > .zero else {
                throw NorqError(.storeDeadlineExceeded,
                                "send \(sendID) did not finish within \(timeout): \(current.finished) of \(current.targetCount) targets have an outcome",
                                hint: "is a worker running (norq worker)?")
            }
            if Task.isCancelled {
                throw NorqError(.storeDeadlineExceeded, "waiting for send \(sendID) was cancelled")
            }
            await completed.wait(upTo: min(left, settings.pollInterval))
        }
    }

    /// Records that `token` was registered again now: later sends reach it even if it was reported invalid. With
    /// `provider` and/or `environment` (`sandbox`, `production`), only there; nil: every provider and environment.
    public func registerToken(_ token: String, provider: String? = nil,
                              environment: PushEnvironment? = nil) async throws(NorqError) {
        try await store.registerToken(token, provider: provider, environment: environment?.rawValue,
                                      at: clock.nowMillis())
    }
}
