import NorqCore
import NIOCore
import Synchronization

/// The header fields of one request as the transport encodes them: `:method`, `:scheme https`, `:path`,
/// `:authority`, then `fields` in order (see ``HPACKRequestEncoder/indexing(of:)`` for which enter the HPACK table).
struct APNsRequestHead: Sendable {
    var method: String
    var path: String
    var authority: String
    var fields: [HTTPHeader]
}

/// One request as the transport sends it: its header fields and the payload. A class: it travels through the
/// provider, the pool, the request box and the stream handler, and a reference is one retain where a copy of the
/// struct retained each of its strings.
final class APNsWireRequest: Sendable {
    let endpoint: APNsEndpoint
    let headers: APNsRequestHead
    /// The payload; requests of one send share one buffer (a `ByteBuffer` is copied on write only).
    let body: ByteBuffer
    /// The device token, named (redacted) in error messages only when one is made; nil for other requests.
    let logToken: String?
    /// What error messages name when there is no device token (a channel).
    let logLabel: String

    init(endpoint: APNsEndpoint, headers: APNsRequestHead, body: ByteBuffer, logToken: String?, logLabel: String = "") {
        self.endpoint = endpoint
        self.headers = headers
        self.body = body
        self.logToken = logToken
        self.logLabel = logLabel
    }

    /// Log-safe name of the target (first 8 characters of the token).
    var logID: String { logToken.map(PushToken.redact) ?? logLabel }
}

/// One response as received.
struct APNsWireResponse: Sendable {
    var status: Int
    var headers: [HTTPHeader]
    var body: [UInt8]
}

/// What a transport calls, exactly once, with a request's answer or failure.
typealias APNsCompletion = @Sendable (Result<APNsWireResponse, NorqError>) -> Void

/// The small internal interface between the provider and HTTP/2.
protocol APNsTransport: Sendable {
    /// Sends once and calls `completion` exactly once, on any thread (an event loop, or the caller's before
    /// returning). Fails with `provider/transport-failed` when the connection fails before an answer,
    /// `provider/deadline-exceeded` when the deadline passes (the stream is cancelled, not the connection),
    /// `provider/shut-down` after `shutdown()`.
    func start(_ request: APNsWireRequest, deadline: ContinuousClock.Instant, completion: @escaping APNsCompletion)
    /// Stops taking requests, waits for those in flight, closes the connections.
    func shutdown() async
}

extension APNsTransport {
    /// `start` for async callers.
    func send(_ request: APNsWireRequest, deadline: ContinuousClock.Instant) async throws(NorqError) -> APNsWireResponse {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<APNsWireResponse, NorqError>, Never>) in
            start(request, deadline: deadline) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }
}

/// A request travelling through the pool: completed exactly once (response, failure or deadline).
final class APNsRequestBox: Sendable {
    let request: APNsWireRequest
    /// When `deadlineExceeded()` fires; armed by ``armDeadline(on:)`` on the event loop that takes the request.
    let deadline: NIODeadline
    /// Times this request was re-queued after GOAWAY / REFUSED_STREAM.
    let requeues = Atomic<Int>(0)

    private struct State {
        var completion: APNsCompletion?
        var done = false
        /// Where it is in flight, so the deadline can cancel the stream.
        var connection: APNsConnection?
        var streamID: Int32?
        var deadlineTask: Scheduled<Void>?
        var deadlineArmed = false
    }
    private let state = Mutex(State())

    init(request: APNsWireRequest, deadline: NIODeadline, completion: @escaping APNsCompletion) {
        self.request = request
        self.deadline = deadline
        state.withLock { $0.completion = completion }
    }

    /// Schedules the deadline timer once, for a request that waits for a connection. (A connection's stream
    /// handler enforces the deadlines of the requests it holds itself, with one periodic sweep.)
    func armDeadline(on eventLoop: any EventLoop) {
        let arm = state.withLock { state -> Bool in
            if state.done || state.deadlineArmed { return false }
            state.deadlineArmed = true
            return true
        }
        guard arm else { return }
        setDeadlineTask(eventLoop.scheduleTask(deadline: deadline) { self.deadlineExceeded() })
    }

    var isDone: Bool { state.withLock { $0.done } }

    func setDeadlineTask(_ task: Scheduled<Void>) {
        let cancel: Bool = state.withLock { state in
            if state.done { return true }
            state.deadlineTask = task
            return false
        }
        if cancel { task.cancel() }
    }

    /// Records the stream it was written on; false when it already completed (skip it).
    func assign(connection: APNsConnection, streamID: Int32) -> Bool {
        state.withLock { state in
            if state.done { return false }
            state.connection = connection
            state.streamID = streamID
            return true
        }
    }

    func unassign() {
        state.withLock { state in
            state.connection = nil
            state.streamID = nil
        }
    }

    /// Fails with `provider/deadline-exceeded` (the caller cancels the stream); false when already complete.
    @discardableResult
    func completeAsExpired() -> Bool {
        complete(.failure(NorqError(.deadlineExceeded, "APNs did not answer before the deadline (token \(request.logID))")))
    }

    /// Completes once; returns false when it had completed already. The completion runs outside the lock
    /// and may start new requests on the calling event loop: callers finish changing their state first.
    @discardableResult
    func complete(_ result: Result<APNsWireResponse, NorqError>) -> Bool {
        let taken = state.withLock { state -> (APNsCompletion?, Scheduled<Void>?) in
            if state.done { return (nil, nil) }
            state.done = true
            let completion = state.completion
            state.completion = nil
            state.connection = nil
            return (completion, state.deadlineTask)
        }
        guard let completion = taken.0 else { return false }
        taken.1?.cancel()
        completion(result)
        return true
    }

    /// The deadline passed: fail with `provider/deadline-exceeded` and cancel the stream if one is open.
    func deadlineExceeded() {
        let location = state.withLock { ($0.connection, $0.streamID) }
        if completeAsExpired() {
            if let connection = location.0, let streamID = location.1 {
                connection.cancelStream(streamID)
            }
        }
    }
}
