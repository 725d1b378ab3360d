import AsyncHTTPClient
import BenchSupport
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import NorqCore

/// `--mode ahc`: the same requests (path, headers, payload, a fresh apns-id each) through a plain
/// AsyncHTTPClient loop with `--in-flight` requests outstanding: the transport most Swift APNs clients use.
struct AHCBench {
    let options: Options

    func run() async throws -> RunResult {
        let prepared = try RouterBench(options: options).prepared()
        var tls = TLSConfiguration.makeClientConfiguration()
        if let ca = options.ca { tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMFile(ca))] }
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.httpVersion = .automatic
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let (host, port) = options.hostAndPort
        let base = "https://\(host):\(port)/3/device/"
        var headers = HTTPHeaders()
        for header in prepared.headers where header.name != "apns-id" { headers.add(name: header.name, value: header.value) }
        let recorder = LatencyRecorder(capacity: options.count)
        let sender = Sender(client: client, base: base, headers: headers, body: ByteBuffer(bytes: prepared.body),
                            recorder: recorder)
        let one: @Sendable (Int) async -> String = { index in await sender.send(index) }

        func batch(_ range: Range<Int>) async -> [String: Int] {
            await withTaskGroup(of: String.self) { group in
                var counts: [String: Int] = [:]
                var next = range.lowerBound
                while next < range.upperBound, next - range.lowerBound < options.inFlight {
                    let index = next
                    group.addTask { await one(index) }
                    next += 1
                }
                while let kind = await group.next() {
                    counts[kind, default: 0] += 1
                    if next < range.upperBound {
                        let index = next
                        group.addTask { await one(index) }
                        next += 1
                    }
                }
                return counts
            }
        }

        if options.warmup > 0 { _ = await batch(0..<min(options.warmup, options.count)) }
        recorder.reset()
        let cpuStart = ProcessStats.cpuSeconds()
        let start = ContinuousClock.now
        let counts = await batch(0..<options.count)
        let elapsed = start.duration(to: .now)
        let cpu = ProcessStats.cpuSeconds() - cpuStart
        try await client.shutdown()
        var result = RunResult()
        result.add("client", "async-http-client")
        if let label = options.label { result.add("label", label) }
        result.add("endpoint", options.endpoint)
        result.add("connections", 1)
        result.add("in_flight", options.inFlight)
        result.addDelivery(count: options.count, elapsed: elapsed, cpu: cpu, latencies: recorder.all, outcomes: counts)
        return result
    }
}

/// One plain AsyncHTTPClient request per call.
struct Sender: Sendable {
    let client: HTTPClient
    let base: String
    let headers: HTTPHeaders
    let body: ByteBuffer
    let recorder: LatencyRecorder

    func send(_ index: Int) async -> String {
        var request = HTTPClientRequest(url: base + BenchTokens.token(index))
        request.method = .POST
        request.headers = headers
        request.headers.add(name: "apns-id", value: UUID().uuidString.lowercased())
        request.body = .bytes(body)
        let start = ContinuousClock.now
        do {
            let response = try await client.execute(request, timeout: .seconds(60))
            _ = try await response.body.collect(upTo: 1 << 16)
            recorder.record(start.duration(to: .now))
            return response.status.code == 200 ? "delivered" : "status:\(response.status.code)"
        } catch {
            return "failed:\(type(of: error))"
        }
    }
}
