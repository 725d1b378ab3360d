import Norq
import NorqCore
import NorqProviderTesting
import Synchronization

/// The scripted provider moved to `NorqProviderTesting` (for third-party provider authors too); this name keeps
/// the router tests unchanged.
typealias FakeProvider = NorqProviderTesting.FakeProvider

/// A one-shot gate: `wait()` suspends until `open()`.
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// A counter readable from tests.
final class CallCounter: Sendable {
    private let value = Mutex(0)
    func increment() { value.withLock { $0 += 1 } }
    var count: Int { value.withLock { $0 } }
}

/// A template source that renders `title` from data and counts renders.
final class FakeTemplates: TemplateSource {
    let renders = CallCounter()
    func content(template: String, data: JSONValue, strict: Bool) throws(NorqError) -> PushContent? {
        renders.increment()
        switch template {
        case "disabled": return nil
        case "hello":
            guard let name = data["name"]?.stringValue else {
                if strict { throw NorqError("template/missing-variable", "name is missing") }
                return PushContent(title: "Hello there", body: "b")
            }
            return PushContent(title: "Hello \(name)", body: "b")
        default:
            throw NorqError("template/not-found", "no template \(template)")
        }
    }
}

/// Sleeps recorded, never really slept (beyond a yield).
final class SleepRecorder: Sendable {
    private let sleeps = Mutex<[Duration]>([])
    var recorded: [Duration] { sleeps.withLock { $0 } }
    var clock: RouterClock {
        RouterClock(sleep: { duration in
            self.sleeps.withLock { $0.append(duration) }
            await Task.yield()
        }, random: { 0.5 })
    }
}

func ios(_ token: String, provider: String? = nil, environment: PushEnvironment? = nil) -> PushToken {
    PushToken(token: token, platform: .ios, provider: provider, environment: environment)
}

func recipients(_ tokens: [PushToken]) -> [Recipient] { [Recipient(id: "u1", tokens: tokens)] }

func hexToken(_ index: Int) -> String {
    let digits = String(index, radix: 16)
    return String(repeating: "0", count: max(0, 64 - digits.count)) + digits
}

/// A settable instant for injected clocks.
final class ManualNow: Sendable {
    private let value = Mutex(ContinuousClock.now)
    var instant: ContinuousClock.Instant { value.withLock { $0 } }
    func advance(by duration: Duration) { value.withLock { $0 = $0.advanced(by: duration) } }
}
