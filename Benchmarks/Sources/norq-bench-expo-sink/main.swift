import BenchServer
import Foundation
import NorqTesting
import NIOCore
import NorqZlib

// norq-bench-expo-sink: the Expo-shaped sink of Benchmarks/expo.sh, in a process of its own. It answers
// `POST /--/api/v2/push/send` with one ok ticket per recipient it counted (every element of every `to`, found by a
// one-pass scanner, not a JSON parser; gzip bodies inflated first), from answers built once for 0...100 recipients,
// so a partial batch (the router's linger timer fired) gets as many tickets as it carried. Anything else is 404;
// more than 100 recipients is Expo's 400 PUSH_TOO_MANY_NOTIFICATIONS. No records, no receipts: it must stay cheap,
// since it shares the machine with the client it measures (h2load is measured against it in the same run).
// With --http1-port (and --http1-cert / --http1-key, PEM files), it also serves HTTP/1.1 over TLS on a second port
// with the same answers (`HTTP1TicketServer`), for the Python exponent-server-sdk, which speaks only HTTP/1.1; it
// prints `http1 PORT` before `listening PORT`.
// usage: norq-bench-expo-sink --port P --ca-out PEM [--max-streams N] [--http1-port P --http1-cert PEM --http1-key PEM]

struct SinkAnswer: EmulatorHTTP2Answer {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]
}

struct ExpoTicketSink: EmulatorHTTP2Service {
    static let sendPath = "/--/api/v2/push/send"
    static let maxRecipients = 100
    /// Answers for 0...100 recipients, built once.
    let tickets: [SinkAnswer] = (0...ExpoTicketSink.maxRecipients).map { count in
        let list = (0..<count).map { #"{"status":"ok","id":"00000000-0000-4000-8000-\#(String(format: "%012d", $0))"}"# }
        return SinkAnswer(status: 200, headers: [("content-type", "application/json")],
                          body: Array(#"{"data":[\#(list.joined(separator: ","))]}"#.utf8))
    }

    /// 4 MiB: 100 messages of Expo's largest payload, uncompressed, several times over.
    var maxRequestBodyBytes: Int { 4 << 20 }

    func payloadTooLarge() -> SinkAnswer { Self.error(413, code: "PAYLOAD_TOO_LARGE") }

    func handle(_ request: EmulatorHTTP2Request) -> EmulatorHTTP2Decision<SinkAnswer> {
        .answer(answer(method: request.method, path: request.path, contentEncoding: request.header("content-encoding"),
                       body: request.body), latency: .zero)
    }

    /// The answer to one request, whichever HTTP version it came by: one ok ticket per recipient of a send.
    func answer(method: String, path: String, contentEncoding: String?, body: ByteBuffer) -> SinkAnswer {
        guard method == "POST", path == Self.sendPath else { return Self.error(404, code: "NOT_FOUND") }
        let count: Int?
        if contentEncoding == "gzip" {
            count = Gzip.decompress(Array(body.readableBytesView), limit: 8 << 20)
                .flatMap { $0.withUnsafeBytes { Self.recipients(in: $0) } }
        } else {
            count = body.withUnsafeReadableBytes { Self.recipients(in: $0) }
        }
        guard let count else { return Self.error(400, code: "API_ERROR") }
        guard count <= Self.maxRecipients else { return Self.error(400, code: "PUSH_TOO_MANY_NOTIFICATIONS") }
        return tickets[count]
    }

    static func error(_ status: Int, code: String) -> SinkAnswer {
        SinkAnswer(status: status, headers: [("content-type", "application/json")],
                   body: Array(#"{"errors":[{"code":"\#(code)","message":"\#(code)"}]}"#.utf8))
    }

    /// The recipients of a send body (an array of messages, or one message): each `"to"` key of a message whose
    /// value is a string counts 1, an array counts its strings. One pass, strings skipped with their escapes; nil
    /// when a string is not closed.
    static func recipients(in bytes: UnsafeRawBufferPointer) -> Int? {
        let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\"), colon = UInt8(ascii: ":")
        let n = bytes.count
        var i = 0
        func skipSpace(_ j: inout Int) {
            while j < n, bytes[j] == 0x20 || bytes[j] == 0x0a || bytes[j] == 0x0d || bytes[j] == 0x09 { j += 1 }
        }
        skipSpace(&i)
        // The depth at which a message's keys are: 2 inside the array, 1 for a lone object.
        let messageDepth = i < n && bytes[i] == UInt8(ascii: "[") ? 2 : 1
        var depth = 0, count = 0, toArrayDepth = -1
        while i < n {
            switch bytes[i] {
            case quote:
                let start = i + 1
                i += 1
                while i < n, bytes[i] != quote { i += bytes[i] == backslash ? 2 : 1 }
                guard i < n else { return nil }
                if depth == toArrayDepth {
                    count += 1
                } else if depth == messageDepth, i - start == 2, bytes[start] == UInt8(ascii: "t"),
                          bytes[start + 1] == UInt8(ascii: "o") {
                    var j = i + 1
                    skipSpace(&j)
                    if j < n, bytes[j] == colon {
                        j += 1
                        skipSpace(&j)
                        if j < n, bytes[j] == quote { count += 1 } else if j < n, bytes[j] == UInt8(ascii: "[") { toArrayDepth = depth + 1 }
                    }
                }
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                if depth == toArrayDepth { toArrayDepth = -1 }
                depth -= 1
            default:
                break
            }
            i += 1
        }
        return count
    }
}

let options = BenchServerProcess.options(known: ["--port", "--ca-out", "--max-streams", "--http1-port", "--http1-cert",
                                                "--http1-key"])
// Self-checks of the scanner (a wrong count would make every run fail with expo/ticket-count-mismatch).
precondition(Array(#"[{"to":"a","title":"to"},{"body":"x\"to\":","to":["b","c"]}]"#.utf8).withUnsafeBytes {
    ExpoTicketSink.recipients(in: $0) } == 3)
precondition(Array(#"{"to" : "a","data":{"to":"nested"}}"#.utf8).withUnsafeBytes { ExpoTicketSink.recipients(in: $0) } == 1)
await BenchServerProcess.run("norq-bench-expo-sink") {
    let sink = ExpoTicketSink()
    if let http1 = options["--http1-port"] {
        guard let cert = options["--http1-cert"], let key = options["--http1-key"] else {
            throw BenchSinkError(message: "--http1-port needs --http1-cert and --http1-key")
        }
        let port = try await HTTP1TicketServer.start(sink: sink, port: Int(http1) ?? 0, certificatePath: cert, keyPath: key)
        FileHandle.standardOutput.write(Data("http1 \(port)\n".utf8))
    }
    let server = try EmulatorHTTP2Server(service: sink, port: Int(options["--port"] ?? "") ?? 0,
                                         maxConcurrentStreams: Int(options["--max-streams"] ?? "") ?? 1000)
    try await server.start()
    try server.writeCACertificate(to: options["--ca-out"] ?? "/tmp/norq-expo-sink-ca.pem")
    return server.port
}

struct BenchSinkError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
