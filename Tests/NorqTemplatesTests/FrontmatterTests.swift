import NorqCore
import NorqTemplates
import Testing

struct FrontmatterTests {
    @Test func fullFrontmatter() throws {
        let source = """
            ---
            title: "Order #{{order.id}} shipped"
            enabled: true
            ios:
              sound: { name: alarm.caf, critical: true, volume: 0.5 }
              badge: "{{count}}"
              category: ORDER
              thread-id: "t-{{order.id}}"
              mutable-content: true
              content-available: false
              interruption-level: time-sensitive
              subtitle: Sub
              relevance-score: 0.5
              target-content-id: tc
              filter-criteria: work
              launch-image: launch.png
              attributes-type: DeliveryAttributes
              attributes: { orderId: "{{order.id}}" }
              input-push-token: true
              input-push-channel: chan
              dismissal-date: 1767229200
            android:
              channel_id: orders
              priority: high
              color: "#ff0000"
              icon: ic
              sound: ding
              tag: t
              ttl: 3600s
            web:
              icon: https://i
              badge: https://b
              image: https://im
              requireInteraction: true
              actions: [{ action: open, title: "Open {{order.id}}" }]
              tag: wt
              renotify: true
            headers:
              apns-priority: 10
              apns-push-type: alert
              apns-collapse-id: "order-{{order.id}}"
              apns-expiration: { at: 1767229200 }
            data:
              orderId: "{{order.id}}"
              count: "{{count}}"
              note: "n={{count}}"
              nested: { list: [1, "{{order.id}}"] }
            ---
            Body
            """
        let c = try render(source, ["order": ["id": "A1"], "count": 3])
        #expect(c.title == "Order #A1 shipped")
        #expect(c.ios.sound == PushSound(name: "alarm.caf", critical: true, volume: 0.5))
        #expect(c.ios.badge == 3)
        #expect(c.ios.category == "ORDER")
        #expect(c.ios.threadID == "t-A1")
        #expect(c.ios.mutableContent == true)
        #expect(c.ios.contentAvailable == false)
        #expect(c.ios.interruptionLevel == "time-sensitive")
        #expect(c.ios.subtitle == "Sub")
        #expect(c.ios.relevanceScore == 0.5)
        #expect(c.ios.targetContentID == "tc")
        #expect(c.ios.filterCriteria == "work")
        #expect(c.ios.launchImage == "launch.png")
        #expect(c.ios.attributesType == "DeliveryAttributes")
        #expect(c.ios.attributes == ["orderId": "A1"])
        #expect(c.ios.inputPushToken == true)
        #expect(c.ios.inputPushChannel == "chan")
        #expect(c.ios.dismissalDate == 1767229200)
        #expect(c.android.channelID == "orders")
        #expect(c.android.priority == "high")
        #expect(c.android.color == "#ff0000")
        #expect(c.android.icon == "ic")
        #expect(c.android.sound == "ding")
        #expect(c.android.tag == "t")
        #expect(c.android.ttl == 3600)
        #expect(c.web.icon == "https://i")
        #expect(c.web.badge == "https://b")
        #expect(c.web.image == "https://im")
        #expect(c.web.requireInteraction == true)
        #expect(c.web.actions == [["action": "open", "title": "Open A1"]])
        #expect(c.web.tag == "wt")
        #expect(c.web.renotify == true)
        #expect(c.headers == PushHeaders(priority: 10, pushType: "alert", collapseID: "order-A1",
                                         expiration: .at(epochSeconds: 1767229200)))
        #expect(c.data == ["orderId": "A1", "count": 3, "note": "n=3", "nested": ["list": [1, "A1"]]])
        #expect(c.body == "Body")
        #expect(c.templateName == "t")
    }

    @Test func liveActivityAndLocKeys() throws {
        let c = try render("""
            ---
            ios:
              event: end
              content-state: { progress: "{{p}}", label: "{{l | uppercase}}" }
              timestamp: "{{ts}}"
              stale-date: "2026-01-01T00:00:00Z"
              title-loc-key: T
              title-loc-args: ["{{l}}"]
              subtitle-loc-key: S
              subtitle-loc-args: [a]
              loc-key: B
              loc-args: ["{{p}}", x]
            ---
            """, ["p": 0.5, "l": "go", "ts": 1767225600])
        #expect(c.ios.event == "end")
        #expect(c.ios.contentState == ["progress": 0.5, "label": "GO"])
        #expect(c.ios.timestamp == 1767225600)
        #expect(c.ios.staleDate == 1767225600)
        #expect(c.ios.titleLocKey == "T")
        #expect(c.ios.titleLocArgs == ["go"])
        #expect(c.ios.subtitleLocArgs == ["a"])
        #expect(c.ios.locArgs == ["0.5", "x"])
    }

    @Test(arguments: [
        ("expiration: 0", PushExpiration.immediately), ("expiration: \"60s\"", .after(seconds: 60)),
        ("expiration: \"at: 1767225600\"", .at(epochSeconds: 1767225600)),
        // A number is a UNIX epoch as Apple, hapns and node-apn define it: on the wire as written.
        ("expiration: 1767225600", .at(epochSeconds: 1767225600)),
        ("expiration: \"1767225600\"", .at(epochSeconds: 1767225600)),
        ("expiration: 60", .at(epochSeconds: 60)),
        ("expiration: \"1h\"", .after(seconds: 3600)), ("expiration: \"30m\"", .after(seconds: 1800)),
        ("expiration: \"3600s\"", .after(seconds: 3600)), ("expiration: \"2d\"", .after(seconds: 172_800)),
        ("expiration: \"0s\"", .immediately),
        ("expiration: \"2026-01-01T00:00:00Z\"", .at(epochSeconds: 1767225600)),
    ])
    func expiration(_ line: String, _ expected: PushExpiration) throws {
        let c = try render("---\nheaders:\n  apns-\(line)\n---\n")
        #expect(c.headers.expiration == expected)
    }

    @Test(arguments: [
        ("ios:\n  colour: red", NorqError.Code.unknownIOSKey),
        ("android:\n  chanel: x", .unknownAndroidKey),
        ("web:\n  sound: x", .unknownWebKey),
        ("headers:\n  apns-topc: x", .unknownHeader),
        ("headers:\n  apns-topic: \"com.example/app\"", .invalidTopic),
        ("headers:\n  apns-expiration: \"1 hour\"", .invalidExpiration),
        ("subject: x", .unknownFrontmatterKey),
        ("ios:\n  interruption-level: loud", .invalidInterruptionLevel),
        ("android:\n  priority: max", .invalidPriority),
        ("headers:\n  apns-priority: 7", .invalidPriority),
        ("headers:\n  apns-push-type: Banner!", .invalidPushType),
        ("headers:\n  apns-collapse-id: \(String(repeating: "x", count: 65))", .collapseIDTooLong),
        ("headers:\n  apns-expiration: soon", .invalidExpiration),
        ("headers:\n  apns-expiration: -5", .invalidExpiration),
        ("headers:\n  apns-expiration: { in: 5 }", .invalidExpiration),
        ("ios:\n  badge: many", .invalidFrontmatterValue),
        ("ios:\n  mutable-content: maybe", .invalidFrontmatterValue),
        ("enabled: perhaps", .invalidFrontmatterValue),
        ("data: [1]", .invalidFrontmatterValue),
        ("ios:\n  relevance-score: 2", .invalidRelevanceScore),
        ("ios:\n  event: pause", .invalidLiveActivityEvent),
        ("ios:\n  sound: { critical: true }", .invalidSound),
        ("ios:\n  sound: { name: a, volume: 3 }", .invalidSound),
        ("ios:\n  loc-key: K", .conflictingLocKey),
        ("title: T\nios:\n  title-loc-key: K", .conflictingLocKey),
        ("ios:\n  subtitle: S\n  subtitle-loc-key: K", .conflictingLocKey),
        ("ios: [", .templateInvalidFrontmatter),
        ("- a\n- b", .templateInvalidFrontmatter),
    ])
    func frontmatterErrors(_ yaml: String, _ code: NorqError.Code) {
        let body = code == .conflictingLocKey && yaml.hasPrefix("ios:\n  loc-key") ? "A body" : ""
        let error = caught { _ = try render("---\n\(yaml)\n---\n\(body)") }
        #expect(error?.code == code, "\(String(describing: error))")
        #expect(error?.location?.file == "push.md")
    }

    @Test func errorsPointAtTheLine() throws {
        let error = caught { _ = try render("---\ntitle: x\nios:\n  badge: 1\n  colour: red\n---\n") }
        #expect(error?.code == .unknownIOSKey)
        #expect(error?.location?.line == 5)
        #expect(error?.hint?.contains("color") == false)
        let hint = caught { _ = try render("---\nios:\n  categry: x\n---\n") }?.hint
        #expect(hint == "did you mean 'category'?")
    }

    @Test func pushTypesComeFromTheProviderTypesRules() throws {
        let source = "---\nheaders:\n  apns-push-type: banner\n---\n"
        // With the provider types' list (TemplateRules), a push type they do not know is refused at compile time.
        let rules = TemplateRules(pushTypes: ["alert", "background"])
        let error = caught { _ = try CompiledTemplate.compile(source: source, name: "t", file: "push.md", rules: rules) }
        #expect(error?.code == .invalidPushType)
        #expect(error?.location?.line == 3)
        #expect(error?.hint == "one of alert, background")
        let known = "---\nheaders:\n  apns-push-type: background\n---\n"
        let compiled = try CompiledTemplate.compile(source: known, name: "t", rules: rules)
        #expect(try compiled.render(data: [:], options: RenderOptions()).headers.pushType == "background")
        // A rendered value is checked against the same list.
        let rendered = "---\nheaders:\n  apns-push-type: \"{{t}}\"\n---\n"
        let template = try CompiledTemplate.compile(source: rendered, name: "t", rules: rules)
        #expect(caught { _ = try template.render(data: ["t": "banner"], options: RenderOptions()) }?.code == .invalidPushType)
        // Without rules the template language keeps no list: the provider checks the name when it prepares.
        #expect(try render(source).headers.pushType == "banner")
        // Rules from provider types: the union of their lists; none declaring any means not checked here.
        #expect(TemplateRules(providerTypes: []).pushTypes == nil)
    }

    @Test func renderedValuesAreValidatedToo() throws {
        let source = "---\nios:\n  interruption-level: \"{{level}}\"\n---\n"
        #expect(errorCode { _ = try render(source, ["level": "loud"]) } == .invalidInterruptionLevel)
        let collapse = "---\nheaders:\n  apns-collapse-id: \"{{id}}\"\n---\n"
        #expect(errorCode { _ = try render(collapse, ["id": .string(String(repeating: "é", count: 33))]) }
                    == .collapseIDTooLong)
        #expect(try render(collapse, ["id": "ok"]).headers.collapseID == "ok")
    }

    @Test func unclosedFrontmatter() throws {
        #expect(errorCode { _ = try render("---\ntitle: x\n") } == .templateInvalidFrontmatter)
    }

    @Test func disabledTemplate() throws {
        #expect(try compile("---\nenabled: false\n---\nx").enabled == false)
        #expect(try compile("x").enabled == true)
    }

    @Test func everyPushType() throws {
        for type in ["alert", "background", "voip", "complication", "fileprovider", "mdm", "location",
                     "liveactivity", "pushtotalk", "widgets", "controls"] {
            #expect(try render("---\nheaders:\n  apns-push-type: \(type)\n---\n").headers.pushType == type)
        }
    }
}
