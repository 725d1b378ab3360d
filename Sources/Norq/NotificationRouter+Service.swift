import NorqCore
import ServiceLifecycle

extension NotificationRouter {
    /// Runs until graceful shutdown (or cancellation), then shuts down: see `shutdown()`.
    public func run() async throws {
        do {
            try await gracefulShutdown()
        } catch {
            // Cancelled: shut down without waiting for the grace period.
            await shutdown(gracePeriod: .zero)
            return
        }
        await shutdown()
    }

    /// Stops accepting sends (new ones throw `provider/shut-down`), waits up to `gracePeriod` (default
    /// `shutdownGracePeriod`) for sends in flight, then stops starting new attempts (tokens not started fail
    /// with `provider/shut-down`), shuts every provider down and finishes `invalidTokens`. Idempotent.
    public func shutdown(gracePeriod: Duration? = nil) async {
        let first = lifecycle.withLock { state in
            state.accepting = false
            defer { state.shutdownStarted = true }
            return !state.shutdownStarted
        }
        guard first else {
            // Another caller is shutting down: wait until it has finished (or this task is cancelled).
            await shutDown.wait()
            return
        }
        // Sends in flight end by themselves; the last one latches `drained` (no send starts any more).
        if lifecycle.withLock({ $0.activeSends }) > 0 {
            await drained.wait(upTo: gracePeriod ?? shutdownGracePeriod)
        }
        let remaining = lifecycle.withLock { state in
            state.stopped = true
            return state.activeSends
        }
        if remaining > 0 {
            logger.notice("shutdown grace period ended with sends in flight", metadata: ["norq.sends": "\(remaining)"])
        }
        for name in providerNames {
            await providers[name]?.shutdown()
        }
        invalidTokenContinuation.finish()
        lifecycle.withLock { $0.shutdownFinished = true }
        shutDown.latch()
        logger.info("router shut down")
    }

    /// Whether `shutdown()` has begun.
    public var isShuttingDown: Bool { lifecycle.withLock { !$0.accepting } }
}
