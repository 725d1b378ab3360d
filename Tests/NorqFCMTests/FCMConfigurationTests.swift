import Foundation
@testable import NorqFCM
import NorqAPNs
import NorqCore
import Testing

@Suite struct FCMConfigurationTests {
    func parse(_ pairs: KeyValuePairs<String, String>) throws -> FCMConfiguration {
        try FCMConfiguration.parse(FCMNode.map(pairs), context: FCMPaths.context)
    }

    @Test func serviceAccountFromAFilePath() throws {
        let configuration = try parse(["projectId": "norq-demo", "serviceAccount": FCMPaths.demoAccountRelative])
        #expect(configuration.projectID == "norq-demo")
        #expect(configuration.serviceAccount.clientEmail == "norq-demo@norq-demo.iam.gserviceaccount.com")
        #expect(configuration.serviceAccountSource == FCMPaths.demoAccountRelative)
        #expect(configuration.endpoint == .fcm)
        #expect(configuration.tokenEndpoint == .googleToken)
        #expect(configuration.sendPath == "/v1/projects/norq-demo/messages:send")
        #expect(configuration.origin == "config")
    }

    @Test func serviceAccountInlineJSON() throws {
        // What `serviceAccount: ${FCM_KEY}` becomes after load-time substitution, or a literal JSON string.
        let configuration = try parse(["projectId": "norq-demo", "serviceAccount": FCMPaths.demoAccountJSON])
        #expect(configuration.serviceAccountSource == "inline JSON")
        #expect(configuration.serviceAccount.privateKeyID?.hasPrefix("demo") == true)
    }

    @Test func optionalKeys() throws {
        let configuration = try parse([
            "projectId": "norq-demo", "serviceAccount": FCMPaths.demoAccountRelative,
            "endpoint": "https://127.0.0.1:8443", "tokenEndpoint": "https://127.0.0.1:8443/token",
            "connections": "4", "maxConcurrentStreams": "200", "timeout": "2s", "proxy": "http://proxy.local:3128",
            "validateOnly": "true",
        ])
        #expect(configuration.endpoint == FCMURL(host: "127.0.0.1", port: 8443))
        #expect(configuration.endpoint.authority == "127.0.0.1:8443")
        #expect(configuration.tokenEndpoint == FCMURL(host: "127.0.0.1", port: 8443, path: "/token"))
        #expect(configuration.connections == 4)
        #expect(configuration.maxConcurrentStreams == 200)
        #expect(configuration.requestTimeout == .seconds(2))
        #expect(configuration.proxy == FCMURL(scheme: "http", host: "proxy.local", port: 3128))
        #expect(configuration.validateOnly)
    }

    @Test func legacyServerKeyIsRefused() {
        let error = fcmError { _ = try parse(["projectId": "p-1", "serverKey": "AAAA1234"]) }
        #expect(error?.code == "provider/fcm-legacy-server-key")
        #expect(error?.location?.line == 3)
        let fromEnv = fcmError {
            _ = try FCMConfiguration.fromEnvironment(["NORQ_FCM_SERVER_KEY": "AAAA"], context: FCMPaths.context)
        }
        #expect(fromEnv?.code == "provider/fcm-legacy-server-key")
    }

    @Test func missingProjectIdIsAMissingKey() {
        let error = fcmError { _ = try parse(["serviceAccount": FCMPaths.demoAccountRelative]) }
        #expect(error?.code == "config/missing-key")
        #expect(error?.message.contains("projectId") == true)
        #expect(error?.location?.file == "norq.yaml")
    }

    @Test func badProjectId() {
        let error = fcmError { _ = try parse(["projectId": "My Project", "serviceAccount": FCMPaths.demoAccountRelative]) }
        #expect(error?.code == "config/invalid-value")
    }

    @Test func unknownKeySuggestsTheRightOne() {
        let error = fcmError {
            _ = try parse(["projectId": "norq-demo", "serviceAccount": FCMPaths.demoAccountRelative, "projectID": "x"])
        }
        #expect(error?.code == "config/unknown-key")
        #expect(error?.hint?.contains("projectId") == true)
        #expect(error?.location?.description == "norq.yaml:4:7")
    }

    @Test func malformedServiceAccountJSON() {
        let error = fcmError { _ = try parse(["projectId": "norq-demo", "serviceAccount": "{\"client_email\": "]) }
        #expect(error?.code == "fcm/invalid-service-account")
        let missing = fcmError { _ = try parse(["projectId": "norq-demo", "serviceAccount": "{\"type\": \"service_account\"}"]) }
        #expect(missing?.code == "fcm/invalid-service-account")
        #expect(missing?.message.contains("client_email") == true)
    }

    @Test func nonRSAKeyIsRefused() throws {
        let ecKey = try String(contentsOfFile: FCMPaths.root + "/examples/keys/AuthKey_DEMO000000.p8", encoding: .utf8)
        var json = JSONValue.object([
            "type": "service_account", "client_email": "a@b.iam.gserviceaccount.com", "private_key": .string(ecKey),
        ])
        let error = fcmError {
            _ = try parse(["projectId": "norq-demo", "serviceAccount": json.compactDescription])
        }
        #expect(error?.code == "fcm/invalid-private-key")
        #expect(error?.description.contains("BEGIN") == false)
        json = .object(["type": "authorized_user", "client_email": "a@b", "private_key": "x"])
        #expect(fcmError { _ = try parse(["projectId": "norq-demo", "serviceAccount": json.compactDescription]) }?.code
                == "fcm/invalid-service-account")
    }

    @Test func missingFile() {
        let error = fcmError { _ = try parse(["projectId": "norq-demo", "serviceAccount": "./nope/key.json"]) }
        #expect(error?.code == "config/file-not-found")
    }

    @Test func environmentFallback() throws {
        #expect(try FCMConfiguration.fromEnvironment([:], context: FCMPaths.context) == nil)
        let fromPath = try #require(try FCMConfiguration.fromEnvironment(
            ["NORQ_FCM_PROJECT_ID": "norq-demo", "NORQ_FCM_SERVICE_ACCOUNT": FCMPaths.demoAccount], context: FCMPaths.context))
        #expect(fromPath.origin == "env")
        #expect(fromPath.projectID == "norq-demo")
        let inline = try #require(try FCMConfiguration.fromEnvironment(
            ["NORQ_FCM_PROJECT_ID": "norq-demo", "NORQ_FCM_SERVICE_ACCOUNT": FCMPaths.demoAccountJSON], context: FCMPaths.context))
        #expect(inline.serviceAccountSource == "env NORQ_FCM_SERVICE_ACCOUNT")
        let reference = try #require(try FCMConfiguration.fromEnvironment(
            ["NORQ_FCM_PROJECT_ID": "norq-demo", "NORQ_FCM_SERVICE_ACCOUNT": "${GOOGLE_KEY}",
             "GOOGLE_KEY": FCMPaths.demoAccountJSON], context: FCMPaths.context))
        #expect(reference.serviceAccount.clientEmail.hasPrefix("norq-demo@"))
        let missing = fcmError {
            _ = try FCMConfiguration.fromEnvironment(["NORQ_FCM_PROJECT_ID": "norq-demo"], context: FCMPaths.context)
        }
        #expect(missing?.code == "config/missing-key")
        #expect(missing?.message.contains("NORQ_FCM_SERVICE_ACCOUNT") == true)
        let typo = fcmError {
            _ = try FCMConfiguration.fromEnvironment(["NORQ_FCM_PROJECTID": "x"], context: FCMPaths.context)
        }
        #expect(typo?.code == "config/unknown-key")
        #expect(typo?.hint?.contains("NORQ_FCM_PROJECT_ID") == true)
    }

    @Test func descriptionAndSummaryNeverPrintKeyMaterial() throws {
        let configuration = try parse(["projectId": "norq-demo", "serviceAccount": FCMPaths.demoAccountJSON])
        let keyLine = configuration.serviceAccount.privateKeyPEM.split(separator: "\n")[1]
        let printed = [configuration.description, String(describing: configuration), String(reflecting: configuration),
                       configuration.summary.map { "\($0.key)=\($0.value)" }.joined(separator: "\n"),
                       String(describing: configuration.serviceAccount)]
        for text in printed {
            #expect(!text.contains(keyLine))
            #expect(!text.contains("PRIVATE KEY"))
        }
        #expect(configuration.summary.contains { $0.key == "serviceAccount" && $0.value.contains("norq-demo@") })
    }

    @Test func providerTypeMetadata() {
        let type = FCMProviderType()
        #expect(type.typeName == "fcm")
        #expect(type.environmentPrefix == "NORQ_FCM_")
        #expect(type.platforms == [.ios, .android, .web])
    }

    @Test func pushTypesAreTheAPNsProviderTypesOwnList() {
        // One table: the APNs push types come from APNsPushType through the provider types, for templates.
        let apns = APNsProviderType().pushTypes
        #expect(apns == Set(APNsPushType.all.map(\.rawValue)))
        #expect(apns.count == 11 && apns.contains("liveactivity"))
        // FCM sends an iOS token's apns block by the same rules.
        #expect(FCMProviderType().pushTypes == apns)
    }
}

@Suite struct FCMTrustRootsTests {
    static let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

    /// `caPath` and `caPem` read by the rule every provider shares: the same keys and error codes as APNs.
    @Test func caPathAndCaPemAsForAPNs() throws {
        let inline = try FCMConfiguration.parse(FCMNode.map(["projectId": "norq-demo", "serviceAccount": FCMPaths.demoAccountRelative,
                                                             "caPem": Self.pem]), context: FCMPaths.context)
        #expect(inline.caPath == "caPem (inline)" && inline.additionalTrustRootsPEM == Self.pem)
        let notes = try FCMPaths.temporaryFile("no certificate", suffix: ".txt")
        let error = fcmError {
            _ = try FCMConfiguration.parse(FCMNode.map(["projectId": "norq-demo", "serviceAccount": FCMPaths.demoAccountRelative,
                                                        "caPath": notes]), context: FCMPaths.context)
        }
        #expect(error?.code == .configInvalidCertificate)
        let both = fcmError {
            _ = try FCMConfiguration.parse(FCMNode.map(["projectId": "norq-demo", "serviceAccount": FCMPaths.demoAccountRelative,
                                                        "caPath": notes, "caPem": Self.pem]), context: FCMPaths.context)
        }
        #expect(both?.code == .configConflictingKeys)
    }
}
