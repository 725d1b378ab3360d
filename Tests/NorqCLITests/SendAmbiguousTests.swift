import Foundation
import NorqHostileTesting
import NorqTesting
import Testing

/// `norq send` says when a failed push may have been delivered (issue 14, defect 2): a server that resets every
/// stream with INTERNAL_ERROR after reading the request (so the push may have been processed), no collapse id, the
/// default `retry.ambiguous: collapsible`: one attempt, and the line and `--json` carry the mark.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct SendAmbiguousTests {
    static let token = String(repeating: "ab", count: 32)

    func setUp(_ server: HostileHTTP2Server) throws -> String {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("norq-ambiguous-\(UInt64.random(in: 0...UInt64.max))")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("templates/plain"),
                                                withIntermediateDirectories: true)
        try "---\ntitle: Hello\n---\nA push without a collapse id.\n"
            .write(to: directory.appendingPathComponent("templates/plain/push.md"), atomically: true, encoding: .utf8)
        try server.caCertificatePEM.write(to: directory.appendingPathComponent("ca.pem"), atomically: true, encoding: .utf8)
        let key = ChannelsCommandTests.packageRoot.appendingPathComponent("examples/keys/AuthKey_DEMO000000.p8").path
        let config = directory.appendingPathComponent("norq.yaml").path
        try """
            templates: ./templates
            providers:
              apns:
                config:
                  keyId: DEMO000000
                  teamId: TEAM123ABC
                  keyPath: \(key)
                  bundleId: com.example.app
                  sandboxEndpoint: https://localhost:\(server.port)
                  caPath: ./ca.pem
                retry: { retries: 2, backoff: 10ms }
            """.write(toFile: config, atomically: true, encoding: .utf8)
        return config
    }

    @Test("the failed line and --json say 'may have been delivered'; the push is not re-sent")
    func mayHaveBeenDelivered() async throws {
        let server = try HostileHTTP2Server(configuration: .init(fault: .resetStreams(code: 0x2)))
        try await server.start()
        do {
            try check(server)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    func check(_ server: HostileHTTP2Server) throws {
        let config = try setUp(server)
        let to = #"[{"token": "\#(Self.token)", "platform": "ios"}]"#

        let lines = try ChannelsCommandTests.norq(["send", "plain", "--config", config, "--to", to, "--deadline", "3"])
        #expect(lines.status == 2, "\(lines)")
        #expect(lines.stdout.contains("(may have been delivered)"), "\(lines)")
        #expect(lines.stdout.contains("1 failed (1 may have been delivered)"), "\(lines)")

        let json = try ChannelsCommandTests.norq(["send", "plain", "--config", config, "--to", to, "--deadline", "3", "--json"])
        #expect(json.status == 2, "\(json)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let outcome = try #require((object["outcomes"] as? [[String: Any]])?.first)
        let result = try #require(outcome["result"] as? [String: Any])
        #expect(result["kind"] as? String == "failed")
        #expect(result["mayHaveBeenDelivered"] as? Bool == true, "\(json.stdout)")
        #expect((object["summary"] as? [String: Any])?["mayHaveBeenDelivered"] as? Int == 1)
        // One request per send: a push that may have been processed is not sent again.
        #expect(server.statistics.requestsByToken[Self.token] == 2, "\(server.statistics.requestsByToken)")
    }
}
