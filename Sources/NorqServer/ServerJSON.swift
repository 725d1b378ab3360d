import Foundation
import Hummingbird
import Norq
import NorqAPI
import NorqCore
import NorqStore
import NIOCore
import OrderedCollections

/// JSON bodies in and out of the API: bounded reading, field checks, and the answer documents.
enum ServerJSON {
    static let contentType = "application/json"

    /// A JSON response with `status`.
    static func response(_ status: Int, _ body: JSONValue, headers: HTTPFields = [:]) -> Response {
        var headers = headers
        headers[.contentType] = contentType
        let bytes = body.serialized()
        return Response(status: HTTPResponse.Status(code: status), headers: headers,
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// `{"error": {"code", "message", "hint"?}}` (docs/openapi.yaml's `Error`, its generated type) with the error's
    /// status. Messages never hold a key or a whole token.
    static func error(_ error: NorqError, headers: HTTPFields = [:]) -> Response {
        encoded(error.httpStatus, Components.Schemas._Error(error: .init(code: error.code.rawValue, message: error.message,
                                                                          hint: error.hint)),
                headers: headers)
    }

    /// A JSON response with `status` whose body is a value of a type generated from docs/openapi.yaml (NorqAPI): the
    /// document has the spec's shape by construction.
    static func encoded(_ status: Int, _ body: some Encodable, headers: HTTPFields = [:]) -> Response {
        var headers = headers
        headers[.contentType] = contentType
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(body) else {
            // Only a non-finite number fails to encode, and these documents hold none.
            return response(500, ["error": ["code": "server/internal", "message": "the answer could not be encoded"]])
        }
        return Response(status: HTTPResponse.Status(code: status), headers: headers,
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// Reads the body (at most `limit` bytes) and parses it as a JSON object; with `elements`, the arrays it names
    /// are counted while parsing (the parse stops at the first element past the limit).
    static func readObject(_ request: Request, limit: Int,
                           elements: JSONElementLimit? = nil) async throws(NorqError) -> [String: JSONValue] {
        let type = request.headers[.contentType]?.lowercased() ?? ""
        guard type == contentType || type.hasPrefix(contentType + ";") else {
            throw NorqError(.serverUnsupportedMediaType,
                            "the body must be JSON with Content-Type: application/json (got \(type.isEmpty ? "none" : "\(type.prefix(64))"))")
        }
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit {
            throw NorqError(.serverBodyTooLarge, "the body is larger than \(limit) bytes (server.limits.bodyBytes)")
        }
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: limit)
        } catch is NIOTooManyBytesError {
            throw NorqError(.serverBodyTooLarge, "the body is larger than \(limit) bytes (server.limits.bodyBytes)")
        } catch {
            throw NorqError(.serverInvalidRequest, "the body could not be read")
        }
        let json: JSONValue
        do {
            if let elements {
                json = try JSONValue(parsing: Array(buffer.readableBytesView), maxDepth: 64, limit: elements)
            } else {
                json = try JSONValue(parsing: Array(buffer.readableBytesView), maxDepth: 64)
            }
        } catch where error.code != .invalidJSON {
            throw error
        } catch {
            throw NorqError(.serverInvalidRequest, "the body is not valid JSON: \(error.message)")
        }
        guard case .object(let object) = json else {
            throw NorqError(.serverInvalidRequest, "the body must be a JSON object")
        }
        var result: [String: JSONValue] = [:]
        for (key, value) in object { result[key] = value }
        return result
    }

    /// Refuses fields not in `allowed` (a typo must not be silently ignored).
    static func checkFields(_ object: [String: JSONValue], allowed: Set<String>, in place: String) throws(NorqError) {
        for key in object.keys.sorted() where !allowed.contains(key) {
            throw NorqError(.serverInvalidRequest, "unknown field \"\(key.prefix(64))\" in \(place)",
                            hint: "allowed: " + allowed.sorted().joined(separator: ", "))
        }
    }

    static func string(_ object: [String: JSONValue], _ key: String, in place: String) throws(NorqError) -> String? {
        guard let value = object[key], value != .null else { return nil }
        guard case .string(let text) = value, !text.isEmpty else {
            throw NorqError(.serverInvalidRequest, "\(place).\(key) must be a non-empty string")
        }
        return text
    }

    static func int(_ object: [String: JSONValue], _ key: String, in place: String) throws(NorqError) -> Int64? {
        guard let value = object[key], value != .null else { return nil }
        switch value {
        case .int(let number): return number
        case .double(let number) where number.rounded() == number && abs(number) < 1e15: return Int64(number)
        default: throw NorqError(.serverInvalidRequest, "\(place).\(key) must be an integer")
        }
    }

    static func bool(_ object: [String: JSONValue], _ key: String, in place: String) throws(NorqError) -> Bool? {
        guard let value = object[key], value != .null else { return nil }
        guard case .bool(let flag) = value else {
            throw NorqError(.serverInvalidRequest, "\(place).\(key) must be true or false")
        }
        return flag
    }

    // MARK: documents

    static func target(_ target: DeliveryTarget) -> JSONValue { DryRunJSON.targetJSON(target, redactTokens: true) }

    static func outcome(_ result: PushOutcome.Result) -> JSONValue { DryRunJSON.outcomeJSON(result) }

    static func outcomeEntry(_ outcome: PushOutcome) -> JSONValue { DryRunJSON.outcomeEntryJSON(outcome, redactTokens: true) }

    static func row(_ row: OutboxRow) -> JSONValue { DryRunJSON.rowJSON(row) }

    /// The same summary from a durable send's counts by state (a final state other than delivered, accepted,
    /// rejected or skipped is a failure, as `DurableCodec` reads it; durable outcomes are never duplicates).
    /// `accepted`: tickets whose receipts the worker has still to fetch (they count as delivered for
    /// `allDelivered`, as in a direct send's report).
    static func summary(_ progress: DurableDelivery.Progress) -> JSONValue {
        let delivered = progress.states[.delivered] ?? 0, rejected = progress.states[.rejected] ?? 0
        let skipped = progress.states[.skipped] ?? 0, accepted = progress.awaitingReceipts
        let failed = progress.finished - delivered - accepted - rejected - skipped
        return [
            "delivered": .int(Int64(delivered)), "accepted": .int(Int64(accepted)), "rejected": .int(Int64(rejected)),
            "failed": .int(Int64(failed)), "skipped": .int(Int64(skipped)), "duplicates": 0,
            "allDelivered": .bool(delivered + accepted == progress.finished),
        ]
    }

    static func summary(_ report: SendReport) -> JSONValue {
        [
            "delivered": .int(Int64(report.delivered)), "accepted": .int(Int64(report.accepted)),
            "rejected": .int(Int64(report.rejected)),
            "failed": .int(Int64(report.failed)), "skipped": .int(Int64(report.skipped)),
            "duplicates": .int(Int64(report.duplicates)), "allDelivered": .bool(report.allDelivered),
        ]
    }
}

extension JSONValue {
    static func optional(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
}
