import BenchSupport
#if canImport(Glibc)
import Glibc
#endif

// norq-bench-ahc: `norq-bench --mode ahc` in a process of its own (see Options.usage and Benchmarks/README.md).
do {
    var options = try Options.parse(Array(CommandLine.arguments.dropFirst()))
    options.mode = "ahc"
    print(try await AHCBench(options: options).run().json)
} catch {
    FileHandleErr.write("norq-bench-ahc: \(error)\n")
    exit(1)
}
