import NorqCore
import Testing

/// A token in logs and messages: never whole. A Web Push endpoint is a capability URL (its path is the secret):
/// its origin and a short digest are shown, never the path.
@Suite struct PushTokenRedactionTests {
    @Test func deviceTokensShowTheirFirstEightCharacters() {
        #expect(PushToken.redact("a1b2c3d4e5f60718293a4b5c6d7e8f90") == "a1b2c3d4…")
        #expect(PushToken.redact("dQw4w9WgXcQ:APA91bHun4MxP5eg") == "dQw4w9Wg…")
        #expect(PushToken.redact("short") == "*****")
    }

    @Test func webEndpointsShowTheOriginAndADigestNeverThePath() {
        let secret = "cRmVNSZMDD0:APA91bHqgYOmU7rZUm3WUlQd9RFvQxTkt4nbdQ2uiJjSHQ1q2GIeHSHvXcd1lmJ4LNZe"
        let endpoint = "https://fcm.googleapis.com/fcm/send/" + secret
        let shown = PushToken.redact(endpoint)
        #expect(shown.hasPrefix("https://fcm.googleapis.com/…["), "\(shown)")
        #expect(shown.hasSuffix("]"))
        #expect(shown.count == "https://fcm.googleapis.com/…[".count + 8 + 1, "8 hex digits: \(shown)")
        #expect(!shown.contains("fcm/send") && !shown.contains(secret.prefix(6)), "the path never shows: \(shown)")
        // Stable for one endpoint, different for another subscription of the same service.
        #expect(PushToken.redact(endpoint) == shown)
        #expect(PushToken.redact(endpoint + "x") != shown)
        #expect(PushToken(token: endpoint, platform: .web).redacted == shown)
        // A port stays (it is part of the origin); user info and query never show.
        let local = PushToken.redact("https://user:pw@127.0.0.1:8443/push/sub1?x=secret")
        #expect(local.hasPrefix("https://127.0.0.1:8443/…["), "\(local)")
        #expect(!local.contains("pw") && !local.contains("secret") && !local.contains("sub1"), "\(local)")
        #expect(PushToken.redact("https://[::1]:9/p").hasPrefix("https://[::1]:9/…["))
    }

    @Test func aLongHostIsCut() {
        let host = String(repeating: "h", count: 200) + ".example"
        let shown = PushToken.redact("https://\(host)/p/secret")
        #expect(shown.hasPrefix("https://" + String(repeating: "h", count: 64) + "…/…["), "\(shown)")
    }

    @Test func errorsAboutAWebTokenShowTheRedactedOrigin() {
        do {
            _ = try PushToken(json: try JSONValue(parsing: #"{"token": "https://push.example.net/push/s3cr3t", "platform": "web"}"#))
            Issue.record("a web token without keys must be refused")
        } catch {
            #expect(error.code.rawValue == "provider/missing-vapid-keys")
            #expect(error.message.contains("https://push.example.net/…["), "\(error.message)")
            #expect(!error.message.contains("s3cr3t"))
        }
    }
}
