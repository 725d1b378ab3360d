package import NIOCore
import Synchronization

/// A request body: a buffer, or the caller's bytes, copied once, straight into the connection's outgoing buffer
/// (a body made per request, as FCM's, was otherwise copied into a buffer of its own first: a malloc of twice its
/// size, and a copy, per request).
///
/// `spliced`: a shared head and tail around one string's UTF-8, copied part by part into the outgoing buffer (a body
/// made per request from a shared message and one token then needs no array of its own).
package enum HTTP2RequestBody: Sendable {
    case buffer(ByteBuffer)
    case bytes([UInt8])
    case spliced(head: [UInt8], middle: String, tail: [UInt8])

    package var count: Int {
        switch self {
        case .buffer(let buffer): buffer.readableBytes
        case .bytes(let bytes): bytes.count
        case .spliced(let head, let middle, let tail): head.count + middle.utf8.count + tail.count
        }
    }

    /// As a buffer (the bytes copied into one).
    package var buffer: ByteBuffer {
        switch self {
        case .buffer(let buffer): return buffer
        case .bytes(let bytes): return ByteBuffer(bytes: bytes)
        case .spliced(let head, let middle, let tail):
            var buffer = ByteBuffer()
            buffer.reserveCapacity(count)
            buffer.writeBytes(head)
            buffer.writeString(middle)
            buffer.writeBytes(tail)
            return buffer
        }
    }
}

/// What a request's caller is told, exactly once.
package typealias HTTP2Completion = @Sendable (Result<HTTP2Response, HTTP2ClientError>) -> Void

/// One request on its way through the pool and a connection: the only per-request object of the client. It
/// completes exactly once (answer, failure or deadline), from whichever thread gets there first.
package final class HTTP2RequestContext: Sendable {
    package let head: HTTP2RequestHead
    package let body: HTTP2RequestBody
    package let deadline: NIODeadline

    private struct State {
        var completion: HTTP2Completion?
        /// The stream it is written on; 0 while it is not on one.
        var streamID: Int32 = 0
        var deadlineTask: Scheduled<Void>?
        var deadlineArmed = false
        /// Times the server refused it (REFUSED_STREAM, above GOAWAY): bounded by ``HTTP2RequestContext/maxRequeues``.
        var requeues = 0
        /// Times a connection handed it back, written or not: bounded by ``HTTP2RequestContext/maxHandBacks``.
        var handBacks = 0
    }
    private let state: Mutex<State>

    /// A request above a GOAWAY's last-stream-id is sent again once by the pool; the next time it fails, not
    /// processed (``HTTP2ClientError/isUnprocessed``), and the caller re-queues it (the router: without spending the
    /// retry budget, until the deadline).
    package static let maxRequeues = 1
    /// A request handed back without having been written (queued on a connection that closed or went away) is
    /// sent again up to this many times in all.
    package static let maxHandBacks = 3

    /// Told when the request completes (for the pool's shutdown wait); nil in state-machine tests. Not the pool:
    /// a request never references its pool.
    private let outstanding: HTTP2OutstandingRequests?

    package convenience init(head: HTTP2RequestHead, body: ByteBuffer, deadline: NIODeadline,
                             completion: @escaping HTTP2Completion) {
        self.init(head: head, body: .buffer(body), deadline: deadline, completion: completion)
    }

    package convenience init(head: HTTP2RequestHead, body: HTTP2RequestBody, deadline: NIODeadline,
                             completion: @escaping HTTP2Completion) {
        self.init(head: head, body: body, deadline: deadline, outstanding: nil, completion: completion)
    }

    init(head: HTTP2RequestHead, body: HTTP2RequestBody, deadline: NIODeadline,
         outstanding: HTTP2OutstandingRequests?, completion: @escaping HTTP2Completion) {
        self.head = head
        self.body = body
        self.deadline = deadline
        self.outstanding = outstanding
        self.state = Mutex(State(completion: completion))
    }

    package var isDone: Bool { state.withLock { $0.completion == nil } }

    /// Counts a hand-back (`written`: the server refused it); false when the request was handed back too often
    /// (fail it, not processed) or is done.
    package func takeRequeue(written: Bool) -> Bool {
        state.withLock { state in
            guard state.completion != nil, state.handBacks < Self.maxHandBacks else { return false }
            if written {
                guard state.requeues < Self.maxRequeues else { return false }
                state.requeues += 1
            }
            state.handBacks += 1
            return true
        }
    }

    /// Schedules the deadline timer once, for a request that waits for a connection. (A connection enforces the
    /// deadlines of the requests it holds itself, with one periodic sweep.)
    package func armDeadline(on eventLoop: any EventLoop) {
        let arm = state.withLock { state -> Bool in
            if state.completion == nil || state.deadlineArmed { return false }
            state.deadlineArmed = true
            return true
        }
        guard arm else { return }
        let task = eventLoop.scheduleTask(deadline: deadline) { self.deadlineExceeded() }
        let cancel: Bool = state.withLock { state in
            if state.completion == nil { return true }
            state.deadlineTask = task
            return false
        }
        if cancel { task.cancel() }
    }

    /// Records that it is written on stream `streamID`; false when it completed already (skip it).
    func assign(streamID: Int32) -> Bool {
        state.withLock { state in
            if state.completion == nil { return false }
            state.streamID = streamID
            return true
        }
    }

    func unassign() {
        state.withLock { $0.streamID = 0 }
    }

    /// Completes once; false when it had completed already. The completion runs outside the lock and may start
    /// new requests on the calling event loop: callers finish changing their state first.
    @discardableResult
    package func complete(_ result: Result<HTTP2Response, HTTP2ClientError>) -> Bool {
        // Taken into locals, not returned through `withLock`'s generic result: a closure returned that way came
        // back wrapped in a reabstraction thunk, an allocation per request.
        var taken: HTTP2Completion?
        var deadlineTask: Scheduled<Void>?
        state.withLock { state in
            guard let completion = state.completion else { return }
            taken = completion
            deadlineTask = state.deadlineTask
            state.completion = nil
            state.streamID = 0
        }
        guard let completion = taken else { return false }
        deadlineTask?.cancel()
        outstanding?.finished()
        completion(result)
        return true
    }

    package func fail(_ error: HTTP2ClientError) {
        complete(.failure(error))
    }

    /// The deadline passed while it waited for a connection or was in transit to one: not processed. If it was
    /// written meanwhile, it may have been; its stream is cancelled by the connection's own deadline sweep at its
    /// next tick (the request knows no connection).
    package func deadlineExceeded() {
        let written = state.withLock { $0.streamID != 0 }
        complete(.failure(HTTP2ClientError(.deadlineExceeded, possiblyProcessed: written, "no answer before the deadline")))
    }
}
