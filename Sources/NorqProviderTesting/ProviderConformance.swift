public import NorqCore
import Synchronization

/// A conformance suite any `PushProvider` runs against its own server (an emulator on 127.0.0.1): the
/// properties the router relies on, checked from outside through the protocol only.
///
/// 1. `prepare` is pure: the same content, target and options give the same request (the `authorization`
///    header aside, which a provider may renew between calls). A provider that encrypts each body afresh (Web
///    Push, `bodyEncryptedPerCall`) gives the same request but for the body's bytes: their length must match and
///    the bytes must differ (a fresh key and salt per message).
/// 2. What is sent is what was prepared: when `received` is given, every prepared (path, body) arrives exactly once.
/// 3. One outcome per request: `startDelivery` calls its completion exactly once for every request.
/// 4. Deadlines are honoured: a request the server never answers completes with `provider/deadline-exceeded`
///    soon after its deadline (within `deadlineSlack`), not later, and is marked as possibly processed.
/// 5. Shutdown drains: requests in flight when `shutdown()` starts complete (delivered or failed), and a request
///    started afterwards fails with `provider/shut-down` without being sent.
///
/// `run()` returns the failures (empty when the provider conforms); it never hangs: every wait is bounded.
public struct ProviderConformance: Sendable {
    public struct Configuration: Sendable {
        /// The provider under test; it is shut down by the suite.
        public var provider: any PushProvider
        /// Tokens the server delivers.
        public var tokens: [PushToken]
        public var content: PushContent
        /// A token the server never answers (skips check 4 when nil).
        public var silentToken: PushToken?
        /// The (path, body) of every request the server answered 200 so far (skips check 2 when nil).
        public var received: (@Sendable () -> [Received])?
        /// How late after its deadline a request may complete.
        public var deadlineSlack: Duration
        /// The deadline given to requests that should be answered.
        public var answerDeadline: Duration
        /// The body is encrypted per call (Web Push): check 1 compares its length, and requires different bytes.
        public var bodyEncryptedPerCall: Bool

        public init(provider: any PushProvider, tokens: [PushToken], content: PushContent = PushContent(title: "conformance"),
                    silentToken: PushToken? = nil, received: (@Sendable () -> [Received])? = nil,
                    deadlineSlack: Duration = .seconds(2), answerDeadline: Duration = .seconds(10),
                    bodyEncryptedPerCall: Bool = false) {
            self.provider = provider
            self.tokens = tokens
            self.content = content
            self.silentToken = silentToken
            self.received = received
            self.deadlineSlack = deadlineSlack
            self.answerDeadline = answerDeadline
            self.bodyEncryptedPerCall = bodyEncryptedPerCall
        }
    }

    /// One request as the server recorded it.
    public struct Received: Sendable, Hashable {
        public var path: String
        public var body: [UInt8]
        public init(path: String, body: [UInt8]) {
            self.path = path
            self.body = body
        }
    }

    public let configuration: Configuration

    public init(_ configuration: Configuration) { self.configuration = configuration }

    /// Runs every check; returns the failures.
    public func run() async -> [String] {
        var failures: [String] = []
        let provider = configuration.provider
        // 1. prepare is pure.
        var prepared: [PreparedRequest] = []
        for (index, token) in configuration.tokens.enumerated() {
            let options = SendOptions(requestID: Self.requestID(index), sendTime: 1_800_000_000, contentID: 7)
            do throws(NorqError) {
                let first = try provider.prepare(configuration.content, for: token, options: options)
                let second = try provider.prepare(configuration.content, for: token, options: options)
                let perCall = configuration.bodyEncryptedPerCall
                if Self.comparable(first, withoutBody: perCall) != Self.comparable(second, withoutBody: perCall) {
                    failures.append("prepare is not pure for \(token.redacted): two calls gave different requests")
                }
                if perCall, first.body.count != second.body.count || first.body == second.body {
                    failures.append("prepare for \(token.redacted): two bodies encrypted per call have different lengths or the same bytes")
                }
                prepared.append(first)
            } catch {
                failures.append("prepare failed for \(token.redacted): \(error)")
            }
        }
        // 3. one outcome per request (and 2. what was prepared is what is sent).
        let before = configuration.received?().count ?? 0
        let counts = await deliverAll(prepared, deadline: .now + configuration.answerDeadline)
        for (index, count) in counts.enumerated() where count != 1 {
            failures.append("request \(index) completed \(count) times, expected exactly once")
        }
        if let receivedNow = configuration.received {
            let received = Array(receivedNow().dropFirst(before))
            for request in prepared {
                let sent = Received(path: request.path, body: request.body)
                let times = received.filter { $0 == sent }.count
                if times != 1 { failures.append("the prepared request for \(request.target.redacted) was received \(times) times") }
            }
        }
        // 4. deadlines.
        if let silent = configuration.silentToken {
            do throws(NorqError) {
                let request = try provider.prepare(configuration.content, for: silent, options: SendOptions())
                let started = ContinuousClock.now
                let deadline = started + .milliseconds(300)
                let result = await Self.deliver(provider, request, deadline: deadline,
                                                bound: .milliseconds(300) + configuration.deadlineSlack)
                let elapsed = ContinuousClock.now - started
                switch result {
                case .none:
                    failures.append("a request the server never answers did not complete within its deadline + slack")
                case .some(.success(let response)):
                    failures.append("a request the server never answers was answered \(response.status)")
                case .some(.failure(let error)):
                    if error.code != .deadlineExceeded {
                        failures.append("a silent request failed with \(error.code), expected provider/deadline-exceeded")
                    }
                    if !error.possiblyProcessed {
                        failures.append("a silent request that was written is not marked possiblyProcessed")
                    }
                    if elapsed < .milliseconds(250) {
                        failures.append("a silent request failed after \(elapsed), before its deadline")
                    }
                }
            } catch {
                failures.append("prepare failed for the silent token: \(error)")
            }
        }
        // 5. shutdown drains.
        let inFlight = Mutex<[Int]>(Array(repeating: 0, count: prepared.count))
        for (index, request) in prepared.enumerated() {
            provider.startDelivery(request, deadline: .now + configuration.answerDeadline) { _ in
                inFlight.withLock { $0[index] += 1 }
            }
        }
        await provider.shutdown()
        let drained = inFlight.withLock { $0 }
        if let index = drained.firstIndex(where: { $0 != 1 }) {
            failures.append("after shutdown() returned, request \(index) had completed \(drained[index]) times (expected once)")
        }
        if let request = prepared.first {
            let after = await Self.deliver(provider, request, deadline: .now + .seconds(5), bound: .seconds(5))
            switch after {
            case .some(.failure(let error)) where error.code == .providerShutDown && !error.possiblyProcessed: break
            case .some(.failure(let error)): failures.append("a request after shutdown failed with \(error.code) (possiblyProcessed \(error.possiblyProcessed)), expected provider/shut-down, not processed")
            case .some(.success): failures.append("a request after shutdown was sent")
            case .none: failures.append("a request after shutdown never completed")
            }
        }
        return failures
    }

    static func requestID(_ index: Int) -> String {
        let hex = String(index, radix: 16)
        return "00000000-0000-4000-8000-" + String(repeating: "0", count: 12 - hex.count) + hex
    }

    /// A request without its `authorization` header (and without its body, when it is encrypted per call), for
    /// comparing two `prepare` calls.
    static func comparable(_ request: PreparedRequest, withoutBody: Bool = false) -> PreparedRequest {
        var copy = request
        copy.headers.removeAll { $0.name == "authorization" }
        if withoutBody { copy.body = [] }
        return copy
    }

    /// Starts every request and waits (bounded) until each completed; returns how often each completion ran.
    func deliverAll(_ requests: [PreparedRequest], deadline: ContinuousClock.Instant) async -> [Int] {
        let counts = Mutex<[Int]>(Array(repeating: 0, count: requests.count))
        let done = AsyncStream.makeStream(of: Void.self)
        for (index, request) in requests.enumerated() {
            configuration.provider.startDelivery(request, deadline: deadline) { _ in
                counts.withLock { $0[index] += 1 }
                done.continuation.yield()
            }
        }
        await Self.collect(done.stream, count: requests.count, bound: deadline - .now + configuration.deadlineSlack)
        // A late second completion would show up here.
        try? await Task.sleep(for: .milliseconds(50))
        return counts.withLock { $0 }
    }

    /// One delivery, or nil when it does not complete within `bound`.
    static func deliver(_ provider: any PushProvider, _ request: PreparedRequest, deadline: ContinuousClock.Instant,
                        bound: Duration) async -> Result<DeliveryResponse, NorqError>? {
        let box = Mutex<Result<DeliveryResponse, NorqError>?>(nil)
        let done = AsyncStream.makeStream(of: Void.self)
        provider.startDelivery(request, deadline: deadline) { result in
            box.withLock { $0 = result }
            done.continuation.yield()
        }
        await collect(done.stream, count: 1, bound: bound)
        return box.withLock { $0 }
    }

    /// Waits for `count` elements or `bound`, whichever comes first.
    static func collect(_ stream: AsyncStream<Void>, count: Int, bound: Duration) async {
        guard count > 0 else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                var seen = 0
                for await _ in stream {
                    seen += 1
                    if seen == count { return }
                }
            }
            group.addTask { try? await Task.sleep(for: max(bound, .zero)) }
            await group.next()
            group.cancelAll()
        }
    }
}
