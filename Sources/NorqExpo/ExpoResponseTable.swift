public import NorqCore
import NorqHTTP2

/// Everything Expo answers, classified: the per-message error codes of tickets and receipts (`details.error`), the
/// request-level codes (`errors[].code`), and the shape checks (ticket count). Pure; the provider and the tests read
/// the same table.
///
/// A ticket arrives in an HTTP 200 answer whatever its status: an error ticket's outcome carries the HTTP status
/// the table gives its code (410 for `DeviceNotRegistered`, 429 for `MessageRateExceeded`, ...), so that the
/// router's retry rules (`retry.on`) read it as they read other providers' answers.
public enum ExpoResponseTable {
    /// One known error code: the status the outcome carries, its class and Norq's code.
    public struct Entry: Sendable, Hashable {
        public var status: Int
        public var classification: ResponseClass
        public var code: NorqError.Code
    }

    /// Per-message error codes (`details.error` of an error ticket or receipt).
    public static let messageErrors: [String: Entry] = [
        "DeviceNotRegistered": Entry(status: 410, classification: .tokenInvalid, code: .expoDeviceNotRegistered),
        "MessageTooBig": Entry(status: 413, classification: .permanent, code: .expoMessageTooBig),
        "MessageRateExceeded": Entry(status: 429, classification: .retryAfterDelay, code: .expoMessageRateExceeded),
        "MismatchSenderId": Entry(status: 403, classification: .credentials, code: .expoMismatchSenderID),
        "InvalidCredentials": Entry(status: 403, classification: .credentials, code: .expoInvalidCredentials),
        "DeveloperError": Entry(status: 400, classification: .permanent, code: .expoDeveloperError),
        "ExpoError": Entry(status: 503, classification: .retryable, code: .expoServiceError),
        "ProviderError": Entry(status: 503, classification: .retryable, code: .expoServiceError),
    ]

    /// An error ticket or receipt whose code is not in ``messageErrors`` (kept as the reason).
    public static let unknownMessageError = Entry(status: 400, classification: .permanent, code: .expoUnknownError)

    /// Request-level error codes (`errors[].code`); the HTTP status of the answer is kept as it is.
    public static let requestErrors: [String: (classification: ResponseClass, code: NorqError.Code)] = [
        "TOO_MANY_REQUESTS": (.retryAfterDelay, .expoTooManyRequests),
        "PUSH_TOO_MANY_EXPERIENCE_IDS": (.permanent, .expoTooManyExperienceIDs),
        "PUSH_TOO_MANY_NOTIFICATIONS": (.permanent, .expoTooManyNotifications),
        "PUSH_TOO_MANY_RECEIPTS": (.permanent, .expoTooManyReceipts),
        "UNAUTHORIZED": (.credentials, .expoUnauthorized),
        "INTERNAL_SERVER_ERROR": (.retryable, .expoRequestFailed),
    ]

    /// Every reason string an Expo outcome may carry (metric labels stay bounded).
    public static var reasonStrings: Set<String> {
        Set(messageErrors.keys).union(requestErrors.keys).union(["API_ERROR", "VALIDATION_ERROR"])
    }

    /// The class of a request-level failure without a known code: by HTTP status.
    public static func classify(status: Int) -> ResponseClass {
        switch status {
        case 429: .retryAfterDelay
        case 401, 403: .credentials
        case 500...599: .retryable
        default: .permanent
        }
    }

    // MARK: tickets

    /// The answer to one recipient from its ticket: `ok` is `accepted` with the ticket id as message id; an error
    /// ticket is classified by ``messageErrors``.
    public static func response(ticket: JSONValue) -> DeliveryResponse {
        let id = ticket["id"]?.stringValue
        if ticket["status"]?.stringValue == "ok" {
            return DeliveryResponse(status: 200, messageID: id, classification: .accepted)
        }
        return errorResponse(ticket, id: id)
    }

    /// An error ticket or receipt, classified.
    static func errorResponse(_ value: JSONValue, id: String?) -> DeliveryResponse {
        let reason = value["details"]?["error"]?.stringValue
        let entry = reason.flatMap { messageErrors[$0] } ?? unknownMessageError
        var response = DeliveryResponse(status: entry.status, body: value.serialized(), messageID: id,
                                        reason: reason ?? value["message"]?.stringValue.map { String($0.prefix(80)) },
                                        classification: entry.classification)
        response.code = entry.code
        return response
    }

    /// What a send answer means for each of `recipients` recipients, in order: one response per ticket, or one
    /// failure (the same for every recipient).
    public enum SendAnswer: Sendable, Hashable {
        case tickets([DeliveryResponse])
        /// The whole request failed with an answer (4xx/5xx, `errors[]`), the same for every recipient.
        case requestFailed(DeliveryResponse, errorCode: String?)
        /// `PUSH_TOO_MANY_EXPERIENCE_IDS`: the tokens of each project, from `details`.
        case mixedProjects([String: [String]])
        /// No usable answer (ticket count mismatch, malformed JSON in a 200): possibly processed.
        case ambiguous(NorqError)
    }

    /// Reads the answer to a send request of `recipients` recipients as NorqHTTP2's bridge returned it: the body is
    /// scanned where it lies (an all-ok answer, the common case, needs no copy of it and no header array); any other
    /// answer is read by ``sendAnswer(status:headers:body:recipients:)``.
    static func sendAnswer(_ response: HTTP2Response, recipients: Int) -> SendAnswer {
        if response.status == 200,
           let tickets = response.body.withUnsafeReadableBytes({ raw in
               ExpoTicketScanner.okTickets(bytes: raw.bindMemory(to: UInt8.self), expected: recipients)
           }) {
            return okTickets(tickets, recipients: recipients)
        }
        return sendAnswer(status: response.status, headers: response.headers(HTTPHeader.init), body: response.bodyBytes,
                          recipients: recipients)
    }

    /// The tickets of an all-ok answer, or a count mismatch.
    private static func okTickets(_ tickets: [String], recipients: Int) -> SendAnswer {
        guard tickets.count == recipients else {
            return .ambiguous(NorqError(.expoTicketCountMismatch,
                                        "Expo answered \(tickets.count) tickets for \(recipients) recipients",
                                        possiblyProcessed: true))
        }
        return .tickets(tickets.map { DeliveryResponse(status: 200, messageID: $0, classification: .accepted) })
    }

    /// Reads the answer to a send request of `recipients` recipients.
    public static func sendAnswer(status: Int, headers: [HTTPHeader] = [], body: [UInt8],
                                  recipients: Int) -> SendAnswer {
        if status == 200, let tickets = ExpoTicketScanner.okTickets(body) {
            return okTickets(tickets, recipients: recipients)
        }
        let json = try? JSONValue(parsing: body)
        if status == 200, let json {
            var tickets: [JSONValue]
            switch json["data"] {
            case .array(let array)?: tickets = array
            case .object?: tickets = [json["data"]!]  // a single object answered with a single ticket
            default: tickets = []
            }
            if json["data"] != nil || json["errors"] == nil {
                guard tickets.count == recipients else {
                    return .ambiguous(NorqError(.expoTicketCountMismatch,
                                                "Expo answered \(tickets.count) tickets for \(recipients) recipients",
                                                possiblyProcessed: true))
                }
                return .tickets(tickets.map(response(ticket:)))
            }
        }
        if status == 200 && json == nil {
            return .ambiguous(NorqError(.expoTicketCountMismatch, "Expo answered 200 without a JSON body",
                                        possiblyProcessed: true))
        }
        return requestFailure(status: status, headers: headers, body: body, json: json)
    }

    /// A request-level failure: `errors[0].code` by ``requestErrors``, else by HTTP status (HTML and text bodies
    /// of gateways included).
    static func requestFailure(status: Int, headers: [HTTPHeader], body: [UInt8], json: JSONValue?) -> SendAnswer {
        var first: JSONValue?
        if case .array(let errors)? = json?["errors"] { first = errors.first }
        let errorCode = first?["code"]?.stringValue ?? json?["error"]?.stringValue
        if errorCode == "PUSH_TOO_MANY_EXPERIENCE_IDS", case .object(let details)? = first?["details"] {
            var projects: [String: [String]] = [:]
            for (project, tokens) in details {
                guard case .array(let list) = tokens else { continue }
                projects[project] = list.compactMap(\.stringValue)
            }
            if !projects.isEmpty { return .mixedProjects(projects) }
        }
        let known = errorCode.flatMap { requestErrors[$0] }
        let effectiveStatus = status == 200 ? 400 : status  // `errors` in a 200: a failed request all the same
        var response = DeliveryResponse(status: effectiveStatus, headers: headers, body: Array(body.prefix(2048)),
                                        reason: errorCode ?? "HTTP \(status)",
                                        classification: known?.classification ?? classify(status: effectiveStatus))
        response.code = known?.code ?? (effectiveStatus == 429 ? .expoTooManyRequests
                                        : effectiveStatus == 401 ? .expoUnauthorized : .expoRequestFailed)
        if let retryAfter = headers.first(where: { $0.name == "retry-after" })?.value, let seconds = Int64(retryAfter) {
            response.retryAfter = .seconds(max(0, min(seconds, 3600)))
        }
        return .requestFailed(response, errorCode: errorCode)
    }

    // MARK: receipts

    /// Reads a `getReceipts` answer for `ids`: every id gets a state (`.pending` when absent). Throws
    /// the request-level failure as a `NorqError` (code from ``requestErrors``).
    public static func receipts(status: Int, body: [UInt8], ids: [String]) throws(NorqError) -> [String: ReceiptState] {
        let json = try? JSONValue(parsing: body)
        guard status == 200, let json, case .object(let data)? = json["data"] else {
            if case .requestFailed(let response, let errorCode) = requestFailure(status: status, headers: [], body: body, json: json) {
                throw NorqError(response.code ?? .expoRequestFailed,
                                "Expo's getReceipts answered \(status)\(errorCode.map { " \($0)" } ?? "")",
                                hint: response.classification.isRetryable ? "ask again later" : nil)
            }
            throw NorqError(.expoRequestFailed, "Expo's getReceipts answered \(status) without receipts")
        }
        var states: [String: ReceiptState] = [:]
        states.reserveCapacity(ids.count)
        for id in ids {
            guard let receipt = data[id] else {
                states[id] = .pending
                continue
            }
            if receipt["status"]?.stringValue == "ok" {
                states[id] = .final(DeliveryResponse(status: 200, messageID: id, classification: .delivered))
            } else {
                states[id] = .final(errorResponse(receipt, id: id))
            }
        }
        return states
    }

    /// The token a `DeviceNotRegistered` receipt names (`details.expoPushToken`), when it does.
    public static func receiptToken(_ response: DeliveryResponse) -> String? {
        (try? JSONValue(parsing: response.body))?["details"]?["expoPushToken"]?.stringValue
    }
}
