import Crypto
import Foundation
import NorqCore
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `norq serve --emulator` with the quick start's configuration (APNs, FCM and Web Push providers, demo keys):
/// every provider's emulator starts in the served process, web tokens given to the API are delivered to the
/// in-process push service (not to their real host), and broadcast-channel management goes to the APNs emulator
/// (not to api-manage-broadcast.sandbox.push.apple.com). Everything on 127.0.0.1.
@Suite(.serialized, .timeLimit(.minutes(3))) struct ServeEmulatorTests {
    static let quickstart = ServedNorq.packageRoot.appendingPathComponent("examples/quickstart/norq.yaml")

    /// The demo web token of examples/quickstart/recipients.json.
    static let demoWebToken: JSONValue = [
        "platform": "web", "token": "https://push.example.net/push/demo-web-1",
        "keys": ["p256dh": "BKCjp1WSg7IDKe3dkSVMishklWs4459OXVoS2crjl1jqju8PbORmCsqtxo2LmsRbX2fMOyuft4jx5Ueznj5Tp_Q",
                 "auth": "SCcgLAlycoK6hUuYKyV4MQ"],
    ]

    /// A browser's subscription the emulator has never seen, on a host that does not resolve.
    static func foreignWebToken() -> JSONValue {
        let key = P256.KeyAgreement.PrivateKey()
        let p256dh = Data(key.publicKey.x963Representation).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        return ["platform": "web", "token": "https://push.example.invalid/fcm/send/browser-42",
                "keys": ["p256dh": .string(p256dh), "auth": "SCcgLAlycoK6hUuYKyV4MQ"]]
    }

    struct Served {
        let process: Process
        let port: Int
        let directory: URL
        let session: URLSession

        var log: String {
            (try? String(contentsOf: directory.appendingPathComponent("serve.log"), encoding: .utf8)) ?? ""
        }

        func request(_ method: String, _ path: String, json: JSONValue? = nil) async throws -> (status: Int, json: JSONValue?, text: String) {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
            request.httpMethod = method
            if let json {
                request.httpBody = Data(json.serialized())
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            }
            let (data, response) = try await session.data(for: request)
            return ((response as! HTTPURLResponse).statusCode, try? JSONValue(parsing: Array(data)),
                    String(decoding: data, as: UTF8.self))
        }

        func stop() {
            if process.isRunning {
                process.terminate()
                process.waitUntilExit()
            }
            try? FileManager.default.removeItem(at: directory)
        }
    }

    static func serve() async throws -> Served {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("norq-serve-emu-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let (process, port) = try await ServedNorq.launch(
            config: quickstart, directory: directory,
            extra: ["--emulator", "--no-auth", "--port", "0", "--verbose",
                    "--store", directory.appendingPathComponent("norq.db").path])
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 30
        return Served(process: process, port: port, directory: directory, session: URLSession(configuration: configuration))
    }

    @Test func everyProviderEmulatorStartsAndWebTokensAreDeliveredToThePushServiceEmulator() async throws {
        let served = try await Self.serve()
        defer { served.stop() }
        #expect(served.log.contains("Web Push emulator (in-process)"), "\(served.log)")
        #expect(served.log.contains("APNs emulator (in-process)"))
        #expect(served.log.contains("FCM emulator (in-process)"))
        let body: JSONValue = ["template": "order-shipped", "sample": "Default",
                               "to": [Self.demoWebToken, Self.foreignWebToken()]]
        let answer = try await served.request("POST", "/v1/sends?wait=true&timeout=20", json: body)
        #expect(answer.status == 200, "\(answer.text.prefix(1000))")
        #expect(answer.json?["summary"]?["delivered"]?.intValue == 2, "\(answer.text.prefix(1000))\n\(served.log)")
        let providers = (answer.json?["outcomes"]?.arrayValue ?? []).compactMap { $0["provider"]?.stringValue }
        #expect(providers == ["webpush", "webpush"], "\(answer.text.prefix(1000))")
    }

    @Test func channelManagementGoesToTheAPNsEmulator() async throws {
        let served = try await Self.serve()
        defer { served.stop() }
        let created = try await served.request("POST", "/v1/channels", json: ["storagePolicy": 1])
        #expect(created.status == 201, "\(created.text.prefix(500))\n\(served.log)")
        let id = try #require(created.json?["channel"]?.stringValue)
        let list = try await served.request("GET", "/v1/channels")
        #expect(list.status == 200, "\(list.text.prefix(500))")
        #expect(list.json?["channels"]?.arrayValue?.contains(.string(id)) == true)
        // The APNs emulator answered both (its request log, printed with --verbose).
        #expect(served.log.contains("APNs emulator: POST /1/apps/com.example.MyApp/channels 201"), "\(served.log)")
        #expect(served.log.contains("APNs emulator: GET /1/apps/com.example.MyApp/all-channels 200"), "\(served.log)")
    }
}
