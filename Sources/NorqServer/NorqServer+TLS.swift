import HummingbirdCore
import Logging
import NIOCore
import NIOSSL
import Synchronization

/// The server's TLS context (certificate chain and key of `server.tls`), swapped by a SIGHUP reload: every new
/// connection takes the current one, connections already open keep the one they were made with.
final class ServerTLSContext: Sendable {
    private let current: Mutex<NIOSSLContext>

    init(_ context: NIOSSLContext) {
        current = Mutex(context)
    }

    /// The context new connections use.
    var context: NIOSSLContext { current.withLock { $0 } }

    func replace(with context: NIOSSLContext) {
        current.withLock { $0 = context }
    }
}

/// A child channel that speaks TLS with the context current when the connection is accepted, then `Base` (as
/// HummingbirdTLS's `TLSChannel`, whose context is fixed at start).
struct ReloadableTLSChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value
    let base: Base
    let tls: ServerTLSContext

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let context = tls.context
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

extension ReloadableTLSChannel: HTTPChannelHandler where Base: HTTPChannelHandler {
    var responder: HTTPChannelHandler.Responder { base.responder }
}
