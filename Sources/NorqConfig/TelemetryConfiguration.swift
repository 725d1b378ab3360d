public import NorqCore

extension NorqError.Code {
    /// The `telemetry:` block of `norq.yaml` is invalid: an unknown `traces:` exporter, an endpoint that is not an
    /// `http(s)://` URL, a sample ratio outside 0...1, an empty service name.
    public static let configInvalidTelemetry: Self = "config/invalid-telemetry"
    /// `telemetry.traces: swift-otel` in a `norq` built without swift-otel (the package's `OTLP` trait is off:
    /// `swift build --traits OTLP` builds it).
    public static let configOTLPNotBuilt: Self = "config/otlp-not-built"
}

/// The `telemetry:` block of `norq.yaml`: whether `norq serve` exports its spans (off by default).
///
/// ```yaml
/// telemetry:
///   traces: otlp                       # off (the default) | otlp: OTLP/HTTP (protobuf) to `endpoint`
///                                      # | swift-otel: the same through swift-otel (a norq built with the OTLP trait)
///   endpoint: http://127.0.0.1:4318    # the collector (default: OTEL_EXPORTER_OTLP_ENDPOINT, else this)
///   serviceName: norq                  # the spans' service.name
///   sampleRatio: 1.0                   # the share of new traces recorded (0...1); a caller's sampled flag wins
/// ```
///
/// Spans: `POST /v1/sends` and every other API request, the enqueue, the worker's claim of a send's rows and each
/// provider attempt; a request's W3C `traceparent` is stored with its send, so the worker's spans (in any
/// instance) join the request's trace. See docs/server.md, "Tracing".
public struct TelemetryConfiguration: Sendable, Hashable {
    /// Where spans go.
    public struct TraceExporter: Sendable, Hashable, RawRepresentable {
        /// The name as written in norq.yaml.
        public var rawValue: String
        /// An exporter by name (``known`` lists the ones `traces:` accepts).
        public init(rawValue: String) { self.rawValue = rawValue }
        /// No spans are made (the default).
        public static let off = TraceExporter(rawValue: "off")
        /// OTLP/HTTP (protobuf) to ``TelemetryConfiguration/endpoint`` by Norq's own exporter (every build).
        public static let otlp = TraceExporter(rawValue: "otlp")
        /// OTLP/HTTP (protobuf) to ``TelemetryConfiguration/endpoint`` through swift-otel (needs a `norq` built with
        /// the package's `OTLP` trait).
        public static let swiftOTel = TraceExporter(rawValue: "swift-otel")
        /// Every exporter `traces:` accepts.
        public static let known: [TraceExporter] = [.off, .otlp, .swiftOTel]
    }

    /// Where spans go (`traces:`): ``TraceExporter/off`` (the default), ``TraceExporter/otlp`` or
    /// ``TraceExporter/swiftOTel``.
    public var traces: TraceExporter = .off
    /// The OTLP/HTTP endpoint (`http(s)://host:port`, the signal path added by the exporter); nil: the exporter's
    /// default (`OTEL_EXPORTER_OTLP_ENDPOINT`, else `http://localhost:4318`).
    public var endpoint: String?
    /// The spans' `service.name`.
    public var serviceName: String = "norq"
    /// The share of new traces recorded, 0...1 (a request whose `traceparent` is sampled is always recorded).
    public var sampleRatio: Double = 1
    /// Where the block is in the file (for errors).
    public var location: SourceLocation?

    /// A telemetry configuration; the defaults are tracing off.
    public init(traces: TraceExporter = .off, endpoint: String? = nil, serviceName: String = "norq",
                sampleRatio: Double = 1) {
        self.traces = traces
        self.endpoint = endpoint
        self.serviceName = serviceName
        self.sampleRatio = sampleRatio
    }

    /// Whether spans are made at all.
    public var isTracing: Bool { traces != .off }

    static let keys = ["traces", "endpoint", "serviceName", "sampleRatio"]

    /// Parses and validates a `telemetry:` node.
    public static func parse(_ node: ConfigNode) throws(NorqError) -> TelemetryConfiguration {
        var telemetry = TelemetryConfiguration()
        telemetry.location = node.location
        if node.value == .null { return telemetry }
        let map = try node.mapping(allowedKeys: keys, path: "telemetry")
        if let value = map["traces"] {
            let name = try value.string(path: "telemetry.traces")
            guard let exporter = TraceExporter.known.first(where: { $0.rawValue == name }) else {
                throw NorqError(.configInvalidTelemetry,
                                "telemetry.traces must be one of \(TraceExporter.known.map(\.rawValue).joined(separator: ", ")), not \"\(name.prefix(64))\"",
                                at: value.location)
            }
            telemetry.traces = exporter
        }
        if let value = map["endpoint"] {
            let endpoint = try value.string(path: "telemetry.endpoint")
            let lower = endpoint.lowercased()
            guard lower.hasPrefix("http://") || lower.hasPrefix("https://"), endpoint.utf8.count <= 2048,
                  !endpoint.contains(where: { $0.isWhitespace }),
                  endpoint.drop(while: { $0 != ":" }).dropFirst(3).first.map({ $0 != "/" }) ?? false else {
                throw NorqError(.configInvalidTelemetry,
                                "telemetry.endpoint must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:4318",
                                at: value.location)
            }
            telemetry.endpoint = endpoint
        }
        if let value = map["serviceName"] {
            let name = try value.string(path: "telemetry.serviceName")
            guard !name.isEmpty, name.utf8.count <= 255 else {
                throw NorqError(.configInvalidTelemetry, "telemetry.serviceName must be 1 to 255 bytes", at: value.location)
            }
            telemetry.serviceName = name
        }
        if let value = map["sampleRatio"] {
            guard let scalar = value.scalar, let ratio = Double(scalar), ratio.isFinite, (0...1).contains(ratio) else {
                throw NorqError(.configInvalidTelemetry, "telemetry.sampleRatio must be a number from 0 to 1",
                                at: value.location)
            }
            telemetry.sampleRatio = ratio
        }
        return telemetry
    }
}
