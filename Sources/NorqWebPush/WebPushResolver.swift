import NIOCore
import NIOPosix
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Resolves a host name to every address the system resolver gives (`getaddrinfo` on NIO's thread pool, so no
/// event loop blocks), for the SSRF guard of transports that cannot check the address they connect to.
enum WebPushResolver {
    /// Every address of `host` (an IP literal is returned as is); nil when the name does not resolve.
    static func resolve(_ host: String, on eventLoop: any EventLoop) -> EventLoopFuture<[IPAddress]?> {
        if let literal = IPAddress(parsing: host) { return eventLoop.makeSucceededFuture([literal]) }
        return NIOThreadPool.singleton.runIfActive(eventLoop: eventLoop) { resolveBlocking(host) }
    }

    static func resolveBlocking(_ host: String) -> [IPAddress]? {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc) || canImport(Musl)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &result) == 0, let first = result else { return nil }
        defer { freeaddrinfo(first) }
        var addresses: [IPAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let info = cursor, addresses.count < 64 {
            if let sockaddr = info.pointee.ai_addr {
                switch info.pointee.ai_family {
                case AF_INET:
                    sockaddr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                        var raw = v4.pointee.sin_addr
                        let bytes = withUnsafeBytes(of: &raw) { Array($0) }
                        if let address = IPAddress(bytes: bytes) { addresses.append(address) }
                    }
                case AF_INET6:
                    sockaddr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                        var raw = v6.pointee.sin6_addr
                        let bytes = withUnsafeBytes(of: &raw) { Array($0) }
                        if let address = IPAddress(bytes: bytes) { addresses.append(address) }
                    }
                default: break
                }
            }
            cursor = info.pointee.ai_next
        }
        return addresses.isEmpty ? nil : addresses
    }
}
