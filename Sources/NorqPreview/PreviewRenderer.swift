import Foundation
import Norq
package import NorqCore
import NorqTemplates
import OrderedCollections

/// What the page asks to see: a template, a sample of it and/or pasted data (merged on the sample, as
/// `norq render --sample S --data D` does).
package struct PreviewRenderRequest: Sendable, Hashable {
    package var template: String
    package var sample: String?
    package var data: JSONValue?

    package init(template: String, sample: String? = nil, data: JSONValue? = nil) {
        self.template = template
        self.sample = sample
        self.data = data
    }

    /// Parses `{"template": "...", "sample": "..."?, "data": {...}?}`; anything else is `preview/invalid-request`.
    package init(json: JSONValue) throws(NorqError) {
        guard case .object(let object) = json else {
            throw NorqError(.previewInvalidRequest, "the body must be a JSON object")
        }
        for key in object.keys where !["template", "sample", "data"].contains(key) {
            throw NorqError(.previewInvalidRequest, "unknown field \"\(key.prefix(64))\" (fields: template, sample, data)")
        }
        guard case .string(let template)? = object["template"], !template.isEmpty else {
            throw NorqError(.previewInvalidRequest, "\"template\" must be a template id (a string)")
        }
        self.template = template
        switch object["sample"] {
        case nil, .null?: sample = nil
        case .string(let name)?: sample = name
        default: throw NorqError(.previewInvalidRequest, "\"sample\" must be a string or null")
        }
        switch object["data"] {
        case nil, .null?: data = nil
        case .object(let value)?: data = .object(value)
        default: throw NorqError(.previewInvalidRequest, "\"data\" must be a JSON object or null")
        }
    }
}

/// The JSON the page reads: the templates list and, per template and data, the notification as each platform
/// draws it, the exact request per routed provider (the dry run's, secrets redacted by the providers'
/// `displayHeaders`), the payload size against each provider's limit, and the findings.
package enum PreviewRenderer {
    /// The stand-in device of a platform for a provider type: what the dry run prepares requests for. Not real
    /// devices; each in the form its provider takes (an FCM registration token whatever the platform, an APNs hex
    /// token, a Web Push subscription whose keys are a valid P-256 point, the quick start's demo subscription, so
    /// that the provider encrypts as it would for a browser).
    static func previewToken(_ platform: Platform, providerType: String?, provider: String? = nil) -> PushToken {
        let type = providerType ?? (platform == .web ? "webpush" : platform == .android ? "fcm" : "apns")
        switch type {
        case "webpush":
            return PushToken(token: "https://fcm.googleapis.com/fcm/send/norq-preview-subscription", platform: platform,
                             provider: provider,
                             keys: WebPushKeys(p256dh: "BKCjp1WSg7IDKe3dkSVMishklWs4459OXVoS2crjl1jqju8PbORmCsqtxo2LmsRbX2fMOyuft4jx5Ueznj5Tp_Q",
                                               auth: "SCcgLAlycoK6hUuYKyV4MQ"))
        case "fcm":
            return PushToken(token: "norq-preview:APA91bPreviewRegistrationToken-\(platform.rawValue)", platform: platform,
                             provider: provider)
        default:
            return PushToken(token: String(repeating: "0e", count: 32), platform: platform, provider: provider)
        }
    }

    // MARK: GET /api/templates

    package static func templatesJSON(_ snapshot: PreviewSnapshot) -> JSONValue {
        var object: OrderedDictionary<String, JSONValue> = ["generation": .int(Int64(snapshot.generation))]
        guard let project = snapshot.project else {
            object["templates"] = []
            object["loadError"] = snapshot.loadError.map(errorJSON) ?? .null
            return .object(object)
        }
        let library = project.library
        object["directory"] = .string((library.directory as NSString).standardizingPath)
        object["config"] = project.configuration?.file.map { .string(($0 as NSString).standardizingPath) } ?? .null
        object["templates"] = .array(library.templateNames.map { name in
            let findings = snapshot.findings[name] ?? []
            var entry: OrderedDictionary<String, JSONValue> = [
                "id": .string(name),
                "errors": .int(Int64(findings.count { $0.severity == .error })),
                "warnings": .int(Int64(findings.count { $0.severity == .warning })),
            ]
            do throws(NorqError) {
                let compiled = try library.template(named: name)
                entry["samples"] = .array(compiled.samples.keys.map(JSONValue.string))
                entry["enabled"] = .bool(compiled.enabled)
                entry["file"] = compiled.file.map(JSONValue.string) ?? .null
            } catch {
                entry["samples"] = []
                entry["error"] = errorJSON(error)
            }
            return .object(entry)
        })
        object["loadError"] = snapshot.loadError.map(errorJSON) ?? .null
        return .object(object)
    }

    // MARK: POST /api/render

    /// The render of `request` against `snapshot`, and the HTTP status: 200 also when the template does not
    /// compile or render (the page shows the error with the findings); 404 for an unknown template, 400 for an
    /// unknown sample.
    package static func render(_ request: PreviewRenderRequest, snapshot: PreviewSnapshot,
                               sendTime: Int64 = Int64(Date().timeIntervalSince1970)) -> (status: Int, body: JSONValue) {
        let started = ContinuousClock.now
        var object: OrderedDictionary<String, JSONValue> = [
            "generation": .int(Int64(snapshot.generation)), "template": .string(request.template),
        ]
        func finish(_ status: Int, error: NorqError?) -> (status: Int, body: JSONValue) {
            object["error"] = error.map(errorJSON) ?? .null
            let elapsed = ContinuousClock.now - started
            object["renderMicroseconds"] = .int(elapsed.components.seconds * 1_000_000
                                                + elapsed.components.attoseconds / 1_000_000_000_000)
            return (status, .object(object))
        }
        guard let project = snapshot.project else {
            return finish(200, error: snapshot.loadError
                          ?? NorqError(.previewInvalidRequest, "the project could not be loaded"))
        }
        var findings = snapshot.findings[request.template] ?? []
        func attachFindings() { object["findings"] = .array(findings.map(\.json)) }
        let compiled: CompiledTemplate
        do throws(NorqError) {
            compiled = try project.library.template(named: request.template)
        } catch {
            attachFindings()
            return finish(error.code == .templateNotFound ? 404 : 200, error: error)
        }
        object["file"] = compiled.file.map(JSONValue.string) ?? .null
        object["samples"] = .array(compiled.samples.keys.map(JSONValue.string))
        object["enabled"] = .bool(compiled.enabled)
        // The data: the sample (the first when neither a sample nor data is given), pasted data merged on top.
        var base: JSONValue?
        if let sample = request.sample {
            guard let found = compiled.samples[sample] else {
                attachFindings()
                let names = compiled.samples.keys.map { "\"\($0)\"" }.joined(separator: ", ")
                return finish(400, error: NorqError(.previewInvalidRequest,
                                                    "template \"\(request.template)\" has no sample \"\(sample.prefix(100))\"",
                                                    hint: names.isEmpty ? "it has no data.samples.yaml" : "samples: " + names))
            }
            base = found
        } else if request.data == nil {
            base = compiled.defaultSample
        }
        let data: JSONValue = switch (base, request.data) {
        case (let base?, let pasted?): merge(base, pasted)
        case (let base?, nil): base
        case (nil, let pasted?): pasted
        case (nil, nil): .object([:])
        }
        object["sample"] = request.sample.map(JSONValue.string)
            ?? (request.data == nil ? compiled.samples.keys.first.map(JSONValue.string) ?? .null : .null)
        object["data"] = data
        if request.data != nil {
            // Pasted data is checked against the schema here; the samples are checked by the linter.
            findings += compiled.schemaErrors(data).map { PreviewFinding($0, severity: .error) }
        }
        let content: PushContent
        do throws(NorqError) {
            content = try compiled.render(data: data)
        } catch {
            findings.append(PreviewFinding(error, severity: .error))
            attachFindings()
            return finish(200, error: error)
        }
        object["content"] = DryRunJSON.contentJSON(content, template: request.template)
        let requests = preparedRequests(content, project: project, sendTime: sendTime)
        object["requests"] = .array(requests.map(\.json))
        object["platforms"] = PreviewPlatforms.views(content, requests: requests)
        object["providers"] = .object(providersNote(project))
        attachFindings()
        return finish(200, error: nil)
    }

    /// One prepared request of the preview: the platform it is for and the dry run's entry.
    struct PlatformRequest {
        var platform: Platform
        var providerType: String?
        var delivery: PreparedDelivery
        /// The request body as JSON, when it is JSON (not a Web Push encrypted record).
        var bodyJSON: JSONValue?

        var json: JSONValue {
            var object: OrderedDictionary<String, JSONValue> = [
                "platform": .string(platform.rawValue),
                "provider": delivery.provider.map(JSONValue.string) ?? .null,
                "type": providerType.map(JSONValue.string) ?? .null,
                "routing": .string(delivery.routing),
            ]
            switch delivery.plan {
            case .request(let request):
                let headers: [JSONValue] = request.displayHeaders.map { ["name": .string($0.name), "value": .string($0.value)] }
                object["request"] = [
                    "method": .string(request.method), "url": .string(request.url),
                    "headers": .array(headers),
                    "body": bodyJSON ?? .null,
                    "bodyText": .string(bodyJSON?.prettyPrinted() ?? DryRunJSON.bodyText(request.body)),
                ]
                let limit = request.payloadLimit
                object["size"] = [
                    "bytes": .int(Int64(request.body.count)),
                    "limit": limit.map { .int(Int64($0)) } ?? .null,
                    "percent": limit.map { .double(($0 > 0 ? Double(request.body.count) / Double($0) : 0) * 100) } ?? .null,
                    "over": .bool(limit.map { request.body.count > $0 } ?? false),
                ]
                if let shown = PreviewPlatforms.shown(in: bodyJSON) { object["shown"] = shown }
            case .noRequest(let result):
                object["outcome"] = DryRunJSON.outcomeJSON(result)
            }
            return .object(object)
        }
    }

    /// The request of every platform's routed provider, then of each other provider that serves the platform
    /// (an FCM provider for iOS beside APNs, ...): what a token of that platform, routed or pinned with
    /// `"provider"`, would be sent.
    static func preparedRequests(_ content: PushContent, project: PreviewProject, sendTime: Int64) -> [PlatformRequest] {
        guard let router = project.router else { return [] }
        let options = RouterSendOptions(strict: true, sendTime: sendTime)
        func type(_ name: String?) -> String? { name.flatMap { router.providers[$0]?.typeName } }
        // Routing first (a token of each platform, as a recipient would give it), then each platform's token in the
        // form of each provider that serves it: the routed one first, pinned so that its token fits its type.
        let routed = router.prepare(content: content, to: [Recipient(tokens: Platform.known.map {
            previewToken($0, providerType: nil)
        })], options: options)
        var wanted: [(platform: Platform, provider: String, routing: String)] = []
        var result: [PlatformRequest] = []
        for delivery in routed {
            guard case .token(let token) = delivery.target else { continue }
            if let provider = delivery.provider {
                wanted.append((token.platform, provider, delivery.routing))
            } else {
                // No provider serves this platform: shown by the routing outcome.
                result.append(PlatformRequest(platform: token.platform, providerType: nil, delivery: delivery))
            }
        }
        for platform in Platform.known {
            for name in router.providerNames where router.providers[name]?.platforms.contains(platform) == true
                && !wanted.contains(where: { $0.platform == platform && $0.provider == name }) {
                wanted.append((platform, name, "token.provider \(name) (another provider serving \(platform.rawValue))"))
            }
        }
        let tokens = wanted.map { previewToken($0.platform, providerType: type($0.provider), provider: $0.provider) }
        let deliveries = router.prepare(content: content, to: [Recipient(tokens: tokens)], options: options)
        for (delivery, want) in zip(deliveries, wanted) {
            var delivery = delivery
            delivery.routing = want.routing
            let json = delivery.request.flatMap { try? JSONValue(parsing: $0.body) }
            result.append(PlatformRequest(platform: want.platform, providerType: type(want.provider), delivery: delivery,
                                          bodyJSON: json))
        }
        let order = Dictionary(uniqueKeysWithValues: Platform.known.enumerated().map { ($1, $0) })
        return result.enumerated().sorted {
            (order[$0.element.platform] ?? 9, $0.offset) < (order[$1.element.platform] ?? 9, $1.offset)
        }.map(\.element)
    }

    static func providersNote(_ project: PreviewProject) -> OrderedDictionary<String, JSONValue> {
        var note: OrderedDictionary<String, JSONValue> = [
            "configured": .array((project.router?.providerNames ?? []).map(JSONValue.string)),
        ]
        if let error = project.routerError {
            note["error"] = errorJSON(error)
        } else if project.configuration == nil {
            note["note"] = "no norq.yaml / norq.config.yaml: no provider, so no request is shown (pass --config)"
        } else if project.router == nil {
            note["note"] = "the configuration declares no provider: no request is shown"
        }
        return note
    }

    /// Deep merge: objects merge key by key, anything else in `top` wins.
    static func merge(_ base: JSONValue, _ top: JSONValue) -> JSONValue {
        guard case .object(var result) = base, case .object(let overlay) = top else { return top }
        for (key, value) in overlay {
            result[key] = result[key].map { merge($0, value) } ?? value
        }
        return .object(result)
    }

    package static func errorJSON(_ error: NorqError) -> JSONValue {
        PreviewFinding(error, severity: .error).json
    }
}
