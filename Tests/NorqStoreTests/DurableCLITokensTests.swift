import Foundation
import NorqCore
import NorqStore
import NorqStoreSQLite
import Testing

/// `norq tokens invalid` and `norq tokens register` with the registry per (token, provider, environment).
@Suite(.serialized) struct DurableCLITokensTests {
    @Test func invalidJSONListsTheWholeTokenItsProviderEnvironmentAndReasonAndRegisterTakesAnEnvironment() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let db = directory.appendingPathComponent("norq.db").path
        let token = DurableRig.token(9)
        // A sandbox BadDeviceToken and a production Unregistered (with APNs' timestamp), recorded by the store.
        try await SQLiteDeliveryStore.withMigrated(path: db) { store in
            let send = StoreConformance.send(to: [(token, "apns", "sandbox"), ("other-token", "apns-2", "production")])
            _ = try await store.enqueue(send, now: 1_000, idempotencyWindow: StoreConformance.window)
            try await StoreConformance.reject(store, token: token, reason: "BadDeviceToken", status: 400,
                                              invalidSince: nil, environment: "sandbox", now: 2_000)
            try await StoreConformance.reject(store, token: "other-token", reason: "Unregistered", status: 410,
                                              invalidSince: 1_500, environment: "production", now: 3_000)
        }
        let listed = try DurableCLITests.norq(["tokens", "invalid", "--store", db, "--json"])
        #expect(listed.status == 0, "\(listed)")
        guard case .array(let entries) = try JSONValue(parsing: listed.out) else {
            Issue.record("not a JSON array: \(listed.out)")
            return
        }
        #expect(entries.count == 2)
        let expected: [[String: JSONValue]] = [
            ["token": "other-token", "provider": "apns-2", "environment": "production", "reason": "Unregistered",
             "invalidSince": 1_500, "recordedAt": 3_000, "registeredAt": .null, "skipped": true],
            ["token": .string(token), "provider": "apns", "environment": "sandbox", "reason": "BadDeviceToken",
             "invalidSince": 2_000, "recordedAt": 2_000, "registeredAt": .null, "skipped": true],
        ]
        for (entry, fields) in zip(entries, expected) {
            for (key, value) in fields { #expect(entry[key] == value, "\(key) in \(listed.out)") }
        }
        // The text output shortens tokens.
        let text = try DurableCLITests.norq(["tokens", "invalid", "--store", db])
        #expect(text.status == 0 && text.out.contains("2 tokens"), "\(text)")
        #expect(!text.out.contains(token) && text.out.contains(PushToken.redact(token)), "\(text)")
        #expect(text.out.contains("sandbox") && text.out.contains("production"), "\(text)")
        // Registered again in production only: the sandbox entry stays; then in sandbox.
        let wrong = try DurableCLITests.norq(["tokens", "register", token, "--store", db, "--environment", "staging"])
        #expect(wrong.status != 0 && wrong.err.contains("push/invalid-environment"), "\(wrong)")
        let production = try DurableCLITests.norq(["tokens", "register", token, "--store", db,
                                                   "--environment", "production"])
        #expect(production.status == 0 && production.out.contains("production"), "\(production)")
        #expect(!production.out.contains(token), "\(production)")
        let stillInvalid = try DurableCLITests.norq(["tokens", "invalid", "--store", db, "--json"])
        #expect(try Self.skipped(stillInvalid.out) == [true, true], "\(stillInvalid.out)")
        let sandbox = try DurableCLITests.norq(["tokens", "register", token, "--store", db, "--environment", "sandbox",
                                                "--provider", "apns"])
        #expect(sandbox.status == 0, "\(sandbox)")
        let registered = try DurableCLITests.norq(["tokens", "invalid", "--store", db, "--json"])
        #expect(try Self.skipped(registered.out) == [true, false], "\(registered.out)")
    }

    /// Many tokens at once, as arguments and from a file, in one store call; no token at all is a usage error.
    @Test func registerTakesManyTokensFromArgumentsAndAFile() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let db = directory.appendingPathComponent("norq.db").path
        let tokens = (0..<5).map(DurableRig.token)
        try await SQLiteDeliveryStore.withMigrated(path: db) { store in
            let send = StoreConformance.send(to: tokens.map { ($0, "apns", "sandbox") })
            _ = try await store.enqueue(send, now: 1_000, idempotencyWindow: StoreConformance.window)
            for token in tokens {
                try await StoreConformance.reject(store, token: token, reason: "BadDeviceToken", status: 400,
                                                  invalidSince: nil, environment: "sandbox", now: 2_000)
            }
        }
        let none = try DurableCLITests.norq(["tokens", "register", "--store", db])
        #expect(none.status != 0 && none.err.contains("cli/missing-recipients"), "\(none)")
        let missing = try DurableCLITests.norq(["tokens", "register", "--store", db, "--file", directory.path + "/nope"])
        #expect(missing.status != 0 && missing.err.contains("cli/file-not-found"), "\(missing)")
        let file = directory.appendingPathComponent("tokens.txt")
        try (" \(tokens[2])\n\n\(tokens[3])\n").write(to: file, atomically: true, encoding: .utf8)
        let batch = try DurableCLITests.norq(["tokens", "register", tokens[0], tokens[1], "--store", db,
                                              "--file", file.path])
        #expect(batch.status == 0 && batch.out.contains("registered 4 tokens"), "\(batch)")
        let listed = try DurableCLITests.norq(["tokens", "invalid", "--store", db, "--json"])
        guard case .array(let entries) = try JSONValue(parsing: listed.out) else {
            Issue.record("not a JSON array: \(listed.out)")
            return
        }
        let stillInvalid = entries.filter { $0["skipped"] == true }.compactMap { $0["token"]?.stringValue }
        #expect(stillInvalid == [tokens[4]], "\(listed.out)")
    }

    /// The `skipped` field of each entry `norq tokens invalid --json` printed.
    static func skipped(_ out: String) throws -> [Bool] {
        guard case .array(let entries) = try JSONValue(parsing: out) else { return [] }
        return entries.map { $0["skipped"] == true }
    }
}
