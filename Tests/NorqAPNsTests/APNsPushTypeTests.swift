import NorqAPNs
import NorqCore
import Testing

@Suite struct APNsPushTypeTests {
    @Test func elevenTypesWithTheirSuffixes() {
        let expected: [(String, String)] = [
            ("alert", ""), ("background", ""), ("voip", ".voip"), ("complication", ".complication"),
            ("fileprovider", ".pushkit.fileprovider"), ("mdm", ""), ("location", ".location-query"),
            ("liveactivity", ".push-type.liveactivity"), ("pushtotalk", ".voip-ptt"),
            ("widgets", ".push-type.widgets"), ("controls", ".push-type.controls"),
        ]
        #expect(APNsPushType.all.count == 11)
        for (name, suffix) in expected {
            let type = APNsPushType.named(name)
            #expect(type?.topicSuffix == suffix, "\(name)")
            #expect(type?.topic(bundleID: "com.a") == "com.a" + suffix)
        }
        #expect(APNsPushType.named("silent") == nil)
    }

    @Test func rulesPerType() {
        #expect(APNsPushType.background.allowedPriorities == [5])
        #expect(APNsPushType.background.defaultPriority == 5)
        #expect(APNsPushType.pushtotalk.allowedPriorities == [10])
        #expect(APNsPushType.pushtotalk.requiresZeroExpiration)
        #expect(APNsPushType.voip.payloadLimit == 5120)
        #expect(APNsPushType.alert.payloadLimit == 4096)
        #expect(APNsPushType.location.authConstraint == .tokenOnly)
        #expect(APNsPushType.widgets.authConstraint == .tokenOnly)
        #expect(APNsPushType.mdm.authConstraint == .certificateOnly)
        #expect(APNsPushType.alert.authConstraint == .any)
    }

    @Test func inference() throws {
        var content = PushContent()
        content.ios.contentAvailable = true
        #expect(try APNsPushType.resolve(for: content) == .background)
        content.ios.badge = 3
        #expect(try APNsPushType.resolve(for: content) == .alert)
        #expect(try APNsPushType.resolve(for: PushContent(title: "Hi")) == .alert)
        var activity = PushContent()
        activity.ios.event = "update"
        #expect(try APNsPushType.resolve(for: activity) == .liveactivity)
        var named = PushContent(title: "x")
        named.headers.pushType = "voip"
        #expect(try APNsPushType.resolve(for: named) == .voip)
        named.headers.pushType = "silent"
        #expect(errorCode { _ = try APNsPushType.resolve(for: named) } == "apns/invalid-push-type")
        let native = PushContent(nativePayload: ["aps": ["content-available": 1]])
        #expect(try APNsPushType.resolve(for: native) == .background)
    }
}
