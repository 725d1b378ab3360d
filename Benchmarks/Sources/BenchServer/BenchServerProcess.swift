import Foundation

/// The command line and the life of a benchmark's server process (norq-bench-emulator, norq-bench-fcm-emulator,
/// norq-bench-expo-sink): `--name value` options, then a server that runs until the script signals it.
public enum BenchServerProcess {
    /// The `--name value` pairs of the command line; exits 2 on a name not in `known` or a name without a value.
    public static func options(known: Set<String>) -> [String: String] {
        var options: [String: String] = [:]
        var arguments = Array(CommandLine.arguments.dropFirst())
        while !arguments.isEmpty {
            let name = arguments.removeFirst()
            guard known.contains(name) else { fail("unknown option \(name)") }
            guard let value = arguments.first else { fail("\(name) needs a value") }
            arguments.removeFirst()
            options[name] = value
        }
        return options
    }

    /// Runs `start` (which binds the server and returns its port), prints `listening PORT` (what the scripts wait
    /// for), then sleeps until the process is signalled (the scripts send SIGTERM). An error is printed after `tool`
    /// and exits 1.
    public static func run(_ tool: String, _ start: () async throws -> Int) async -> Never {
        do {
            let port = try await start()
            FileHandle.standardOutput.write(Data("listening \(port)\n".utf8))
            while true { try await Task.sleep(for: .seconds(3600)) }
        } catch {
            FileHandle.standardError.write(Data("\(tool): \(error)\n".utf8))
            exit(1)
        }
    }

    private static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("\(message)\n".utf8))
        exit(2)
    }
}
