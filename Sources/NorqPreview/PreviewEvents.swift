import Synchronization

/// The pages subscribed to live updates (server-sent events): each gets an `AsyncStream` of messages that keeps
/// only the newest one not yet sent (a slow page skips to the latest generation, never queues), and at most
/// `maximumClients` are served at once.
final class PreviewEvents: Sendable {
    /// One server-sent event.
    struct Message: Sendable, Hashable {
        /// The event name (`change`), or nil for a comment that keeps the connection alive.
        var event: String?
        var data: String

        var text: String {
            guard let event else { return ": \(data)\n\n" }
            return "event: \(event)\ndata: \(data)\n\n"
        }
    }

    private struct State {
        var next = 0
        var clients: [Int: AsyncStream<Message>.Continuation] = [:]
        var closed = false
    }

    private let state = Mutex(State())
    let maximumClients: Int

    init(maximumClients: Int) {
        self.maximumClients = maximumClients
    }

    /// The number of pages subscribed now.
    var count: Int { state.withLock { $0.clients.count } }

    /// A new subscription starting with `first`; nil when `maximumClients` are subscribed or the preview is
    /// shutting down.
    func subscribe(first: Message) -> AsyncStream<Message>? {
        let (stream, continuation) = AsyncStream<Message>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state in
            state.next += 1
            return state.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.clients.removeValue(forKey: id) }
        }
        let admitted = state.withLock { state in
            guard !state.closed, state.clients.count < maximumClients else { return false }
            state.clients[id] = continuation
            return true
        }
        guard admitted else {
            continuation.finish()
            return nil
        }
        continuation.yield(first)
        return stream
    }

    /// Sends `message` to every subscribed page.
    func broadcast(_ message: Message) {
        let clients = state.withLock { Array($0.clients.values) }
        for client in clients { client.yield(message) }
    }

    /// Ends every subscription and refuses new ones (graceful shutdown: the responses end, so the server can stop).
    func close() {
        let clients = state.withLock { state in
            state.closed = true
            defer { state.clients.removeAll() }
            return Array(state.clients.values)
        }
        for client in clients { client.finish() }
    }
}
