#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Lets a transport that completes many requests in one go (the answers of one HTTP/2 read) say so, so that
/// the wake-ups those completions cause are made once, at the end, rather than once per completion.
///
/// The router defers through it the resumption of a streaming send's consumer: a consumer that waits is woken
/// once per batch of outcomes, not once per outcome (each wake-up of a sleeping thread costs the completing
/// thread a system call). Batches are per thread and nest; outside a batch, `afterBatch` runs its action at once.
///
/// A batch belongs to a thread, so it must open and end in synchronous code (an event-loop callback), never
/// across an `await`: a task may resume on another thread, and another task may run on this one meanwhile.
public enum CompletionBatch {
    /// Starts a batch on this thread (or nests in the current one).
    public static func begin() {
        current.depth += 1
    }

    /// Ends the batch begun last on this thread; the outermost end runs the deferred actions, in order.
    public static func end() {
        end(current)
    }

    private static func end(_ batch: State) {
        guard batch.depth > 0 else { return }  // an unmatched end: nothing is open
        guard batch.depth == 1 else {
            batch.depth -= 1
            return
        }
        // Still inside while the actions run: an action that defers another adds it to this loop.
        var index = 0
        while index < batch.actions.count {
            batch.actions[index]()
            index += 1
        }
        batch.actions.removeAll(keepingCapacity: true)
        batch.depth = 0
    }

    /// Runs `body` as one batch.
    public static func run<Result>(_ body: () throws -> Result) rethrows -> Result {
        begin()
        defer { end() }
        return try body()
    }

    /// Runs `action` when this thread's current batch ends, or now when no batch is open.
    public static func afterBatch(_ action: @escaping () -> Void) {
        let batch = current
        if batch.depth > 0 {
            batch.actions.append(action)
        } else {
            action()
        }
    }

    /// Whether a batch is open on this thread.
    public static var isOpen: Bool { current.depth > 0 }

    /// The object filling free slots on this thread right now (a router's delivery pump, in `runFilling`), or nil.
    ///
    /// A completion that frees a slot while its own filler runs on this thread leaves the slot to that filler's
    /// loop, which is still going; one freed under another filler is refilled when the batch ends. Only then is a
    /// slot refilled at once, inside the completion, which bounds the nesting to one filler per thread.
    package static var filler: ObjectIdentifier? { current.filler }

    /// Runs `body` as one batch with `filler` as this thread's filler (one lookup of the thread's state, not one
    /// per step: it runs once per freed slot). The filler before is back when the batch's deferred actions run.
    package static func runFilling(_ filler: ObjectIdentifier, _ body: () -> Void) {
        let batch = current
        let outer = batch.filler
        batch.filler = filler
        batch.depth += 1
        body()
        batch.filler = outer
        end(batch)
    }

    /// One thread's batch state (only that thread touches it).
    private final class State {
        var filler: ObjectIdentifier?
        var depth = 0
        var actions: [() -> Void] = []
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { pointer in
            #if canImport(Darwin)
            Unmanaged<AnyObject>.fromOpaque(pointer).release()
            #else
            if let pointer { Unmanaged<AnyObject>.fromOpaque(pointer).release() }
            #endif
        }
        precondition(status == 0, "pthread_key_create failed: \(status)")
        return key
    }()

    private static var current: State {
        if let pointer = pthread_getspecific(key) {
            return Unmanaged<State>.fromOpaque(pointer).takeUnretainedValue()
        }
        let state = State()
        pthread_setspecific(key, Unmanaged.passRetained(state).toOpaque())
        return state
    }
}
