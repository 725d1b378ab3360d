import HTTPTypes
import Hummingbird
import Tracing
import NorqSpanAttributes

/// The span of each API request (issue 33), made with the router's tracer: the caller's W3C `traceparent` (read by
/// the tracer's propagation) is its parent, the route pattern its name (`/v1/sends`), and the request's context is
/// `InstrumentationContext.current` in the handlers, so the enqueue's span is its child and the context stored with
/// the send makes the worker's claim and attempts its children too. Attributes as Hummingbird's `TracingMiddleware`
/// (method, path, route, status), without the query string or any header: an `Authorization` key never reaches a
/// span. The span ends when the response is ready. Added only when the router traces.
struct RequestTracingMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    let tracer: any Tracer
    /// How the span gets its attributes with this tracer (decided once).
    let recorder: SpanAttributeRecorder

    init(tracer: any Tracer) {
        self.tracer = tracer
        self.recorder = SpanAttributeRecorder(tracer: tracer)
    }

    func handle(_ request: Request, context: Context,
                next: (Request, Context) async throws -> Response) async throws -> Response {
        var parent = InstrumentationContext.current ?? .topLevel
        tracer.extract(request.headers, into: &parent, using: HTTPFieldsExtractor())
        let span = tracer.startSpan(Self.operationName(request.method), context: parent, ofKind: .server)
        defer { span.end() }
        // The attributes are given once, when the answer is known; a span that records nothing gets none.
        var attributes = SpanAttributeList(capacity: span.isRecording ? 4 : 0)
        if span.isRecording {
            let path = request.uri.path
            attributes.set("http.request.method", .string(request.method.rawValue))
            attributes.set("url.path", .string(path.utf8.count <= 256 ? path
                                               : String(decoding: path.utf8.prefix(256), as: UTF8.self)))
        }
        do {
            let response = try await InstrumentationContext.$current.withValue(span.context) {
                try await next(request, context)
            }
            if span.isRecording {
                if let route = context.endpointPath {
                    span.operationName = route
                    attributes.set("http.route", .string(route))
                }
                attributes.set("http.response.status_code", .int(Int64(response.status.code)))
                recorder.record(attributes, on: span)
                if response.status.code >= 500 { span.setStatus(SpanStatus(code: .error)) }
            }
            return response
        } catch {
            // Only errors the next middleware did not map (it maps every error to a response): a 500.
            if let route = context.endpointPath { span.operationName = route }
            attributes.set("http.response.status_code",
                           .int(Int64((error as? any HTTPResponseError).map { Int($0.status.code) } ?? 500)))
            recorder.record(attributes, on: span)
            span.setStatus(SpanStatus(code: .error))
            throw error
        }
    }
}

extension RequestTracingMiddleware {
    /// The span's name until its route is known (`HTTP POST`): made once for the methods the API serves.
    static func operationName(_ method: HTTPRequest.Method) -> String {
        switch method {
        case .get: "HTTP GET"
        case .post: "HTTP POST"
        case .put: "HTTP PUT"
        case .delete: "HTTP DELETE"
        case .head: "HTTP HEAD"
        default: "HTTP \(method.rawValue)"
        }
    }
}

/// Reads a propagation header (W3C `traceparent`, `tracestate`) from a request's fields.
struct HTTPFieldsExtractor: Extractor {
    /// The W3C names, made once (a name is validated when it is made).
    static let traceparent = HTTPField.Name("traceparent")!
    static let tracestate = HTTPField.Name("tracestate")!

    func extract(key name: String, from fields: HTTPFields) -> String? {
        let field: HTTPField.Name
        switch name {
        case "traceparent": field = Self.traceparent
        case "tracestate": field = Self.tracestate
        default:
            guard let named = HTTPField.Name(name) else { return nil }
            field = named
        }
        return fields[field]
    }
}
