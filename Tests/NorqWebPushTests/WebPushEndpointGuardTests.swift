import NorqCore
import Testing
@testable import NorqWebPush

@Suite struct WebPushEndpointGuardTests {
    static let refused: [(String, IPAddressClass)] = [
        ("127.0.0.1", .loopback), ("127.255.1.2", .loopback), ("::1", .loopback),
        ("10.0.0.1", .private), ("172.16.0.1", .private), ("172.31.255.255", .private), ("192.168.1.1", .private),
        ("fc00::1", .private), ("fd12:3456::1", .private), ("fec0::1", .private), ("64:ff9b:1::1", .private),
        ("100.64.0.1", .sharedAddressSpace), ("100.127.255.254", .sharedAddressSpace),
        ("169.254.169.254", .linkLocal), ("fe80::1", .linkLocal), ("febf::1", .linkLocal),
        ("224.0.0.1", .multicast), ("239.255.255.250", .multicast), ("ff02::1", .multicast),
        ("0.0.0.0", .unspecified), ("::", .unspecified),
        ("0.1.2.3", .reserved), ("192.0.0.8", .reserved), ("192.0.2.1", .reserved), ("198.18.0.1", .reserved),
        ("198.51.100.7", .reserved), ("203.0.113.9", .reserved), ("240.0.0.1", .reserved),
        ("255.255.255.255", .reserved), ("2001:db8::1", .reserved), ("100::1", .reserved), ("2001::1", .reserved),
        ("::2", .reserved), ("4000::1", .reserved),
        // IPv4 inside IPv6 keeps its class.
        ("::ffff:127.0.0.1", .loopback), ("::ffff:7f00:1", .loopback), ("::ffff:169.254.169.254", .linkLocal),
        ("::ffff:10.1.2.3", .private), ("64:ff9b::a9fe:a9fe", .linkLocal), ("2002:7f00:1::1", .loopback),
        ("2002:c0a8:101::", .private),
    ]

    static let allowed = ["8.8.8.8", "142.250.74.106", "172.32.0.1", "100.128.0.1", "192.169.0.1", "2607:f8b0::200e",
                          "2a00:1450:4001:80b::200a", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"]

    @Test func classifiesEveryRefusedClass() {
        for (text, expected) in Self.refused {
            guard let address = IPAddress(parsing: text) else {
                Issue.record("\(text) did not parse")
                continue
            }
            #expect(address.classification == expected, "\(text)")
            #expect(!WebPushEndpointGuard().allows(address: address), "\(text)")
            #expect(WebPushEndpointGuard(allowPrivateEndpoints: true).allows(address: address), "\(text)")
        }
    }

    @Test func allowsGlobalAddresses() {
        for text in Self.allowed {
            let address = IPAddress(parsing: text)
            #expect(address?.classification == .global, "\(text)")
        }
    }

    @Test func parsing() {
        #expect(IPAddress(parsing: "1.2.3.4")?.bytes == [1, 2, 3, 4])
        #expect(IPAddress(parsing: "::ffff:1.2.3.4")?.bytes == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 1, 2, 3, 4])
        #expect(IPAddress(parsing: "fe80::1%eth0")?.classification == .linkLocal)
        for bad in ["", "1.2.3", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "1.2.3.-4", "1:2:3:4:5:6:7:8:9", "1::2::3",
                    "12345::", "g::1", ":::", "localhost", "1.2.3.4 "] {
            #expect(IPAddress(parsing: bad) == nil, "\(bad)")
        }
    }

    @Test func literalEndpointsRefusedBeforeAnyNetwork() throws {
        let guardDefault = WebPushEndpointGuard()
        for host in ["127.0.0.1", "[::1]", "169.254.169.254", "10.0.0.7", "[::ffff:127.0.0.1]", "[fe80::1]",
                     "100.64.1.1", "224.1.1.1", "0.0.0.0"] {
            let endpoint = try WebPushEndpoint(parsing: "https://\(host)/push/abc")
            do {
                try guardDefault.check(endpoint)
                Issue.record("\(host) allowed")
            } catch {
                #expect(error.code == .webPushEndpointNotAllowed)
            }
            try WebPushEndpointGuard(allowPrivateEndpoints: true).check(endpoint)
        }
        try guardDefault.check(try WebPushEndpoint(parsing: "https://8.8.8.8/x"))
        // A host name is checked on its resolved address by the transport, not here.
        try guardDefault.check(try WebPushEndpoint(parsing: "https://localhost/x"))
    }

    @Test func allowedHostSuffixes() throws {
        let guardHosts = WebPushEndpointGuard(allowedHosts: ["fcm.googleapis.com", "push.apple.com"])
        try guardHosts.check(try WebPushEndpoint(parsing: "https://fcm.googleapis.com/fcm/send/x"))
        try guardHosts.check(try WebPushEndpoint(parsing: "https://web.push.apple.com/x"))
        for url in ["https://evilfcm.googleapis.com/x", "https://fcm.googleapis.com.attacker.net/x",
                    "https://updates.push.services.mozilla.com/x"] {
            do {
                try guardHosts.check(try WebPushEndpoint(parsing: url))
                Issue.record("\(url) allowed")
            } catch {
                #expect(error.code == .webPushEndpointNotAllowed)
            }
        }
    }

    @Test func endpointParsing() throws {
        let e = try WebPushEndpoint(parsing: "https://Push.Example.net/push/JzLQ3raZ?x=1#frag")
        #expect(e.host == "push.example.net")
        #expect(e.port == 443)
        #expect(e.path == "/push/JzLQ3raZ?x=1")
        #expect(e.origin == "https://push.example.net")
        let p = try WebPushEndpoint(parsing: "https://127.0.0.1:8443")
        #expect(p.path == "/")
        #expect(p.origin == "https://127.0.0.1:8443")
        let v6 = try WebPushEndpoint(parsing: "https://[2001:db8::1]:444/p")
        #expect(v6.host == "2001:db8::1")
        #expect(v6.authority == "[2001:db8::1]:444")
        for bad in ["http://push.example.net/x", "push.example.net/x", "https:///x", "https://user@host/x",
                    "https://host:0/x", "https://host:99999/x", "https://ho st/x", "ftp://x", "https://[::1/x",
                    "https://host:abc/", "https://hÃ¶st/x", ""] {
            do {
                _ = try WebPushEndpoint(parsing: bad)
                Issue.record("\(bad) accepted")
            } catch {
                #expect(error.code == .webPushInvalidEndpoint, "\(bad)")
            }
        }
    }
}
