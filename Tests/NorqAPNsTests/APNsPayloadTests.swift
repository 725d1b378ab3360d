import NorqAPNs
import NorqCore
import Testing

@Suite struct APNsPayloadTests {
    @Test func alertMapsEveryKeyInOrder() throws {
        var content = PushContent(title: "Order shipped", body: "On its way", image: "https://cdn/x.png",
                                  actionURL: "https://app/track", data: ["orderId": "42"])
        content.ios.subtitle = "Today"
        content.ios.sound = PushSound(name: "default")
        content.ios.badge = 1
        content.ios.threadID = "orders"
        content.ios.category = "ORDER"
        content.ios.targetContentID = "win"
        content.ios.interruptionLevel = "time-sensitive"
        content.ios.relevanceScore = 0.5
        content.ios.filterCriteria = "work"
        content.ios.locKey = "BODY"
        content.ios.locArgs = ["a"]
        let text = try payloadText(content, .alert)
        #expect(text == #"{"aps":{"alert":{"title":"Order shipped","subtitle":"Today","body":"On its way","loc-key":"BODY","loc-args":["a"]},"badge":1,"sound":"default","thread-id":"orders","category":"ORDER","mutable-content":1,"target-content-id":"win","interruption-level":"time-sensitive","relevance-score":0.5,"filter-criteria":"work"},"orderId":"42","image":"https://cdn/x.png","url":"https://app/track"}"#)
    }

    @Test func criticalSoundAndDataNamesWin() throws {
        var content = PushContent(title: "Alarm", image: "img", actionURL: "u", data: ["image": "mine", "url": "mine-too"])
        content.ios.sound = PushSound(name: "alarm.caf", critical: true, volume: 0.8)
        content.ios.mutableContent = false
        let text = try payloadText(content, .alert)
        #expect(text == #"{"aps":{"alert":{"title":"Alarm"},"sound":{"critical":1,"name":"alarm.caf","volume":0.8}},"image":"mine","url":"mine-too"}"#)
    }

    @Test func backgroundWidgetsControls() throws {
        var content = PushContent(data: ["sync": true])
        content.ios.contentAvailable = true
        #expect(try payloadText(content, .background) == #"{"aps":{"content-available":1},"sync":true}"#)
        #expect(try payloadText(PushContent(), .widgets) == #"{"aps":{"content-changed":true}}"#)
        #expect(try payloadText(PushContent(), .controls) == #"{"aps":{"content-changed":true}}"#)
        #expect(errorCode { _ = try payloadText(PushContent(title: "visible"), .background) } == "apns/invalid-payload")
    }

    @Test func nativePayloadIsSentAsIs() throws {
        let native: JSONValue = ["aps": ["alert": "hi"], "z": 1, "a": 2]
        #expect(try payloadText(PushContent(title: "ignored", nativePayload: native), .alert) == #"{"aps":{"alert":"hi"},"z":1,"a":2}"#)
        #expect(errorCode { _ = try payloadText(PushContent(nativePayload: [1, 2]), .alert) } == "apns/invalid-payload")
    }

    @Test func liveActivityDefaultsAndValidation() throws {
        let update = APNsNotification.liveActivity(event: "update", contentState: ["eta": 5]).content
        #expect(try payloadText(update, .liveactivity, sendTime: 1234) == #"{"aps":{"timestamp":1234,"event":"update","content-state":{"eta":5}}}"#)
        let start = APNsNotification.liveActivity(event: "start", contentState: ["eta": 5], timestamp: 99,
                                                  attributesType: "Delivery", attributes: ["id": "7"],
                                                  inputPushToken: true, alertTitle: "Started").content
        #expect(try payloadText(start, .liveactivity) == #"{"aps":{"timestamp":99,"event":"start","content-state":{"eta":5},"attributes-type":"Delivery","attributes":{"id":"7"},"input-push-token":1,"alert":{"title":"Started"}}}"#)
        let bad: [PushContent] = [
            APNsNotification.liveActivity(event: "pause", contentState: [:]).content,
            APNsNotification.liveActivity(event: "update", contentState: [:], attributesType: "A", attributes: [:]).content,
            APNsNotification.liveActivity(event: "start", contentState: [:]).content,
            APNsNotification.liveActivity(event: "start", contentState: [:], attributesType: "A", attributes: [:],
                                          inputPushToken: true, inputPushChannel: "ch").content,
            APNsNotification.liveActivity(event: "update", contentState: nil).content,
        ]
        for content in bad {
            #expect(errorCode { _ = try payloadText(content, .liveactivity) } == "apns/invalid-live-activity")
        }
        var noEvent = PushContent()
        noEvent.headers.pushType = "liveactivity"
        #expect(errorCode { _ = try payloadText(noEvent, .liveactivity) } == "apns/invalid-live-activity")
    }

    @Test func typedBuildersSetTheirPushType() throws {
        let cases: [(APNsNotification, String)] = [
            (.alert(title: "t"), "alert"), (.background(), "background"), (.voip(["callId": "1"]), "voip"),
            (.complication(), "complication"), (.fileProvider(), "fileprovider"), (.location(), "location"),
            (.mdm(pushMagic: "magic"), "mdm"), (.widgets(), "widgets"), (.controls(), "controls"),
            (.pushToTalk(), "pushtotalk"),
            (.liveActivity(event: "end", contentState: nil), "liveactivity"),
        ]
        for (notification, type) in cases {
            #expect(try APNsPushType.resolve(for: notification.content).rawValue == type)
        }
        #expect(try payloadText(APNsNotification.mdm(pushMagic: "m").content, .mdm) == #"{"mdm":"m"}"#)
        #expect(APNsNotification.alert(title: "t").priority(5).collapseID("c").content.headers.collapseID == "c")
    }
}
