import AsyncHTTPClient
import Foundation
import NIOCore
import NorqCore
import NorqBuiltIns
import NorqConfig
import NorqPreview
import NorqTemplates
import Testing

/// `norq preview`'s JSON endpoints, against a running preview service on 127.0.0.1.
@Suite(.serialized, .timeLimit(.minutes(2))) struct PreviewEndpointTests {
    @Test func templatesListsEveryTemplateWithItsSamplesAndFindingCounts() async throws {
        let fixture = try PreviewFixture()
        defer { fixture.remove() }
        try await withPreview(fixture) { _, url in
            let answer = try await PreviewHTTP.get(url, "/api/templates")
            #expect(answer.status == 200)
            guard case .array(let templates)? = answer.json["templates"] else {
                Issue.record("no templates: \(answer.text)")
                return
            }
            #expect(templates.compactMap { $0["id"] } == ["raw", "strict", "welcome"])
            let welcome = templates.first { $0["id"] == "welcome" }
            #expect(welcome?["samples"] == ["Ada", "Grace"])
            #expect(welcome?["warnings"] == 1)
            #expect(answer.json["generation"] == 1)
        }
    }

    @Test func renderShowsEachPlatformAndTheRequestOfEachProviderServingIt() async throws {
        let fixture = try PreviewFixture()
        defer { fixture.remove() }
        try await withPreview(fixture) { _, url in
            let answer = try await PreviewHTTP.post(url, "/api/render", #"{"template": "welcome", "sample": "Grace"}"#)
            #expect(answer.status == 200, "\(answer.text)")
            #expect(answer.json["error"] == .null)
            let platforms = try #require(answer.json["platforms"])
            for platform in ["ios", "android", "web"] {
                #expect(platforms[platform]?["title"]?["shown"] == "Welcome, Grace", "\(platform)")
                #expect(platforms[platform]?["body"]?["shown"] == "Hi Grace, thanks for joining Norq!", "\(platform)")
            }
            #expect(platforms["ios"]?["subtitle"]?["shown"] == "Your account is ready")
            #expect(platforms["ios"]?["threadId"] == "onboarding")
            #expect(platforms["ios"]?["interruptionLevel"] == "passive")
            #expect(platforms["android"]?["channelId"] == "onboarding")
            #expect(platforms["android"]?["priority"] == "high")

            guard case .array(let requests)? = answer.json["requests"] else {
                Issue.record("no requests: \(answer.text)")
                return
            }
            func request(_ platform: String, _ provider: String) -> JSONValue? {
                requests.first { $0["platform"] == .string(platform) && $0["provider"] == .string(provider) }
            }
            // The routed provider of each platform, with its routing and the exact request.
            let apns = try #require(request("ios", "apns"))
            #expect(apns["routing"] == "routing push")
            #expect(apns["request"]?["body"]?["aps"]?["alert"]?["title"] == "Welcome, Grace")
            #expect(apns["request"]?["url"] == .string("https://api.sandbox.push.apple.com/3/device/" + String(repeating: "0e", count: 32)))
            #expect(request("android", "fcm")?["routing"] == "routing push.android")
            #expect(request("web", "webpush")?["routing"] == "routing push.web")
            // Another provider serving the platform (FCM for iOS), with what it would show.
            #expect(request("ios", "fcm")?["shown"]?["title"] == "Welcome, Grace")
            // Sizes against each provider's limit.
            for entry in requests {
                guard case .int(let bytes)? = entry["size"]?["bytes"], case .int(let limit)? = entry["size"]?["limit"] else {
                    Issue.record("no size: \(entry)")
                    continue
                }
                #expect(bytes > 0 && bytes < limit)
                #expect(entry["size"]?["over"] == false)
            }
            // Secrets redacted: the authorization headers are descriptions, never a JWT or an access token.
            #expect(answer.text.contains("<redacted ES256 JWT kid=DEMO000000"))
            #expect(!answer.text.contains("eyJ"), "a JWT in the answer")
            // The linter's findings, with their lines.
            guard case .array(let findings)? = answer.json["findings"] else {
                Issue.record("no findings")
                return
            }
            #expect(findings.first?["code"] == "test/line-two")
            #expect(findings.first?["line"] == 2)
        }
    }

    /// Templates without a config (`norq preview --templates DIR`): each platform drawn from the rendered content,
    /// no request, and a note saying why.
    @Test func withoutAConfigThePlatformsAreDrawnAndNoRequestIsShown() async throws {
        let fixture = try PreviewFixture()
        defer { fixture.remove() }
        let templates = fixture.templates.path
        let loader: PreviewProject.Loader = { _ throws(NorqError) in
            let registry = ProviderTypeRegistry.builtIn(consoleOutput: { _ in })
            let library = try TemplateLibrary(directory: templates, rules: TemplateRules(providerTypes: registry.registeredTypes))
            return PreviewProject.make(library: library, configuration: nil, registry: registry)
        }
        let service = PreviewService(settings: .init(port: 0), loader: loader, linter: NoPreviewLinter())
        service.reload()
        let (status, body) = PreviewRenderer.render(PreviewRenderRequest(template: "welcome", sample: "Grace"),
                                                    snapshot: service.snapshot)
        #expect(status == 200)
        #expect(body["platforms"]?["ios"]?["title"]?["full"] == "Welcome, Grace")
        #expect(body["platforms"]?["ios"]?["source"] == "rendered content")
        #expect(body["requests"] == [])
        guard case .string(let note)? = body["providers"]?["note"] else {
            Issue.record("no note: \(body)")
            return
        }
        #expect(note.hasPrefix("no norq.yaml"))
        #expect(body["findings"] == [])
    }

    @Test func pastedDataIsMergedOnTheSample() async throws {
        let fixture = try PreviewFixture()
        defer { fixture.remove() }
        try await withPreview(fixture) { _, url in
            let answer = try await PreviewHTTP.post(url, "/api/render",
                                                    #"{"template": "welcome", "sample": "Ada", "data": {"app": "the beta"}}"#)
            #expect(answer.status == 200, "\(answer.text)")
            #expect(answer.json["platforms"]?["ios"]?["body"]?["full"] == "Hi Ada, thanks for joining the beta!")
            let alone = try await PreviewHTTP.post(url, "/api/render",
                                                   #"{"template": "welcome", "data": {"user": {"name": "Lin"}, "app": "X"}}"#)
            #expect(alone.json["platforms"]?["web"]?["title"]?["full"] == "Welcome, Lin")
            #expect(alone.json["sample"] == .null)
        }
    }

    /// A body longer than a platform shows is cut where that platform cuts it: four lines on an iOS banner, one
    /// line on a collapsed Android notification; the full text is kept beside it.
    @Test func longTextIsCutPerPlatform() async throws {
        let fixture = try PreviewFixture()
        defer { fixture.remove() }
        try await withPreview(fixture) { _, url in
            let app = String(repeating: "a very long app name ", count: 10)
            let answer = try await PreviewHTTP.post(url, "/api/render", #"{"template": "welcome", "sample": "Ada", "data": {"app": "\#(app)"}}"#)
            let platforms = try #require(answer.json["platforms"], "\(answer.text)")
            let full = try #require(platforms["ios"]?["body"]?["full"])
            for platform in ["ios", "android", "web"] {
                #expect(platforms[platform]?["body"]?["truncated"] == true, "\(platform)")
                #expect(platforms[platform]?["body"]?["full"] == full)
                guard case .string(let shown)? = platforms[platform]?["body"]?["shown"],
                      case .int(let limit)? = platforms[platform]?["body"]?["limit"] else {
                    Issue.record("\(platform): no cut body")
                    continue
                }
                #expect(shown.hasSuffix("…") && shown.count <= Int(limit) + 1, "\(platform): \(shown)")
            }
            #expect(platforms["android"]?["body"]?["limit"] == .int(Int64(PreviewPlatforms.androidCuts.body)))
            #expect(platforms["ios"]?["title"]?["truncated"] == false)
        }
    }

    /// A hand-written APNs payload (`push.json`): iOS draws it from `aps.alert`; FCM refuses it for Android, which
    /// its platform view says; a background push says the system shows nothing.
    @Test func whatTheRoutedProviderRefusesIsMarkedOnItsPlatform() async throws {
        let fixture = try PreviewFixture()
        defer { fixture.remove() }
        try fixture.write("native/push.json", #"""
            {"aps": {"alert": {"title": "{{who}} wrote", "body": "Lunch?"}, "sound": "default"}, "id": "c-1"}
            """#)
        try fixture.write("native/data.samples.yaml", "Default:\n  who: Ana\n")
        try fixture.write("quiet/push.md", """
            ---
            ios:
              content-available: true
            headers:
              apns-push-type: background
              apns-priority: 5
            data:
              kind: refresh
            ---

            """)
        try await withPreview(fixture) { _, url in
            let native = try await PreviewHTTP.post(url, "/api/render", #"{"template": "native"}"#)
            let platforms = try #require(native.json["platforms"], "\(native.text)")
            #expect(platforms["ios"]?["title"]?["full"] == "Ana wrote")
            #expect(platforms["ios"]?["body"]?["full"] == "Lunch?")
            #expect(platforms["ios"]?["refused"] == .null)
            #expect(platforms["android"]?["refused"]?["kind"] == "failed", "\(native.text)")
            #expect(platforms["android"]?["refused"]?["code"] == "fcm/invalid-message")

            let quiet = try await PreviewHTTP.post(url, "/api/render", #"{"template": "quiet"}"#)
            let views = try #require(quiet.json["platforms"], "\(quiet.text)")
            #expect(views["ios"]?["silent"] == true)
            #expect(views["ios"]?["title"] == .null)
            guard case .string(let note)? = views["android"]?["note"] else {
                Issue.record("no note for a data message: \(quiet.text)")
                return
            }
            #expect(note.hasPrefix("data message"))
        }
    }

    @Test func aTemplateThatDoesNotRenderIsShownWithItsErrorNotAnHTTPError() async throws {
        let fixture = try PreviewFixture()
        defer { fixture.remove() }
        try await withPreview(fixture) { _, url in
            let answer = try await PreviewHTTP.post(url, "/api/render", #"{"template": "strict"}"#)
            #expect(answer.status == 200)
            #expect(answer.json["error"]?["code"] == "template/missing-variable")
            #expect(answer.json["error"]?["line"] != .null, "the error has its line: \(answer.text)")
            #expect(answer.json["platforms"] == nil)
        }
    }

    @Test(arguments: [
        (#"{"template": "nope"}"#, 404, "template/not-found"),
        (#"{"template": "welcome", "sample": "Nobody"}"#, 400, "preview/invalid-request"),
        (#"{"template": "welcome", "colour": 1}"#, 400, "preview/invalid-request"),
        (#"{"template": "welcome", "data": [1]}"#, 400, "preview/invalid-request"),
        (#"not json"#, 400, "preview/invalid-request"),
    ])
    func badRequestsAreTypedErrors(body: String, status: Int, code: String) async throws {
        let fixture = try PreviewFixture()
        defer { fixture.remove() }
        try await withPreview(fixture) { _, url in
            let answer = try await PreviewHTTP.post(url, "/api/render", body)
            #expect(answer.status == status, "\(answer.text)")
            #expect(answer.json["error"]?["code"] == .string(code), "\(answer.text)")
        }
    }

    /// DNS rebinding: a request naming another host (a site whose name resolves to 127.0.0.1) is refused.
    @Test func requestsToAnotherHostNameAreRefused() async throws {
        let fixture = try PreviewFixture()
        defer { fixture.remove() }
        try await withPreview(fixture) { _, url in
            for path in ["/", "/api/templates", "/events"] {
                var request = HTTPClientRequest(url: url.absoluteString + path)
                request.headers.replaceOrAdd(name: "Host", value: "rebind.example:\(url.port ?? 0)")
                let answer = try await PreviewHTTP.send(request)
                #expect(answer.status == 403, "\(path)")
                #expect(answer.json["error"]?["code"] == "preview/forbidden-host", "\(path): \(answer.text)")
            }
            var local = HTTPClientRequest(url: url.absoluteString + "/api/templates")
            local.headers.replaceOrAdd(name: "Host", value: "localhost:\(url.port ?? 0)")
            #expect(try await PreviewHTTP.send(local).status == 200)
        }
    }

    @Test func pastedDataIsBounded() async throws {
        let fixture = try PreviewFixture()
        defer { fixture.remove() }
        try await withPreview(fixture, configure: { $0.maximumBodyBytes = 1024 }) { _, url in
            let big = String(repeating: "x", count: 2000)
            let answer = try await PreviewHTTP.post(url, "/api/render", #"{"template": "welcome", "data": {"app": "\#(big)"}}"#)
            #expect(answer.status == 413)
            #expect(answer.json["error"]?["code"] == "preview/body-too-large")
        }
    }

    @Test func thePageIsServedFromTheBinary() async throws {
        let fixture = try PreviewFixture()
        defer { fixture.remove() }
        try await withPreview(fixture) { _, url in
            let answer = try await PreviewHTTP.get(url, "/")
            #expect(answer.status == 200)
            #expect(answer.text.hasPrefix("<!doctype html>"))
            #expect(answer.text.contains("new EventSource(\"/events\")"))
        }
    }

    /// Saving a template: the event stream says `change` (the watcher polls every 100 ms), and a render then shows
    /// the new text; the project is loaded again (generation 2).
    @Test func savingATemplateSendsAChangeEventAndTheNextRenderShowsIt() async throws {
        let fixture = try PreviewFixture()
        defer { fixture.remove() }
        try await withPreview(fixture) { service, url in
            let log = EventLog()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url.absoluteString + "/events"),
                                                                       timeout: .seconds(30))
                    #expect(response.headers.first(name: "content-type") == "text/event-stream")
                    for try await chunk in response.body {
                        log.text.withLock { $0 += String(buffer: chunk) }
                    }
                }
                _ = try await log.wait(for: "event: hello\ndata: {\"generation\":1}")
                try fixture.write("welcome/push.md", PreviewFixture.welcome(title: "Hello again, {{user.name}}"))
                let waited = try await log.wait(for: "event: change\ndata: {\"generation\":2}", timeout: .seconds(3))
                // A functional bound (the watcher polls every 100 ms); speed is measured apart, not by unit tests.
                #expect(waited < .seconds(3), "the change was seen after \(waited)")
                let answer = try await PreviewHTTP.post(url, "/api/render", #"{"template": "welcome"}"#)
                #expect(answer.json["platforms"]?["ios"]?["title"]?["full"] == "Hello again, Ada")
                #expect(answer.json["generation"] == 2)
                #expect(service.snapshot.generation == 2)
                group.cancelAll()
            }
        }
    }

    /// A template saved: the templates are read again, the providers kept (their keys are not read again); the
    /// config saved: the providers are made again from it.
    @Test func aTemplateSaveKeepsTheProvidersAndAConfigSaveRemakesThem() async throws {
        let fixture = try PreviewFixture()
        defer { fixture.remove() }
        try await withPreview(fixture) { service, url in
            let first = try #require(service.snapshot.project?.router)
            try fixture.write("welcome/push.md", PreviewFixture.welcome(title: "Saved, {{user.name}}"))
            try await waitForGeneration(service, 2)
            #expect(service.snapshot.project?.router === first)
            let saved = try await PreviewHTTP.post(url, "/api/render", #"{"template": "welcome"}"#)
            #expect(saved.json["platforms"]?["android"]?["title"]?["full"] == "Saved, Ada")
            let config = try String(contentsOfFile: fixture.config, encoding: .utf8)
            try config.replacingOccurrences(of: "com.example.Preview", with: "com.example.Other")
                .write(toFile: fixture.config, atomically: false, encoding: .utf8)
            try await waitForGeneration(service, 3)
            let remade = try #require(service.snapshot.project?.router)
            #expect(remade !== first)
            let answer = try await PreviewHTTP.post(url, "/api/render", #"{"template": "welcome"}"#)
            #expect(answer.text.contains(#""value":"com.example.Other""#), "the new bundle id is the apns-topic")
        }
    }

    /// A config that no longer loads is shown (the page keeps running), and fixing it brings the project back.
    @Test func aBrokenConfigIsShownAndFixingItRecovers() async throws {
        let fixture = try PreviewFixture()
        defer { fixture.remove() }
        try await withPreview(fixture) { service, url in
            let good = try String(contentsOfFile: fixture.config, encoding: .utf8)
            try (good + "\nnot: [valid\n").write(toFile: fixture.config, atomically: false, encoding: .utf8)
            try await waitForGeneration(service, 2)
            let broken = try await PreviewHTTP.get(url, "/api/templates")
            #expect(broken.json["loadError"]?["code"] != nil && broken.json["loadError"] != .null, "\(broken.text)")
            #expect(broken.json["templates"] == [])
            try good.write(toFile: fixture.config, atomically: false, encoding: .utf8)
            try await waitForGeneration(service, 3)
            let fixed = try await PreviewHTTP.get(url, "/api/templates")
            #expect(fixed.json["loadError"] == .null)
        }
    }

    @Test func liveUpdateSubscribersAreBounded() async throws {
        let fixture = try PreviewFixture()
        defer { fixture.remove() }
        try await withPreview(fixture, configure: { $0.maximumClients = 1 }) { _, url in
            let log = EventLog()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url.absoluteString + "/events"),
                                                                       timeout: .seconds(30))
                    for try await chunk in response.body { log.text.withLock { $0 += String(buffer: chunk) } }
                }
                _ = try await log.wait(for: "event: hello")
                let second = try await PreviewHTTP.get(url, "/events")
                #expect(second.status == 503)
                #expect(second.json["error"]?["code"] == "preview/too-many-clients")
                group.cancelAll()
            }
        }
    }

    @Test func aPortInUseIsPreviewBindFailed() async throws {
        let fixture = try PreviewFixture()
        defer { fixture.remove() }
        try await withPreview(fixture) { _, url in
            let second = PreviewService(settings: .init(port: url.port ?? 0), loader: fixture.loader,
                                        linter: NoPreviewLinter())
            await #expect(throws: NorqError.self) { try await second.run() }
            do {
                try await second.run()
            } catch let error as NorqError {
                #expect(error.code.rawValue == "preview/bind-failed")
            }
        }
    }
}

func waitForGeneration(_ service: PreviewService, _ generation: Int, timeout: Duration = .seconds(5)) async throws {
    let clock = ContinuousClock()
    let start = clock.now
    while service.snapshot.generation < generation {
        guard clock.now - start < timeout else {
            throw PreviewTestError("generation \(generation) not reached (at \(service.snapshot.generation))")
        }
        try await Task.sleep(for: .milliseconds(20))
    }
}
