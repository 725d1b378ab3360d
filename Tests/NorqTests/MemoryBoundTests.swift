import Foundation
import Norq
import NorqAPNs
import NorqCore
import NorqTesting
import Testing

/// A measurement, not a unit test: 200,000 tokens through a bound of 1,000 in flight against the emulator,
/// reporting peak RSS (VmHWM). Runs only with `NORQ_MEMORY_TEST=1`:
///
///     NORQ_MEMORY_TEST=1 swift test -c release --filter MemoryBound
@Suite(.serialized)
struct MemoryBoundTests {
    static var enabled: Bool { ProcessInfo.processInfo.environment["NORQ_MEMORY_TEST"] == "1" }

    /// A field of /proc/self/status in kB (VmHWM: peak resident set, VmRSS: current).
    static func status(_ field: String) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            return Int(line.dropFirst(field.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
        }
        return nil
    }

    /// An emulator that records nothing and a router with one APNs provider, 1,000 in flight.
    static func setUp(keyID: String) async throws -> (APNsEmulator, NotificationRouter) {
        let credentials = APNsCredentials(teamID: "TEAMMEMORY", keyID: keyID)
        let emulator = try await EmulatorFixtures.emulator([credentials]) {
            $0.recordRequests = false
            $0.recordBodies = false
        }
        let provider = try EmulatorFixtures.provider("apns", credentials, sandbox: emulator, maxInFlight: 1_000)
        return (emulator, try NotificationRouter(providers: [provider]))
    }

    @Test(.enabled(if: enabled, "set NORQ_MEMORY_TEST=1 to run the 200,000-token memory measurement"),
          .timeLimit(.minutes(10)))
    func twoHundredThousandTokensWithBoundedMemory() async throws {
        let count = Int(ProcessInfo.processInfo.environment["NORQ_MEMORY_TOKENS"] ?? "") ?? 200_000
        let (emulator, router) = try await Self.setUp(keyID: "KEYMEMORY1")
        let baseline = Self.status("VmHWM") ?? 0
        // The input itself: 200,000 PushTokens (the caller's array, not the router's).
        let tokens = (0..<count).map { PushToken(token: hexToken(0x10000000 + $0), platform: .ios) }
        let withInput = Self.status("VmRSS") ?? 0
        let clock = ContinuousClock()
        let started = clock.now
        // Streamed outcomes: nothing per token is kept by the caller, so the peak shows what the router holds.
        var delivered = 0
        var other: [String: Int] = [:]
        for await outcome in try router.sendStreaming(content: PushContent(title: "memory", body: "bound"),
                                                      to: [Recipient(id: "all", tokens: tokens)]) {
            if outcome.result.kind == "delivered" { delivered += 1 } else { other[outcome.failureCode ?? outcome.result.kind, default: 0] += 1 }
        }
        let elapsed = started.duration(to: clock.now)
        let peak = Self.status("VmHWM") ?? 0
        print("""
            norq memory: \(count) tokens, maxInFlight 1000, delivered \(delivered), other \(other), \
            \(elapsed); VmHWM before tokens \(baseline) kB, VmRSS with tokens \(withInput) kB, \
            VmHWM after send \(peak) kB (peak above input \(peak - withInput) kB)
            """)
        #expect(delivered == count, "\(other)")
        await router.shutdown(gracePeriod: .seconds(5))
        try? await emulator.shutdown()
    }

    @Test(.enabled(if: enabled, "set NORQ_MEMORY_TEST=1 to run the 1,000,000-token streamed-input measurement"),
          .timeLimit(.minutes(10)))
    func millionTokensFromAnAsyncSequence() async throws {
        let count = Int(ProcessInfo.processInfo.environment["NORQ_MEMORY_STREAM_TOKENS"] ?? "") ?? 1_000_000
        let (emulator, router) = try await Self.setUp(keyID: "KEYMEMORY2")
        let before = Self.status("VmHWM") ?? 0
        let clock = ContinuousClock()
        let started = clock.now
        // The recipients are made as the router reads them: the process never holds the list.
        let source = CountingRecipients(count: count)
        var delivered = 0
        var other: [String: Int] = [:]
        for await outcome in try router.sendStreaming(content: PushContent(title: "memory", body: "bound"), to: source) {
            if outcome.result.kind == "delivered" { delivered += 1 } else { other[outcome.failureCode ?? outcome.result.kind, default: 0] += 1 }
        }
        let elapsed = started.duration(to: clock.now)
        let peak = Self.status("VmHWM") ?? 0
        print("""
            norq memory (streamed input): \(count) tokens, maxInFlight 1000, chunk \(router.recipientChunkSize), \
            delivered \(delivered), other \(other), \(elapsed); VmHWM before \(before) kB, after \(peak) kB \
            (emulator in the same process)
            """)
        #expect(delivered == count, "\(other)")
        await router.shutdown(gracePeriod: .seconds(5))
        try? await emulator.shutdown()
    }
}
