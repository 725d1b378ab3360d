/// Command-line options of `norq-bench` (parsed by hand to keep the benchmark's own overhead obvious).
struct Options: Sendable {
    var mode = "router"
    var endpoint = "https://127.0.0.1:8443"
    var ca: String?
    var key = "examples/keys/AuthKey_DEMO000000.p8"
    var team = "DEMO000000"
    var keyID = "DEMO000000"
    var bundleID = "com.example.MyApp"
    var templates = "Benchmarks/templates"
    var template = "order-shipped-bench"
    var count = 100_000
    var connections = 1
    var inFlight = 100
    var warmup = 2_000
    var label: String?
    var outDir: String?
    var seconds = 3.0
    var timeout = 60
    /// Router mode: `array` hands the router a `[Recipient]`; `stream` an async sequence that makes each
    /// recipient when the router reads it (`sendStreaming(...to: some AsyncSequence)`).
    var input = "array"

    static let usage = """
    usage: norq-bench [--mode router|ahc|render|prepare|tokens|jwt] [--endpoint https://HOST:PORT] [--ca PEM]
                      [--key P8] [--team TEAMID] [--key-id KEYID] [--bundle-id ID] [--templates DIR]
                      [--template NAME] [--count N] [--connections C] [--in-flight M] [--warmup N]
                      [--label TEXT] [--out DIR] [--seconds S] [--timeout S] [--input array|stream]
      router   N notifications through NotificationRouter (render + routing + JWT + TLS HTTP/2), one JSON line
      ahc      the same requests through a plain AsyncHTTPClient loop, one JSON line
      render   renders/s of the template compiled once (one core), one JSON line per template
      prepare  writes the exact request of one token to --out DIR (body.json, headers.txt) for h2load
      tokens   prints the --count benchmark device tokens, one a line
      jwt      prints a provider token (the authorization header value) for --key/--team/--key-id
    """

    static func parse(_ arguments: [String]) throws -> Options {
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
            case "-h", "--help": throw BenchError(usage)
            default: throw BenchError("unknown option \(argument)\n\(usage)")
            }
            index += 1
        }
        return options
    }

    /// Host and port of `--endpoint` (`https://host:port`, `host:port` or `host`).
    var hostAndPort: (host: String, port: Int) {
        var rest = Substring(endpoint)
        if let range = rest.range(of: "://") { rest = rest[range.upperBound...] }
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        if let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]) {
            return (String(rest[..<colon]), port)
        }
        return (String(rest), 443)
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension String {
    var replacingUnderscores: String { String(filter { $0 != "_" && $0 != "," }) }
}

/// The benchmark's device tokens: `ab` + the index in 62 hex digits (the script builds the same list).
enum BenchTokens {
    static func token(_ index: Int) -> String {
        let hex = String(index, radix: 16)
        return "ab" + String(repeating: "0", count: max(0, 62 - hex.count)) + hex
    }
}
