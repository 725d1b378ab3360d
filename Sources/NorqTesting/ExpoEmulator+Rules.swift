import NorqZlib
import Foundation
import NIOCore
import Synchronization

/// One answer of the Expo emulator.
struct ExpoEmulatorAnswer: EmulatorHTTP2Answer {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]
    var errorCode: String?
    var detail: ExpoEmulator.RecordedRequest.Detail?
}

/// Expo's request and answer shapes, as pure functions.
enum ExpoEmulatorRules {
    static let sendPath = "/--/api/v2/push/send"
    static let receiptsPath = "/--/api/v2/push/getReceipts"
    static let maxRecipients = 100
    static let maxReceiptIDs = 1000
    static let payloadLimit = 4096
    /// The largest inflated body accepted.
    static let maxInflatedBytes = 8 << 20

    static func json(_ object: Any) -> [UInt8] {
        Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8))
    }

    static func requestError(_ status: Int, code: String, message: String, details: Any? = nil) -> ExpoEmulatorAnswer {
        var error: [String: Any] = ["code": code, "message": message]
        if let details { error["details"] = details }
        return ExpoEmulatorAnswer(status: status, headers: [("content-type", "application/json")],
                                  body: json(["errors": [error]]), errorCode: code)
    }

    static func gatewayPage(_ status: Int) -> ExpoEmulatorAnswer {
        let page = "<html><head><title>\(status) Gateway Time-out</title></head><body><center><h1>\(status) Gateway Time-out</h1></center><hr><center>nginx</center></body></html>"
        return ExpoEmulatorAnswer(status: status, headers: [("content-type", "text/html")], body: Array(page.utf8))
    }
}

/// State shared by the Expo emulator and its connections, behind one lock.
final class ExpoEmulatorShared: Sendable {
    let configuration: ExpoEmulator.Configuration

    struct Receipt {
        var token: String
        var error: String?
        var readyAt: ContinuousClock.Instant
    }

    struct State {
        var faults: ExpoEmulator.Faults
        var projects: [String: String]
        var records: EmulatorRecords<ExpoEmulator.RecordedRequest>
        var connectionCount = 0
        var channels: [Int: any Channel] = [:]
        var perTokenAttempts: [String: Int] = [:]
        var receipts: [String: Receipt] = [:]
        var receiptOrder: [String] = []
        var acceptedCount = 0
    }
    let state: Mutex<State>

    init(configuration: ExpoEmulator.Configuration) {
        self.configuration = configuration
        self.state = Mutex(State(faults: configuration.faults, projects: configuration.projects,
                                 records: EmulatorRecords(limit: configuration.recordLimit)))
    }

    typealias Decision = EmulatorHTTP2Decision<ExpoEmulatorAnswer>

    func handle(method: String, path: String, authorization: String?, encoding: String?, body: [UInt8]) -> Decision {
        var detail = ExpoEmulator.RecordedRequest.Detail()
        var body = body
        if let encoding, encoding.lowercased() == "gzip" {
            guard let inflated = Gzip.decompress(body, limit: ExpoEmulatorRules.maxInflatedBytes) else {
                return .answer(ExpoEmulatorRules.requestError(400, code: "API_ERROR", message: "The request body could not be decompressed."),
                               latency: .zero)
            }
            body = inflated
            detail.gzipped = true
        }
        detail.inflatedBody = body
        func answer(_ a: ExpoEmulatorAnswer, latency: Duration = .zero) -> Decision {
            var a = a
            a.detail = detail
            return .answer(a, latency: latency)
        }
        guard method == "POST", path == ExpoEmulatorRules.sendPath || path == ExpoEmulatorRules.receiptsPath else {
            return answer(ExpoEmulatorRules.requestError(404, code: "NOT_FOUND", message: "Not found: \(path)"))
        }
        if let expected = configuration.accessToken, authorization != "Bearer \(expected)" {
            return answer(ExpoEmulatorRules.requestError(
                401, code: "UNAUTHORIZED",
                message: "The bearer token is invalid or missing; this project requires an access token (enhanced push security)."))
        }
        guard let json = try? JSONSerialization.jsonObject(with: Data(body)) else {
            return answer(ExpoEmulatorRules.requestError(400, code: "API_ERROR", message: "The request body is not JSON."))
        }
        if path == ExpoEmulatorRules.receiptsPath { return answer(receipts(json)) }

        let single = json is [String: Any]
        guard let messages = (json as? [Any]) ?? (single ? [json] : nil) as [Any]?,
              messages.allSatisfy({ $0 is [String: Any] }) else {
            return answer(ExpoEmulatorRules.requestError(400, code: "VALIDATION_ERROR", message: "\"value\" must be of type object"))
        }
        var recipients: [(token: String, message: [String: Any])] = []
        for case let message as [String: Any] in messages {
            if let to = message["to"] as? String {
                recipients.append((to, message))
            } else if let to = message["to"] as? [String] {
                for token in to { recipients.append((token, message)) }
            } else {
                return answer(ExpoEmulatorRules.requestError(400, code: "VALIDATION_ERROR", message: "\"to\" must be a string or an array of strings"))
            }
        }
        detail.recipients = recipients.map(\.token)
        guard recipients.count <= ExpoEmulatorRules.maxRecipients else {
            return answer(ExpoEmulatorRules.requestError(
                400, code: "PUSH_TOO_MANY_NOTIFICATIONS",
                message: "You are trying to send more than 100 push notifications in one request (received \(recipients.count))"))
        }
        return state.withLock { s -> Decision in
            let f = s.faults
            if recipients.contains(where: { f.silentTokens.contains($0.token) }) { return .silent }
            var byProject: [String: [String]] = [:]
            for recipient in recipients {
                byProject[s.projects[recipient.token] ?? configuration.defaultProject, default: []].append(recipient.token)
            }
            if byProject.count > 1 {
                return answer(ExpoEmulatorRules.requestError(
                    400, code: "PUSH_TOO_MANY_EXPERIENCE_IDS",
                    message: "All push notification messages in the same request must be for the same project; check the details field to investigate conflicting tokens.",
                    details: byProject), latency: f.latency)
            }
            if !s.faults.failNextRequests.isEmpty {
                let fault = s.faults.failNextRequests.removeFirst()
                let a = fault.code.map { ExpoEmulatorRules.requestError(fault.status, code: $0, message: $0 == "TOO_MANY_REQUESTS" ? "Exceeded 600 notifications per second, please try again." : "An unknown error occurred.") }
                    ?? ExpoEmulatorRules.gatewayPage(fault.status)
                return answer(a, latency: f.latency)
            }
            let now = ContinuousClock.now
            var tickets: [[String: Any]] = []
            for (token, message) in recipients {
                var error: String?
                if !Self.isExpoToken(token) || f.unregisteredTokens.contains(token) {
                    error = "DeviceNotRegistered"
                } else if let code = f.ticketErrors[token] {
                    error = code
                } else if let plan = f.failTokenTickets[token] {
                    let n = s.perTokenAttempts[token, default: 0]
                    s.perTokenAttempts[token] = n + 1
                    if n < plan.count { error = plan[n] }
                }
                if let error {
                    var details: [String: Any] = ["error": error]
                    if error == "DeviceNotRegistered" { details["expoPushToken"] = token }
                    tickets.append(["status": "error", "message": "\"\(token)\" is not a registered push notification recipient",
                                    "details": details])
                    continue
                }
                var without = message
                without.removeValue(forKey: "to")
                let size = ExpoEmulatorRules.json(without).count
                let id = UUID().uuidString.lowercased()
                var receiptError = f.receiptErrors[token]
                if size > ExpoEmulatorRules.payloadLimit { receiptError = "MessageTooBig" }
                s.receipts[id] = Receipt(token: token, error: receiptError, readyAt: now + f.receiptLatency)
                s.receiptOrder.append(id)
                if s.receiptOrder.count > configuration.receiptLimit {
                    let count = max(1, configuration.receiptLimit / 10)
                    for old in s.receiptOrder.prefix(count) { s.receipts.removeValue(forKey: old) }
                    s.receiptOrder.removeFirst(count)
                }
                s.acceptedCount += 1
                tickets.append(["status": "ok", "id": id])
            }
            let data: Any = single && tickets.count == 1 ? tickets[0] : tickets
            return answer(ExpoEmulatorAnswer(status: 200, headers: [("content-type", "application/json")],
                                             body: ExpoEmulatorRules.json(["data": data])), latency: f.latency)
        }
    }

    private func receipts(_ json: Any) -> ExpoEmulatorAnswer {
        guard let object = json as? [String: Any], let ids = object["ids"] as? [String] else {
            return ExpoEmulatorRules.requestError(400, code: "VALIDATION_ERROR", message: "\"ids\" must be an array of strings")
        }
        guard ids.count <= ExpoEmulatorRules.maxReceiptIDs else {
            return ExpoEmulatorRules.requestError(400, code: "PUSH_TOO_MANY_RECEIPTS",
                                                  message: "You are trying to get more than 1000 push receipts in one request")
        }
        let now = ContinuousClock.now
        let data = state.withLock { s -> [String: Any] in
            var data: [String: Any] = [:]
            for id in ids {
                guard let receipt = s.receipts[id], receipt.readyAt <= now else { continue }
                if let error = receipt.error {
                    var details: [String: Any] = ["error": error]
                    if error == "DeviceNotRegistered" { details["expoPushToken"] = receipt.token }
                    data[id] = ["status": "error", "message": "The notification was not delivered: \(error)", "details": details]
                } else {
                    data[id] = ["status": "ok"]
                }
            }
            return data
        }
        return ExpoEmulatorAnswer(status: 200, headers: [("content-type", "application/json")],
                                  body: ExpoEmulatorRules.json(["data": data]))
    }

    /// `ExponentPushToken[...]`, `ExpoPushToken[...]` or a UUID (anything else gets a DeviceNotRegistered ticket, as
    /// the real service answers a placeholder token).
    static func isExpoToken(_ token: String) -> Bool {
        if (token.hasPrefix("ExponentPushToken[") || token.hasPrefix("ExpoPushToken[")) && token.hasSuffix("]") { return true }
        return UUID(uuidString: token) != nil
    }

    func record(_ r: ExpoEmulator.RecordedRequest) {
        guard configuration.recordRequests else { return }
        state.withLock { $0.records.append(r) }
    }
}

/// The Expo emulator as a service of the generic HTTP/2 handler.
extension ExpoEmulatorShared: EmulatorHTTP2Service {
    /// 1 MiB: a batch of 100 messages of up to 4 KiB each, uncompressed, with room to spare.
    var maxRequestBodyBytes: Int { 1 << 20 }

    func payloadTooLarge() -> ExpoEmulatorAnswer {
        ExpoEmulatorRules.requestError(413, code: "PAYLOAD_TOO_LARGE", message: "Request entity too large")
    }

    func handle(_ request: EmulatorHTTP2Request) -> Decision {
        handle(method: request.method, path: request.path, authorization: request.header("authorization"),
               encoding: request.header("content-encoding"), body: request.bodyBytes)
    }

    func connectionOpened(_ channel: any Channel) -> Int {
        state.withLock { s in
            s.connectionCount += 1
            s.channels[s.connectionCount] = channel
            return s.connectionCount
        }
    }

    func connectionClosed(_ id: Int) {
        _ = state.withLock { $0.channels.removeValue(forKey: id) }
    }

    var recordsRequests: Bool { configuration.recordRequests }

    func record(_ request: EmulatorHTTP2Request, answer: ExpoEmulatorAnswer?, answered: Bool, connectionID: Int) {
        let sent = answered ? answer : nil
        record(ExpoEmulator.RecordedRequest(
            method: request.method, path: request.path, headers: request.headers, body: request.bodyBytes,
            detail: answer?.detail ?? .init(), status: sent?.status ?? 0, errorCode: sent?.errorCode,
            connectionID: connectionID))
    }
}
