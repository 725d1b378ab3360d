import NorqCore
@testable import NorqPreview
import Testing

/// What a request body makes the device show, for each provider's body (issue 32: an Expo view where it differs).
@Suite struct PreviewShownTests {
    @Test func anExpoMessageShowsItsOwnFields() throws {
        let body = try JSONValue(parsing: """
            {"to": "ExponentPushToken[x]", "title": "Shipped", "subtitle": "Order 17", "body": "On its way",
             "channelId": "orders", "richContent": {"image": "https://example.com/box.png"}, "sound": "default"}
            """)
        let shown = try #require(PreviewPlatforms.shown(in: body))
        #expect(shown == ["title": "Shipped", "subtitle": "Order 17", "body": "On its way",
                          "image": "https://example.com/box.png", "channel_id": "orders"])
    }

    @Test func aDataOnlyExpoMessageShowsNothing() throws {
        #expect(PreviewPlatforms.shown(in: try JSONValue(parsing: #"{"to": "ExponentPushToken[x]", "data": {"a": 1}}"#)) == nil)
    }

    @Test func apnsAndFCMBodiesAreReadAsBefore() throws {
        let apns = try JSONValue(parsing: #"{"aps": {"alert": {"title": "T", "body": "B"}}}"#)
        #expect(PreviewPlatforms.shown(in: apns) == ["title": "T", "body": "B"])
        let fcm = try JSONValue(parsing: #"{"message": {"notification": {"title": "T"}, "android": {"notification": {"channel_id": "c"}}}}"#)
        #expect(PreviewPlatforms.shown(in: fcm) == ["title": "T", "channel_id": "c"])
    }
}
