#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// CPU time of this process (user + system) from getrusage.
package enum ProcessStats {
    package static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1_000_000 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// Current resident set size in MB (`VmRSS` of /proc/self/status; 0 where unavailable).
    package static func currentRSSMegabytes() -> Double {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            if let kb = Double(String(line.filter { $0.isNumber })) { return kb / 1024 }
        }
        return 0
    }

    /// Peak resident set size in MB: `VmHWM` of /proc/self/status, else `ru_maxrss`.
    package static func peakRSSMegabytes() -> Double {
        if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) {
            for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
                let digits = line.filter { $0.isNumber }
                if let kb = Double(String(digits)) { return kb / 1024 }
            }
        }
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        #if os(Linux)
        return Double(usage.ru_maxrss) / 1024
        #else
        return Double(usage.ru_maxrss) / 1_048_576
        #endif
    }
}

/// Latency percentiles (milliseconds) from microsecond samples.
package struct Percentiles {
    package var p50 = 0.0, p90 = 0.0, p99 = 0.0, max = 0.0
    package init(microseconds samples: [UInt32]) {
        guard !samples.isEmpty else { return }
        let sorted = samples.sorted()
        func at(_ q: Double) -> Double {
            Double(sorted[Swift.min(sorted.count - 1, Int(Double(sorted.count) * q))]) / 1_000
        }
        p50 = at(0.50); p90 = at(0.90); p99 = at(0.99); max = Double(sorted[sorted.count - 1]) / 1_000
    }
}

/// One benchmark result, printed as one JSON object on one line.
package struct RunResult {
    package var fields: [(String, String)] = []
    package init() {}
    package mutating func add(_ key: String, _ value: String) { fields.append((key, "\"" + Self.escape(value) + "\"")) }
    package mutating func add(_ key: String, _ value: Int) { fields.append((key, String(value))) }
    package mutating func add(_ key: String, _ value: Double, digits: Int = 3) {
        fields.append((key, value.isFinite ? String(format: "%.\(digits)f", value) : "null"))
    }
    package mutating func addObject(_ key: String, _ counts: [String: Int]) {
        let inner = counts.sorted { $0.key < $1.key }.map { "\"\(Self.escape($0.key))\":\($0.value)" }
        fields.append((key, "{" + inner.joined(separator: ",") + "}"))
    }
    package var json: String { "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}" }

    package static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default:
                if scalar.value < 0x20 { out += String(format: "\\u%04x", scalar.value) } else { out.unicodeScalars.append(scalar) }
            }
        }
        return out
    }

    /// The common measured fields of a delivery run.
    package mutating func addDelivery(count: Int, elapsed: Duration, cpu: Double, latencies: [UInt32], outcomes: [String: Int]) {
        let peakRSS = ProcessStats.peakRSSMegabytes()  // before the percentiles' sorted copy
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let p = Percentiles(microseconds: latencies)
        add("count", count)
        add("seconds", seconds)
        add("notifications_per_s", Double(count) / seconds, digits: 0)
        add("p50_ms", p.p50); add("p90_ms", p.p90); add("p99_ms", p.p99); add("max_ms", p.max)
        add("cpu_s", cpu)
        add("cpu_s_per_10k", cpu / Double(count) * 10_000, digits: 4)
        add("peak_rss_mb", peakRSS, digits: 1)
        addObject("outcomes", outcomes)
        add("all_delivered", (outcomes["delivered"] ?? 0) == count ? 1 : 0)
    }
}

package enum FileHandleErr {
    package static func write(_ text: String) {
        var text = text
        text.withUTF8 { _ = Glibc.write(2, $0.baseAddress, $0.count) }
    }
}
