import Foundation
@testable import NorqFCM
import NorqCore
import NorqHTTP2
import NIOCore
import Synchronization

/// Config nodes built by hand, with locations like a YAML file's.
enum FCMNode {
    static func map(_ pairs: KeyValuePairs<String, String>, file: String = "norq.yaml") -> ConfigNode {
        var line = 1
        var entries: [(key: ConfigNode, value: ConfigNode)] = []
        for (key, value) in pairs {
            line += 1
            let keyNode = ConfigNode(.scalar(key, quoted: false), at: SourceLocation(file: file, line: line, column: 7))
            let valueNode = ConfigNode(.scalar(value, quoted: false),
                                       at: SourceLocation(file: file, line: line, column: 9 + key.count))
            entries.append((keyNode, valueNode))
        }
        return ConfigNode(.mapping(entries), at: SourceLocation(file: file, line: 2, column: 7))
    }
}

enum FCMPaths {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let demoAccountRelative = "examples/keys/fcm-service-account-DEMO.json"
    static let demoAccount = root + "/" + demoAccountRelative
    static let context = ProviderConfigurationContext(instanceName: "fcm", baseDirectory: root, file: "norq.yaml")

    static var demoAccountJSON: String { (try? String(contentsOfFile: demoAccount, encoding: .utf8)) ?? "" }

    static func temporaryFile(_ contents: String, suffix: String = ".json") throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("norq-fcm-\(UUID().uuidString)\(suffix)")
        try Data(contents.utf8).write(to: url)
        return url.path
    }
}

func fcmError(_ body: () throws -> Void) -> NorqError? {
    do { try body() } catch let error as NorqError { return error } catch { return nil }
    return nil
}

func demoConfiguration(validateOnly: Bool = false) throws -> FCMConfiguration {
    var configuration = FCMConfiguration(projectID: "norq-demo",
                                         serviceAccount: try FCMServiceAccount(json: FCMPaths.demoAccountJSON),
                                         serviceAccountSource: FCMPaths.demoAccountRelative)
    configuration.validateOnly = validateOnly
    return configuration
}

/// A settable wall clock.
final class TestWallClock: Sendable {
    let seconds: Mutex<Int64>
    init(_ start: Int64 = 1_800_000_000) { seconds = Mutex(start) }
    var clock: FCMClock { FCMClock { [self] in seconds.withLock { $0 } } }
    func advance(_ by: Int64) { seconds.withLock { $0 += by } }
}

/// A transport answering from a script, recording requests.
final class ScriptedTransport: FCMTransport {
    typealias Answer = @Sendable (FCMWireRequest) -> Result<HTTP2Response, NorqError>
    let answer: Answer
    let requests = Mutex<[FCMWireRequest]>([])
    init(_ answer: @escaping Answer) { self.answer = answer }

    func execute(_ request: FCMWireRequest, deadline: ContinuousClock.Instant, now: ContinuousClock.Instant,
                 completion: @escaping @Sendable (Result<HTTP2Response, NorqError>) -> Void) {
        requests.withLock { $0.append(request) }
        completion(answer(request))
    }
    func shutdown() async {}
    var count: Int { requests.withLock { $0.count } }
}

func jsonResponse(_ status: Int, _ body: String, headers: [HTTPHeader] = []) -> HTTP2Response {
    HTTP2Response(status: status, headers: headers.map { ($0.name, $0.value) }, body: ByteBuffer(string: body))
}

func fcmErrorBody(status: Int, canonical: String, errorCode: String? = nil, message: String = "error") -> String {
    let details = errorCode.map {
        #","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#($0)"}]"#
    } ?? ""
    return #"{"error":{"code":\#(status),"message":"\#(message)","status":"\#(canonical)"\#(details)}}"#
}
