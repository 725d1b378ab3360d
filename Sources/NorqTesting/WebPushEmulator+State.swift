import Crypto
import Foundation
import NIOCore
import Synchronization

/// Per-connection counters (stream numbers, GOAWAY), shared by the connection's streams.
final class WebPushEmulatorConnection: Sendable {
    let id: Int
    private let state = Mutex<(streams: Int, goAwayLastStreamID: Int?)>((0, nil))
    init(id: Int) { self.id = id }

    /// Counts a new stream and returns its number on the connection (1-based).
    func openedStream(id: Int) -> Int { state.withLock { $0.streams += 1; return $0.streams } }

    var goAwayLastStreamID: Int? {
        get { state.withLock { $0.goAwayLastStreamID } }
        set { state.withLock { $0.goAwayLastStreamID = newValue } }
    }
}

/// State shared by the emulator and its connections, behind one lock.
final class WebPushEmulatorShared: Sendable {
    let configuration: WebPushEmulator.Configuration

    struct Held: Sendable {
        var subscription: WebPushEmulator.Subscription
        /// Nil for a subscription adopted without its keys: checked like any other, not decrypted.
        var privateKey: P256.KeyAgreement.PrivateKey?
        var authSecret: [UInt8]
        var gone: Bool
    }

    struct State {
        var port = 0
        var subscriptions: [String: Held] = [:]
        /// Paths (without query) of adopted subscriptions that keep their own endpoint path -> subscription id.
        var paths: [String: String] = [:]
        var nextSubscription = 0
        var nextMessage = 0
        var messages: EmulatorRecords<WebPushEmulator.Message>
        var faults: WebPushEmulator.Faults
        var attempts: [String: Int] = [:]
        var burstIndex = 0
        var connectionCount = 0
        var channels: [Int: any Channel] = [:]
    }
    let state: Mutex<State>

    init(configuration: WebPushEmulator.Configuration) {
        self.configuration = configuration
        self.state = Mutex(State(messages: EmulatorRecords(limit: configuration.recordLimit), faults: configuration.faults))
    }

    func setPort(_ port: Int) { state.withLock { $0.port = port } }

    var origin: String {
        let host = configuration.endpointHost.contains(":") ? "[\(configuration.endpointHost)]" : configuration.endpointHost
        return "https://\(host):\(state.withLock { $0.port })"
    }

    func subscribe(applicationServerKey: String?) -> WebPushEmulator.Subscription {
        let key = P256.KeyAgreement.PrivateKey()
        var generator = SystemRandomNumberGenerator()
        let auth = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let origin = self.origin
        return state.withLock { s in
            s.nextSubscription += 1
            let id = "sub\(s.nextSubscription)-" + WebPushCrypto.base64URLEncode((0..<9).map { _ in UInt8.random(in: 0...255) })
            let subscription = WebPushEmulator.Subscription(
                id: id, endpoint: "\(origin)/push/\(id)",
                p256dh: WebPushCrypto.base64URLEncode(Array(key.publicKey.x963Representation)),
                auth: WebPushCrypto.base64URLEncode(auth), applicationServerKey: applicationServerKey)
            s.subscriptions[id] = Held(subscription: subscription, privateKey: key, authSecret: auth, gone: false)
            return subscription
        }
    }

    func adopt(id: String, privateKey: P256.KeyAgreement.PrivateKey, authSecret: [UInt8],
               path: String?) -> WebPushEmulator.Subscription {
        let subscription = WebPushEmulator.Subscription(
            id: id, endpoint: origin + (path ?? "/push/\(id)"),
            p256dh: WebPushCrypto.base64URLEncode(Array(privateKey.publicKey.x963Representation)),
            auth: WebPushCrypto.base64URLEncode(authSecret), applicationServerKey: nil)
        state.withLock { s in
            s.subscriptions[id] = Held(subscription: subscription, privateKey: privateKey, authSecret: authSecret, gone: false)
            if let path { s.paths[Self.withoutQuery(path)] = id }
        }
        return subscription
    }

    func adoptWithoutKeys(id: String, p256dh: String, auth: String, path: String?) -> WebPushEmulator.Subscription {
        let subscription = WebPushEmulator.Subscription(id: id, endpoint: origin + (path ?? "/push/\(id)"),
                                                        p256dh: p256dh, auth: auth, applicationServerKey: nil)
        state.withLock { s in
            s.subscriptions[id] = Held(subscription: subscription, privateKey: nil, authSecret: [], gone: false)
            if let path { s.paths[Self.withoutQuery(path)] = id }
        }
        return subscription
    }

    static func withoutQuery(_ path: String) -> String {
        String(path.prefix(while: { $0 != "?" }))
    }

    /// The subscription id a request path names: an adopted subscription's own path, else `/push/<id>`.
    func subscriptionID(path: String) -> String? {
        if let id = state.withLock({ $0.paths[Self.withoutQuery(path)] }) { return id }
        guard path.hasPrefix("/push/") else { return nil }
        return String(path.dropFirst(6).prefix(while: { $0 != "?" }))
    }

    func unsubscribe(_ id: String) { state.withLock { $0.subscriptions[id]?.gone = true } }

    var streamFaults: (goAwayAfterStreams: Int?, dropConnectionAfterStreams: Int?) {
        state.withLock { ($0.faults.goAwayAfterStreams, $0.faults.dropConnectionAfterStreams) }
    }

    func register(_ channel: any Channel) -> Int {
        state.withLock { s in
            s.connectionCount += 1
            s.channels[s.connectionCount] = channel
            return s.connectionCount
        }
    }

    func unregister(_ id: Int) { _ = state.withLock { $0.channels.removeValue(forKey: id) } }

    func record(_ message: WebPushEmulator.Message) {
        guard configuration.recordMessages else { return }
        state.withLock { $0.messages.append(message) }
    }

    /// What to answer.
    struct Answer: Sendable {
        var status: Int
        var headers: [(String, String)]
        var body: String
        var latency: Duration
        var silent = false
    }

    /// Checks and decrypts one request; returns the answer and the record of it.
    func handle(method: String, path: String, headers: [(name: String, value: String)], body: [UInt8],
                httpVersion: String) -> (Answer, WebPushEmulator.Message) {
        var fields: [String: String] = [:]
        var repeated = Set<String>()
        for (name, value) in headers {
            let lower = name.lowercased()
            if fields[lower] != nil { repeated.insert(lower) }
            fields[lower] = value
        }
        var message = WebPushEmulator.Message(
            subscriptionID: nil, path: path, httpVersion: httpVersion, headers: fields, plaintext: nil, ttl: nil,
            urgency: fields["urgency"], topic: fields["topic"], vapidSubject: nil, vapidAudience: nil,
            bodyBytes: body.count, status: 0, reason: nil)
        if body.count <= 4096 { message.body = body }
        let latency = state.withLock { $0.faults.latency }
        func refuse(_ status: Int, _ reason: String) -> (Answer, WebPushEmulator.Message) {
            message.status = status
            message.reason = reason
            let json = #"{"code":\#(status),"error":"\#(reason.replacingOccurrences(of: "\"", with: "'"))"}"#
            return (Answer(status: status, headers: [("content-type", "application/json")], body: json, latency: latency), message)
        }
        guard method == "POST" else { return refuse(405, "method not allowed") }
        let known = subscriptionID(path: path).flatMap { id in state.withLock { $0.subscriptions[id] }.map { (id, $0) } }
        let id: String, held: Held
        if let known {
            (id, held) = known
        } else if configuration.acceptUnknownSubscriptions {
            // A subscription never seen: checked as one adopted without its keys, identified by its path.
            id = Self.withoutQuery(path)
            held = Held(subscription: WebPushEmulator.Subscription(id: id, endpoint: origin + path, p256dh: "", auth: "",
                                                                   applicationServerKey: nil),
                        privateKey: nil, authSecret: [], gone: false)
        } else {
            guard let named = subscriptionID(path: path) else { return refuse(404, "no such push resource") }
            message.subscriptionID = named
            return refuse(404, "subscription not found")
        }
        message.subscriptionID = id
        if held.gone { return refuse(410, "subscription is gone") }
        // VAPID
        if let authorization = fields["authorization"] {
            let claims: WebPushCrypto.VAPIDClaims
            do {
                claims = try WebPushCrypto.verifyVAPID(authorization, audience: origin, now: configuration.now())
            } catch {
                return refuse(403, "invalid VAPID token: \(error)")
            }
            if let bound = held.subscription.applicationServerKey, bound != claims.publicKey {
                return refuse(403, "VAPID key does not match the subscription's applicationServerKey")
            }
            if let accepted = configuration.acceptedVAPIDKeys, !accepted.contains(claims.publicKey) {
                return refuse(403, "VAPID key not accepted")
            }
            message.vapidSubject = claims.subject
            message.vapidAudience = claims.audience
        } else if configuration.requireVAPID || held.subscription.applicationServerKey != nil {
            return refuse(401, "missing VAPID authorization")
        }
        // RFC 8030 syntax
        guard let ttlText = fields["ttl"], !repeated.contains("ttl") else { return refuse(400, "missing TTL header") }
        guard !ttlText.isEmpty, ttlText.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let ttl = Int(ttlText.prefix(12)) else {
            return refuse(400, "invalid TTL header")
        }
        message.ttl = min(ttl, Int(Int32.max))
        if let urgency = fields["urgency"] {
            guard !repeated.contains("urgency"), ["very-low", "low", "normal", "high"].contains(urgency) else {
                return refuse(400, "invalid Urgency header")
            }
        }
        if let topic = fields["topic"] {
            guard !repeated.contains("topic"), !topic.isEmpty, topic.utf8.count <= 32, topic.utf8.allSatisfy({ c in
                (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c == 45 || c == 95
            }) else { return refuse(400, "invalid Topic header") }
        }
        guard fields["content-encoding"] == "aes128gcm", !repeated.contains("content-encoding") else {
            return refuse(400, "Content-Encoding must be aes128gcm")
        }
        guard body.count <= 4096 else { return refuse(413, "payload too large") }
        if let privateKey = held.privateKey {
            do {
                message.plaintext = try WebPushCrypto.decrypt(body: body, userAgentPrivateKey: privateKey,
                                                              authSecret: held.authSecret)
            } catch {
                return refuse(400, "decryption failed: \(error)")
            }
        } else {
            message.reason = "not decrypted (subscription adopted without its private key)"
        }
        // Faults
        let fault: WebPushEmulator.FaultAnswer?? = state.withLock { s -> WebPushEmulator.FaultAnswer?? in
            if s.faults.silentSubscriptions.contains(id) { return .some(nil) }
            if let plan = s.faults.failFirstAttempts[id] {
                let n = s.attempts[id, default: 0]
                s.attempts[id] = n + 1
                if n < plan.count { return plan[n] }
            }
            if s.burstIndex < s.faults.failNextRequests.count {
                s.burstIndex += 1
                return s.faults.failNextRequests[s.burstIndex - 1]
            }
            return nil
        }
        switch fault {
        case .some(nil):
            return (Answer(status: 0, headers: [], body: "", latency: latency, silent: true), message)
        case .some(let answer?):
            message.status = answer.status
            message.reason = answer.body.isEmpty ? "injected \(answer.status)" : answer.body
            var headers: [(String, String)] = []
            if let retry = answer.retryAfterSeconds { headers.append(("retry-after", String(retry))) }
            return (Answer(status: answer.status, headers: headers, body: answer.body, latency: latency), message)
        case .none:
            break
        }
        let number = state.withLock { s -> Int in s.nextMessage += 1; return s.nextMessage }
        message.status = 201
        return (Answer(status: 201, headers: [("location", "\(origin)/message/m\(number)"), ("ttl", String(message.ttl ?? 0))],
                       body: "", latency: latency), message)
    }
}
