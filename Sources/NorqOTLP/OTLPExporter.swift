import AsyncHTTPClient
public import Logging
import Metrics
import NIOCore
public import ServiceLifecycle

/// Sends the spans of ``OTLPTracer`` over OTLP/HTTP (protobuf, `POST {endpoint}/v1/traces`) in batches: every
/// ``Configuration/scheduleDelay``, whenever ``Configuration/maxExportBatchSize`` spans wait, and at graceful
/// shutdown (what is held is sent before `run()` returns). Run it in the service group.
///
/// Bounds: at most ``Configuration/maxQueueSize`` spans and about ``Configuration/maxQueueBytes`` bytes wait,
/// encoded as they ended (beyond either, spans are dropped); an export has a
/// deadline of ``Configuration/exportTimeout`` across its attempts (``OTLPExportPolicy``); answers are read to at
/// most 64 KiB. Metrics: `norq_tracing_spans_exported_total`, `norq_tracing_spans_dropped_total` (`reason`:
/// `queue_full`, `export_failed`).
public final class OTLPExporter: Service, Sendable {
    /// Where and how spans are sent.
    public struct Configuration: Sendable, Hashable, CustomStringConvertible {
        /// The collector's base URL (`http(s)://host:port[/path]`); `/v1/traces` is added.
        public var endpoint: String = "http://localhost:4318"
        /// The resource's `service.name`.
        public var serviceName: String = "norq"
        /// The most spans that wait for export (beyond it, and beyond ``maxQueueBytes``, spans are dropped).
        public var maxQueueSize: Int = 16_384
        /// About the most bytes of encoded spans that wait for export (a span is refused once they are reached).
        public var maxQueueBytes: Int = 16 << 20
        public var maxExportBatchSize: Int = 2_048
        public var scheduleDelay: Duration = .seconds(1)
        public var exportTimeout: Duration = .seconds(10)
        public var policy = OTLPExportPolicy()

        public init(endpoint: String = "http://localhost:4318", serviceName: String = "norq") {
            self.endpoint = endpoint
            self.serviceName = serviceName
        }

        /// The URL exports are posted to.
        public var tracesURL: String {
            var base = endpoint
            while base.hasSuffix("/") { base.removeLast() }
            return base + "/v1/traces"
        }

        public var description: String {
            "OTLPExporter.Configuration(endpoint: \(endpoint), serviceName: \(serviceName), maxQueueSize: \(maxQueueSize), maxQueueBytes: \(maxQueueBytes), maxExportBatchSize: \(maxExportBatchSize))"
        }
    }

    public let configuration: Configuration
    let buffer: OTLPSpanBuffer
    private let logger: Logger
    private let exported = Counter(label: "norq_tracing_spans_exported_total")
    private let droppedQueueFull = Counter(label: "norq_tracing_spans_dropped_total", dimensions: [("reason", "queue_full")])
    private let droppedFailed = Counter(label: "norq_tracing_spans_dropped_total", dimensions: [("reason", "export_failed")])

    public init(configuration: Configuration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        self.buffer = OTLPSpanBuffer(maxQueueSize: configuration.maxQueueSize,
                                     maxQueueBytes: configuration.maxQueueBytes,
                                     batchSize: configuration.maxExportBatchSize)
    }

    public func run() async throws {
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        await withTaskGroup(of: Void.self) { group in
            let delay = configuration.scheduleDelay
            let buffer = self.buffer
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: delay)
                    buffer.requestFlush()
                }
            }
            await withGracefulShutdownHandler {
                for await _ in buffer.wakeups { await self.exportHeld(client: client) }
            } onGracefulShutdown: {
                buffer.finish()
            }
            group.cancelAll()
        }
        // What ended before the shutdown is still sent (bounded by the export deadline).
        await exportHeld(client: client)
        try? await client.shutdown()
    }

    /// Sends everything held, in batches.
    func exportHeld(client: HTTPClient) async {
        let (spans, dropped) = buffer.takeAll()
        if dropped > 0 {
            droppedQueueFull.increment(by: dropped)
            logger.info("spans dropped: the export queue was full",
                        metadata: ["norq.tracing.dropped": "\(dropped)",
                                   "norq.tracing.max_queue_size": "\(configuration.maxQueueSize)"])
        }
        var start = 0
        while start < spans.count {
            let end = min(start + configuration.maxExportBatchSize, spans.count)
            await export(spans.fields(start..<end), count: end - start, client: client)
            start = end
        }
        buffer.recycle(consume spans)
    }

    /// Sends `count` spans, encoded as `ScopeSpans.spans` fields (`spanFields`), as one request.
    private func export(_ spanFields: ArraySlice<UInt8>, count: Int, client: HTTPClient) async {
        // The request's first bytes and the spans, copied once into the body.
        let prefix = OTLPTraceEncoder.requestPrefix(spanFieldsCount: spanFields.count, serviceName: configuration.serviceName)
        var body = ByteBuffer()
        body.reserveCapacity(prefix.count + spanFields.count)
        body.writeBytes(prefix)
        body.writeBytes(spanFields)
        let clock = ContinuousClock()
        let deadline = clock.now + configuration.exportTimeout
        var attempt = 1
        while true {
            var status: Int?
            var failure: String?
            do {
                var request = HTTPClientRequest(url: configuration.tracesURL)
                request.method = .POST
                request.headers.add(name: "content-type", value: "application/x-protobuf")
                request.body = .bytes(body)
                let remaining = clock.now.duration(to: deadline)
                let nioDeadline = NIODeadline.now() + .nanoseconds(max(0, remaining.nanoseconds))
                let response = try await client.execute(request, deadline: nioDeadline, logger: logger)
                status = Int(response.status.code)
                _ = try? await response.body.collect(upTo: 65_536)
            } catch {
                failure = String(describing: error)
            }
            switch configuration.policy.decision(status: status, attempt: attempt,
                                                 remaining: clock.now.duration(to: deadline)) {
            case .done:
                exported.increment(by: count)
                return
            case .retry(let delay):
                try? await Task.sleep(for: delay)
                attempt += 1
            case .drop:
                droppedFailed.increment(by: count)
                logger.info("spans dropped: the OTLP export failed",
                            metadata: ["norq.tracing.dropped": "\(count)",
                                       "norq.tracing.status": "\(status.map(String.init) ?? "none")",
                                       "norq.tracing.error": "\(failure ?? "-")", "norq.tracing.attempts": "\(attempt)"])
                return
            }
        }
    }
}

extension Duration {
    /// Whole nanoseconds (saturating).
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        return product.addingReportingOverflow(attoseconds / 1_000_000_000).overflow ? .max : product + attoseconds / 1_000_000_000
    }
}
