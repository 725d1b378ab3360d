import NIOCore

/// Opens an HTTP CONNECT tunnel through a proxy (with basic authentication when configured), then gets out of
/// the way. The proxy's response head is bounded to 16 KiB.
final class HTTPConnectProxyHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let targetHost: String
    private let targetPort: Int
    private let proxyAuthorization: String?
    private let promise: EventLoopPromise<Void>
    private var received: [UInt8] = []
    private var done = false

    var established: EventLoopFuture<Void> { promise.futureResult }

    init(host: String, port: Int, proxy: HTTP2Proxy, eventLoop: any EventLoop) {
        self.targetHost = host
        self.targetPort = port
        if let username = proxy.username {
            self.proxyAuthorization = "Basic " + Base64.encode(Array("\(username):\(proxy.password ?? "")".utf8))
        } else {
            self.proxyAuthorization = nil
        }
        self.promise = eventLoop.makePromise()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let host = targetHost.contains(":") ? "[\(targetHost)]" : targetHost
        let authority = "\(host):\(targetPort)"
        var request = "CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n"
        if let proxyAuthorization { request += "Proxy-Authorization: \(proxyAuthorization)\r\n" }
        request += "\r\n"
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: request)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !done else {
            context.fireChannelRead(data)
            return
        }
        let buffer = unwrapInboundIn(data)
        received.append(contentsOf: buffer.readableBytesView)
        guard let end = headerEnd() else {
            if received.count > 16 * 1024 { fail(context: context, "proxy response too long") }
            return
        }
        let head = String(decoding: received[..<end], as: UTF8.self)
        let statusLine = head.split(separator: "\r\n", maxSplits: 1).first ?? ""
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, parts[1] == "200" else {
            fail(context: context, "proxy refused CONNECT: \(statusLine)")
            return
        }
        done = true
        promise.succeed()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !done { fail(context: context, "proxy closed the connection") }
        context.fireChannelInactive()
    }

    private func headerEnd() -> Int? {
        guard received.count >= 4 else { return nil }
        for i in 0...(received.count - 4)
        where received[i] == 13 && received[i + 1] == 10 && received[i + 2] == 13 && received[i + 3] == 10 {
            return i + 4
        }
        return nil
    }

    private func fail(context: ChannelHandlerContext, _ message: String) {
        guard !done else { return }
        done = true
        promise.fail(ProxyError(message: message))
        context.close(promise: nil)
    }

    struct ProxyError: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}

/// RFC 4648 base64, for the proxy's basic authentication.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let b0 = bytes[index]
            let b1 = index + 1 < bytes.count ? bytes[index + 1] : 0
            let b2 = index + 2 < bytes.count ? bytes[index + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x3) << 4 | b1 >> 4)])
            out.append(index + 1 < bytes.count ? alphabet[Int((b1 & 0xf) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(index + 2 < bytes.count ? alphabet[Int(b2 & 0x3f)] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
