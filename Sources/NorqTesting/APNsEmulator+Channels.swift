import NIOCore
import NIOHPACK
import NIOHTTP2
import Synchronization

/// The emulator's broadcast channels: one store per emulator (which is one APNs environment, named by
/// ``APNsEmulator/Configuration/environmentName``), keyed by environment and bundle id, with APNs' limit of
/// channels per app and environment.
final class EmulatorChannelStore: Sendable {
    struct Channel: Sendable, Hashable {
        var id: String
        var storagePolicy: Int
    }
    private struct Key: Hashable {
        var environment: String
        var bundleID: String
    }
    private struct State {
        var channels: [Key: [Channel]] = [:]
        var enabledOverride: Bool?
        var serial: UInt64 = 0
        var broadcasts: [String: Int] = [:]
    }
    private let state = Mutex(State())
    let limit: Int
    private let enabledByDefault: Bool

    init(limit: Int, enabled: Bool) {
        self.limit = max(0, limit)
        self.enabledByDefault = enabled
    }

    var isEnabled: Bool { state.withLock { $0.enabledOverride ?? enabledByDefault } }

    func setEnabled(_ enabled: Bool?) { state.withLock { $0.enabledOverride = enabled } }

    /// Creates a channel; nil when the app already has `limit` channels in this environment.
    func create(environment: String, bundleID: String, storagePolicy: Int) -> Channel? {
        state.withLock { s -> Channel? in
            let key = Key(environment: environment, bundleID: bundleID)
            if s.channels[key, default: []].count >= limit { return nil }
            s.serial &+= 1
            let channel = Channel(id: Self.channelID(serial: s.serial, environment: environment, bundleID: bundleID),
                                  storagePolicy: storagePolicy)
            s.channels[key, default: []].append(channel)
            return channel
        }
    }

    func find(environment: String, bundleID: String, id: String) -> Channel? {
        state.withLock { $0.channels[Key(environment: environment, bundleID: bundleID)]?.first { $0.id == id } }
    }

    /// Removes a channel; false when it was not registered.
    func delete(environment: String, bundleID: String, id: String) -> Bool {
        state.withLock { s -> Bool in
            let key = Key(environment: environment, bundleID: bundleID)
            guard let index = s.channels[key]?.firstIndex(where: { $0.id == id }) else { return false }
            s.channels[key]?.remove(at: index)
            return true
        }
    }

    func list(environment: String, bundleID: String) -> [Channel] {
        state.withLock { $0.channels[Key(environment: environment, bundleID: bundleID)] ?? [] }
    }

    func countBroadcast(to id: String) { state.withLock { $0.broadcasts[id, default: 0] += 1 } }

    func broadcastCount(to id: String) -> Int { state.withLock { $0.broadcasts[id] ?? 0 } }

    /// A base64 id of 16 bytes, unique per store (serial) and distinct across environments and apps.
    static func channelID(serial: UInt64, environment: String, bundleID: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in (environment + "/" + bundleID).utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: hash >> UInt64(shift))) }
        let mixed = serial &* 0x9E37_79B9_7F4A_7C15 ^ hash
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: mixed >> UInt64(shift))) }
        return base64(bytes)
    }

    static func base64(_ bytes: [UInt8]) -> String {
        let table = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            let b0 = bytes[i], b1 = i + 1 < bytes.count ? bytes[i + 1] : 0, b2 = i + 2 < bytes.count ? bytes[i + 2] : 0
            out.append(table[Int(b0 >> 2)])
            out.append(table[Int(((b0 & 3) << 4) | (b1 >> 4))])
            out.append(i + 1 < bytes.count ? table[Int(((b1 & 15) << 2) | (b2 >> 6))] : UInt8(ascii: "="))
            out.append(i + 2 < bytes.count ? table[Int(b2 & 63)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Standard base64 with correct padding, decoding to 1...128 bytes (what APNs' `BadChannelId` rejects otherwise).
    static func isWellFormed(_ id: String) -> Bool {
        let utf8 = Array(id.utf8)
        guard !utf8.isEmpty, utf8.count % 4 == 0, utf8.count <= 172 else { return false }
        var padding = 0
        for (index, c) in utf8.enumerated() {
            if c == UInt8(ascii: "=") {
                guard index >= utf8.count - 2 else { return false }
                padding += 1
            } else {
                guard padding == 0 else { return false }
                let ok = (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c == 43 || c == 47
                guard ok else { return false }
            }
        }
        return utf8.count / 4 * 3 - padding >= 1
    }
}

/// One answer of the channel or broadcast API.
struct EmulatorReply {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]
    var reason: String?
    var requestID: String?

    static func rejection(_ status: Int, _ reason: String, requestID: String?) -> EmulatorReply {
        var headers: [(String, String)] = [("content-type", "application/json")]
        if let requestID { headers.append(("apns-request-id", requestID)) }
        return EmulatorReply(status: status, headers: headers, body: Array("{\"reason\":\"\(reason)\"}".utf8),
                             reason: reason, requestID: requestID)
    }
}

/// The request fields the channel and broadcast API reads.
struct EmulatorChannelFields {
    var method = ""
    var path = ""
    var authorization: String?
    var requestID: String?
    var channelID: String?
    var pushType: String?
    var topic: String?
    var priority: String?
    var expiration: String?
    var duplicate = false

    init(_ headers: HPACKHeaders) {
        func set(_ slot: inout String?, _ value: String) {
            if slot != nil { duplicate = true }
            slot = value
        }
        for (name, value, _) in headers {
            switch name {
            case ":method": method = value
            case ":path": path = value
            case "authorization": set(&authorization, value)
            case "apns-request-id": set(&requestID, value)
            case "apns-channel-id": set(&channelID, value)
            case "apns-push-type": set(&pushType, value)
            case "apns-topic": set(&topic, value)
            case "apns-priority": set(&priority, value)
            case "apns-expiration": set(&expiration, value)
            default: break
            }
        }
    }
}

extension EmulatorConnectionHandler {
    /// The hook of the dispatch: answers channel-management (`/1/apps/...`) and broadcast (`/4/broadcasts/...`)
    /// requests, and returns false for anything else (device pushes go on as before).
    func answerChannelRequest(context: ChannelHandlerContext, streamID: HTTP2StreamID, headers: HPACKHeaders,
                              body: ByteBuffer?, connectionID: Int, shared: EmulatorShared) -> Bool {
        guard let path = headers.first(name: ":path"),
              path.hasPrefix("/1/apps/") || path.hasPrefix("/4/broadcasts/") || path.hasPrefix("/4/broadcast/")
        else { return false }
        let bytes = body.map { Array($0.readableBytesView) } ?? []
        let fields = EmulatorChannelFields(headers)
        var generator = FastUUIDGenerator()
        let reply = channelReply(fields, body: bytes, shared: shared, newRequestID: { generator.uuidString() })
        // Recorded before the answer leaves, so a client that got its answer finds the record.
        let configuration = shared.configuration
        var recordedHeaders: [(name: String, value: String)] = []
        var authority = ""
        for (name, value, _) in headers {
            if name == ":authority" { authority = value } else if !name.hasPrefix(":") { recordedHeaders.append((name, value)) }
        }
        shared.record(RecordedRequest(
            method: fields.method, path: fields.path, authority: authority, headers: recordedHeaders,
            body: configuration.recordBodies ? bytes : [], connectionID: connectionID, streamID: Int(streamID),
            environmentName: configuration.environmentName, status: reply.status, reason: reply.reason,
            apnsID: reply.requestID))
        var responseHeaders = HPACKHeaders()
        responseHeaders.add(name: ":status", value: String(reply.status))
        for (name, value) in reply.headers { responseHeaders.add(name: name, value: value) }
        if reply.body.isEmpty {
            context.write(NIOAny(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: responseHeaders, endStream: true)))),
                          promise: nil)
        } else {
            context.write(NIOAny(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: responseHeaders)))), promise: nil)
            let buffer = context.channel.allocator.buffer(bytes: reply.body)
            context.write(NIOAny(HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(buffer), endStream: true)))),
                          promise: nil)
        }
        context.flush()
        return true
    }

    private func channelReply(_ f: EmulatorChannelFields, body: [UInt8], shared: EmulatorShared,
                              newRequestID: () -> String) -> EmulatorReply {
        let requestID: String
        if let given = f.requestID {
            guard FastUUIDGenerator.isUUID(given) else { return .rejection(400, "BadMessageId", requestID: newRequestID()) }
            requestID = given.lowercased()
        } else {
            requestID = newRequestID()
        }
        func reject(_ status: Int, _ reason: String) -> EmulatorReply { .rejection(status, reason, requestID: requestID) }

        let isBroadcast = f.path.hasPrefix("/4/")
        let bundleID: String
        var collection = ""
        if isBroadcast {
            let prefix = "/4/broadcasts/apps/"
            guard f.path.hasPrefix(prefix) else { return reject(404, "BadPath") }
            bundleID = String(f.path.dropFirst(prefix.count))
            guard !bundleID.isEmpty, !bundleID.contains("/") else { return reject(404, "BadPath") }
            guard f.method == "POST" else { return reject(405, "MethodNotAllowed") }
        } else {
            let parts = f.path.dropFirst("/1/apps/".count).split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty, parts[1] == "channels" || parts[1] == "all-channels" else {
                return reject(404, "BadPath")
            }
            bundleID = String(parts[0])
            collection = String(parts[1])
            let allowed = collection == "channels" ? ["POST", "GET", "DELETE"] : ["GET"]
            guard allowed.contains(f.method) else { return reject(405, "MethodNotAllowed") }
        }
        if f.duplicate { return reject(400, "DuplicateHeaders") }
        if !shared.configuration.requireClientCertificate, let verifier = shared.verifier {
            if let r = checkAuthorization(f.authorization, verifier: verifier, now: shared.configuration.now()) {
                return reject(r.status, r.reason)
            }
        }
        if let bundles = shared.configuration.bundleIDs, !bundles.contains(bundleID) {
            return reject(400, "TopicDisallowed")
        }
        let store = shared.channels
        guard store.isEnabled else { return reject(400, "FeatureNotEnabled") }
        let environment = shared.configuration.environmentName

        if isBroadcast {
            return broadcastReply(f, body: body, bundleID: bundleID, environment: environment, shared: shared,
                                  requestID: requestID)
        }
        // Faults (keyed by the channel id, "" for create and list) apply to valid management requests too.
        if case .answer(let rejection?, _) = shared.decide(token: Substring(f.channelID ?? "")) {
            var reply = reject(rejection.status, rejection.reason)
            if let retry = rejection.retryAfterSeconds { reply.headers.append(("retry-after", String(retry))) }
            return reply
        }
        switch (collection, f.method) {
        case ("all-channels", _):
            let ids = store.list(environment: environment, bundleID: bundleID).map { "\"\($0.id)\"" }
            return EmulatorReply(status: 200, headers: [("apns-request-id", requestID), ("content-type", "application/json")],
                                 body: Array("{\"channels\":[\(ids.joined(separator: ","))]}".utf8), requestID: requestID)
        case (_, "POST"):
            guard !body.isEmpty else { return reject(400, "BadRequestPayload") }
            guard JSONSyntax.isObject(body[...]), let object = EmulatorJSON.flatObject(body) else {
                return reject(400, "BadRequestPayload")
            }
            guard let policyText = object["message-storage-policy"] else { return reject(400, "MissingChannelQueueSize") }
            guard policyText == "0" || policyText == "1" else { return reject(400, "BadRequestParams") }
            guard let pushType = object["push-type"] else { return reject(400, "MissingPushType") }
            guard pushType.lowercased() == "\"liveactivity\"" else { return reject(400, "InvalidPushType") }
            guard let channel = store.create(environment: environment, bundleID: bundleID,
                                             storagePolicy: policyText == "0" ? 0 : 1) else {
                return reject(400, "CannotCreateChannelConfig")
            }
            return EmulatorReply(status: 201, headers: [("apns-request-id", requestID), ("apns-channel-id", channel.id)],
                                 body: [], requestID: requestID)
        default:
            guard let id = f.channelID, !id.isEmpty else { return reject(400, "MissingChannelId") }
            guard EmulatorChannelStore.isWellFormed(id) else { return reject(400, "BadChannelId") }
            if f.method == "DELETE" {
                guard store.delete(environment: environment, bundleID: bundleID, id: id) else {
                    return reject(400, "ChannelNotRegistered")
                }
                return EmulatorReply(status: 204, headers: [("apns-request-id", requestID)], body: [], requestID: requestID)
            }
            guard let channel = store.find(environment: environment, bundleID: bundleID, id: id) else {
                return reject(400, "ChannelNotRegistered")
            }
            return EmulatorReply(
                status: 200,
                headers: [("apns-request-id", requestID), ("apns-channel-id", id), ("content-type", "application/json")],
                body: Array("{\"message-storage-policy\":\(channel.storagePolicy),\"push-type\":\"LiveActivity\"}".utf8),
                requestID: requestID)
        }
    }
}

/// The top-level keys of a JSON object with their raw value text (enough for the channel-create body).
enum EmulatorJSON {
    static func flatObject(_ bytes: [UInt8]) -> [String: String]? {
        guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
        var result: [String: String] = [:]
        var chars = Array(text.unicodeScalars)
        chars.removeAll { $0 == " " || $0 == "\n" || $0 == "\t" || $0 == "\r" }
        guard chars.first == "{", chars.last == "}" else { return nil }
        var i = 1
        let end = chars.count - 1
        while i < end {
            guard chars[i] == "\"" else { return nil }
            var j = i + 1
            while j < end, chars[j] != "\"" { j += chars[j] == "\\" ? 2 : 1 }
            let key = String(String.UnicodeScalarView(chars[(i + 1)..<min(j, end)]))
            j += 1
            guard j < end, chars[j] == ":" else { return nil }
            j += 1
            var depth = 0
            var inString = false
            let start = j
            while j < end {
                let c = chars[j]
                if inString {
                    if c == "\\" { j += 1 } else if c == "\"" { inString = false }
                } else if c == "\"" {
                    inString = true
                } else if c == "{" || c == "[" {
                    depth += 1
                } else if c == "}" || c == "]" {
                    depth -= 1
                } else if c == ",", depth == 0 {
                    break
                }
                j += 1
            }
            result[key] = String(String.UnicodeScalarView(chars[start..<min(j, end)]))
            i = j + 1
        }
        return result
    }
}

extension APNsEmulator {
    /// Channel ids of an app in this emulator's environment, in creation order.
    public func channelIDs(bundleID: String) -> [String] {
        shared.channels.list(environment: configuration.environmentName, bundleID: bundleID).map(\.id)
    }

    /// Switches the broadcast capability on or off at runtime (off: every channel and broadcast request gets
    /// 400 `FeatureNotEnabled`); nil returns to ``Configuration/broadcastEnabled``.
    public func setBroadcastEnabled(_ enabled: Bool?) {
        shared.channels.setEnabled(enabled)
    }

    /// Broadcasts accepted (200) for a channel so far.
    public func broadcastCount(channelID: String) -> Int {
        shared.channels.broadcastCount(to: channelID)
    }
}

extension RecordedRequest {
    /// `apns-channel-id` of a channel or broadcast request.
    public var channelID: String? { header("apns-channel-id") }
    /// True for `POST /4/broadcasts/apps/<bundleId>`.
    public var isBroadcast: Bool { path.hasPrefix("/4/broadcasts/") }
}
