import NIOCore
import NIOHPACK
import NIOHTTP2

/// Serves one HTTP/2 connection as APNs would, on raw frames (no child channel per stream).
/// Lives on the connection's event loop; only the shared state is locked.
final class EmulatorConnectionHandler: ChannelDuplexHandler, EmulatorDelayedAnswering {
    typealias InboundIn = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private let shared: EmulatorShared
    private var connectionID = 0

    private typealias PendingStream = EmulatorConnectionState.Stream
    /// Streams, faults, the connection window and the close after GOAWAY (shared with ``EmulatorHTTP2Handler``).
    var connection = EmulatorConnectionState()

    // JWT state of this connection.
    private var verifiedTokens: [String: Result<JWTVerifier.Verified, JWTVerifier.Failure>] = [:]
    private var currentJWT: String?
    private var currentJWTSince: Int64 = 0

    private var uuids = FastUUIDGenerator()

    init(shared: EmulatorShared) {
        self.shared = shared
    }

    func handlerAdded(context: ChannelHandlerContext) {
        connectionID = shared.register(context.channel).id
    }

    func channelInactive(context: ChannelHandlerContext) {
        // Requests that were received but never answered.
        for (id, stream) in connection.closedByPeer() {
            record(stream, streamID: id, status: 0, reason: nil, apnsID: nil, bodyOverride: nil)
        }
        shared.unregister(connectionID)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch connection.receive(frame, faults: shared.streamFaults) {
        case .nothing:
            break
        case .complete(let streamID):
            complete(context: context, streamID: streamID)
        case .reset(let streamID, let stream):
            record(stream, streamID: streamID, status: 0, reason: "client reset the stream", apnsID: nil, bodyOverride: nil)
        case .drop:
            // Answer what is already answered, then drop the connection.
            context.flush()
            context.close(promise: nil)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        for payload in connection.readComplete() {
            context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: payload)), promise: nil)
        }
        if connection.takeFlush() { context.flush() }
        if connection.closeIfDrained() { context.close(promise: nil) }
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // NIOHTTP2Handler and NIOSSL close the connection themselves on connection-level errors;
        // stream-level errors (e.g. a frame for a stream already closed) must not end the connection.
    }

    // MARK: - Requests

    private func complete(context: ChannelHandlerContext, streamID: HTTP2StreamID) {
        guard let stream = connection.stream(streamID) else { return }
        if stream.tooLarge {
            // Far above APNs's 4 KiB (5 KiB for VoIP) payload limit: the body was not kept.
            connection.remove(streamID)
            answer(context: context, streamID: streamID, stream: stream,
                   rejection: APNsRejection(status: 413, reason: "PayloadTooLarge"), flush: false)
            return
        }
        if answerChannelRequest(context: context, streamID: streamID, headers: stream.headers, body: stream.body,
                                connectionID: connectionID, shared: shared) {  // broadcast API (APNsEmulator+Channels.swift)
            connection.remove(streamID)
            return
        }
        let now = shared.configuration.now()
        let outcome = evaluate(stream, now: now)
        switch outcome {
        case .rejected(let rejection):
            connection.remove(streamID)
            answer(context: context, streamID: streamID, stream: stream, rejection: rejection, flush: false)
        case .valid(let token):
            switch shared.decide(token: token) {
            case .silent:
                break  // stays in `streams`, recorded with status 0 if the connection closes
            case .answer(let rejection, let latency):
                connection.remove(streamID)
                if latency == .zero {
                    answer(context: context, streamID: streamID, stream: stream, rejection: rejection, flush: false)
                } else {
                    answer(after: latency, context: context, write: {
                        $0.answer(context: $1, streamID: streamID, stream: stream, rejection: rejection, flush: true)
                    }, unanswered: {
                        $0.record(stream, streamID: streamID, status: 0, reason: nil, apnsID: nil, bodyOverride: nil)
                    })
                }
            }
        }
    }

    private enum Evaluation {
        case valid(token: Substring)
        case rejected(APNsRejection)
    }

    private struct Fields {
        var method = ""
        var path = ""
        var authorization: String?
        var apnsID: String?
        var pushType: String?
        var topic: String?
        var priority: String?
        var expiration: String?
        var collapseID: String?
        var duplicate = false
    }

    private static func fields(of headers: HPACKHeaders) -> Fields {
        var f = Fields()
        func set(_ slot: inout String?, _ value: String, _ dup: inout Bool) {
            if slot != nil { dup = true }
            slot = value
        }
        for (name, value, _) in headers {
            switch name {
            case ":method": f.method = value
            case ":path": f.path = value
            case "authorization": set(&f.authorization, value, &f.duplicate)
            case "apns-id": set(&f.apnsID, value, &f.duplicate)
            case "apns-push-type": set(&f.pushType, value, &f.duplicate)
            case "apns-topic": set(&f.topic, value, &f.duplicate)
            case "apns-priority": set(&f.priority, value, &f.duplicate)
            case "apns-expiration": set(&f.expiration, value, &f.duplicate)
            case "apns-collapse-id": set(&f.collapseID, value, &f.duplicate)
            default: break
            }
        }
        return f
    }

    private func evaluate(_ stream: PendingStream, now: Int64) -> Evaluation {
        let f = Self.fields(of: stream.headers)
        let token: Substring
        switch APNsRequestRules.checkPath(method: f.method, path: f.path) {
        case .failure(let r): return .rejected(r)
        case .success(let t): token = t
        }
        if f.duplicate { return .rejected(.init(status: 400, reason: "DuplicateHeaders")) }
        if !shared.configuration.requireClientCertificate, let verifier = shared.verifier {
            if let r = checkAuthorization(f.authorization, verifier: verifier, now: now) { return .rejected(r) }
        }
        let body = stream.body?.readableBytesView ?? ByteBuffer().readableBytesView
        if let r = shared.rules.checkHeaders(
            apnsID: f.apnsID, pushType: f.pushType, topic: f.topic, priority: f.priority,
            expiration: f.expiration, collapseID: f.collapseID, body: body,
            bodyIsJSONObject: { stream.body?.withUnsafeReadableBytes { JSONSyntax.isObject($0) } ?? false })
        {
            return .rejected(r)
        }
        return .valid(token: token)
    }

    func checkAuthorization(_ authorization: String?, verifier: JWTVerifier, now: Int64) -> APNsRejection? {
        guard let authorization, !authorization.isEmpty else {
            return .init(status: 403, reason: "MissingProviderToken")
        }
        let utf8 = authorization.utf8
        guard utf8.count > 7, authorization.prefix(7).lowercased() == "bearer " else {
            return .init(status: 403, reason: "InvalidProviderToken")
        }
        let jwt = authorization.dropFirst(7)
        let result: Result<JWTVerifier.Verified, JWTVerifier.Failure>
        if let cached = verifiedTokens[authorization] {
            result = cached
        } else {
            result = verifier.verify(jwt)
            if verifiedTokens.count > 64 { verifiedTokens.removeAll() }
            verifiedTokens[authorization] = result
        }
        let verified: JWTVerifier.Verified
        switch result {
        case .failure: return .init(status: 403, reason: "InvalidProviderToken")
        case .success(let v): verified = v
        }
        if verified.issuedAt > now + shared.jwtFutureSkewSeconds {
            return .init(status: 403, reason: "InvalidProviderToken")
        }
        if now - verified.issuedAt > shared.jwtMaxAgeSeconds {
            return .init(status: 403, reason: "ExpiredProviderToken")
        }
        if currentJWT != authorization {
            if currentJWT != nil, now - currentJWTSince < shared.tokenUpdateMinSeconds {
                return .init(status: 429, reason: "TooManyProviderTokenUpdates")
            }
            currentJWT = authorization
            currentJWTSince = now
        }
        return nil
    }

    // MARK: - Answers

    private func answer(
        context: ChannelHandlerContext, streamID: HTTP2StreamID, stream: PendingStream,
        rejection: APNsRejection?, flush: Bool
    ) {
        let requestID = stream.headers.first(name: "apns-id")
        let apnsID: String
        if let requestID, FastUUIDGenerator.isUUID(requestID) {
            apnsID = requestID.lowercased()
        } else {
            apnsID = uuids.uuidString()
        }
        if let rejection {
            var headers = HPACKHeaders()
            headers.reserveCapacity(4)
            headers.add(name: ":status", value: String(rejection.status))
            headers.add(name: "apns-id", value: apnsID)
            headers.add(name: "content-type", value: "application/json")
            if let retry = rejection.retryAfterSeconds { headers.add(name: "retry-after", value: String(retry)) }
            var body = context.channel.allocator.buffer(capacity: 64)
            body.writeStaticString("{\"reason\":\"")
            body.writeString(rejection.reason)
            if let ts = rejection.timestamp {
                body.writeStaticString("\",\"timestamp\":")
                body.writeString(String(ts))
                body.writeStaticString("}")
            } else {
                body.writeStaticString("\"}")
            }
            context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))),
                          promise: nil)
            context.write(wrapOutboundOut(HTTP2Frame(
                streamID: streamID, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: nil)
        } else {
            let headers: HPACKHeaders = [":status": "200", "apns-id": apnsID, "apns-unique-id": uuids.uuidString()]
            context.write(wrapOutboundOut(HTTP2Frame(
                streamID: streamID, payload: .headers(.init(headers: headers, endStream: true)))), promise: nil)
        }
        if flush { context.flush() } else { connection.needsFlush = true }
        record(stream, streamID: streamID, status: rejection?.status ?? 200, reason: rejection?.reason,
               apnsID: apnsID, bodyOverride: nil)
    }

    private func record(
        _ stream: PendingStream, streamID: HTTP2StreamID, status: Int, reason: String?, apnsID: String?,
        bodyOverride: [UInt8]?
    ) {
        let configuration = shared.configuration
        guard configuration.recordRequests else { return }
        var method = "", path = "", authority = ""
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(stream.headers.count)
        for (name, value, _) in stream.headers {
            switch name {
            case ":method": method = value
            case ":path": path = value
            case ":authority": authority = value
            default: if !name.hasPrefix(":") { headers.append((name, value)) }
            }
        }
        let body = configuration.recordBodies ? (bodyOverride ?? stream.body.map { Array($0.readableBytesView) } ?? []) : []
        shared.record(RecordedRequest(
            method: method, path: path, authority: authority, headers: headers, body: body,
            connectionID: connectionID, streamID: Int(streamID), environmentName: configuration.environmentName,
            status: status, reason: reason, apnsID: apnsID))
    }
}
