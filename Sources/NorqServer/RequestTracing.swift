import HTTPTypes
import Hummingbird
import Tracing
import NorqSpanAttributes

/// The span of each API request (issue 33), made with the router's tracer: the caller's W3C `traceparent` (read by
/// the tracer's propagation) is its parent, the route pattern its name (`/v1/sends`), and the request's context is
/// `InstrumentationContext.current` in the handlers, so the enqueue's span is its child and the context stored with
/// the send makes the worker's claim and attempts its children too. Attributes as Hummingbird's `TracingMiddleware`
/// (method, path, route, status), without the query string or any header: an `Authorization` key never reaches a
/// span. The span ends when the response is ready.
///
/// Not a middleware of its own: ``ErrorAndAccessMiddleware`` (the outermost) runs its answer inside the span, so the
/// span sees the status the client gets. A middleware more in Hummingbird's chain cost a traced server 0.5-1.5% of its
/// CPU a send (Benchmarks/README.md, "Stop 39"), of the ~7% tracing cost in all.
struct RequestTracing: Sendable {
    /// How the span is made and ended with the tracer (decided once: a value with Norq's OTLP tracer).
    let recorder: SpanAttributeRecorder
    var tracer: any Tracer { recorder.tracer }

    init(tracer: any Tracer) {
        self.recorder = SpanAttributeRecorder(tracer: tracer)
    }

    /// `respond`'s answer to `request`, made inside the request's span (errors are already answers: a status of 500 or
    /// more marks the span failed).
    func traced(_ request: Request, context: ServerRequestContext,
                respond: (Request, ServerRequestContext) async -> Response) async -> Response {
        var parent = InstrumentationContext.current ?? .topLevel
        tracer.extract(request.headers, into: &parent, using: HTTPFieldsExtractor())
        let span = recorder.startSpan(Self.operationName(request.method), context: parent, ofKind: .server)
        let spanContext = recorder.context(of: span, in: parent)
        guard span.isRecording else {
            defer { recorder.end(span) }
            return await InstrumentationContext.$current.withValue(spanContext) { await respond(request, context) }
        }
        // The attributes, the route's name and the status are given once, with the span's end.
        var attributes = SpanAttributeList(capacity: 4)
        let path = request.uri.path
        attributes.add("http.request.method", .string(request.method.rawValue))
        attributes.add("url.path", .string(path.utf8.count <= 256 ? path
                                           : String(decoding: path.utf8.prefix(256), as: UTF8.self)))
        let response = await InstrumentationContext.$current.withValue(spanContext) { await respond(request, context) }
        // A route pattern starts with `/`; Hummingbird names a request no route matched `NotFound`, which is no
        // route (OpenTelemetry: `http.route` only for a matched route; the span keeps its `HTTP GET` name).
        var route: String?
        if let matched = context.endpointPath, matched.hasPrefix("/") {
            route = matched
            attributes.add("http.route", .string(matched))
        }
        attributes.add("http.response.status_code", .int(Int64(response.status.code)))
        recorder.end(span, operationName: route, attributes: attributes,
                     status: response.status.code >= 500 ? SpanStatus(code: .error) : nil)
        return response
    }
}

extension RequestTracing {
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
