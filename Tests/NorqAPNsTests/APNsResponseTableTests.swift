import Foundation
@testable import NorqAPNs
import NorqCore
import NorqHTTP2
import NIOCore
import Testing

@Suite struct APNsResponseTableTests {
    @Test func everyDocumentedReasonIsClassified() {
        let reasons = APNsResponseTable.reasons.map(\.reason)
        #expect(Set(reasons).count == reasons.count)
        for reason in ["BadCollapseId", "BadDeviceToken", "BadExpirationDate", "BadMessageId", "BadPriority", "BadTopic",
                       "DeviceTokenNotForTopic", "DuplicateHeaders", "IdleTimeout", "InvalidPushType",
                       "MissingDeviceToken", "MissingTopic", "PayloadEmpty", "TopicDisallowed", "BadCertificate",
                       "BadCertificateEnvironment", "ExpiredProviderToken", "Forbidden", "InvalidProviderToken",
                       "MissingProviderToken", "UnrelatedKeyIdInToken", "BadEnvironmentKeyIdInToken",
                       "BadEnvironmentKeyInToken", "BadPath", "MethodNotAllowed", "Unregistered", "ExpiredToken",
                       "PayloadTooLarge", "TooManyProviderTokenUpdates", "TooManyRequests", "InternalServerError",
                       "ServiceUnavailable", "Shutdown", "FeatureNotEnabled", "MissingChannelId", "BadChannelId",
                       "ChannelNotRegistered", "BadRequestParams", "BadRequestPayload", "MissingPushType",
                       "CannotCreateChannelConfig", "TopicMismatch", "MissingChannelQueueSize"] {
            #expect(APNsResponseTable.entry(for: reason) != nil, "\(reason)")
        }
    }

    @Test func classes() {
        #expect(APNsResponseTable.classify(status: 200, reason: nil) == .delivered)
        #expect(APNsResponseTable.classify(status: 410, reason: "Unregistered") == .tokenInvalid)
        #expect(APNsResponseTable.classify(status: 400, reason: "BadDeviceToken") == .tokenInvalid)
        #expect(APNsResponseTable.classify(status: 429, reason: "TooManyRequests") == .retryAfterDelay)
        #expect(APNsResponseTable.classify(status: 503, reason: "Shutdown") == .retryable)
        #expect(APNsResponseTable.classify(status: 403, reason: "InvalidProviderToken") == .credentials)
        #expect(APNsResponseTable.classify(status: 403, reason: "ExpiredProviderToken") == .retryable)
        #expect(APNsResponseTable.classify(status: 400, reason: "BadTopic") == .permanent)
        #expect(APNsResponseTable.classify(status: 400, reason: "SomethingNew") == .permanent)
        #expect(APNsResponseTable.classify(status: 502, reason: nil) == .retryable)
        #expect(APNsResponseTable.code(status: 400, reason: "BadDeviceToken")?.rawValue == "apns/bad-device-token")
        #expect(APNsResponseTable.code(status: 403, reason: "UnrelatedKeyIdInToken")?.rawValue == "apns/unrelated-key-id-in-token")
        #expect(APNsResponseTable.code(status: 400, reason: "SomethingNew")?.rawValue == "apns/unknown-reason")
        #expect(APNsResponseTable.code(status: 502, reason: nil)?.rawValue == "apns/no-reason")
        #expect(APNsResponseTable.code(status: 200, reason: nil) == nil)
    }

    @Test func interpretParsesReasonTimestampAndRetryAfter() {
        let gone = APNsProvider.interpret(HTTP2Response(
            status: 410, headers: [("apns-id", "id-1")],
            body: ByteBuffer(string: #"{"reason":"Unregistered","timestamp":1700000000123}"#)))
        #expect(gone.reason == "Unregistered" && gone.invalidSince == 1_700_000_000_123)
        #expect(gone.classification == .tokenInvalid && gone.messageID == "id-1")
        let busy = APNsProvider.interpret(HTTP2Response(
            status: 429, headers: [("retry-after", "7")], body: ByteBuffer(string: #"{"reason":"NewReason"}"#)))
        #expect(busy.retryAfter == .seconds(7) && busy.reason == "NewReason" && busy.classification == .permanent)
        let ok = APNsProvider.interpret(HTTP2Response(
            status: 200, headers: [("apns-id", "a"), ("apns-unique-id", "u")], body: ByteBuffer()))
        #expect(ok.classification == .delivered && ok.uniqueID == "u" && ok.reason == nil)
    }

    @Test("interpret reads the first of each header among others of the same length: apns-request-id, a non-numeric retry-after is not skipped for a later one")
    func interpretReadsFirstHeaders() {
        let answer = APNsProvider.interpret(HTTP2Response(
            status: 429,
            headers: [("x-other", "1"), ("apns-expiration", "2"), ("apns-request-id", "r-1"),
                      ("apns-id", "a-2"), ("x-unique-id-00", "3"), ("apns-unique-id", "u-1"),
                      ("x-retry-aft", "4"), ("retry-after", "soon"), ("retry-after", "9")],
            body: ByteBuffer()))
        #expect(answer.messageID == "r-1" && answer.uniqueID == "u-1" && answer.retryAfter == nil)
    }

    @Test("HPACK indexing of APNs request fields: ids never, expiration and collapse id not, the rest indexed")
    func requestFieldIndexing() {
        #expect(["apns-id", "apns-request-id", "apns-channel-id"].allSatisfy { APNsProvider.indexing(of: $0) == .neverIndexed })
        #expect(["apns-expiration", "apns-collapse-id"].allSatisfy { APNsProvider.indexing(of: $0) == .notIndexed })
        #expect(["apns-topic", "apns-push-type", "apns-priority", "authorization", "apns-idx-xx", "x-apns-channel"]
            .allSatisfy { APNsProvider.indexing(of: $0) == .indexed })
    }

    /// Every code of the APNs area is listed in docs/errors.md.
    @Test func everyCodeIsDocumented() throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/errors.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        var codes = APNsResponseTable.reasons.map(\.code.rawValue)
        codes += [APNsResponseTable.unknownReasonCode.rawValue, APNsResponseTable.noReasonCode.rawValue]
        codes += [NorqError.Code.apnsInvalidTokenFormat, .apnsPayloadTooLarge, .apnsBadPriority, .apnsBadExpiration,
                  .apnsBadCollapseID, .apnsInvalidPushType, .apnsRequiresCertificate, .apnsRequiresToken,
                  .apnsInvalidLiveActivity, .apnsInvalidPayload, .apnsBadMessageID, .apnsInvalidKey,
                  .apnsInvalidCertificate, .apnsInvalidTrustRoots, .apnsWrongConfiguration].map(\.rawValue)
        for code in Set(codes) { #expect(text.contains("`\(code)`"), "\(code) missing from docs/errors.md") }
    }
}
