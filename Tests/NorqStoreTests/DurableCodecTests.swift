import NorqCore
import OrderedCollections
import PropertyBased
import Testing

@testable import Norq

/// The stored form of a send (content, options) is its synthesized `Codable` conformance: every field survives the
/// store, by construction, and a field added later cannot be missed by one side.
@Suite struct DurableCodecTests {
    /// An accepted outcome (a ticket) is stored with its marker and read back as `accepted`, not `delivered`.
    @Test func anAcceptedOutcomeIsReadBackAsAccepted() throws {
        let result = PushOutcome.Result.delivered(PushOutcome.Delivered(status: 200, messageID: "ticket-1", accepted: true))
        let stored = DurableCodec.stored(result, messageID: "sent-1", mayHaveBeenDelivered: false)
        #expect(stored.isAccepted && stored.messageID == "ticket-1")
        let row = OutboxRow(id: 1, sendID: "s", position: 0, target: DurableCodec.encode(.token(PushToken(token: "ExponentPushToken[x]", platform: .ios))),
                            identity: "ExponentPushToken[x]", provider: "expo", recipientID: nil, state: .delivered,
                            attempts: 1, nextAttemptAt: 0, messageID: nil, mayHaveBeenDelivered: false, last: stored,
                            finishedAt: 2)
        let outcome = try #require(DurableCodec.outcome(of: row))
        #expect(outcome.result.kind == "accepted")
        let plain = DurableCodec.stored(.delivered(PushOutcome.Delivered(status: 200)), messageID: "m", mayHaveBeenDelivered: false)
        #expect(!plain.isAccepted)
    }

    /// Random sends whose every optional field is set or not; `full` sets every field.
    static let plans = Generator<DurableCodec.StoredPlan, Shrink.None<DurableCodec.StoredPlan>>(run: { rng in
        let full = Bool.random(using: &rng) && Bool.random(using: &rng)
        // A trace context as a tracer injects it (W3C `traceparent`, `tracestate`), with values JSON must escape.
        let values = ["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "vendor=a\"b\\c,x=é😀", "", "\u{1}"]
        var trace: [String: String]?
        if full || Bool.random(using: &rng) {
            var carrier: [String: String] = [:]
            for key in ["traceparent", "tracestate", "k\"ey"].shuffled(using: &rng).prefix(Int.random(in: 1...3, using: &rng)) {
                carrier[key] = values.randomElement(using: &rng)
            }
            trace = carrier
        }
        return DurableCodec.StoredPlan(content: Random.content(&rng, full: full),
                                       templateName: Random.string(&rng, full),
                                       options: Random.options(&rng, full: full), trace: trace)
    })

    @Test func everyFieldOfARandomSendRoundTripsThroughTheStoredForm() async throws {
        await propertyCheck(count: 300, input: Self.plans) { plan in
            do {
                let text = try DurableCodec.encode(content: plan.content, templateName: plan.templateName,
                                                   options: plan.options, trace: plan.trace)
                let decoded = try DurableCodec.decodePlan(text)
                #expect(decoded == plan)
                // Byte-stable: encoding what was decoded gives the same text (custom data keeps its key order).
                #expect(try DurableCodec.encode(content: decoded.content, templateName: decoded.templateName,
                                                options: decoded.options, trace: decoded.trace) == text)
                // The trace written in place is what the plan's `Codable` form reads: the generic encoder's text
                // decodes to the same plan.
                let generic = String(decoding: try JSONValueEncoder().encode(plan).serialized(), as: UTF8.self)
                #expect(try DurableCodec.decodePlan(generic) == decoded)
                // Written straight from the encoder's tree: the bytes of the `JSONValue` it would build.
                var direct: [UInt8] = []
                try JSONValueEncoder().encode(plan, into: &direct)
                #expect(direct == Array(generic.utf8))
            } catch {
                Issue.record("\(error)")
            }
        }
    }

    /// The generator sets every field when `full`: a field added to `PushContent` or `RouterSendOptions` without a
    /// generator case fails here (an optional left nil), so the round trip above always covers every field.
    /// Random targets of every shape: a token with or without provider, environment and Web Push keys; a channel
    /// with or without each field; values with the separator or empty (they take the JSON form).
    static let targets = Generator<DeliveryTarget, Shrink.None<DeliveryTarget>>(run: { rng in
        func value(_ rng: inout some RandomNumberGenerator) -> String? {
            switch Int.random(in: 0...5, using: &rng) {
            case 0: return nil
            case 1: return ""
            case 2: return "a\u{1F}b"
            default: return ["apns", "fcm-prod", "sandbox", "é😀", "{x}"].randomElement(using: &rng)
            }
        }
        if Bool.random(using: &rng) {
            let keys = Bool.random(using: &rng) ? WebPushKeys(p256dh: value(&rng) ?? "p", auth: value(&rng) ?? "a") : nil
            return .token(PushToken(token: value(&rng) ?? "0a1b", platform: Platform(rawValue: value(&rng) ?? "ios"),
                                    provider: value(&rng), environment: value(&rng).map(PushEnvironment.init(rawValue:)),
                                    keys: keys))
        }
        return .channel(ChannelRecipient(channel: value(&rng) ?? "ch", provider: value(&rng),
                                         environment: value(&rng).map(PushEnvironment.init(rawValue:)),
                                         platform: value(&rng).map(Platform.init(rawValue:))))
    })

    /// A target is stored as its identity plus the rest (`tios` for a plain iOS token); every field comes back,
    /// and the JSON form of rows written before stop 31 is still read.
    @Test func everyFieldOfARandomTargetRoundTrips() async throws {
        await propertyCheck(count: 300, input: Self.targets) { target in
            let stored = DurableCodec.encode(target)
            #expect((try? DurableCodec.decodeTarget(stored, identity: target.identity)) == target)
            #expect((try? DurableCodec.decodeTarget(DurableCodec.json(target), identity: "ignored")) == target)
        }
        let plain = DeliveryTarget.token(PushToken(token: "0a1b", platform: .ios))
        #expect(DurableCodec.encode(plain) == "tios")
        #expect(throws: NorqError.self) { try DurableCodec.decodeTarget("x", identity: "t") }
        #expect(throws: NorqError.self) { try DurableCodec.decodeTarget("c", identity: "not-a-channel") }
    }

    @Test func theFullGeneratorSetsEveryField() throws {
        var rng = SystemRandomNumberGenerator()
        let content = Random.content(&rng, full: true)
        let options = Random.options(&rng, full: true)
        #expect(Self.nilFields(content, path: "content") == [])
        #expect(Self.nilFields(options, path: "options") == [])
        // And the round trip of the full value, once, deterministically.
        let text = try DurableCodec.encode(content: content, templateName: "t", options: options)
        let decoded = try DurableCodec.decodePlan(text)
        #expect(decoded.content == content)
        #expect(decoded.options == options)
    }

    /// The fields the first stored form (version 1) lost are in the stored text now.
    @Test func theFieldsVersionOneDroppedAreStored() throws {
        var content = PushContent(title: "", body: "")
        content.ios.alertText = "Hello"
        content.ios.action = "Open"
        content.ios.actionLocKey = "OPEN_KEY"
        content.ios.urlArgs = ["a", "b"]
        content.headers.topic = "com.example.other"
        var options = RouterSendOptions()
        options.topic = "com.example.winner"
        let decoded = try DurableCodec.decodePlan(try DurableCodec.encode(content: content, templateName: nil, options: options))
        #expect(decoded.content?.ios.alertText == "Hello")
        #expect(decoded.content?.ios.action == "Open")
        #expect(decoded.content?.ios.actionLocKey == "OPEN_KEY")
        #expect(decoded.content?.ios.urlArgs == ["a", "b"])
        #expect(decoded.content?.headers.topic == "com.example.other")
        #expect(decoded.options.topic == "com.example.winner")
    }

    /// Sends stored by an earlier norq (content version 1) are still read.
    @Test func aVersionOneSendIsStillRead() throws {
        let v1 = #"{"v":1,"template":"order","content":{"title":"T","body":"B","ios":{"badge":3,"sound":{"name":"ping","critical":true,"volume":0.5}},"android":{"ttl":60},"web":{"renotify":true},"headers":{"priority":5,"expiration":{"after":3600}},"data":{"z":1,"a":2}},"options":{"key":"k","deadlineMs":1500,"environment":"production","collapse":"idempotency","strict":false,"sendTime":1700000000}}"#
        let plan = try DurableCodec.decodePlan(v1)
        #expect(plan.templateName == "order")
        #expect(plan.content?.ios.badge == 3)
        #expect(plan.content?.ios.sound == PushSound(name: "ping", critical: true, volume: 0.5))
        #expect(plan.content?.android.ttl == 60)
        #expect(plan.content?.web.renotify == true)
        #expect(plan.content?.headers.expiration == .after(seconds: 3600))
        #expect(Array(plan.content?.data.keys ?? []) == ["z", "a"])
        #expect(plan.options.idempotencyKey == "k")
        #expect(plan.options.deadline == .milliseconds(1500))
        #expect(plan.options.environment == .production)
        #expect(plan.options.collapse == .idempotency)
        #expect(plan.options.strict == false)
        #expect(plan.options.sendTime == 1_700_000_000)
    }

    @Test func aSendFromANewerNorqIsRefusedWithItsCode() {
        #expect(throws: NorqError.self) { try DurableCodec.decodePlan(#"{"v":99,"options":{}}"#) }
        do {
            _ = try DurableCodec.decodePlan(#"{"v":99,"options":{}}"#)
        } catch {
            #expect(error.code == .storeSchemaTooNew)
        }
        do {
            _ = try DurableCodec.decodePlan(#"{"v":2,"options":{"strict":"yes"}}"#)
            Issue.record("a mistyped field decoded")
        } catch {
            #expect(error.code == .storeFailed)
            #expect(error.message.contains("options"))
        }
    }

    @Test func jsonValuesKeepTheirKeyOrderAndNumbersThroughTheEncoder() throws {
        let value: JSONValue = ["z": 1, "a": [true, nil, 2.5, "s"], "m": ["y": -1, "b": 9_007_199_254_740_993]]
        let encoded = try JSONValueEncoder().encode(value)
        #expect(encoded == value)
        #expect(try JSONValueDecoder().decode(JSONValue.self, from: encoded) == value)
        let dictionary: OrderedDictionary<String, JSONValue> = ["q": 1, "b": 2]
        #expect(try JSONValueEncoder().encode(dictionary) == .object(dictionary))
    }

    /// Every kind of container, nesting, a key written twice, a `Duration`, JSON values and empty containers: the
    /// bytes written straight from the encoder's tree are those of the `JSONValue` it builds, and each key added to
    /// an object or element to an array keeps its place.
    @Test func theEncodersDirectBytesAreThoseOfItsJSONValue() throws {
        struct Shapes: Encodable {
            enum Keys: String, CodingKey { case name, list, nested, twice, duration, json, empty, none, matrix }
            func encode(to encoder: any Encoder) throws {
                var object = encoder.container(keyedBy: Keys.self)
                try object.encode("é\"q\u{1}", forKey: .name)
                try object.encode(1, forKey: .twice)
                var list = object.nestedUnkeyedContainer(forKey: .list)
                try list.encode(Int64.min)
                try list.encode(2.5)
                try list.encodeNil()
                var inner = list.nestedContainer(keyedBy: Keys.self)
                try inner.encode(true, forKey: .name)
                var nested = object.nestedContainer(keyedBy: Keys.self, forKey: .nested)
                try nested.encode([["a": 1], ["b": 2]], forKey: .matrix)
                try nested.encode(UInt8(7), forKey: .none)
                try object.encode("later", forKey: .twice)  // replaces the value, keeps the place
                try object.encode(Duration.seconds(3) + .milliseconds(5), forKey: .duration)
                try object.encode(["z": [1, nil], "a": "x"] as JSONValue, forKey: .json)
                _ = object.nestedContainer(keyedBy: Keys.self, forKey: .empty)
                try object.encode([Int](), forKey: .matrix)
            }
        }
        let tree = try JSONValueEncoder().encode(Shapes())
        var direct: [UInt8] = [UInt8(ascii: "x")]  // appended after what is there
        try JSONValueEncoder().encode(Shapes(), into: &direct)
        #expect(direct == [UInt8(ascii: "x")] + tree.serialized())
        let text = String(decoding: tree.serialized(), as: UTF8.self)
        #expect(text.hasPrefix(#"{"name":"é\"q\u0001","twice":"later","list":[-9223372036854775808,2.5,null,{"name":true}],"#))
        #expect(text.hasSuffix(#""empty":{},"matrix":[]}"#))
        for value: JSONValue in [1, "s", [], [:], [[[]]], nil] {
            var bytes: [UInt8] = []
            try JSONValueEncoder().encode(value, into: &bytes)
            #expect(bytes == value.serialized())
        }
    }

    /// Lists the optional stored properties (recursively) that are nil.
    static func nilFields(_ value: Any, path: String) -> [String] {
        var found: [String] = []
        for child in Mirror(reflecting: value).children {
            let name = path + "." + (child.label ?? "?")
            let mirror = Mirror(reflecting: child.value)
            if mirror.displayStyle == .optional {
                guard let wrapped = mirror.children.first?.value else {
                    found.append(name)
                    continue
                }
                if Mirror(reflecting: wrapped).displayStyle == .struct { found += nilFields(wrapped, path: name) }
            } else if mirror.displayStyle == .struct, !(child.value is OrderedDictionary<String, JSONValue>),
                      !(child.value is Duration) {
                found += nilFields(child.value, path: name)
            }
        }
        return found
    }
}

/// Random values for every field of a send.
enum Random {
    static func string(_ rng: inout some RandomNumberGenerator, _ full: Bool) -> String? {
        guard full || Bool.random(using: &rng) else { return nil }
        let alphabet = Array("abcXYZ09 -_.\"\\\n\u{e9}\u{1F600}")
        return String((0..<Int.random(in: 0...12, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! })
    }

    static func int(_ rng: inout some RandomNumberGenerator, _ full: Bool) -> Int64? {
        guard full || Bool.random(using: &rng) else { return nil }
        return Int64.random(in: -1_000_000...4_000_000_000, using: &rng)
    }

    static func bool(_ rng: inout some RandomNumberGenerator, _ full: Bool) -> Bool? {
        guard full || Bool.random(using: &rng) else { return nil }
        return Bool.random(using: &rng)
    }

    static func double(_ rng: inout some RandomNumberGenerator, _ full: Bool) -> Double? {
        guard full || Bool.random(using: &rng) else { return nil }
        return Double(Int.random(in: 0...1000, using: &rng)) / 1000
    }

    static func strings(_ rng: inout some RandomNumberGenerator, _ full: Bool) -> [String]? {
        guard full || Bool.random(using: &rng) else { return nil }
        return (0..<Int.random(in: 0...3, using: &rng)).map { _ in string(&rng, true)! }
    }

    static func json(_ rng: inout some RandomNumberGenerator, depth: Int = 0) -> JSONValue {
        switch Int.random(in: 0...(depth > 2 ? 4 : 6), using: &rng) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .int(Int64.random(in: Int64.min...Int64.max, using: &rng))
        // Not integral: JSON text does not tell 264.0 from 264, so a stored 264.0 reads back as the integer 264
        // (the same bytes in every payload; the byte-stability check above covers it).
        case 3: return .double(Double(Int.random(in: -10_000...10_000, using: &rng) * 2 + 1) / 8)
        case 4: return .string(string(&rng, true)!)
        case 5: return .array((0..<Int.random(in: 0...3, using: &rng)).map { _ in json(&rng, depth: depth + 1) })
        default: return .object(object(&rng, depth: depth + 1))
        }
    }

    static func object(_ rng: inout some RandomNumberGenerator, depth: Int = 0) -> OrderedDictionary<String, JSONValue> {
        var object: OrderedDictionary<String, JSONValue> = [:]
        for _ in 0..<Int.random(in: 0...4, using: &rng) { object[string(&rng, true)!] = json(&rng, depth: depth) }
        return object
    }

    static func expiration(_ rng: inout some RandomNumberGenerator, _ full: Bool) -> PushExpiration? {
        guard full || Bool.random(using: &rng) else { return nil }
        switch Int.random(in: 0...2, using: &rng) {
        case 0: return .after(seconds: Int64.random(in: 0...86_400, using: &rng))
        case 1: return .at(epochSeconds: Int64.random(in: 0...2_000_000_000, using: &rng))
        default: return .immediately
        }
    }

    static func content(_ rng: inout some RandomNumberGenerator, full: Bool) -> PushContent {
        var c = PushContent(title: string(&rng, true)!, body: string(&rng, true)!)
        c.image = string(&rng, full)
        c.actionURL = string(&rng, full)
        if full || Bool.random(using: &rng) {
            c.ios.sound = PushSound(name: string(&rng, true)!, critical: Bool.random(using: &rng), volume: double(&rng, full))
        }
        c.ios.badge = int(&rng, full).map { Int($0) }
        c.ios.category = string(&rng, full)
        c.ios.threadID = string(&rng, full)
        c.ios.mutableContent = bool(&rng, full)
        c.ios.contentAvailable = bool(&rng, full)
        c.ios.interruptionLevel = string(&rng, full)
        c.ios.subtitle = string(&rng, full)
        c.ios.relevanceScore = double(&rng, full)
        c.ios.targetContentID = string(&rng, full)
        c.ios.filterCriteria = string(&rng, full)
        c.ios.launchImage = string(&rng, full)
        c.ios.titleLocKey = string(&rng, full)
        c.ios.titleLocArgs = strings(&rng, full)
        c.ios.subtitleLocKey = string(&rng, full)
        c.ios.subtitleLocArgs = strings(&rng, full)
        c.ios.locKey = string(&rng, full)
        c.ios.locArgs = strings(&rng, full)
        c.ios.actionLocKey = string(&rng, full)
        c.ios.action = string(&rng, full)
        c.ios.urlArgs = strings(&rng, full)
        c.ios.alertText = string(&rng, full)
        c.ios.event = string(&rng, full)
        c.ios.contentState = full || Bool.random(using: &rng) ? json(&rng) : nil
        c.ios.timestamp = int(&rng, full)
        c.ios.staleDate = int(&rng, full)
        c.ios.dismissalDate = int(&rng, full)
        c.ios.attributesType = string(&rng, full)
        c.ios.attributes = full || Bool.random(using: &rng) ? .object(object(&rng)) : nil
        c.ios.inputPushToken = bool(&rng, full)
        c.ios.inputPushChannel = string(&rng, full)
        c.android.channelID = string(&rng, full)
        c.android.priority = string(&rng, full)
        c.android.color = string(&rng, full)
        c.android.icon = string(&rng, full)
        c.android.sound = string(&rng, full)
        c.android.tag = string(&rng, full)
        c.android.ttl = int(&rng, full)
        c.web.icon = string(&rng, full)
        c.web.badge = string(&rng, full)
        c.web.image = string(&rng, full)
        c.web.requireInteraction = bool(&rng, full)
        c.web.actions = full || Bool.random(using: &rng) ? .array([json(&rng)]) : nil
        c.web.tag = string(&rng, full)
        c.web.renotify = bool(&rng, full)
        c.headers.priority = int(&rng, full).map { Int($0 % 11) }
        c.headers.pushType = string(&rng, full)
        c.headers.collapseID = string(&rng, full)
        c.headers.expiration = expiration(&rng, full)
        c.headers.topic = string(&rng, full)
        c.data = object(&rng)
        c.nativePayload = full || Bool.random(using: &rng) ? .object(object(&rng)) : nil
        c.templateName = string(&rng, full)
        return c
    }

    static func options(_ rng: inout some RandomNumberGenerator, full: Bool) -> RouterSendOptions {
        var o = RouterSendOptions()
        o.idempotencyKey = string(&rng, full)
        o.deadline = .milliseconds(Int64.random(in: 1...3_600_000, using: &rng)) + .nanoseconds(Int64.random(in: 0...999_999, using: &rng))
        o.environment = full || Bool.random(using: &rng) ? [.sandbox, .production, PushEnvironment(rawValue: "x")].randomElement(using: &rng)! : nil
        o.priority = int(&rng, full).map { Int($0 % 11) }
        o.expiration = expiration(&rng, full)
        o.collapseID = string(&rng, full)
        o.collapse = Bool.random(using: &rng) ? .template : .idempotency
        o.strict = Bool.random(using: &rng)
        o.sendTime = int(&rng, full)
        o.topic = string(&rng, full)
        o.validateOnly = Bool.random(using: &rng)
        return o
    }
}
