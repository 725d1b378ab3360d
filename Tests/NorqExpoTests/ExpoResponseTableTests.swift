import NorqCore
import NIOCore
import NorqHTTP2
@testable import NorqExpo
import Testing

@Suite("Expo response table")
struct ExpoResponseTableTests {
    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test("every per-message error code of a ticket: its status, class and Norq code", arguments: [
        ("DeviceNotRegistered", 410, ResponseClass.tokenInvalid, NorqError.Code.expoDeviceNotRegistered),
        ("MessageTooBig", 413, .permanent, .expoMessageTooBig),
        ("MessageRateExceeded", 429, .retryAfterDelay, .expoMessageRateExceeded),
        ("MismatchSenderId", 403, .credentials, .expoMismatchSenderID),
        ("InvalidCredentials", 403, .credentials, .expoInvalidCredentials),
        ("DeveloperError", 400, .permanent, .expoDeveloperError),
        ("ExpoError", 503, .retryable, .expoServiceError),
        ("ProviderError", 503, .retryable, .expoServiceError),
        ("SomethingNew", 400, .permanent, .expoUnknownError),
    ])
    func ticketErrors(reason: String, status: Int, classification: ResponseClass, code: NorqError.Code) {
        let ticket: JSONValue = ["status": "error", "message": "no", "details": ["error": .string(reason)]]
        let response = ExpoResponseTable.response(ticket: ticket)
        #expect(response.status == status)
        #expect(response.classification == classification)
        #expect(response.code == code)
        #expect(response.reason == reason)
        #expect(ExpoResponseTable.messageErrors.count == 8)
    }

    @Test("an ok ticket is accepted with the ticket id as message id; tickets come back in order")
    func okTickets() {
        let answer = ExpoResponseTable.sendAnswer(
            status: 200, body: Self.bytes(#"{"data":[{"status":"ok","id":"t-1"},{"status":"error","message":"x","details":{"error":"DeviceNotRegistered","expoPushToken":"ExponentPushToken[b]"}}]}"#),
            recipients: 2)
        guard case .tickets(let tickets) = answer else { Issue.record("\(answer)"); return }
        #expect(tickets[0].classification == .accepted)
        #expect(tickets[0].messageID == "t-1")
        #expect(tickets[1].classification == .tokenInvalid)
        // A single object answers a single-object request.
        if case .tickets(let one) = ExpoResponseTable.sendAnswer(status: 200, body: Self.bytes(#"{"data":{"status":"ok","id":"x"}}"#),
                                                                 recipients: 1) {
            #expect(one.first?.messageID == "x")
        } else { Issue.record("a single ticket object was not read") }
    }

    @Test("a ticket count different from the recipients is an ambiguous failure, possibly processed")
    func countMismatch() {
        let answer = ExpoResponseTable.sendAnswer(status: 200, body: Self.bytes(#"{"data":[{"status":"ok","id":"a"}]}"#),
                                                  recipients: 2)
        guard case .ambiguous(let error) = answer else { Issue.record("\(answer)"); return }
        #expect(error.code == .expoTicketCountMismatch)
        #expect(error.possiblyProcessed)
    }

    @Test("every request-level code, and bodies that are not JSON", arguments: [
        (429, "TOO_MANY_REQUESTS", ResponseClass.retryAfterDelay, NorqError.Code.expoTooManyRequests),
        (400, "PUSH_TOO_MANY_NOTIFICATIONS", .permanent, .expoTooManyNotifications),
        (400, "PUSH_TOO_MANY_RECEIPTS", .permanent, .expoTooManyReceipts),
        (401, "UNAUTHORIZED", .credentials, .expoUnauthorized),
        (500, "INTERNAL_SERVER_ERROR", .retryable, .expoRequestFailed),
        (400, "API_ERROR", .permanent, .expoRequestFailed),
    ])
    func requestErrors(status: Int, code: String, classification: ResponseClass, norqCode: NorqError.Code) {
        let body = Self.bytes(#"{"errors":[{"code":"\#(code)","message":"m"}]}"#)
        guard case .requestFailed(let response, let errorCode) = ExpoResponseTable.sendAnswer(status: status, body: body, recipients: 3) else {
            Issue.record("not a request failure"); return
        }
        #expect(errorCode == code)
        #expect(response.status == status)
        #expect(response.classification == classification)
        #expect(response.code == norqCode)
    }

    @Test("gateway pages (HTML 502/504, text 503) are classified by status; a 401 in OAuth form is unauthorized")
    func gatewayPages() {
        for status in [502, 503, 504] {
            guard case .requestFailed(let response, _) = ExpoResponseTable.sendAnswer(
                status: status, body: Self.bytes("<html>\(status) Gateway Time-out</html>"), recipients: 1) else {
                Issue.record("\(status)"); continue
            }
            #expect(response.classification == .retryable)
            #expect(response.code == .expoRequestFailed)
        }
        guard case .requestFailed(let response, _) = ExpoResponseTable.sendAnswer(
            status: 401, body: Self.bytes(#"{"error":"invalid_token","error_description":"The bearer token is invalid"}"#),
            recipients: 1) else { Issue.record("401"); return }
        #expect(response.classification == .credentials)
        #expect(response.code == .expoUnauthorized)
    }

    @Test("PUSH_TOO_MANY_EXPERIENCE_IDS gives each project's tokens")
    func mixedProjects() {
        let body = Self.bytes(#"{"errors":[{"code":"PUSH_TOO_MANY_EXPERIENCE_IDS","message":"m","details":{"@a/one":["ExponentPushToken[1]"],"@b/two":["ExponentPushToken[2]","ExponentPushToken[3]"]}}]}"#)
        guard case .mixedProjects(let groups) = ExpoResponseTable.sendAnswer(status: 400, body: body, recipients: 3) else {
            Issue.record("not read as mixed projects"); return
        }
        #expect(groups == ["@a/one": ["ExponentPushToken[1]"], "@b/two": ["ExponentPushToken[2]", "ExponentPushToken[3]"]])
        // Without details it stays a permanent request failure with its own code.
        let bare = Self.bytes(#"{"errors":[{"code":"PUSH_TOO_MANY_EXPERIENCE_IDS","message":"m"}]}"#)
        guard case .requestFailed(let response, _) = ExpoResponseTable.sendAnswer(status: 400, body: bare, recipients: 3) else {
            Issue.record("bare"); return
        }
        #expect(response.code == .expoTooManyExperienceIDs)
    }

    @Test("receipts: ok is delivered, an error is classified, an absent id is pending; a failed request throws")
    func receipts() throws {
        let body = Self.bytes(#"{"data":{"a":{"status":"ok"},"b":{"status":"error","message":"m","details":{"error":"DeviceNotRegistered","expoPushToken":"ExponentPushToken[b]"}}}}"#)
        let states = try ExpoResponseTable.receipts(status: 200, body: body, ids: ["a", "b", "c"])
        guard case .final(let a)? = states["a"], case .final(let b)? = states["b"] else { Issue.record("\(states)"); return }
        #expect(a.classification == .delivered)
        #expect(b.classification == .tokenInvalid)
        #expect(ExpoResponseTable.receiptToken(b) == "ExponentPushToken[b]")
        #expect(states["c"] == .pending)
        do {
            _ = try ExpoResponseTable.receipts(status: 400, body: Self.bytes(#"{"errors":[{"code":"PUSH_TOO_MANY_RECEIPTS","message":"m"}]}"#), ids: ["a"])
            Issue.record("no error")
        } catch {
            #expect(error.code == .expoTooManyReceipts)
        }
    }

    @Test("the ticket scanner reads ok tickets (any key order, extra string keys, white space) and nothing else")
    func ticketScanner() {
        #expect(ExpoTicketScanner.okTickets(Self.bytes(#"{"data":[{"status":"ok","id":"a-1"},{"id":"b-2","status":"ok"}]}"#))
                == ["a-1", "b-2"])
        #expect(ExpoTicketScanner.okTickets(Self.bytes(" { \"data\" : [ { \"status\" : \"ok\" , \"id\" : \"x\", \"extra\":\"y\" } ] } \n"))
                == ["x"])
        #expect(ExpoTicketScanner.okTickets(Self.bytes(#"{"data":[]}"#)) == [])
        // Left to the parser: an error ticket, an escape, a ticket without id, a single object, errors, trailing bytes.
        #expect(ExpoTicketScanner.okTickets(Self.bytes(#"{"data":[{"status":"ok","id":"a"},{"status":"error","message":"m","details":{"error":"DeviceNotRegistered"}}]}"#)) == nil)
        #expect(ExpoTicketScanner.okTickets(Self.bytes(#"{"data":[{"status":"ok","id":"a\"b"}]}"#)) == nil)
        #expect(ExpoTicketScanner.okTickets(Self.bytes(#"{"data":[{"status":"ok"}]}"#)) == nil)
        #expect(ExpoTicketScanner.okTickets(Self.bytes(#"{"data":{"status":"ok","id":"x"}}"#)) == nil)
        #expect(ExpoTicketScanner.okTickets(Self.bytes(#"{"data":[{"status":"ok","id":"x"}],"errors":[]}"#)) == nil)
        #expect(ExpoTicketScanner.okTickets(Self.bytes(#"{"data":[{"status":"ok","id":"x"}]}x"#)) == nil)
        #expect(ExpoTicketScanner.okTickets(Self.bytes(#"{"data":[{"status":"ok","id":"x"}"#)) == nil)
        // Both readings agree on what the scanner takes.
        let body = Self.bytes(#"{"data":[{"status":"ok","id":"t-1"},{"status":"ok","id":"t-2"}]}"#)
        guard case .tickets(let tickets) = ExpoResponseTable.sendAnswer(status: 200, body: body, recipients: 2) else {
            Issue.record("not read as tickets"); return
        }
        #expect(tickets.map(\.messageID) == ["t-1", "t-2"])
        #expect(tickets.allSatisfy { $0.classification == .accepted && $0.status == 200 })
    }
}

/// The provider reads its answers as NorqHTTP2's one bridge response type (`HTTP2Response`, issue 30), the all-ok
/// answer scanned in the response's own buffer.
@Suite("Expo answers through the HTTP/2 bridge")
struct ExpoBridgeAnswerTests {
    static func response(_ status: Int, _ body: String, headers: [(name: String, value: String)] = []) -> HTTP2Response {
        // A buffer whose reader index is not 0: the scanner must read the readable bytes, not the storage.
        var buffer = ByteBuffer(string: "junk" + body)
        buffer.moveReaderIndex(forwardBy: 4)
        return HTTP2Response(status: status, headers: headers, body: buffer)
    }

    @Test("an all-ok answer: one accepted ticket per recipient, ids in order, read from the response's buffer")
    func okInPlace() {
        let answer = ExpoResponseTable.sendAnswer(Self.response(200, #"{"data":[{"status":"ok","id":"a-1"},{"id":"b-2","status":"ok"}]}"#),
                                                  recipients: 2)
        guard case .tickets(let tickets) = answer else { Issue.record("\(answer)"); return }
        #expect(tickets.map(\.messageID) == ["a-1", "b-2"])
        #expect(tickets.allSatisfy { $0.classification == .accepted && $0.status == 200 })
    }

    @Test("a ticket count different from the recipients is ambiguous on this path too")
    func countMismatch() {
        let answer = ExpoResponseTable.sendAnswer(Self.response(200, #"{"data":[{"status":"ok","id":"a"}]}"#), recipients: 3)
        guard case .ambiguous(let error) = answer else { Issue.record("\(answer)"); return }
        #expect(error.code == .expoTicketCountMismatch)
        #expect(error.possiblyProcessed)
    }

    @Test("an error ticket falls back to the parser; a 429 keeps the answer's headers (retry-after)")
    func fallbacks() {
        let mixed = ExpoResponseTable.sendAnswer(
            Self.response(200, #"{"data":[{"status":"ok","id":"a"},{"status":"error","message":"m","details":{"error":"DeviceNotRegistered"}}]}"#),
            recipients: 2)
        guard case .tickets(let tickets) = mixed else { Issue.record("\(mixed)"); return }
        #expect(tickets[0].messageID == "a")
        #expect(tickets[1].code == .expoDeviceNotRegistered)
        let limited = ExpoResponseTable.sendAnswer(
            Self.response(429, #"{"errors":[{"code":"TOO_MANY_REQUESTS","message":"slow down"}]}"#,
                          headers: [(name: "retry-after", value: "7")]),
            recipients: 2)
        guard case .requestFailed(let response, let code) = limited else { Issue.record("\(limited)"); return }
        #expect(code == "TOO_MANY_REQUESTS")
        #expect(response.code == .expoTooManyRequests)
        #expect(response.retryAfter == .seconds(7))
        #expect(response.header("retry-after") == "7")
    }
}
