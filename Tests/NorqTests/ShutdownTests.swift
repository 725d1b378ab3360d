import Logging
import Norq
import NorqCore
import ServiceLifecycle
import Testing

@Suite("Shutdown and service lifecycle")
struct ShutdownTests {
    @Test("shutdown drains sends in flight, then shuts providers down and refuses new sends")
    func drains() async throws {
        let gate = Gate()
        let entered = Gate()
        let apns = FakeProvider(name: "apns", maxInFlight: 4) { _, _ throws(NorqError) in
            entered.open()
            await gate.wait()
            return FakeProvider.ok()
        }
        let r = try NotificationRouter(providers: [apns], shutdownGracePeriod: .seconds(20))
        let send = Task { try await r.send(content: PushContent(title: "t"), to: recipients((0..<20).map { ios(hexToken($0)) })) }
        await entered.wait()
        let shutdown = Task { await r.shutdown() }
        while !r.isShuttingDown { await Task.yield() }
        do {
            _ = try await r.send(content: PushContent(title: "t"), to: recipients([ios("late")]))
            Issue.record("expected provider/shut-down")
        } catch {
            #expect(error.code == .providerShutDown)
        }
        #expect(apns.shutdownCalls == 0)
        // A second caller waits for the first one's shutdown to finish.
        let second = Task { await r.shutdown() }
        let opened = ContinuousClock.now
        gate.open()
        let report = try await send.value
        await shutdown.value
        await second.value
        // The last send's end wakes the shutdown: it does not sit out the 20 s grace period.
        #expect(opened.duration(to: .now) < .seconds(10))
        #expect(report.delivered == 20)
        #expect(apns.shutdownCalls == 1)
    }

    @Test("after the grace period, tokens not yet started fail with provider/shut-down")
    func gracePeriodEnds() async throws {
        let entered = Gate()
        let release = Gate()
        let apns = FakeProvider(name: "apns", maxInFlight: 1) { _, _ throws(NorqError) in
            entered.open()
            await release.wait()
            return FakeProvider.ok()
        }
        let r = try NotificationRouter(providers: [apns])
        let send = Task { try await r.send(content: PushContent(title: "t"), to: recipients((0..<5).map { ios(hexToken($0)) })) }
        await entered.wait()
        await r.shutdown(gracePeriod: .milliseconds(20))
        release.open()
        let report = try await send.value
        #expect(report.outcomes.count == 5)
        #expect(report.delivered == 1)
        let shutDown = report.outcomes.filter {
            if case .failed(let error) = $0.result { return error.code == .providerShutDown }
            return false
        }
        #expect(shutDown.count == 4)
    }

    @Test("as a Service, the router shuts down on graceful shutdown")
    func service() async throws {
        let apns = FakeProvider(name: "apns")
        let r = try NotificationRouter(providers: [apns])
        let group = ServiceGroup(services: [r], logger: Logger(label: "test"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            let report = try await r.send(content: PushContent(title: "t"), to: recipients([ios("a")]))
            #expect(report.delivered == 1)
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        #expect(apns.shutdownCalls == 1)
        #expect(r.isShuttingDown)
    }
}
