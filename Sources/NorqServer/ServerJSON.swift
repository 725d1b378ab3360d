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

    /// `{"error": {"code", "message", "hint"?}}` (docs/openapi.yaml's `Error`, its generated type) with the error's
    /// status. Messages never hold a key or a whole token.
    static func error(_ error: NorqError, headers: HTTPFields = [:]) -> Response {
        encoded(error.httpStatus, Components.Schemas._Error(error: .init(code: error.code.rawValue, message: error.message,
                                                                          hint: error.hint)),
                headers: headers)
    }

    /// A JSON response with `status` whose body is a value of a type generated from docs/openapi.yaml (NorqAPI): the
    /// document has the spec's shape by construction. Keys are sorted; a nil property the spec allows to be null is
    /// written `null` (`APIDocuments.nullable`), any other nil is left out.
    static func encoded(_ status: Int, _ body: some Encodable, headers: HTTPFields = [:]) -> Response {
        var headers = headers
        headers[.contentType] = contentType
        var status = status
        let bytes: [UInt8]
        if let encoded = serialized(body) {
            bytes = encoded
        } else {
            // Only an integer past 64 bits fails to encode, and these documents hold none.
            status = 500
            bytes = serialized(Components.Schemas._Error(error: .init(code: "server/internal",
                                                                      message: "the answer could not be encoded"))) ?? []
        }
        return Response(status: HTTPResponse.Status(code: status), headers: headers,
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// The compact JSON of `body` (`SpecJSONEncoder` with the spec's nullable properties), nil when it cannot be
    /// encoded.
    static func serialized(_ body: some Encodable) -> [UInt8]? {
        // (A non-finite number, which JSON lacks, is written as null by `JSONValue.serialized`.)
        json(body)?.serialized()
    }

    /// The JSON `body` is answered with (`serialized`, before its bytes).
    static func json(_ body: some Encodable) -> JSONValue? {
        try? SpecJSONEncoder(nullable: APIDocuments.nullProperties(of:)).encode(body)
    }

    /// A durable send's summary as `GET /v1/sends/{id}` writes it (`APIDocuments.summary`).
    static func summary(_ progress: DurableDelivery.Progress) -> JSONValue {
        json(APIDocuments.summary(progress)) ?? .null
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
}

