import Crypto
import Foundation
import NorqCore
import Testing
@testable import NorqWebPush

@Suite struct WebPushConfigurationTests {
    static let keys = VAPIDKeyPair.generate()

    static func node(_ pairs: [(String, ConfigNode.Value)], file: String = "norq.yaml") -> ConfigNode {
        var line = 3
        return ConfigNode(.mapping(pairs.map { key, value in
            line += 1
            let location = SourceLocation(file: file, line: line, column: 7)
            return (ConfigNode(.scalar(key, quoted: false), at: location), ConfigNode(value, at: location))
        }), at: SourceLocation(file: file, line: 3, column: 5))
    }

    static func scalar(_ text: String) -> ConfigNode.Value { .scalar(text, quoted: true) }
    static let context = ProviderConfigurationContext(instanceName: "webpush", baseDirectory: NSTemporaryDirectory(), file: "norq.yaml")

    static func parse(_ pairs: [(String, ConfigNode.Value)]) throws(NorqError) -> WebPushConfiguration {
        try WebPushConfiguration.parse(node(pairs), context: context)
    }

    static func expectError(_ code: NorqError.Code, line: Int? = nil, _ pairs: [(String, ConfigNode.Value)],
                            sourceLocation: Testing.SourceLocation = #_sourceLocation) {
        do {
            _ = try parse(pairs)
            Issue.record("accepted", sourceLocation: sourceLocation)
        } catch {
            #expect(error.code == code, sourceLocation: sourceLocation)
            if let line { #expect(error.location?.line == line, sourceLocation: sourceLocation) }
            #expect(error.location?.file == "norq.yaml", sourceLocation: sourceLocation)
            #expect(!error.description.contains(keys.privateKeyBase64URL), sourceLocation: sourceLocation)
        }
    }

    @Test func base64URLKeys() throws {
        let configuration = try Self.parse([
            ("vapidPublicKey", Self.scalar(Self.keys.publicKeyBase64URL)),
            ("vapidPrivateKey", Self.scalar(Self.keys.privateKeyBase64URL)),
            ("subject", Self.scalar("mailto:ops@example.com")),
            ("allowedHosts", .sequence([ConfigNode(Self.scalar("fcm.googleapis.com")), ConfigNode(Self.scalar(".push.apple.com"))])),
            ("ttl", Self.scalar("1h")), ("connections", .scalar("2", quoted: false)), ("padding", .scalar("64", quoted: false)),
        ])
        #expect(configuration.vapidKeys == Self.keys)
        #expect(configuration.subject == "mailto:ops@example.com")
        #expect(configuration.allowedHosts == ["fcm.googleapis.com", "push.apple.com"])
        #expect(configuration.defaultTTL == 3600)
        #expect(configuration.connectionsPerOrigin == 2)
        #expect(configuration.paddingBlock == 64)
        let printed = "\(configuration) \(configuration.summary)"
        #expect(!printed.contains(Self.keys.privateKeyBase64URL))
        #expect(printed.contains(Self.keys.publicKeyBase64URL))
    }

    @Test func pemKeysInlineAndFromFiles() throws {
        let directory = NSTemporaryDirectory() + "norq-webpush-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Self.keys.privateKey.pemRepresentation.write(toFile: directory + "/vapid.pem", atomically: true, encoding: .utf8)
        try (Self.keys.publicKeyBase64URL + "\n").write(toFile: directory + "/vapid.pub", atomically: true, encoding: .utf8)
        let context = ProviderConfigurationContext(instanceName: "web", baseDirectory: directory, file: "norq.yaml")
        let fromFiles = try WebPushConfiguration.parse(Self.node([
            ("vapidPublicKey", Self.scalar("vapid.pub")), ("vapidPrivateKey", Self.scalar("./vapid.pem")),
            ("subject", Self.scalar("https://example.com/contact")),
        ]), context: context)
        #expect(fromFiles.vapidKeys == Self.keys)
        #expect(fromFiles.keySource == "./vapid.pem")
        let inlinePEM = try Self.parse([
            ("vapidPublicKey", Self.scalar(Self.keys.privateKey.publicKey.pemRepresentation)),
            ("vapidPrivateKey", Self.scalar(Self.keys.privateKey.pemRepresentation)),
            ("subject", Self.scalar("mailto:ops@example.com")),
        ])
        #expect(inlinePEM.vapidKeys == Self.keys)
    }

    @Test func errorsWithLocations() {
        let other = VAPIDKeyPair.generate()
        let good: [(String, ConfigNode.Value)] = [
            ("vapidPublicKey", Self.scalar(Self.keys.publicKeyBase64URL)),
            ("vapidPrivateKey", Self.scalar(Self.keys.privateKeyBase64URL)),
            ("subject", Self.scalar("mailto:ops@example.com")),
        ]
        // Mismatched pair: reported at the public key's line.
        Self.expectError(.webPushInvalidVAPIDKey, line: 4, [
            ("vapidPublicKey", Self.scalar(other.publicKeyBase64URL)), good[1], good[2]])
        Self.expectError(.webPushInvalidVAPIDKey, line: 5, [
            good[0], ("vapidPrivateKey", Self.scalar(String(repeating: "A", count: 43))), good[2]])
        Self.expectError(.webPushInvalidVAPIDKey, line: 4, [
            ("vapidPublicKey", Self.scalar(String(repeating: "B", count: 87))), good[1], good[2]])
        for subject in ["ops@example.com", "mailto: <ops@example.com>", "mailto:admin@localhost", "http://example.com"] {
            Self.expectError(.webPushInvalidSubject, line: 6, [good[0], good[1], ("subject", Self.scalar(subject))])
        }
        Self.expectError(.configMissingKey, [good[0], good[1]])
        Self.expectError(.configUnknownKey, line: 7, good + [("vapidKey", Self.scalar("x"))])
        Self.expectError("config/key-not-found", line: 5, [good[0], ("vapidPrivateKey", Self.scalar("./missing.pem")), good[2]])
        Self.expectError(.webPushInvalidTTL, line: 7, good + [("ttl", Self.scalar("100000000000s"))])
        Self.expectError(.configInvalidValue, line: 7, good + [("connections", .scalar("0", quoted: false))])
    }

    @Test func environmentFallback() throws {
        let context = ProviderConfigurationContext(instanceName: "webpush", baseDirectory: ".")
        #expect(try WebPushConfiguration.fromEnvironment(["HOME": "/root"], context: context) == nil)
        let configuration = try WebPushConfiguration.fromEnvironment([
            "NORQ_WEBPUSH_VAPID_PUBLIC_KEY": Self.keys.publicKeyBase64URL,
            "NORQ_WEBPUSH_VAPID_PRIVATE_KEY": Self.keys.privateKeyBase64URL,
            "NORQ_WEBPUSH_SUBJECT": "mailto:ops@example.com",
            "NORQ_WEBPUSH_ALLOWED_HOSTS": "fcm.googleapis.com, push.apple.com",
        ], context: context)
        #expect(configuration?.origin == "env")
        #expect(configuration?.allowedHosts == ["fcm.googleapis.com", "push.apple.com"])
        do {
            _ = try WebPushConfiguration.fromEnvironment(["NORQ_WEBPUSH_SUBJECT": "mailto:ops@example.com"], context: context)
            Issue.record("accepted")
        } catch {
            #expect(error.code == .configMissingKey)
            #expect(error.location?.file == "env NORQ_WEBPUSH_VAPID_PUBLIC_KEY")
        }
        do {
            _ = try WebPushConfiguration.fromEnvironment(["NORQ_WEBPUSH_SUBJEKT": "x"], context: context)
            Issue.record("accepted")
        } catch {
            #expect(error.code == .configUnknownKey)
        }
    }
}
