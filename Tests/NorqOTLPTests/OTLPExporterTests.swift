import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
@testable import NorqOTLP
import ServiceLifecycle
import Synchronization
import Testing
import Tracing

/// A local OTLP/HTTP collector for the tests: records each POST to /v1/traces and answers with the next scripted
/// status (then 200).
final class TestCollector: Sendable {
    struct Received: Sendable {
        var path: String
        var contentType: String?
        var body: [UInt8]
    }
    private let state = Mutex<(received: [Received], statuses: [Int])>(([], []))
    private let channel: any Channel
    let port: Int

    init(statuses: [Int] = []) async throws {
        state.withLock { $0.statuses = statuses }
        let collector = StateBox()
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler(collector: collector))
                }
            }
        channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        port = channel.localAddress?.port ?? 0
        collector.owner.withLock { $0 = self }
    }

    var received: [Received] { state.withLock { $0.received } }

    func record(_ received: Received) -> Int {
        state.withLock { state in
            state.received.append(received)
            return state.statuses.isEmpty ? 200 : state.statuses.removeFirst()
        }
    }

    func close() async { try? await channel.close() }

    final class StateBox: Sendable {
        let owner = Mutex<TestCollector?>(nil)
    }

    /// Made on its channel's event loop and used only there.
    final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let collector: StateBox
        var head: HTTPRequestHead?
        var body: [UInt8] = []
        init(collector: StateBox) { self.collector = collector }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head): self.head = head; body = []
            case .body(var buffer): body += buffer.readBytes(length: buffer.readableBytes) ?? []
            case .end:
                guard let head else { return }
                let status = collector.owner.withLock { $0 }?.record(
                    Received(path: head.uri, contentType: head.headers.first(name: "content-type"), body: body)) ?? 500
                var headers = HTTPHeaders()
                headers.add(name: "content-length", value: "0")
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1,
                                                                      status: HTTPResponseStatus(statusCode: status),
                                                                      headers: headers))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }
}

@Suite("NorqOTLP: the exporter against a local collector")
struct OTLPExporterTests {
    static func configuration(port: Int) -> OTLPExporter.Configuration {
        var configuration = OTLPExporter.Configuration(endpoint: "http://127.0.0.1:\(port)/", serviceName: "exporter-test")
        configuration.scheduleDelay = .milliseconds(50)
        configuration.maxExportBatchSize = 100
        configuration.exportTimeout = .seconds(5)
        configuration.policy = OTLPExportPolicy(maxAttempts: 3, initialBackoff: .milliseconds(20))
        return configuration
    }

    /// Runs `exporter` in a service group while `body` runs, then shuts it down gracefully.
    static func running(_ exporter: OTLPExporter, _ body: () async throws -> Void) async throws {
        let group = ServiceGroup(configuration: .init(services: [exporter], logger: Logger(label: "test")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            try await body()
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }

    @Test("spans reach the collector in batches, as protobuf to /v1/traces; shutdown flushes the rest")
    func exportsInBatches() async throws {
        let collector = try await TestCollector()
        let exporter = OTLPExporter(configuration: Self.configuration(port: collector.port), logger: Logger(label: "test"))
        let tracer = OTLPTracer(sampler: OTLPSampler(ratio: 1), exporter: exporter)
        try await Self.running(exporter) {
            for index in 0..<250 { tracer.startSpan("span-\(index)", context: .topLevel, ofKind: .internal).end() }
            // Two full batches go at once; the rest within the schedule delay or at shutdown.
        }
        await collector.close()
        let received = collector.received
        #expect(received.allSatisfy { $0.path == "/v1/traces" && $0.contentType == "application/x-protobuf" })
        let names = received.flatMap { ProtobufMessage.spans(ofRequest: $0.body) }.compactMap { $0.first(5)?.string }
        #expect(names.count == 250 && Set(names).count == 250, "\(names.count)")
        #expect(received.allSatisfy { ProtobufMessage.spans(ofRequest: $0.body).count <= 100 })
    }

    @Test("a 503 is retried; a 400 drops the batch without a retry")
    func retries() async throws {
        let collector = try await TestCollector(statuses: [503, 200, 400])
        let exporter = OTLPExporter(configuration: Self.configuration(port: collector.port), logger: Logger(label: "test"))
        let tracer = OTLPTracer(sampler: OTLPSampler(ratio: 1), exporter: exporter)
        try await Self.running(exporter) {
            tracer.startSpan("first", context: .topLevel).end()
            tracer.forceFlush()
            for _ in 0..<200 where collector.received.count < 2 { try await Task.sleep(for: .milliseconds(10)) }
            tracer.startSpan("second", context: .topLevel).end()
            tracer.forceFlush()
            for _ in 0..<200 where collector.received.count < 3 { try await Task.sleep(for: .milliseconds(10)) }
        }
        await collector.close()
        let names = collector.received.map { ProtobufMessage.spans(ofRequest: $0.body).compactMap { $0.first(5)?.string } }
        // "first": 503 then 200 (two posts); "second": 400, dropped (one post, no retry).
        #expect(names == [["first"], ["first"], ["second"]], "\(names)")
    }

    @Test("a collector that is not there: the export gives up within its deadline and shutdown still returns")
    func unreachable() async throws {
        let collector = try await TestCollector()
        let port = collector.port
        await collector.close()
        var configuration = Self.configuration(port: port)
        configuration.exportTimeout = .seconds(2)
        let exporter = OTLPExporter(configuration: configuration, logger: Logger(label: "test"))
        let tracer = OTLPTracer(sampler: OTLPSampler(ratio: 1), exporter: exporter)
        let clock = ContinuousClock()
        let start = clock.now
        try await Self.running(exporter) {
            tracer.startSpan("lost", context: .topLevel).end()
        }
        #expect(start.duration(to: clock.now) < .seconds(8))
    }
}
