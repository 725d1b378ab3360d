import NIOCore
import NIOHPACK

/// The connection's states, each carrying its own data (swift-nio-http2's per-state structs and postgres-nio's
/// `ConnectionStateMachine` are the models), and the in-place access to that data.
///
/// ```
/// awaitingSettings(Pending) --SETTINGS--> active(Active) --GOAWAY / drain--> draining(OpenStreams, last id)
///          \________________________________\______________________________________\--> closed
/// ```
///
/// Only a state that has a thing holds it: the queue of requests waiting for a stream exists while the connection
/// awaits SETTINGS or is active (draining hands it back at once); the stream table and its ids exist once SETTINGS
/// arrived; the flow-control windows and the bodies waiting for them (``HTTP2FlowControl``) exist until closed; the
/// warm-up exists only while active; the last stream id only while draining. `closed` holds nothing.
///
/// Reading or changing a state's data goes through the accessors below, which take the payload out of the enum,
/// leave ``State/modifying`` in its place while it changes, and put it back: the payload's storage (dictionary,
/// queue, blocked bodies) is then referenced once and changed in place, never copied per frame.
extension HTTP2ConnectionStateMachine {
    enum State {
        /// Preface sent; the server's SETTINGS (its first frame) not yet received. Requests queue.
        case awaitingSettings(Pending)
        /// Taking requests: streams open as the limit (and the warm-up) allow.
        case active(Active)
        /// No new streams (a GOAWAY, received or of our own): the streams up to `lastStreamID` finish, then closed.
        case draining(OpenStreams, lastStreamID: Int32)
        case closed
        /// Only while a state's payload is changed in place (never seen between two inputs).
        case modifying
    }

    /// What a connection awaiting the server's SETTINGS holds.
    struct Pending {
        var queue = CircularBuffer<HTTP2RequestContext>()
        /// No deadline of a queued request is earlier (a lower bound).
        var earliestDeadline = NIODeadline.distantFuture
        var flow: HTTP2FlowControl
    }

    /// The streams of a connection that got the server's SETTINGS (active or draining): the stream table, the ids,
    /// both directions' windows and the bodies waiting for window.
    struct OpenStreams {
        var table: [Int32: Stream] = [:]
        var nextStreamID: Int32 = 1
        /// The highest stream id opened: frames on higher (or even) ids are on idle streams.
        var highestStreamID: Int32 = 0
        /// No deadline of a request queued or in flight is earlier (a lower bound: lowered by each request taken,
        /// recomputed by each scan of ``HTTP2ConnectionStateMachine/expire(now:)``).
        var earliestDeadline: NIODeadline
        var flow: HTTP2FlowControl
    }

    /// What an active connection holds: its streams, the requests waiting for one, the warm-up.
    struct Active {
        var open: OpenStreams
        var queue: CircularBuffer<HTTP2RequestContext>
        var warmUp: WarmUp
    }

    // MARK: in-place access to the state's data

    /// Takes the state out of `state`, leaving ``State/modifying`` in its place: a move (the payload's storage is
    /// neither retained nor released), after which the payload bound from it is referenced once and changes in
    /// place. Binding a payload from `state` itself (`case .active(var a) = state`) copied it through its value
    /// witness (`ActiveVwcp` in `perf`: the queue, the table and the blocked bodies retained, then released when
    /// `modifying` replaced them), on every access. Every changing access below goes through this; the caller puts
    /// a state back.
    @inline(__always)
    mutating func takeState() -> State {
        var taken = State.modifying
        swap(&taken, &state)
        return taken
    }

    /// The requests waiting for a stream (none while draining or closed: changes then are dropped).
    var queue: CircularBuffer<HTTP2RequestContext> {
        get {
            switch state {
            case .awaitingSettings(let pending): pending.queue
            case .active(let active): active.queue
            case .draining, .closed, .modifying: CircularBuffer(initialCapacity: 1)
            }
        }
        _modify {
            switch takeState() {
            case .awaitingSettings(var pending):
                defer { state = .awaitingSettings(pending) }
                yield &pending.queue
            case .active(var active):
                defer { state = .active(active) }
                yield &active.queue
            case let other:
                state = other
                var none = CircularBuffer<HTTP2RequestContext>(initialCapacity: 1)
                yield &none
            }
        }
    }

    /// The open streams (none before SETTINGS or once closed: changes then are dropped).
    var streams: [Int32: Stream] {
        get {
            switch state {
            case .active(let active): active.open.table
            case .draining(let open, _): open.table
            case .awaitingSettings, .closed, .modifying: [:]
            }
        }
        _modify {
            switch takeState() {
            case .active(var active):
                defer { state = .active(active) }
                yield &active.open.table
            case .draining(var open, let last):
                defer { state = .draining(open, lastStreamID: last) }
                yield &open.table
            case let other:
                state = other
                var none: [Int32: Stream] = [:]
                yield &none
            }
        }
    }

    /// Both directions' windows and the bodies waiting for window (a fresh one once closed: changes are dropped).
    var flow: HTTP2FlowControl {
        get {
            switch state {
            case .awaitingSettings(let pending): pending.flow
            case .active(let active): active.open.flow
            case .draining(let open, _): open.flow
            case .closed, .modifying: HTTP2FlowControl(localWindowSize: configuration.connectionWindowSize)
            }
        }
        _modify {
            switch takeState() {
            case .awaitingSettings(var pending):
                defer { state = .awaitingSettings(pending) }
                yield &pending.flow
            case .active(var active):
                defer { state = .active(active) }
                yield &active.open.flow
            case .draining(var open, let last):
                defer { state = .draining(open, lastStreamID: last) }
                yield &open.flow
            case let other:
                state = other
                var none = HTTP2FlowControl(localWindowSize: configuration.connectionWindowSize)
                yield &none
            }
        }
    }

    /// No deadline of a request queued or in flight is earlier (distant future once closed).
    var earliestDeadline: NIODeadline {
        get {
            switch state {
            case .awaitingSettings(let pending): pending.earliestDeadline
            case .active(let active): active.open.earliestDeadline
            case .draining(let open, _): open.earliestDeadline
            case .closed, .modifying: .distantFuture
            }
        }
        set {
            switch takeState() {
            case .awaitingSettings(var pending):
                pending.earliestDeadline = newValue
                state = .awaitingSettings(pending)
            case .active(var active):
                active.open.earliestDeadline = newValue
                state = .active(active)
            case .draining(var open, let last):
                open.earliestDeadline = newValue
                state = .draining(open, lastStreamID: last)
            case let other:
                state = other
            }
        }
    }

    /// The highest stream id opened (0 before SETTINGS or once closed).
    var highestStreamID: Int32 {
        switch state {
        case .active(let active): active.open.highestStreamID
        case .draining(let open, _): open.highestStreamID
        case .awaitingSettings, .closed, .modifying: 0
        }
    }

    /// Runs `body` on the open streams of an active or draining connection, in place; nil in other states. `body`
    /// must not use the accessors above (the state is ``State/modifying`` meanwhile).
    @inline(__always)
    mutating func withOpenStreams<T>(_ body: (inout OpenStreams) -> T) -> T? {
        switch takeState() {
        case .active(var active):
            defer { state = .active(active) }
            return body(&active.open)
        case .draining(var open, let last):
            defer { state = .draining(open, lastStreamID: last) }
            return body(&open)
        case let other:
            state = other
            return nil
        }
    }

    /// Runs `body` on an active connection's data, in place; nil in other states. `body` must not use the accessors
    /// above (the state is ``State/modifying`` meanwhile).
    @inline(__always)
    mutating func withActive<T>(_ body: (inout Active) -> T) -> T? {
        switch takeState() {
        case .active(var active):
            defer { state = .active(active) }
            return body(&active)
        case let other:
            state = other
            return nil
        }
    }

    /// The warm-up of an active connection (`.off` in every other state; setting it there does nothing).
    var warmUp: WarmUp {
        get { if case .active(let active) = state { active.warmUp } else { .off } }
        set {
            guard warmUp != newValue else { return }
            _ = withActive { $0.warmUp = newValue }
        }
    }

    /// The id of the next stream to open (`Int32.max` when no stream can open: before SETTINGS, closed).
    var nextStreamID: Int32 {
        switch state {
        case .active(let active): active.open.nextStreamID
        case .draining(let open, _): open.nextStreamID
        case .awaitingSettings, .closed, .modifying: .max
        }
    }

    var isGoingAway: Bool { if case .draining = state { true } else { false } }
    var isAwaitingSettings: Bool { if case .awaitingSettings = state { true } else { false } }

    /// The state's name, for tests and logs.
    package var stateName: String {
        switch state {
        case .awaitingSettings: "awaitingSettings"
        case .active: "active"
        case .draining(_, let last): "draining(lastStreamID: \(last))"
        case .closed: "closed"
        case .modifying: "modifying"
        }
    }

    // MARK: transitions

    /// SETTINGS arrived: the pending queue and windows become an active connection's.
    mutating func becomeActive() {
        switch takeState() {
        case .awaitingSettings(let pending):
            state = .active(Active(open: OpenStreams(earliestDeadline: pending.earliestDeadline, flow: pending.flow),
                                   queue: pending.queue, warmUp: configuration.warmUp == nil ? .off : .pending))
        case let other:
            state = other
        }
    }

    /// No new streams: an active connection keeps its streams up to `lastStreamID`; the queue is returned (to hand
    /// back). Draining already: the lower last id is kept. Before SETTINGS (nothing was written) or closed:
    /// nothing changes but the queue is returned.
    mutating func beginDraining(lastStreamID: Int32) -> CircularBuffer<HTTP2RequestContext>? {
        switch takeState() {
        case .active(let active):
            state = .draining(active.open, lastStreamID: lastStreamID)
            return active.queue
        case .draining(let open, let previous):
            state = .draining(open, lastStreamID: min(previous, lastStreamID))
            return nil
        case .awaitingSettings(var pending):
            let queue = pending.queue
            pending.queue = CircularBuffer(initialCapacity: 1)
            state = .awaitingSettings(pending)
            return queue
        case let other:
            state = other
            return nil
        }
    }

    /// Closed: everything the state held is returned (to fail and hand back); nothing is kept.
    mutating func becomeClosed() -> (streams: [Int32: Stream], queue: CircularBuffer<HTTP2RequestContext>?) {
        let old = takeState()
        state = .closed
        switch old {
        case .awaitingSettings(let pending): return ([:], pending.queue)
        case .active(let active): return (active.open.table, active.queue)
        case .draining(let open, _): return (open.table, nil)
        case .closed, .modifying: return ([:], nil)
        }
    }
}
