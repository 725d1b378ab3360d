/// Command-line options of `norq-bench` (parsed by hand to keep the benchmark's own overhead obvious).
package struct Options: Sendable {
    package var mode = "router"
    package var endpoint = "https://127.0.0.1:8443"
    package var ca: String?
    package var key = "examples/keys/AuthKey_DEMO000000.p8"
    package var team = "DEMO000000"
    package var keyID = "DEMO000000"
    package var bundleID = "com.example.MyApp"
    package var templates = "Benchmarks/templates"
    package var template = "order-shipped-bench"
    package var count = 100_000
    package var connections = 1
    package var inFlight = 100
    package var warmup = 2_000
    package var label: String?
    package var outDir: String?
    package var seconds = 3.0
    package var timeout = 60
    /// Router mode: `array` hands the router a `[Recipient]`; `stream` an async sequence that makes each
    /// recipient when the router reads it (`sendStreaming(...to: some AsyncSequence)`).
    package var input = "array"
    // Web Push modes (issue 16, WebPushBench.swift): the VAPID private key (PEM) and the subscriptions' path
    // prefix on --endpoint (`<endpoint><path><token>`).
    package var vapidKey = "examples/keys/vapid-demo.pem"
    package var webPushPath = "/wp/"
    // FCM (--mode fcm, fcm-prepare, fcm-tokens; see FCMBench.swift).
    package var fcmProject = "norq-demo"
    package var fcmServiceAccount = "examples/keys/fcm-service-account-DEMO.json"
    package var fcmTokenEndpoint: String?
    package var fcmPlatform = "android"
    /// Expo mode: gzip request bodies over 1 KiB (`--expo-gzip 0` sends them plain, as h2load does).
    package var expoGzip = true
    // Durable mode (issue 18, DurableBench.swift).
    package var store: String?
    package var phases = "enqueue,deliver,store,latency"
    /// The enqueue phase builds the `[Recipient]` array before the call instead of a lazy sequence.
    package var eagerRecipients = false
    package var lanes = 4
    package var claimBatch = 500
    package var leaseSeconds = 10.0
    package var pollMillis: Int64 = 250
    package var poolSize = 4
    package var rate = 6_000
    package var sendSize = 10
    package var latencyCount = 30_000
    package var dbPID: Int32?
    package var workerName: String?
    package var killAfter = 1.5

    package static let usage = """
    usage: norq-bench [--mode router|render|prepare|tokens|jwt|fcm|fcm-prepare|fcm-tokens|webpush|webpush-encrypt|webpush-prepare|durable|durable-recovery|durable-hold] [--endpoint https://HOST:PORT] [--ca PEM]
                      [--key P8] [--team TEAMID] [--key-id KEYID] [--bundle-id ID] [--templates DIR]
                      [--template NAME] [--count N] [--connections C] [--in-flight M] [--warmup N]
                      [--label TEXT] [--out DIR] [--seconds S] [--timeout S] [--input array|stream]
      router   N notifications through NotificationRouter (render + routing + JWT + TLS HTTP/2), one JSON line
      (norq-bench-ahc, the same options: the same requests through a plain AsyncHTTPClient loop, one JSON
       line; a process of its own, so that norq-bench holds no other HTTP client)
      render   renders/s of the template compiled once (one core), one JSON line per template
      prepare  writes the exact request of one token to --out DIR (body.json, headers.txt) for h2load
      tokens   prints the --count benchmark device tokens, one a line
      jwt      prints a provider token (the authorization header value) for --key/--team/--key-id
      webpush          N encrypted Web Push messages through NotificationRouter + WebPushProvider to --endpoint
                       (subscriptions <endpoint><--webpush-path><token>), one JSON line [--vapid-key PEM]
      webpush-encrypt  µs of CPU per message (one thread): RFC 8291 encryption, one VAPID ES256 signature, and
                       the provider's whole prepare, over --count messages, one JSON line
      webpush-prepare  writes plaintext.json, body.bin, headers.txt, subscription.json to --out DIR
      fcm          N notifications through NotificationRouter + NorqFCM (OAuth token, TLS HTTP/2), one JSON line
      fcm-prepare  delivers one, then writes the exact FCM request of the first token to --out DIR
      fcm-tokens   prints the --count FCM benchmark registration tokens, one a line
        FCM options: [--project ID] [--service-account JSON] [--token-endpoint https://HOST:PORT/PATH]
                     [--platform android|ios|web]  (token endpoint default: --endpoint + /token)
      durable  (norq-bench-durable) durable delivery (issue 18) through --store sqlite:PATH|postgres://URL, one JSON line per phase of
               --phases enqueue,deliver,store,latency [--lanes L] [--claim-batch B] [--lease S] [--poll-ms MS]
               [--pool-size P] [--rate PUSHES/S] [--send-size N] [--latency-count N] [--db-pid PID]
               [--eager-recipients] (the enqueue phase's recipients as an array built first, not a lazy sequence)
      durable-recovery  kills (SIGKILL) a second instance (--mode durable-hold) holding leases after
               --kill-after S and measures until this one has re-sent its rows
    """

    package static func parse(_ arguments: [String]) throws -> Options {
        var options = Options()
        var index = 0
        func value(_ name: String) throws -> String {
            index += 1
            guard index < arguments.count else { throw BenchError("\(name) needs a value\n\(usage)") }
            return arguments[index]
        }
        func int(_ name: String) throws -> Int {
            let text = try value(name).replacingUnderscores
            guard let number = Int(text), number > 0 else { throw BenchError("\(name) needs a positive integer") }
            return number
        }
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "--mode": options.mode = try value(argument)
            case "--endpoint": options.endpoint = try value(argument)
            case "--ca": options.ca = try value(argument)
            case "--key": options.key = try value(argument)
            case "--team": options.team = try value(argument)
            case "--key-id": options.keyID = try value(argument)
            case "--bundle-id": options.bundleID = try value(argument)
            case "--templates": options.templates = try value(argument)
            case "--template": options.template = try value(argument)
            case "--count": options.count = try int(argument)
            case "--connections": options.connections = try int(argument)
            case "--in-flight": options.inFlight = try int(argument)
            case "--warmup": options.warmup = Int(try value(argument)) ?? 0
            case "--label": options.label = try value(argument)
            case "--out": options.outDir = try value(argument)
            case "--seconds": options.seconds = Double(try value(argument)) ?? 3
            case "--timeout": options.timeout = try int(argument)
            case "--input":
                options.input = try value(argument)
                guard ["array", "stream"].contains(options.input) else { throw BenchError("--input is array or stream") }
            case "--vapid-key": options.vapidKey = try value(argument)
            case "--webpush-path": options.webPushPath = try value(argument)
            // FCM options.
            case "--expo-gzip": options.expoGzip = try value(argument) != "0"
            case "--project": options.fcmProject = try value(argument)
            case "--service-account": options.fcmServiceAccount = try value(argument)
            case "--token-endpoint": options.fcmTokenEndpoint = try value(argument)
            case "--platform":
                options.fcmPlatform = try value(argument)
                guard ["android", "ios", "web"].contains(options.fcmPlatform) else { throw BenchError("--platform is android, ios or web") }
            // Durable mode (issue 18).
            case "--store": options.store = try value(argument)
            case "--phases": options.phases = try value(argument)
            case "--eager-recipients": options.eagerRecipients = true
            case "--lanes": options.lanes = try int(argument)
            case "--claim-batch": options.claimBatch = try int(argument)
            case "--lease": options.leaseSeconds = Double(try value(argument)) ?? 10
            case "--poll-ms": options.pollMillis = Int64(try int(argument))
            case "--pool-size": options.poolSize = try int(argument)
            case "--rate": options.rate = try int(argument)
            case "--send-size": options.sendSize = try int(argument)
            case "--latency-count": options.latencyCount = try int(argument)
            case "--db-pid": options.dbPID = Int32(try int(argument))
            case "--worker-name": options.workerName = try value(argument)
            case "--kill-after": options.killAfter = Double(try value(argument)) ?? 1.5
            case "-h", "--help": throw BenchError(usage)
            default: throw BenchError("unknown option \(argument)\n\(usage)")
            }
            index += 1
        }
        return options
    }

    /// Host and port of `--endpoint` (`https://host:port`, `host:port` or `host`).
    package var hostAndPort: (host: String, port: Int) {
        var rest = Substring(endpoint)
        if let range = rest.range(of: "://") { rest = rest[range.upperBound...] }
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        if let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]) {
            return (String(rest[..<colon]), port)
        }
        return (String(rest), 443)
    }
}

package struct BenchError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

extension String {
    package var replacingUnderscores: String { String(filter { $0 != "_" && $0 != "," }) }
}

/// The benchmark's device tokens: `ab` + the index in 62 hex digits (the script builds the same list).
package enum BenchTokens {
    /// `ab`, zeros, then `index` in hex: 64 characters. Made in one piece, so the string holds 64 bytes the way a
    /// token read from JSON or a database does (concatenating three strings left spare capacity in each token).
    package static func token(_ index: Int) -> String {
        let hex = String(index, radix: 16)
        var bytes = [UInt8](repeating: UInt8(ascii: "0"), count: 64)
        bytes[0] = UInt8(ascii: "a")
        bytes[1] = UInt8(ascii: "b")
        bytes.replaceSubrange((64 - hex.utf8.count)..., with: hex.utf8)
        return String(decoding: bytes, as: UTF8.self)
    }
}
