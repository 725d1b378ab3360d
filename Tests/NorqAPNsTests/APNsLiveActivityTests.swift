import NorqAPNs
import NorqCore
import Testing

/// Live Activity payloads: the typed API, and the checks on typed and native (`push.json`) payloads.
@Suite struct APNsLiveActivityTests {
    @Test func typedStartUpdateEnd() throws {
        let start = APNsNotification.liveActivityStart(
            attributesType: "DeliveryAttributes", attributes: ["orderId": "42"], contentState: ["eta": 12],
            staleDate: 1_800_003_600, relevanceScore: 0.5,
            alert: APNsLiveActivityAlert(title: "On its way", body: "Order 42", sound: PushSound(name: "chime.aiff")),
            inputPushChannel: "dHN0LXNyY2gtY2hubA==")
        #expect(try payloadText(start.content, .liveactivity) ==
            #"{"aps":{"timestamp":1800000000,"event":"start","content-state":{"eta":12},"stale-date":1800003600,"attributes-type":"DeliveryAttributes","attributes":{"orderId":"42"},"input-push-channel":"dHN0LXNyY2gtY2hubA==","alert":{"title":"On its way","body":"Order 42"},"sound":"chime.aiff","relevance-score":0.5}}"#)
        let update = APNsNotification.liveActivityUpdate(contentState: ["eta": 5], timestamp: 1_799_999_999)
        #expect(try payloadText(update.content, .liveactivity) ==
            #"{"aps":{"timestamp":1799999999,"event":"update","content-state":{"eta":5}}}"#)
        let end = APNsNotification.liveActivityEnd(dismissalDate: 1_800_000_600)
        #expect(try payloadText(end.content, .liveactivity) ==
            #"{"aps":{"timestamp":1800000000,"event":"end","dismissal-date":1800000600}}"#)
        #expect(try APNsPushType.resolve(for: end.content) == .liveactivity)
        let token = APNsNotification.liveActivityStart(attributesType: "A", attributes: [:], contentState: [:],
                                                       inputPushToken: true)
        #expect(try payloadText(token.content, .liveactivity).contains(#""input-push-token":1"#))
    }

    @Test func deviceRequestUsesSuffixedTopic() throws {
        let provider = try Fixtures.provider()
        let request = try provider.prepare(APNsNotification.liveActivityUpdate(contentState: ["eta": 1]).priority(5).content,
                                           for: Fixtures.iosToken(), options: SendOptions())
        #expect(request.header("apns-topic") == "com.example.app.push-type.liveactivity")
        #expect(request.header("apns-push-type") == "liveactivity")
        #expect(request.header("apns-priority") == "5")
        #expect(errorCode { _ = try provider.prepare(APNsNotification.liveActivityUpdate(contentState: [:]).priority(1).content,
                                                     for: Fixtures.iosToken(), options: SendOptions()) } == "apns/bad-priority")
    }

    @Test func typedValidation() throws {
        func code(_ build: (inout PushContent) -> Void) -> String? {
            var content = APNsNotification.liveActivityUpdate(contentState: ["a": 1]).content
            build(&content)
            return errorCode { _ = try payloadText(content, .liveactivity) }
        }
        #expect(code { $0.ios.event = nil } == "apns/invalid-live-activity")
        #expect(code { $0.ios.event = "pause" } == "apns/invalid-live-activity")
        #expect(code { $0.ios.attributes = ["x": 1] } == "apns/invalid-live-activity")
        #expect(code { $0.ios.attributesType = "X" } == "apns/invalid-live-activity")
        #expect(code { $0.ios.contentState = nil } == "apns/invalid-live-activity")
        #expect(code { $0.ios.inputPushChannel = "abc=" } == "apns/invalid-live-activity")
        #expect(code {
            $0.ios.event = "start"; $0.ios.attributesType = "A"; $0.ios.attributes = [:]
            $0.ios.inputPushToken = true; $0.ios.inputPushChannel = "abc="
        } == "apns/invalid-live-activity")
        #expect(code { $0.ios.event = "start" } == "apns/invalid-live-activity")
        #expect(code { _ in } == nil)
    }

    @Test func nativePayloadValidation() throws {
        func code(_ json: String) -> String? {
            var content = PushContent()
            content.headers.pushType = "liveactivity"
            do {
                content.nativePayload = try JSONValue(parsing: Array(json.utf8))
            } catch {
                return "unparsable"
            }
            return errorCode { _ = try payloadText(content, .liveactivity) }
        }
        #expect(code(#"{"aps":{"timestamp":1,"event":"update","content-state":{}}}"#) == nil)
        #expect(code(#"{"aps":{"timestamp":1,"event":"end"}}"#) == nil)
        #expect(code(#"{"aps":{"event":"update","content-state":{}}}"#) == "apns/invalid-live-activity")      // no timestamp
        #expect(code(#"{"aps":{"timestamp":"soon","event":"update","content-state":{}}}"#) == "apns/invalid-live-activity")
        #expect(code(#"{"aps":{"timestamp":1,"content-state":{}}}"#) == "apns/invalid-live-activity")         // no event
        #expect(code(#"{"aps":{"timestamp":1,"event":"stop"}}"#) == "apns/invalid-live-activity")
        #expect(code(#"{"aps":{"timestamp":1,"event":"update","content-state":{},"attributes":{}}}"#) == "apns/invalid-live-activity")
        #expect(code(#"{"aps":{"timestamp":1,"event":"start","content-state":{},"attributes-type":"A","attributes":{},"input-push-token":1,"input-push-channel":"abc="}}"#)
                == "apns/invalid-live-activity")
        #expect(code(#"{"aps":{"timestamp":1,"event":"start","content-state":{},"attributes-type":"A","attributes":{},"input-push-channel":"abc="}}"#)
                == nil)
        #expect(code(#"{"aps":{"timestamp":1,"event":"update"}}"#) == "apns/invalid-live-activity")            // no content-state
        #expect(code(#"{"noaps":1}"#) == "apns/invalid-live-activity")
    }
}
