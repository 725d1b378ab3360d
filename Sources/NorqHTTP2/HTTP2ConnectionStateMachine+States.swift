import NIOCore
import NIOHPACK

/// The connection's states and the data each one uses, split by concern.
///
/// ```
/// awaitingSettings --SETTINGS--> active(WarmUp) --GOAWAY / drain--> draining(lastStreamID:)
///        \___________________________\___________________________________\--> closed
/// ```
///
/// The enum holds the small per-state facts (the warm-up while active, the last stream id while draining); the
/// large, hot data lives in sub-machines stored beside it, one per concern, never inside an enum case:
/// - sending: ``queue``, the requests waiting for a stream (filled while awaiting SETTINGS or active; draining
///   and closing hand it back at once, so it is empty in those states);
/// - the streams (receiving): ``OpenStreams``, the stream table, the ids, the deadline bound (filled once
///   SETTINGS arrived; emptied when closed);
/// - flow control: ``HTTP2FlowControl``, both directions' windows and the bodies waiting for window (in
///   ``OpenStreams/flow``; its blocked bodies dropped when closed);
/// - timers: ``HTTP2KeepAlive`` (PING, idle) and the warm-up in ``State/active(_:)``.
///
/// Why not in the cases (stop 33's first version, `Benchmarks/README.md`): a payload taken out of its case is
/// copied through its value witness (`ActiveVwcp` in `perf`: the queue, the table and the blocked bodies retained,
/// then released), on every access, 8-14% more router CPU per notification; and a payload bound by a `switch` on a
/// moved-out state kept the subject alive to the end of the case, so the table was shared and copied per stream
/// (`Benchmarks/README.md`, stop 35). Stored properties change in place with no copy and no retain.
extension HTTP2ConnectionStateMachine {
    enum State {
        /// Preface sent; the server's SETTINGS (its first frame) not yet received. Requests queue.
        case awaitingSettings
        /// Taking requests: streams open as the limit (and the warm-up) allow.
        case active(WarmUp)
        /// No new streams (a GOAWAY, received or of our own): the streams up to `lastStreamID` finish, then closed.
        case draining(lastStreamID: Int32)
        case closed
    }

    /// The streams of a connection (filled once SETTINGS arrived): the stream table, the ids, the deadline bound,
    /// both directions' windows and the bodies waiting for window.
    struct OpenStreams {
        var table: [Int32: Stream] = [:]
        var nextStreamID: Int32 = 1
        /// The highest stream id opened: frames on higher (or even) ids are on idle streams.
        var highestStreamID: Int32 = 0
        /// No deadline of a request queued or in flight is earlier (a lower bound: lowered by each request taken,
        /// recomputed by each scan of ``HTTP2ConnectionStateMachine/expire(now:)``).
        var earliestDeadline = NIODeadline.distantFuture
        var flow: HTTP2FlowControl
    }

    // MARK: access to the data

    /// The open streams (none before SETTINGS or once closed).
    var streams: [Int32: Stream] {
        get { open.table }
        _modify { yield &open.table }
    }

    /// Both directions' windows and the bodies waiting for window.
    var flow: HTTP2FlowControl {
        get { open.flow }
        _modify { yield &open.flow }
    }

    /// No deadline of a request queued or in flight is earlier.
    var earliestDeadline: NIODeadline {
        get { open.earliestDeadline }
        set { open.earliestDeadline = newValue }
    }

    /// The highest stream id opened (0 before SETTINGS).
    var highestStreamID: Int32 { open.highestStreamID }

    /// Runs `body` on the open streams of an active or draining connection, in place; nil in other states.
    @inline(__always)
    mutating func withOpenStreams<T>(_ body: (inout OpenStreams) -> T) -> T? {
        switch state {
        case .active, .draining: body(&open)
        case .awaitingSettings, .closed: nil
        }
    }

    /// The warm-up of an active connection (`.off` in every other state; setting it there does nothing).
    var warmUp: WarmUp {
        get { if case .active(let warmUp) = state { warmUp } else { .off } }
        set {
            guard case .active(let warmUp) = state, warmUp != newValue else { return }
            state = .active(newValue)
        }
    }

    var isGoingAway: Bool { if case .draining = state { true } else { false } }
    var isAwaitingSettings: Bool { if case .awaitingSettings = state { true } else { false } }

    /// The state's name, for tests and logs.
    package var stateName: String {
        switch state {
        case .awaitingSettings: "awaitingSettings"
        case .active: "active"
        case .draining(let last): "draining(lastStreamID: \(last))"
        case .closed: "closed"
        }
    }

    // MARK: transitions

    /// SETTINGS arrived: the connection is active (the queue and windows kept).
    mutating func becomeActive() {
        guard case .awaitingSettings = state else { return }
        state = .active(configuration.warmUp == nil ? .off : .pending)
    }

    /// No new streams: an active connection keeps its streams up to `lastStreamID`; the queue is returned (to hand
    /// back). Draining already: the lower last id is kept. Before SETTINGS (nothing was written) or closed:
    /// nothing changes but the queue is returned.
    mutating func beginDraining(lastStreamID: Int32) -> CircularBuffer<HTTP2RequestContext>? {
        switch state {
        case .active:
            state = .draining(lastStreamID: lastStreamID)
            return takeQueue()
        case .draining(let previous):
            state = .draining(lastStreamID: min(previous, lastStreamID))
            return nil
        case .awaitingSettings:
            return takeQueue()
        case .closed:
            return nil
        }
    }

    /// The queue, emptied (a move).
    mutating func takeQueue() -> CircularBuffer<HTTP2RequestContext> {
        var taken = CircularBuffer<HTTP2RequestContext>(initialCapacity: 1)
        swap(&taken, &queue)
        return taken
    }

    /// Closed: everything the connection held is returned (to fail and hand back); nothing is kept.
    mutating func becomeClosed() -> (streams: [Int32: Stream], queue: CircularBuffer<HTTP2RequestContext>?) {
        let old = state
        state = .closed
        var table: [Int32: Stream] = [:]
        swap(&table, &open.table)
        open.flow.forgetAll()
        switch old {
        case .awaitingSettings, .active: return (table, takeQueue())
        case .draining: return (table, nil)
        case .closed: return ([:], nil)
        }
    }
}
