import NIOCore

/// Runs the jobs of the tasks that prefer it on one NIO event loop: the loop on which `sqlite-nio` completes a
/// connection's queries. A transaction's code then resumes after each query on the thread that got the answer,
/// instead of being handed to the cooperative pool first (one thread wake-up less per statement, while the
/// connection's lock is held).
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
