import Logging
import NIOCore

/// Drives one ``HTTP2ConnectionStateMachine`` on the connection's TLS channel: hands it what the channel reads,
/// the requests the pool sends, the timer; writes what it encodes (the frames of one event-loop tick as one
/// buffer, one flush); carries out its actions (complete, hand back to the pool, close). It knows its pool only
/// as a delegate, to which it names its connection by id (``attach(id:delegate:load:)``).
final class HTTP2ConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var machine: HTTP2ConnectionStateMachine
    private let logger: Logger
    private let observer: (any HTTP2ClientObserver)?
    private let batching: HTTP2CompletionBatching?
    private var context: ChannelHandlerContext?
    /// A write of `machine.outbound` is scheduled for the end of this event-loop tick.
    private var writeScheduled = false
    private var tickScheduled: NIODeadline?
    /// The interval `tickScheduled` was scheduled with: a tick that near is due no later than one asked for now.
    private var tickScheduledInterval: TimeAmount?
    private var inReadBatch = false
    /// `runActions` is on the stack.
    private var runningActions = false
    /// The clock read of the read being handled: requests its completions start use it (one clock read per read,
    /// not one more per request).
    private var readNow: NIODeadline?
    private let readyPromise: EventLoopPromise<Void>
    private var readySettled = false
    private var opened = false
    /// Set by ``attach(id:delegate:load:)``: the connection's id in its pool, and the pool. Weak: the pool owns its
    /// connections, not the other way round; after GOAWAY the pool forgets the connection, and the handler still
    /// hands its unanswered requests back through the delegate, by id.
    private var connectionID: HTTP2ConnectionID?
    private weak var delegate: (any HTTP2ConnectionDelegate)?
    /// Where the load the pool balances on is published.
    private var publishedLoad: HTTP2ConnectionLoad?

    /// Completes when the server's first SETTINGS arrive (the TLS handshake and preface are done); fails when the
    /// connection closes before.
    var ready: EventLoopFuture<Void> { readyPromise.futureResult }

    init(configuration: HTTP2ClientConfiguration, eventLoop: any EventLoop, logger: Logger) {
        self.machine = HTTP2ConnectionStateMachine(configuration: .init(configuration), now: .now())
        self.logger = logger
        self.observer = configuration.observer
        self.batching = configuration.completionBatching
        self.readyPromise = eventLoop.makePromise()
    }

    /// Requests queued or in flight on this connection.
    var load: Int { inPlace { $0.load } }

    /// Tells the handler which connection of which pool it drives, before the connection is known to the pool.
    /// Closed (or going away) already: the pool is told at once, so that it never adds it.
    func attach(id: HTTP2ConnectionID, delegate: any HTTP2ConnectionDelegate, load: HTTP2ConnectionLoad) {
        connectionID = id
        self.delegate = delegate
        publishedLoad = load
        publishLoad()
        if inPlace({ $0.takesNoNewStreams }) { delegate.connectionClosed(id) }
    }

    // MARK: lifecycle

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { writeOutbound() }
        scheduleTick()
    }

    func channelActive(context: ChannelHandlerContext) {
        writeOutbound()
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        closed(reason: "the connection closed")
        endReadBatch()
        self.context = nil
        self.delegate = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        beginReadBatch()
        closed(reason: "the connection closed")
        endReadBatch()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("HTTP/2 connection error", metadata: ["norq.http2.error": "\(error)"])
        context.close(promise: nil)
    }

    private func closed(reason: String) {
        machine.channelClosed(reason: reason)
        runActions()
        reportCounts()
        if !readySettled {
            readySettled = true
            readyPromise.fail(HTTP2ClientError(.connectFailed, possiblyProcessed: false,
                                               "\(reason) before the server's SETTINGS"))
        }
        if opened {
            opened = false
            observer?.connectionClosed()
        }
        if let connectionID { delegate?.connectionClosed(connectionID) }
    }

    // MARK: output

    /// Writes what is encoded so far, as one buffer, and flushes.
    private func writeOutbound() {
        guard machine.outbound.readableBytes > 0 else { return }
        guard let context else {
            machine.outbound.clear()  // removed from the channel: nothing can be written any more
            return
        }
        context.writeAndFlush(wrapOutboundOut(machine.outbound), promise: nil)
        machine.outbound.clear()  // reuses the storage when TLS has taken the bytes (it encrypts on flush)
    }

    /// Writes at the end of this event-loop tick, so that the frames of many requests leave as one TLS record and
    /// one syscall; `writeChunkBytes` go at once. The stream counts go to the observer at the end of the tick
    /// too: reported per enqueue, they cost a metrics call per request.
    private func scheduleWrite() {
        if machine.outbound.readableBytes >= machine.writeChunkBytes {
            writeOutbound()
        }
        guard !writeScheduled, machine.outbound.readableBytes > 0 || !machine.counts.isZero, let context else { return }
        writeScheduled = true
        context.eventLoop.assumeIsolated().execute {
            self.writeScheduled = false
            self.reportCounts()
            self.writeOutbound()
        }
    }

    private func reportCounts() {
        guard let observer, !machine.counts.isZero else { return }
        let counts = machine.counts
        machine.counts = .init()
        observer.streams(opened: counts.opened, completed: counts.completed, requeued: counts.requeued,
                         cancelled: counts.cancelled)
    }

    /// Carries out what the state machine decided. Completions may re-enter (a completion starts the caller's
    /// next request on this connection): the machine is never borrowed while one runs, and a re-entered call
    /// leaves the actions it added to the loop already running (no recursion as deep as the answers of a read).
    ///
    /// The load the pool balances on is published before the completions run (the streams they free are free
    /// when they start the caller's next requests) and on every re-entry: a stale, full-looking load sent the next
    /// request of a completion to another event loop's connection, and every object of that request across cores.
    private func runActions() {
        guard !runningActions else {
            publishLoad()
            return
        }
        runningActions = true
        publishLoad()
        while let action = machine.popAction() {
            switch action {
            case .succeed(let request, let response):
                request.complete(.success(response))
            case .fail(let request, let error):
                request.fail(error)
            case .requeue(let request, let error, let written):
                if let connectionID, let delegate {
                    delegate.connection(connectionID, handsBack: request, error: error, written: written)
                } else {
                    request.fail(error)
                }
            case .ready:
                if !readySettled {
                    readySettled = true
                    opened = true
                    observer?.connectionOpened()
                    readyPromise.succeed()
                }
            case .goingAway(let reason):
                logger.debug("HTTP/2 connection takes no new requests", metadata: ["norq.http2.reason": "\(reason)"])
                if let connectionID { delegate?.connectionGoingAway(connectionID) }
            case .close:
                writeOutbound()
                context?.close(promise: nil)
            case .writeAndResume:
                writeOutbound()
                machine.resumeStreams(now: .now())
            }
        }
        runningActions = false
        publishLoad()
    }

    private func publishLoad() {
        if let publishedLoad { publishedLoad.published.store(inPlace { $0.load }, ordering: .relaxed) }
    }

    // MARK: requests

    /// Takes a batch of requests: opens what the stream limit allows, one flush.
    func enqueue(_ requests: some Collection<HTTP2RequestContext>) {
        guard !requests.isEmpty else { return }
        let now = readNow ?? .now()
        for request in requests { machine.enqueue(request, now: now) }
        runActions()
        scheduleWrite()
        scheduleTick()
    }

    /// Closes the connection now (pool shutdown): requests still on it fail.
    func close() {
        guard let context else { return }
        context.close(promise: nil)
    }

    // MARK: timer

    /// Schedules the periodic check, unless one is already due within the interval the machine asks for (the
    /// common case while requests are in flight: no clock read, no new timer per request).
    private func scheduleTick() {
        guard let context else { return }
        // Read through `inout`: a getter called on the stored struct copied the whole machine per call.
        guard let interval = inPlace({ $0.isClosed ? nil : $0.tickInterval }) else { return }
        if tickScheduled != nil, let scheduledInterval = tickScheduledInterval, scheduledInterval <= interval { return }
        let due = NIODeadline.now() + interval
        if let scheduled = tickScheduled, scheduled <= due { return }
        tickScheduled = due
        tickScheduledInterval = interval
        context.eventLoop.assumeIsolated().scheduleTask(deadline: due) {
            guard self.tickScheduled == due else { return }  // superseded by an earlier one
            self.tickScheduled = nil
            self.tickScheduledInterval = nil
            self.tick()
        }
    }

    /// Runs `body` on the machine in place (a getter on the stored struct copies it: every buffer, table and
    /// dictionary retained and released).
    private func inPlace<T>(_ body: (inout HTTP2ConnectionStateMachine) -> T) -> T {
        body(&machine)
    }

    private func tick() {
        guard context != nil else { return }
        beginReadBatch()
        machine.tick(now: .now())
        runActions()
        endReadBatch()
        scheduleWrite()
        scheduleTick()
    }

    // MARK: inbound

    private func beginReadBatch() {
        guard !inReadBatch else { return }
        inReadBatch = true
        batching?.begin()
    }

    private func endReadBatch() {
        guard inReadBatch else { return }
        inReadBatch = false
        batching?.end()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // The answers of one read complete as one batch (ended in channelReadComplete).
        beginReadBatch()
        var bytes = unwrapInboundIn(data)
        let now = NIODeadline.now()
        readNow = now
        machine.receive(&bytes, now: now)
        runActions()
        readNow = nil
        scheduleWrite()  // SETTINGS and PING acknowledgements
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        machine.readComplete()
        scheduleWrite()
        endReadBatch()
        scheduleTick()
        context.fireChannelReadComplete()
    }
}
