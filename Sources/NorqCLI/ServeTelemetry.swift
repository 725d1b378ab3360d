import Foundation
import Logging
import NorqConfig
import NorqCore
import NorqOTLP
import ServiceLifecycle
import Tracing
#if OTLP
import OTel
#endif

/// `telemetry:` of norq.yaml for `norq serve` (issue 33): the tracer its router, worker and API make spans with, and
/// the service that exports them (run in the serve command's service group, so that spans still buffered are
/// flushed at shutdown). `traces: otlp` is Norq's own OTLP/HTTP exporter (NorqOTLP, every build); `traces:
/// swift-otel` exports through swift-otel and needs a `norq` built with the package's `OTLP` trait.
enum ServeTelemetry {
    /// Whether this `norq` can export spans through swift-otel (built with `--traits OTLP`).
    static var otlpBuilt: Bool {
        #if OTLP
        true
        #else
        false
        #endif
    }

    /// Refuses, at load, a configuration this build cannot honour (`config/otlp-not-built`).
    static func check(_ telemetry: TelemetryConfiguration) throws(NorqError) {
        if telemetry.traces == .swiftOTel, !otlpBuilt {
            throw NorqError(.configOTLPNotBuilt,
                            "telemetry.traces is swift-otel, but this norq was built without swift-otel",
                            at: telemetry.location,
                            hint: "build norq with `swift build -c release --traits OTLP`, or set telemetry.traces: otlp (Norq's own exporter)")
        }
    }

    /// The tracer and its exporting service for `telemetry` (nil: tracing is off).
    static func make(_ telemetry: TelemetryConfiguration,
                     logger: Logger) throws(NorqError) -> (tracer: any Tracer, service: any Service)? {
        try check(telemetry)
        if telemetry.traces == .otlp {
            var configuration = OTLPExporter.Configuration(
                endpoint: telemetry.endpoint ?? ProcessInfo.processInfo.environment["OTEL_EXPORTER_OTLP_ENDPOINT"].flatMap { $0.isEmpty ? nil : $0 } ?? "http://localhost:4318",
                serviceName: telemetry.serviceName)
            configuration.maxQueueSize = 16_384
            // Each export costs the server ~0.5 ms of CPU whatever its size (Benchmarks/README.md, "Stop 39"): 8,192
            // spans (~2 MB, a quarter of a second of a busy server's spans) a request, so a busy server makes a few a
            // second. A quiet one still exports every second.
            configuration.maxExportBatchSize = 8_192
            let exporter = OTLPExporter(configuration: configuration, logger: logger)
            return (OTLPTracer(sampler: OTLPSampler(ratio: telemetry.sampleRatio), exporter: exporter), exporter)
        }
        guard telemetry.traces == .swiftOTel else { return nil }
        #if OTLP
        var configuration = OTel.Configuration.default
        configuration.serviceName = telemetry.serviceName
        configuration.diagnosticLogger = .custom(logger)
        configuration.propagators = [.traceContext]
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.enabled = true
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        // A bounded queue sized for a busy server (a few spans per send at thousands of sends a second): exported in
        // batches of 2,048 every second or whenever it fills; spans beyond it are dropped (and the drop logged).
        configuration.traces.batchSpanProcessor.maxQueueSize = 16_384
        configuration.traces.batchSpanProcessor.maxExportBatchSize = 2_048
        configuration.traces.batchSpanProcessor.scheduleDelay = .seconds(1)
        if let endpoint = telemetry.endpoint { configuration.traces.otlpExporter.endpoint = endpoint }
        if let sampler = OTel.Configuration.TracesConfiguration.SamplerConfiguration.parentBasedTraceIDRatio(ratio: telemetry.sampleRatio) {
            configuration.traces.sampler = sampler
        }
        do {
            let backend = try OTel.makeTracingBackend(configuration: configuration)
            return (backend.factory, backend.service)
        } catch {
            throw NorqError(.configInvalidTelemetry, "the OTLP exporter could not be set up: \(error)",
                            at: telemetry.location)
        }
        #else
        return nil
        #endif
    }
}
