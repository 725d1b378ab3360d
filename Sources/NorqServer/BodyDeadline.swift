import HTTPTypes
import Logging
import Metrics
import NIOCore
import NIOHTTPTypes

/// The deadline on receiving one request: from its head to the end of its body. Hummingbird's idle timeout covers
/// a connection between requests and a head sent byte by byte (it counts whole HTTP parts, not bytes), but once a
/// head has arrived a client may trickle its body forever; past this deadline the connection is closed.
///
/// A state machine (a value returning actions); `BodyDeadlineHandler` runs it on the connection's event loop.
package struct BodyDeadline: Sendable, Hashable {
    /// What the handler does next.
    package enum Action: Sendable, Hashable {
        /// Schedule the timer (replacing any), to fire after the body timeout.
        case arm
        /// Cancel the timer.
        case disarm
        /// Close the connection: a body did not arrive within the timeout.
        case close
        case none
    }

    /// Bodies being received (a head without its end yet); HTTP/1.1 receives one at a time, pipelining aside.
    private(set) var receiving = 0
    /// Bumped on every arm, so that a timer armed for an earlier body cannot close the connection.
    private(set) var generation: UInt64 = 0

    package init() {}

    /// A request head arrived: its body must follow within the timeout.
    package mutating func head() -> Action {
        receiving += 1
        generation &+= 1
        return .arm
    }

    /// A request's end arrived.
    package mutating func end() -> Action {
        receiving = max(0, receiving - 1)
        return receiving == 0 ? .disarm : .none
    }

    /// The timer armed at `generation` fired.
    package mutating func timerFired(generation fired: UInt64) -> Action {
        fired == generation && receiving > 0 ? .close : .none
    }
}

/// Runs `BodyDeadline` on a connection (added after Hummingbird's HTTP/1.1 decoder).
final class BodyDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    private var state = BodyDeadline()
    private var timer: Scheduled<Void>?
    private let timeout: TimeAmount
    private let logger: Logger
    private static let closed = Counter(label: "norq_http_slow_clients_closed_total")

    init(timeout: Duration, logger: Logger) {
        let (seconds, attoseconds) = timeout.components
        self.timeout = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: apply(state.head(), context: context)
        case .end: apply(state.end(), context: context)
        case .body: break
        }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    private func apply(_ action: BodyDeadline.Action, context: ChannelHandlerContext) {
        switch action {
        case .arm:
            timer?.cancel()
            let generation = state.generation
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            timer = context.eventLoop.scheduleTask(in: timeout) {
                let (handler, context) = loopBound.value
                handler.apply(handler.state.timerFired(generation: generation), context: context)
            }
        case .disarm:
            timer?.cancel()
            timer = nil
        case .close:
            timer = nil
            Self.closed.increment()
            logger.info("closing a connection: a request body did not arrive in time",
                        metadata: ["norq.http.remote": "\(context.remoteAddress?.ipAddress ?? "-")"])
            context.close(promise: nil)
        case .none:
            break
        }
    }
}
