import NorqAPNs
import NorqConfig
import NorqCore
import NorqFCM
import NorqTemplates
import NorqWebPush
import Testing

/// `payload_bytes` and the template size checks measured by the providers' own payload code
/// (`ProviderType.payloadSizes`), with each provider's limit.
struct TemplatePayloadSizeTests {
    static let sendTime: Int64 = 1_767_225_600
    static let options = SendOptions(sendTime: sendTime)

    static func compile(_ source: String, format: TemplateFormat = .markdown, tests: String? = nil,
                        rules: TemplateRules) throws -> CompiledTemplate {
        try CompiledTemplate.compile(source: source, name: "t", format: format, samplesSource: "Default: {}",
                                     testsSource: tests, rules: rules)
    }

    static func text(_ count: Int) -> String { String(repeating: "x", count: count) }

    static let apns = TemplateRules(payloadSizers: [PayloadSizer(APNsProviderType())])
    static let fcmAndroid = TemplateRules(payloadSizers: [PayloadSizer(FCMProviderType(), platforms: [.android])])
    static let apnsAndFCMAndroid = TemplateRules(payloadSizers: [PayloadSizer(APNsProviderType()),
                                                                 PayloadSizer(FCMProviderType(), platforms: [.android])])

    /// A 3,900-byte body and a 300-character `android.tag`: APNs carries no tag, FCM's Android message does.
    static let fitsAPNsNotFCM = "---\nandroid:\n  tag: \(text(300))\n---\n\(text(3900))"
    /// A 3,500-byte body and a 700-character `ios.subtitle`: FCM's Android message carries no subtitle.
    static let fitsFCMNotAPNs = "---\nios:\n  subtitle: \(text(700))\n---\n\(text(3500))"

    @Test func apnsSizeIsThePayloadTheProviderEncodes() throws {
        let template = try Self.compile(Self.fitsAPNsNotFCM, rules: Self.apns)
        let content = try template.render(data: [:])
        let sizes = try Self.apns.payloadSizes(of: content, options: Self.options)
        let encoded = try APNsPayload.encode(content, pushType: .alert, sendTime: Self.sendTime)
        #expect(sizes == [PayloadSize(provider: "apns", what: "payload (push type alert)", bytes: encoded.count, limit: 4096)])
        #expect(sizes[0].fits)
    }

    @Test func fitsAPNsButNotFCM() throws {
        let tests = "tests:\n  - name: size\n    assert:\n      payload_bytes: { lt: 5000 }\n"
        let onlyAPNs = try Self.compile(Self.fitsAPNsNotFCM, tests: tests, rules: Self.apns).runTests()
        #expect(onlyAPNs.allPassed, "\(onlyAPNs)")
        let both = try Self.compile(Self.fitsAPNsNotFCM, tests: tests, rules: Self.apnsAndFCMAndroid)
        let report = both.runTests()
        #expect(!report.allPassed)
        let content = try both.render(data: [:])
        let fcm = try #require(try Self.fcmAndroid.payloadSizes(of: content, options: Self.options).first)
        #expect(fcm.provider == "fcm" && fcm.platform == .android && fcm.limit == 4096 && !fcm.fits)
        let message = report.cases.first?.messages.joined() ?? ""
        #expect(message.contains("fcm message for android tokens"), "\(message)")
        #expect(message.contains("\(fcm.bytes - 4096) over the limit of 4,096"), "\(message)")
        #expect(!message.contains("apns"), "\(message)")
        let error = #expect(throws: NorqError.self) { try Self.apnsAndFCMAndroid.checkPayloadSize(content) }
        #expect(error?.code == .templatePayloadTooLarge)
        #expect(error?.message.contains("fcm message for android tokens") == true, "\(String(describing: error))")
        #expect(throws: Never.self) { try Self.apns.checkPayloadSize(content) }
    }

    @Test func fitsFCMButNotAPNs() throws {
        let tests = "tests:\n  - name: size\n    assert:\n      payload_bytes: { lt: 5000 }\n"
        let onlyFCM = try Self.compile(Self.fitsFCMNotAPNs, tests: tests, rules: Self.fcmAndroid).runTests()
        #expect(onlyFCM.allPassed, "\(onlyFCM)")
        let both = try Self.compile(Self.fitsFCMNotAPNs, tests: tests, rules: Self.apnsAndFCMAndroid)
        let content = try both.render(data: [:])
        let sizes = try Self.apnsAndFCMAndroid.payloadSizes(of: content, options: Self.options)
        #expect(sizes.map(\.provider) == ["apns", "fcm"])
        #expect(!sizes[0].fits && sizes[1].fits)
        let message = both.runTests().cases.first?.messages.joined() ?? ""
        #expect(message.contains(sizes[0].description), "\(message)")
        #expect(sizes[0].description == "apns payload (push type alert): 4,\(sizes[0].bytes - 4000) bytes, \(sizes[0].excess) over the limit of 4,096")
        let error = #expect(throws: NorqError.self) { try Self.apnsAndFCMAndroid.checkPayloadSize(content) }
        #expect(error?.code == .templatePayloadTooLarge)
        #expect(error?.message.contains("apns payload") == true)
    }

    @Test func voipAllowsFiveKilobytes() throws {
        let voip = try Self.compile("---\nheaders:\n  apns-push-type: voip\ndata:\n  blob: \(Self.text(4500))\n---\n",
                                    rules: Self.apns)
        let size = try #require(try Self.apns.payloadSizes(of: voip.render(data: [:]), options: Self.options).first)
        #expect(size.what == "payload (push type voip)" && size.limit == 5120 && size.bytes > 4096 && size.fits)
        let alert = try Self.compile("---\nheaders:\n  apns-push-type: alert\ndata:\n  blob: \(Self.text(4500))\n---\nHi",
                                     rules: Self.apns)
        let over = try #require(try Self.apns.payloadSizes(of: alert.render(data: [:]), options: Self.options).first)
        #expect(over.limit == 4096 && !over.fits && over.excess == over.bytes - 4096)
        let tooBig = try Self.compile("---\nheaders:\n  apns-push-type: voip\ndata:\n  blob: \(Self.text(5200))\n---\n",
                                      rules: Self.apns)
        #expect(try !Self.apns.payloadSizes(of: tooBig.render(data: [:])).allSatisfy { $0.fits })
    }

    @Test func nativePushJSONIsMeasuredAsWritten() throws {
        let source = "{\"aps\": {\"alert\": {\"title\": \"{{t}}\"}}, \"blob\": \"\(Self.text(3000))\"}"
        let rules = TemplateRules(providerTypes: [APNsProviderType(), FCMProviderType(), WebPushProviderType()])
        let template = try CompiledTemplate.compile(source: source, name: "n", format: .json, samplesSource: "Default: {t: Hi}",
                                                    rules: rules)
        let content = try template.render(data: ["t": "Hi"])
        let native = try #require(content.nativePayload).serialized().count
        let sizes = try rules.payloadSizes(of: content, options: Self.options)
        // APNs sends it as written; FCM only to iOS tokens, as apns.payload; Web Push as written.
        #expect(sizes.map(\.provider) == ["apns", "fcm", "webpush"])
        #expect(sizes[0].bytes == native)
        #expect(sizes[1].platform == .ios && sizes[1].bytes == native + #"{"apns":{"payload":}}"#.utf8.count)
        #expect(sizes[2].bytes == native && sizes[2].limit == 3993)
        #expect(sizes.allSatisfy { $0.fits })
    }

    @Test func webPushLimitIsThePlaintextThatFitsTheEncryptedBody() throws {
        let rules = TemplateRules(payloadSizers: [PayloadSizer(WebPushProviderType())])
        let template = try Self.compile("---\ntitle: T\n---\n\(Self.text(3990))", rules: rules)
        let content = try template.render(data: [:])
        let size = try #require(try rules.payloadSizes(of: content).first)
        #expect(size.bytes == WebPushPayload.encode(content).count && size.limit == WebPushEncryption.maxPlaintextBytes)
        #expect(!size.fits)
        let error = #expect(throws: NorqError.self) { try rules.checkPayloadSize(content) }
        #expect(error?.message.contains("webpush plaintext (before encryption): ") == true)
        #expect(error?.message.contains("\(size.excess) over the limit of 3,993") == true)
    }

    @Test func aProviderThatCannotBuildThePayloadFailsTheAssertion() throws {
        // FCM reserves the data key `from`; APNs does not care.
        let source = "---\ndata:\n  from: me\n---\nHi"
        let tests = "tests:\n  - name: size\n    assert:\n      payload_bytes: { lt: 4096 }\n"
        #expect(try Self.compile(source, tests: tests, rules: Self.apns).runTests().allPassed)
        let report = try Self.compile(source, tests: tests, rules: Self.apnsAndFCMAndroid).runTests()
        #expect(report.cases.first?.messages.first?.contains("fcm/reserved-data-key") == true, "\(report)")
    }

    @Test func withoutProviderRulesTheNeutralOutputIsMeasured() throws {
        let template = try CompiledTemplate.compile(
            source: "---\ntitle: Hi\n---\nBody", name: "t", samplesSource: "Default: {}",
            testsSource: "tests:\n  - name: s\n    assert:\n      payload_bytes: { eq: 59 }\n")
        let content = try template.render(data: [:])
        #expect(TemplateRules.neutralPayload(content).serialized().count == 59)  // {"title":"Hi","body":"Body","image":null,"action_url":null}
        #expect(try TemplateRules().payloadSizes(of: content).map(\.limit) == [nil])
        #expect(template.runTests().allPassed)
    }

    @Test func configuredProvidersAreMeasuredForTheirRoutedPlatforms() {
        struct Empty: ProviderConfiguration { var summary: [(key: String, value: String)] { [] } }
        let origin = ProviderInstanceConfiguration.Origin.environment(prefix: "X_")
        let configuration = NorqConfiguration(
            providers: [ProviderInstanceConfiguration(name: "apns", typeName: "apns", configuration: Empty(), origin: origin),
                        ProviderInstanceConfiguration(name: "fcm", typeName: "fcm", configuration: Empty(), origin: origin),
                        ProviderInstanceConfiguration(name: "spare", typeName: "webpush", configuration: Empty(), origin: origin)],
            routing: RoutingTable(defaultProvider: "apns", byPlatform: [.android: "fcm", .web: "fcm"]))
        let registry = ProviderTypeRegistry([APNsProviderType(), FCMProviderType(), WebPushProviderType()])
        let sizers = configuration.payloadSizers(registry: registry)
        #expect(sizers.map(\.typeName) == ["apns", "fcm", "webpush"])
        #expect(sizers.map(\.platforms) == [[.ios], [.android, .web], [.web]])  // `spare` is routed nowhere: all of its
        #expect(NorqConfiguration().payloadSizers(registry: registry).isEmpty)
    }
}
