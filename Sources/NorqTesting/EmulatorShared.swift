import NIOCore
import Synchronization

/// State shared by the emulator and its connections, behind one lock.
final class EmulatorShared: Sendable {
    let configuration: APNsEmulator.Configuration
    let verifier: JWTVerifier?
    let rules: APNsRequestRules
    let tokenUpdateMinSeconds: Int64
    let jwtMaxAgeSeconds: Int64
    let jwtFutureSkewSeconds: Int64
    /// Broadcast channels (APNsEmulator+Channels.swift).
    let channels: EmulatorChannelStore

    struct State {
        var faults: APNsEmulator.Faults
        var rng: FastUUIDGenerator
        var records: EmulatorRecords<RecordedRequest>
        var connectionCount = 0
        var channels: [Int: any Channel] = [:]
        var maxConcurrentStreams: Int
        var perTokenAttempts: [String: Int] = [:]
        var burstIndex = 0
    }
    let state: Mutex<State>

    init(configuration: APNsEmulator.Configuration) throws {
        self.configuration = configuration
        let keys = configuration.allSigningKeys
        self.verifier = keys.isEmpty ? nil : try JWTVerifier(keysPEM: keys, teamID: configuration.teamID)
        self.rules = APNsRequestRules(
            bundleIDs: configuration.bundleIDs, topicRequired: !configuration.requireClientCertificate)
        self.tokenUpdateMinSeconds = configuration.tokenUpdateMinInterval.components.seconds
        self.jwtMaxAgeSeconds = configuration.jwtMaxAge.components.seconds
        self.jwtFutureSkewSeconds = configuration.jwtFutureSkew.components.seconds
        self.channels = EmulatorChannelStore(limit: configuration.maxChannelsPerApp, enabled: configuration.broadcastEnabled)
        self.state = Mutex(State(
            faults: configuration.faults,
            rng: FastUUIDGenerator(seed: configuration.faults.seed),
            records: EmulatorRecords(limit: configuration.recordLimit),
            maxConcurrentStreams: configuration.maxConcurrentStreams))
    }

    /// Per-connection fault knobs read when a stream opens.
    var streamFaults: EmulatorStreamFaults {
        state.withLock { EmulatorStreamFaults(
            goAwayAfterStreams: $0.faults.goAwayAfterStreams,
            dropConnectionAfterStreams: $0.faults.dropConnectionAfterStreams) }
    }

    /// What to do with a valid request.
    enum Decision {
        case answer(APNsRejection?, latency: Duration)
        case silent
    }

    /// Applies the faults to a valid request for `token`.
    func decide(token: Substring) -> Decision {
        state.withLock { s -> Decision in
            let f = s.faults
            let latency = f.latency
            let hasTokenFaults = !f.silentTokens.isEmpty || !f.unregisteredTokens.isEmpty || !f.badTokens.isEmpty
                || !f.failFirstAttempts.isEmpty
            if hasTokenFaults {
                let t = String(token)
                if f.silentTokens.contains(t) { return .silent }
                if let ms = f.unregisteredTokens[t] {
                    return .answer(.init(status: 410, reason: "Unregistered", timestamp: ms), latency: latency)
                }
                if f.badTokens.contains(t) { return .answer(.init(status: 400, reason: "BadDeviceToken"), latency: latency) }
                if let plan = f.failFirstAttempts[t] {
                    let n = s.perTokenAttempts[t, default: 0]
                    s.perTokenAttempts[t] = n + 1
                    if n < plan.count {
                        return .answer(Self.rejection(plan[n], defaultRetryAfter: f.retryAfterSeconds), latency: latency)
                    }
                }
            }
            if s.burstIndex < f.failNextRequests.count {
                let a = f.failNextRequests[s.burstIndex]
                s.burstIndex += 1
                return .answer(Self.rejection(a, defaultRetryAfter: f.retryAfterSeconds), latency: latency)
            }
            if f.errorRate > 0, s.rng.nextUnit() < f.errorRate {
                let a = APNsEmulator.FaultAnswer(status: f.errorStatus, reason: f.errorReason)
                return .answer(Self.rejection(a, defaultRetryAfter: f.retryAfterSeconds), latency: latency)
            }
            return .answer(nil, latency: latency)
        }
    }

    static func rejection(_ a: APNsEmulator.FaultAnswer, defaultRetryAfter: Int?) -> APNsRejection {
        var r = APNsRejection(status: a.status, reason: a.reason)
        r.retryAfterSeconds = a.retryAfterSeconds ?? ((a.status == 429 || a.status == 503) ? defaultRetryAfter : nil)
        return r
    }

    func record(_ r: RecordedRequest) {
        guard configuration.recordRequests else { return }
        state.withLock { $0.records.append(r) }
        configuration.onRequest?(r)
    }

    func register(_ channel: any Channel) -> (id: Int, maxConcurrentStreams: Int) {
        state.withLock { s in
            s.connectionCount += 1
            s.channels[s.connectionCount] = channel
            return (s.connectionCount, s.maxConcurrentStreams)
        }
    }

    func unregister(_ id: Int) {
        _ = state.withLock { $0.channels.removeValue(forKey: id) }
    }
}
