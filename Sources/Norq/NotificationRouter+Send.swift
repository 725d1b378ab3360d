public import NorqCore
import Logging
import Tracing
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What one send needs besides the recipients: the content rendered once, and the idempotency key.
///
/// A class, not a struct: every in-flight request's async frames refer to it, and a reference there costs 8 bytes
/// where a copy of the content and options cost over 1 KB per frame (over 10 KB per in-flight request).
final class SendPlan: Sendable {
    /// nil when the template is disabled: every target is skipped.
    let content: PushContent?
    let templateName: String?
    let options: RouterSendOptions
    /// The caller's key, or a generated UUID.
    let key: String
    /// Whether `key` came from the caller (only then is the dedup store consulted).
    let callerKey: Bool
    /// Unique in the process: tells providers that every request of this send carries the same content.
    let contentID: UInt64
    /// `content`, or empty content when the template is disabled: read in place per token (unwrapping the optional
    /// copied the whole content, retaining each of its fields, per token).
    let deliverable: PushContent
    /// `content == nil`, kept apart: comparing the optional with nil per token copied it.
    let templateDisabled: Bool
    /// The provider options of every request of this send but its request id (set per token).
    let sendOptions: SendOptions
    /// The trace context its attempts' spans are children of (nil: not traced, or a new trace per attempt): the
    /// caller's for a send in memory; the stored request's (or the claim's) for a durable one.
    let trace: InstrumentationContext?
    private static let nextContentID = Atomic<UInt64>(1)

    init(content: PushContent?, templateName: String?, options: RouterSendOptions,
         trace: InstrumentationContext? = nil) {
        self.trace = trace
        self.content = content
        self.deliverable = content ?? PushContent()
        self.templateDisabled = content == nil
        self.templateName = templateName ?? content?.templateName
        self.options = options
        let key = options.idempotencyKey ?? RequestID.random()
        self.key = key
        self.callerKey = options.idempotencyKey != nil
        let contentID = Self.nextContentID.wrappingAdd(1, ordering: .relaxed).oldValue
        self.contentID = contentID
        var collapseID = options.collapseID
        if collapseID == nil, options.collapse == .idempotency, content?.headers.collapseID == nil {
            collapseID = RequestID.make(idempotencyKey: key, token: "")
        }
        var sendOptions = SendOptions(idempotencyKey: key, environment: options.environment, priority: options.priority,
                                      expiration: options.expiration, collapseID: collapseID,
                                      sendTime: options.sendTime, contentID: contentID)
        sendOptions.topic = options.topic
        sendOptions.validateOnly = options.validateOnly
        self.sendOptions = sendOptions
    }
}

extension NotificationRouter {
    /// The caller's trace context when this router makes spans (nil otherwise: no task-local read per send).
    var currentTrace: InstrumentationContext? { tracer == nil ? nil : InstrumentationContext.current }

    // MARK: - Sending

    /// Renders `template` once with `data`, then delivers to every token and channel of `recipients`.
    /// Returns one outcome per target, in recipient order. Throws only for errors of the whole send
    /// (template errors, `routing/no-templates`, `provider/shut-down` after shutdown began).
    public func send(template: String, data: JSONValue, to recipients: [Recipient],
                     options: RouterSendOptions = RouterSendOptions()) async throws(NorqError) -> SendReport {
        let content = try render(template: template, data: data, strict: options.strict)
        return try await run(SendPlan(content: content, templateName: template, options: options, trace: currentTrace), recipients)
    }

    /// `send(template:data:to:options:)` with data given as an `Encodable` (encoded to JSON first).
    public func send(template: String, data: some Encodable, to recipients: [Recipient],
                     options: RouterSendOptions = RouterSendOptions()) async throws(NorqError) -> SendReport {
        try await send(template: template, data: try Self.jsonValue(data), to: recipients, options: options)
    }

    /// Delivers pre-built content to every token and channel of `recipients`.
    public func send(content: PushContent, to recipients: [Recipient],
                     options: RouterSendOptions = RouterSendOptions()) async throws(NorqError) -> SendReport {
        try await run(SendPlan(content: content, templateName: nil, options: options, trace: currentTrace), recipients)
    }

    /// Like `send(template:...)`, but yields each outcome as it completes. Rendering happens before this
    /// returns (its errors are thrown here). Ending the iteration early cancels the rest of the send
    /// (remaining tokens are not delivered).
    public func sendStreaming(template: String, data: JSONValue, to recipients: [Recipient],
                              options: RouterSendOptions = RouterSendOptions()) throws(NorqError) -> PushOutcomeStream {
        let content = try render(template: template, data: data, strict: options.strict)
        return try stream(SendPlan(content: content, templateName: template, options: options, trace: currentTrace), recipients)
    }

    /// Like `send(content:...)`, but yields each outcome as it completes.
    public func sendStreaming(content: PushContent, to recipients: [Recipient],
                              options: RouterSendOptions = RouterSendOptions()) throws(NorqError) -> PushOutcomeStream {
        try stream(SendPlan(content: content, templateName: nil, options: options, trace: currentTrace), recipients)
    }

    /// Like `sendStreaming(template:...)`, for recipients that arrive as an async sequence (a database cursor,
    /// a file read line by line). They are read in chunks (`recipientChunkSize`: 16 times the largest
    /// in-flight bound, at least 1,024) and each chunk is delivered before the next is read, so a send to
    /// millions of recipients holds one chunk and the requests in flight, never the whole list.
    /// Ending the iteration early cancels the send: the chunk being delivered ends with `send-cancelled`
    /// outcomes for its remaining targets, and recipients not read yet get no outcome.
    public func sendStreaming<Recipients: AsyncSequence & Sendable>(
        template: String, data: JSONValue, to recipients: Recipients, options: RouterSendOptions = RouterSendOptions()
    ) throws(NorqError) -> PushOutcomeStream where Recipients.Element == Recipient, Recipients.Failure == Never {
        let content = try render(template: template, data: data, strict: options.strict)
        return try stream(SendPlan(content: content, templateName: template, options: options, trace: currentTrace), recipients)
    }

    /// Like `sendStreaming(content:...)`, for recipients that arrive as an async sequence (read in chunks, see
    /// `sendStreaming(template:data:to:options:)` with an async sequence).
    public func sendStreaming<Recipients: AsyncSequence & Sendable>(
        content: PushContent, to recipients: Recipients, options: RouterSendOptions = RouterSendOptions()
    ) throws(NorqError) -> PushOutcomeStream where Recipients.Element == Recipient, Recipients.Failure == Never {
        try stream(SendPlan(content: content, templateName: nil, options: options, trace: currentTrace), recipients)
    }

    /// How many recipients a send from an async sequence reads at a time: 16 times the largest provider
    /// in-flight bound (so the tail of a chunk, when fewer requests are in flight, is a small part of it),
    /// at least 1,024.
    public var recipientChunkSize: Int {
        max(1_024, 16 * (providers.values.map(\.policy.maxInFlight).max() ?? 0))
    }

    // MARK: - Dry run

    /// The dry run: renders and routes like a send and returns, per target, the exact request that would
    /// be sent (with its `apns-id`) or the outcome that routing or preparing decided. Nothing is sent and
    /// the dedup store is not consulted.
    public func prepare(template: String, data: JSONValue, to recipients: [Recipient],
                        options: RouterSendOptions = RouterSendOptions()) throws(NorqError) -> [PreparedDelivery] {
        let content = try render(template: template, data: data, strict: options.strict)
        return prepare(SendPlan(content: content, templateName: template, options: options), recipients)
    }

    /// The dry run for pre-built content.
    public func prepare(content: PushContent, to recipients: [Recipient],
                        options: RouterSendOptions = RouterSendOptions()) -> [PreparedDelivery] {
        prepare(SendPlan(content: content, templateName: nil, options: options), recipients)
    }

    func prepare(_ plan: SendPlan, _ recipients: [Recipient]) -> [PreparedDelivery] {
        var result: [PreparedDelivery] = []
        result.reserveCapacity(Self.targetCount(recipients))
        for recipient in recipients {
            let targets = recipient.tokens.map(DeliveryTarget.token) + recipient.channels.map(DeliveryTarget.channel)
            for target in targets {
                let decision = route(target)
                switch decision {
                case .outcome(let outcome, let provider, let how):
                    result.append(PreparedDelivery(target: target, recipientID: recipient.id, provider: provider,
                                                   routing: how, plan: .noRequest(outcome)))
                case .provider(let provider, let how):
                    guard !plan.templateDisabled else {
                        result.append(PreparedDelivery(target: target, recipientID: recipient.id,
                                                       provider: provider.name, routing: how,
                                                       plan: .noRequest(.skipped(Self.disabledSkip(plan)))))
                        continue
                    }
                    let requestID = RequestID.make(idempotencyKey: plan.key, token: target.identity)
                    let entry: PreparedDelivery.Plan
                    do {
                        entry = .request(try prepareRequest(target: target, provider: provider, plan: plan,
                                                            requestID: requestID))
                    } catch {
                        entry = .noRequest(.failed(error))
                    }
                    result.append(PreparedDelivery(target: target, recipientID: recipient.id, provider: provider.name,
                                                   routing: how, plan: entry))
                }
            }
        }
        return result
    }

    // MARK: - Internals

    func render(template: String, data: JSONValue, strict: Bool) throws(NorqError) -> PushContent? {
        guard let templates else {
            throw NorqError(.noTemplates, "this router has no templates; send content instead of template \"\(template)\"")
        }
        guard var content = try templates.content(template: template, data: data, strict: strict) else { return nil }
        if content.templateName == nil { content.templateName = template }
        return content
    }

    static func jsonValue(_ value: some Encodable) throws(NorqError) -> JSONValue {
        let bytes: [UInt8]
        do {
            bytes = Array(try JSONEncoder().encode(value))
        } catch {
            throw NorqError(.invalidData, "the send data could not be encoded to JSON: \(error)")
        }
        return try JSONValue(parsing: bytes)
    }

    static func disabledSkip(_ plan: SendPlan) -> PushOutcome.Skipped {
        PushOutcome.Skipped(code: .templateDisabled,
                            reason: "template \"\(plan.templateName ?? "?")\" is disabled (enabled: false)")
    }

    func beginSend() throws(NorqError) {
        let accepted = lifecycle.withLock { state in
            guard state.accepting else { return false }
            state.activeSends += 1
            return true
        }
        guard accepted else {
            throw NorqError(.providerShutDown, "the router is shutting down and takes no new sends")
        }
    }

    func endSend() {
        let drained = lifecycle.withLock { state in
            state.activeSends -= 1
            return !state.accepting && state.activeSends == 0
        }
        if drained { self.drained.latch() }
    }

    var isStopped: Bool { lifecycle.withLock { $0.stopped } }

    func run(_ plan: SendPlan, _ recipients: [Recipient]) async throws(NorqError) -> SendReport {
        try beginSend()
        defer { endSend() }
        let collector = OutcomeCollector(count: Self.targetCount(recipients))
        await execute(plan, recipients, sink: collector)
        return collector.report
    }

    func stream<Recipients: AsyncSequence & Sendable>(_ plan: SendPlan, _ recipients: Recipients) throws(NorqError)
        -> PushOutcomeStream where Recipients.Element == Recipient, Recipients.Failure == Never
    {
        try beginSend()
        let outcomes = PushOutcomeStream(capacity: outcomeBufferSize)
        let storage = outcomes.storage
        let chunkSize = recipientChunkSize
        let task = Task {
            var chunk: [Recipient] = []
            chunk.reserveCapacity(chunkSize)
            for await recipient in recipients {
                chunk.append(recipient)
                guard chunk.count == chunkSize else { continue }
                await self.execute(plan, chunk, sink: storage)
                chunk.removeAll(keepingCapacity: true)
                // Cancelled, or the router is shutting down: the chunk's remaining targets got their failure
                // outcomes; the rest of the sequence is not read.
                if Task.isCancelled || self.isStopped { break }
            }
            if !chunk.isEmpty, !Task.isCancelled, !self.isStopped {
                await self.execute(plan, chunk, sink: storage)
            }
            storage.finish()
            self.endSend()
        }
        storage.setOnTermination { task.cancel() }
        return outcomes
    }

    func stream(_ plan: SendPlan, _ recipients: [Recipient]) throws(NorqError) -> PushOutcomeStream {
        try beginSend()
        let outcomes = PushOutcomeStream(capacity: outcomeBufferSize)
        let storage = outcomes.storage
        let task = Task {
            await self.execute(plan, recipients, sink: storage)
            storage.finish()
            self.endSend()
        }
        storage.setOnTermination { task.cancel() }
        return outcomes
    }

    /// How many outcomes a streaming send buffers for a consumer that falls behind before it waits for it:
    /// twice the largest provider in-flight bound, at least 1,024.
    public var outcomeBufferSize: Int {
        max(1_024, 2 * (providers.values.map(\.policy.maxInFlight).max() ?? 0))
    }

    /// The fan-out: every target routed once (``RoutedTargets``: a provider index per target), then one
    /// `DeliveryPump` per provider instance, each going through its targets lazily with at most
    /// `policy.maxInFlight` in flight; one more task reports the targets routing did not deliver. Nothing else is
    /// materialised per target beyond the requests in flight.
    func execute(_ plan: SendPlan, _ recipients: [Recipient], sink: some OutcomeSink) async {
        guard !plan.templateDisabled else {
            let skip = Self.disabledSkip(plan)
            await Self.forEachTarget(recipients) { position, target, recipientID in
                self.metrics.count("skipped", provider: nil, reason: skip.code.rawValue)
                await sink.emitWaiting(position, PushOutcome(target: target, recipientID: recipientID,
                                                             provider: self.route(target).providerName,
                                                             result: .skipped(skip)))
            }
            return
        }
        let routes = RoutedTargets(self, recipients)
        await withTaskGroup(of: Void.self) { group in
            if !routes.unrouted.isEmpty {
                group.addTask {
                    for entry in routes.unrouted {
                        self.countFinal(entry.result, provider: entry.provider)
                        await sink.emitWaiting(entry.position, PushOutcome(target: entry.target,
                                                                           recipientID: entry.recipientID,
                                                                           provider: entry.provider, result: entry.result))
                    }
                }
            }
            for (index, name) in providerNames.enumerated() {
                guard let provider = providers[name] else { continue }
                group.addTask {
                    let pump = DeliveryPump(router: self, provider: provider, plan: plan,
                                            cursor: TargetCursor(recipients, routes: routes, providerIndex: index),
                                            sink: sink)
                    await pump.run()
                }
            }
        }
    }

    func prepareRequest(target: DeliveryTarget, provider: any PushProvider, plan: SendPlan,
                        requestID: String?) throws(NorqError) -> PreparedRequest {
        guard !plan.templateDisabled else {
            throw NorqError(.templateDisabled, "template \"\(plan.templateName ?? "?")\" is disabled (enabled: false)")
        }
        guard !plan.sendOptions.validateOnly || provider.supportsValidateOnly else {
            throw NorqError(.validateOnlyUnsupported,
                            "provider \(provider.name) (\(provider.typeName)) has no server-side dry run: nothing was sent to this token",
                            hint: "send without validate-only, or route these tokens to a provider that validates (fcm)")
        }
        var options = plan.sendOptions
        options.requestID = requestID
        switch target {
        case .token(let token):
            return try provider.prepare(plan.deliverable, for: token, options: options)
        case .channel(let channel):
            return try provider.prepare(plan.deliverable, forChannel: channel, options: options)
        }
    }
}
