package import NIOCore

/// PING and idle timing of one connection, as data: when the last frame arrived, when a PING went out unanswered,
/// when a stream last opened or ended. ``tick(now:pingInterval:idleTimeout:idle:)`` says what is due, as one
/// ``Action``; the connection state machine carries it out.
package struct HTTP2KeepAlive: Sendable {
    package enum Action: Equatable, Sendable {
        case none
        /// Nothing was received for a PING interval: send a PING.
        case sendPing
        /// The PING sent went unanswered (no frame at all) for a whole interval: close the connection.
        case closeUnanswered
        /// No request was queued or in flight for the idle timeout: close the connection (GOAWAY NO_ERROR).
        case closeIdle(TimeAmount)
    }

    package private(set) var lastFrameReceived: NIODeadline
    package private(set) var pingSent: NIODeadline?
    package private(set) var lastStreamActivity: NIODeadline

    package init(now: NIODeadline) {
        self.lastFrameReceived = now
        self.lastStreamActivity = now
    }

    /// Any frame counts as an answer to a PING.
    package mutating func frameReceived(now: NIODeadline) {
        lastFrameReceived = now
        pingSent = nil
    }

    /// A stream opened, ended or was cancelled.
    package mutating func streamActivity(now: NIODeadline) {
        lastStreamActivity = now
    }

    /// What is due at `now`. `idle`: no request is queued or in flight. An unanswered PING closes first; an idle
    /// connection is closed rather than pinged.
    package mutating func tick(now: NIODeadline, pingInterval: TimeAmount?, idleTimeout: TimeAmount?,
                               idle: Bool) -> Action {
        let pinging = pingInterval.flatMap { $0 > .zero ? $0 : nil }
        if let interval = pinging, let sent = pingSent, now - sent >= interval { return .closeUnanswered }
        if let timeout = idleTimeout, idle, now - lastStreamActivity >= timeout { return .closeIdle(timeout) }
        if let interval = pinging, pingSent == nil, now - lastFrameReceived >= interval {
            pingSent = now
            return .sendPing
        }
        return .none
    }
}

/// Timers: every request's deadline (one sweep), the warm-up's end, PING and the idle timeout.
extension HTTP2ConnectionStateMachine {
    /// The periodic check: expired requests, the warm-up's end, PING, the idle timeout.
    package mutating func tick(now: NIODeadline) {
        guard !isClosed else { return }
        expire(now: now)
        if case .running(let ends) = warmUp, ends <= now {
            warmUp = .off
            startStreams(now: now)
        }
        guard !isAwaitingSettings else { return }
        switch keepAlive.tick(now: now, pingInterval: configuration.pingInterval, idleTimeout: configuration.idleTimeout,
                              idle: load == 0) {
        case .none:
            break
        case .sendPing:
            writePing(0x4e4f_5251, ack: false)
        case .closeUnanswered:
            closeConnection(reason: "the connection did not answer PING", goAwayCode: nil)
        case .closeIdle(let idle):
            closeConnection(reason: "idle for \(idle.nanoseconds / 1_000_000) ms", goAwayCode: HTTP2Wire.ErrorCode.noError)
        }
    }

    /// How long until the next ``tick(now:)`` is due.
    package var tickInterval: TimeAmount? {
        if load > 0 { return .milliseconds(10) }
        func quarter(_ candidate: TimeAmount?) -> TimeAmount? {
            guard let candidate, candidate > .zero else { return nil }
            return .nanoseconds(max(candidate.nanoseconds / 4, 1_000_000))
        }
        let interval: TimeAmount? = switch (quarter(configuration.pingInterval), quarter(configuration.idleTimeout)) {
        case (let ping?, let idle?): min(ping, idle)
        case (let ping?, nil): ping
        case (nil, let idle?): idle
        case (nil, nil): nil
        }
        return interval.map { min($0, .seconds(1)) }
    }

    /// Fails the queued requests and cancels the streams whose deadline has passed. Scans only once the earliest
    /// deadline held may have passed: a scan every tick copied every stream (its request, fields and body
    /// retained and released) 100 times a second.
    mutating func expire(now: NIODeadline) {
        guard earliestDeadline <= now else { return }
        var earliest = NIODeadline.distantFuture
        if queue.contains(where: { $0.deadline <= now }) {
            var kept = CircularBuffer<HTTP2RequestContext>(initialCapacity: queue.count)
            for request in queue {
                if request.deadline <= now {
                    actions.append(.fail(request, Self.notProcessed(.deadlineExceeded,
                                                                    "the deadline passed before the request was written")))
                } else {
                    kept.append(request)
                }
            }
            queue = kept
        }
        for request in queue { earliest = min(earliest, request.deadline) }
        var expired: [Int32] = []
        for (id, stream) in streams {
            let deadline = stream.request.deadline
            if deadline <= now { expired.append(id) } else { earliest = min(earliest, deadline) }
        }
        earliestDeadline = earliest
        guard !expired.isEmpty else { return }
        for id in expired {
            guard let stream = streams.removeValue(forKey: id) else { continue }
            stream.request.unassign()
            writeReset(streamID: id, errorCode: HTTP2Wire.ErrorCode.cancel)
            counts.cancelled += 1
            actions.append(.fail(stream.request, Self.possiblyProcessed(.deadlineExceeded, "no answer before the deadline")))
        }
        keepAlive.streamActivity(now: now)
        startStreams(now: now)
        closeIfDrained()
    }
}
