/// An IPv4 or IPv6 address as bytes, parsed without the system resolver (pure, so it is unit-tested).
public struct IPAddress: Sendable, Hashable, CustomStringConvertible {
    /// 4 bytes (IPv4) or 16 bytes (IPv6), network order.
    public let bytes: [UInt8]

    public var isIPv6: Bool { bytes.count == 16 }

    public init?(bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    /// Parses dotted-quad IPv4 (exactly four decimal parts 0-255, no leading zeros, which some resolvers read as
    /// octal) or IPv6 text (with `::`, an embedded dotted quad, and an optional `%zone` that is ignored).
    public init?(parsing text: String) {
        if let v4 = Self.parseIPv4(Substring(text)) {
            bytes = v4
        } else if let v6 = Self.parseIPv6(Substring(text)) {
            bytes = v6
        } else {
            return nil
        }
    }

    static func parseIPv4(_ text: Substring) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var out: [UInt8] = []
        for part in parts {
            guard !part.isEmpty, part.count <= 3, part.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
                  part.count == 1 || part.first != "0", let value = Int(part), value <= 255 else { return nil }
            out.append(UInt8(value))
        }
        return out
    }

    static func parseIPv6(_ input: Substring) -> [UInt8]? {
        var text = input
        if let percent = text.firstIndex(of: "%") { text = text[..<percent] }
        guard text.utf8.contains(UInt8(ascii: ":")), text.utf8.count <= 45 else { return nil }
        var head: [UInt16] = []
        var tail: [UInt16] = []
        var sawDoubleColon = false
        var halves: [String] = []
        let utf8 = Array(text.utf8)
        var start = 0
        var i = 0
        while i + 1 < utf8.count {
            if utf8[i] == 58 && utf8[i + 1] == 58 {
                halves.append(String(decoding: utf8[start..<i], as: UTF8.self))
                start = i + 2
                i += 2
            } else {
                i += 1
            }
        }
        halves.append(String(decoding: utf8[start...], as: UTF8.self))
        guard halves.count <= 2 else { return nil }
        sawDoubleColon = halves.count == 2
        func groups(_ part: String, allowIPv4: Bool) -> [UInt16]? {
            if part.isEmpty { return [] }
            var result: [UInt16] = []
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            for (index, piece) in pieces.enumerated() {
                if index == pieces.count - 1, allowIPv4, piece.utf8.contains(UInt8(ascii: ".")) {
                    guard let v4 = parseIPv4(piece) else { return nil }
                    result.append(UInt16(v4[0]) << 8 | UInt16(v4[1]))
                    result.append(UInt16(v4[2]) << 8 | UInt16(v4[3]))
                    continue
                }
                guard (1...4).contains(piece.count), let value = UInt16(piece, radix: 16) else { return nil }
                result.append(value)
            }
            return result
        }
        if sawDoubleColon {
            guard let h = groups(halves[0], allowIPv4: false), let t = groups(halves[1], allowIPv4: true) else { return nil }
            guard h.count + t.count <= 7 else { return nil }
            head = h
            tail = t
        } else {
            guard let all = groups(halves[0], allowIPv4: true), all.count == 8 else { return nil }
            head = all
        }
        let words = head + [UInt16](repeating: 0, count: 8 - head.count - tail.count) + tail
        var out: [UInt8] = []
        out.reserveCapacity(16)
        for word in words {
            out.append(UInt8(word >> 8))
            out.append(UInt8(word & 0xff))
        }
        return out
    }

    public var description: String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        var words: [String] = []
        for i in stride(from: 0, to: 16, by: 2) {
            words.append(String(UInt16(bytes[i]) << 8 | UInt16(bytes[i + 1]), radix: 16))
        }
        return words.joined(separator: ":")
    }
}

/// What kind of address an IP address is, for the server-side request forgery guard. An open set.
public struct IPAddressClass: Sendable, Hashable, RawRepresentable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Globally routable unicast: the only class a push may go to by default.
    public static let global = IPAddressClass(rawValue: "global")
    /// `127.0.0.0/8`, `::1`.
    public static let loopback = IPAddressClass(rawValue: "loopback")
    /// RFC 1918 (`10/8`, `172.16/12`, `192.168/16`), IPv6 unique local `fc00::/7` and site-local `fec0::/10`,
    /// NAT64 local-use `64:ff9b:1::/48`.
    public static let `private` = IPAddressClass(rawValue: "private")
    /// Carrier-grade NAT, RFC 6598 `100.64.0.0/10`.
    public static let sharedAddressSpace = IPAddressClass(rawValue: "shared-address-space (CGNAT)")
    /// `169.254.0.0/16` (cloud metadata services live here), `fe80::/10`.
    public static let linkLocal = IPAddressClass(rawValue: "link-local")
    /// `224.0.0.0/4`, `ff00::/8`.
    public static let multicast = IPAddressClass(rawValue: "multicast")
    /// `0.0.0.0`, `::`.
    public static let unspecified = IPAddressClass(rawValue: "unspecified")
    /// Everything else that is not global unicast: `0/8`, `192.0.0/24`, documentation and benchmarking
    /// ranges, `240/4`, broadcast, IPv4-compatible IPv6, discard `100::/64`, `2001::/23`, `2001:db8::/32`, and
    /// IPv6 outside `2000::/3`.
    public static let reserved = IPAddressClass(rawValue: "reserved")

    public var description: String { rawValue }
}

extension IPAddress {
    /// Classifies the address. IPv4 inside IPv6 (mapped `::ffff:0:0/96`, NAT64 `64:ff9b::/96`, 6to4
    /// `2002::/16`) is classified by the IPv4 address it carries, so a mapped loopback stays loopback.
    public var classification: IPAddressClass {
        bytes.count == 4 ? Self.classifyIPv4(bytes[0], bytes[1], bytes[2], bytes[3]) : classifyIPv6()
    }

    static func classifyIPv4(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) -> IPAddressClass {
        switch (a, b, c) {
        case (0, 0, 0) where d == 0: return .unspecified
        case (0, _, _): return .reserved
        case (10, _, _): return .private
        case (100, 64...127, _): return .sharedAddressSpace
        case (127, _, _): return .loopback
        case (169, 254, _): return .linkLocal
        case (172, 16...31, _): return .private
        case (192, 0, 0), (192, 0, 2), (192, 88, 99): return .reserved
        case (192, 168, _): return .private
        case (198, 18...19, _), (198, 51, 100), (203, 0, 113): return .reserved
        case (224...239, _, _): return .multicast
        case (240...255, _, _): return .reserved
        default: return .global
        }
    }

    func classifyIPv6() -> IPAddressClass {
        let b = bytes
        let firstTen = b[0..<10].allSatisfy { $0 == 0 }
        if firstTen && b[10] == 0xff && b[11] == 0xff {
            return Self.classifyIPv4(b[12], b[13], b[14], b[15])  // ::ffff:a.b.c.d
        }
        if b[0..<12].allSatisfy({ $0 == 0 }) {
            if b[12..<15].allSatisfy({ $0 == 0 }) {
                if b[15] == 0 { return .unspecified }
                if b[15] == 1 { return .loopback }
            }
            return .reserved  // IPv4-compatible (deprecated)
        }
        if b[0] == 0x00, b[1] == 0x64, b[2] == 0xff, b[3] == 0x9b {
            if b[4..<12].allSatisfy({ $0 == 0 }) { return Self.classifyIPv4(b[12], b[13], b[14], b[15]) }  // NAT64
            if b[4] == 0x00, b[5] == 0x01 { return .private }  // 64:ff9b:1::/48 local-use NAT64
        }
        if b[0] == 0x20, b[1] == 0x02 { return Self.classifyIPv4(b[2], b[3], b[4], b[5]) }  // 6to4
        if b[0] == 0x01, b[1] == 0x00, b[2..<8].allSatisfy({ $0 == 0 }) { return .reserved }  // 100::/64 discard
        if b[0] == 0x20, b[1] == 0x01, b[2] <= 0x01 { return .reserved }  // 2001::/23 (Teredo, ORCHID, ...)
        if b[0] == 0x20, b[1] == 0x01, b[2] == 0x0d, b[3] == 0xb8 { return .reserved }  // 2001:db8::/32
        if b[0] & 0xfe == 0xfc { return .private }  // fc00::/7
        if b[0] == 0xfe, b[1] & 0xc0 == 0x80 { return .linkLocal }  // fe80::/10
        if b[0] == 0xfe, b[1] & 0xc0 == 0xc0 { return .private }  // fec0::/10 site-local
        if b[0] == 0xff { return .multicast }
        if b[0] & 0xe0 != 0x20 { return .reserved }  // outside 2000::/3
        return .global
    }
}
