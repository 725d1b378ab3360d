@testable import NorqTesting
import Testing

@Suite("Emulator internals")
struct EmulatorInternalsTests {
    @Test("JSON syntax checker accepts objects only", arguments: [
        (#"{"aps":{"alert":"hi","badge":1}}"#, true),
        (#"  {"a":[1,2.5,-3e2,true,false,null,"\u00e9\n"]} "#, true),
        ("{}", true),
        ("[]", false),
        ("\"x\"", false),
        (#"{"a":}"#, false),
        (#"{"a":1,}"#, false),
        (#"{"a":01}"#, false),
        (#"{"a":"x"} x"#, false),
        (#"{"a":"\q"}"#, false),
        ("{", false),
        ("", false),
    ])
    func json(_ input: String, _ valid: Bool) {
        #expect(JSONSyntax.isObject(Array(input.utf8)) == valid)
    }

    @Test("generated UUIDs are canonical lowercase version 4 and distinct")
    func uuids() {
        var g = FastUUIDGenerator(seed: 42)
        let a = g.uuidString(), b = g.uuidString()
        #expect(a != b)
        #expect(FastUUIDGenerator.isUUID(a))
        #expect(a == a.lowercased())
        #expect(Array(a)[14] == "4")
        #expect("89ab".contains(Array(a)[19]))
        #expect(!FastUUIDGenerator.isUUID("0a1b2c3d-0000-4000-8000-00000000abc"))
        #expect(!FastUUIDGenerator.isUUID("0a1b2c3d00000-4000-8000-00000000abcd"))
    }

    @Test("the fault RNG is deterministic for a seed")
    func seeded() {
        var a = FastUUIDGenerator(seed: 7), b = FastUUIDGenerator(seed: 7)
        #expect((0..<5).map { _ in a.next() } == (0..<5).map { _ in b.next() })
    }

    @Test("topic rules without a bundle list still check the push-type suffix")
    func topicsWithoutBundles() {
        let rules = APNsRequestRules(bundleIDs: nil, topicRequired: true)
        func check(_ type: String, _ topic: String?) -> String? {
            rules.checkHeaders(apnsID: nil, pushType: type, topic: topic, priority: nil, expiration: nil,
                               collapseID: nil, body: [UInt8(ascii: "{"), UInt8(ascii: "}")], bodyIsJSONObject: { true })?.reason
        }
        #expect(check("alert", "any.bundle") == nil)
        #expect(check("voip", "any.bundle.voip") == nil)
        #expect(check("pushtotalk", "any.bundle.voip-ptt") == nil)
        #expect(check("voip", "any.bundle.voip-ptt") == "DeviceTokenNotForTopic")
        #expect(check("alert", "any.bundle.push-type.widgets") == "DeviceTokenNotForTopic")
        #expect(check("mdm", "com.apple.mgmt.External.1234") == nil)
        #expect(check("alert", nil) == "MissingTopic")
    }
}
