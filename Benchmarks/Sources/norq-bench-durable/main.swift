import BenchSupport
import DurableBench
#if canImport(Glibc)
import Glibc
#endif

// norq-bench-durable: the durable modes of Options.usage (durable, durable-recovery, durable-hold), in a process of
// their own so that norq-bench links no delivery store. See Benchmarks/README.md.
do {
    let options = try Options.parse(Array(CommandLine.arguments.dropFirst()))
    switch options.mode {
    case "durable", "durable-recovery", "durable-hold": try await DurableBench(options: options).main()
    default: throw BenchError("norq-bench-durable runs --mode durable, durable-recovery or durable-hold; \(options.mode) is norq-bench's")
    }
} catch {
    FileHandleErr.write("norq-bench-durable: \(error)\n")
    exit(1)
}
