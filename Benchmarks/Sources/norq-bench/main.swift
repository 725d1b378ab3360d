import BenchSupport
#if canImport(Glibc)
import Glibc
#endif

// norq-bench: see Options.usage and Benchmarks/README.md.
do {
    let options = try Options.parse(Array(CommandLine.arguments.dropFirst()))
    switch options.mode {
    case "router": print(try await RouterBench(options: options).run().json)
    case "ahc": throw BenchError("--mode ahc runs in its own process: norq-bench-ahc")
    case "render": for line in try RenderBench(options: options).run() { print(line.json) }
    case "prepare": try await RouterBench(options: options).writePrepared()
    case "tokens":
        var out = ""
        out.reserveCapacity(options.count * 65)
        for index in 0..<options.count { out += BenchTokens.token(index); out += "\n" }
        print(out, terminator: "")
    case "jwt": print(try RouterBench.jwtHeader(options: options))
    case "webpush", "webpush-encrypt", "webpush-prepare": try await WebPushBench(options: options).runMode()
    case "fcm", "fcm-prepare", "fcm-tokens": try await FCMBench(options: options).run(mode: options.mode)
    case "expo", "expo-prepare": try await ExpoBench(options: options).run(mode: options.mode)
    case "durable", "durable-recovery", "durable-hold":
        throw BenchError("--mode \(options.mode) runs in its own process: norq-bench-durable")
    default: throw BenchError("unknown mode \(options.mode)\n\(Options.usage)")
    }
} catch {
    FileHandleErr.write("norq-bench: \(error)\n")
    exit(1)
}
