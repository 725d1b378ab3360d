import Hummingbird
import Metrics
import Norq
import NorqConfig
import NorqAPI
import NorqCore
import NorqStore
import NorqTemplates
import NIOCore

extension NorqServer {
    static let idempotencyHeader = HTTPFields.Element.Name("Idempotency-Key")!
    static let replayedHeader = HTTPFields.Element.Name("Idempotent-Replayed")!
    /// Longest accepted `Idempotency-Key` (bytes).
    static let maximumIdempotencyKey = 255

    /// The routes of `addRoutes` and `addChannelRoutes` with their methods (`:id` is one path segment): a request to
    /// one of these paths with another method is 405 with `Allow`, not 404.
    static let routeMethods: [(path: [Substring], methods: [String])] = [
        ("/healthz", ["GET"]), ("/readyz", ["GET"]), ("/metrics", ["GET"]), ("/v1/sends", ["POST"]),
        ("/v1/sends/:id", ["GET"]), ("/v1/render", ["POST"]), ("/v1/validate", ["POST"]),
        ("/v1/tokens/invalid", ["POST"]), ("/v1/channels", ["GET", "POST"]), ("/v1/channels/:id", ["DELETE", "GET"]),
    ].map { ($0.0.split(separator: "/"), $0.1) }

    /// The methods the route at `path` takes, or nil when no route has that path.
    static func allowedMethods(path: String) -> [String]? {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        guard !segments.contains(where: \.isEmpty) else { return nil }
        return routeMethods.first { route in
            route.path.count == segments.count
                && zip(route.path, segments).allSatisfy { $0.0 == ":id" || $0.0 == $0.1 }
        }?.methods
    }

    func addRoutes(to router: Router<ServerRequestContext>) {
        router.get("/healthz") { _, _ in ServerJSON.encoded(200, Components.Schemas.Health(status: "ok")) }
        router.get("/readyz") { _, _ in try self.readiness() }
        router.get("/metrics") { request, context in
            var context = context
            let key = try self.authorize(request, &context)
            try self.require("metrics", key: key)
            return self.metricsText()
        }
        router.post("/v1/sends") { request, context in
            var context = context
            let key = try self.authorize(request, &context)
            return try await self.send(request, key: key)
        }
        router.get("/v1/sends/:id") { request, context in
            var context = context
            let key = try self.authorize(request, &context)
            let id = context.parameters.get("id") ?? ""
            return try await self.status(id: id, request: request, key: key)
        }
        router.post("/v1/render") { request, context in
            var context = context
            let key = try self.authorize(request, &context)
            return try await self.render(request, key: key)
        }
        router.post("/v1/validate") { request, context in
            var context = context
            let key = try self.authorize(request, &context)
            return try await self.validate(request, key: key)
        }
        router.post("/v1/tokens/invalid") { request, context in
            var context = context
            let key = try self.authorize(request, &context)
            return try await self.tokens(request, key: key)
        }
        addChannelRoutes(to: router)
    }

    // MARK: auth and rate

    /// The caller's key (nil with `--no-auth`); 401 without a valid key, 429 past the key's rate.
    @discardableResult
    func authorize(_ request: Request, _ context: inout ServerRequestContext) throws -> APIKeyTable.Entry? {
        let entry = keys.authenticate(authorization: request.headers[.authorization])
        if entry == nil && !allowAnonymous {
            // Failed attempts are limited per client address: a flood of wrong keys (or a key guesser) gets 429s.
            let address = context.remoteAddress?.ipAddress ?? "unknown"
            if case .limited(let seconds) = failedAuthentications.take(key: address) {
                throw RateLimited(seconds: seconds, message: "too many requests without a valid API key from this address")
            }
            throw NorqError(.serverUnauthorized, "this route needs Authorization: Bearer <API key> with a configured key")
        }
        let name = entry?.name ?? "anonymous"
        context.keyName = name
        if case .limited(let seconds) = rateLimiter.take(key: name) {
            throw RateLimited(seconds: seconds)
        }
        return entry
    }

    /// `server/forbidden` unless `key` may use `template`.
    func checkTemplate(_ template: String, key: APIKeyTable.Entry?) throws(NorqError) {
        if let allowed = key?.templates, !allowed.contains(template) {
            throw NorqError(.serverForbidden, "API key \(key?.name ?? "") may not use template \"\(template.prefix(100))\"")
        }
    }

    /// `server/forbidden` unless `key` holds `scope` (see `ServerConfiguration.APIKey.knownScopes`); every key may
    /// everything with `--no-auth` (no key).
    func require(_ scope: String, key: APIKeyTable.Entry?) throws(NorqError) {
        guard let key, !key.has(scope) else { return }
        throw NorqError(.serverForbidden, "API key \(key.name) needs the scope \"\(scope)\" for this route",
                        hint: "add it to the key's scopes: in server.apiKeys (or admin)")
    }

    /// `server/forbidden` unless `key` may send through the provider each target routes to.
    func checkProviders(_ recipients: [Recipient], key: APIKeyTable.Entry?) throws(NorqError) {
        guard let allowed = key?.providers else { return }
        let router = dependencies.delivery.router
        for recipient in recipients {
            let targets = recipient.tokens.map(DeliveryTarget.token) + recipient.channels.map(DeliveryTarget.channel)
            for target in targets {
                if let provider = router.routedProviderName(for: target), !allowed.contains(provider) {
                    throw NorqError(.serverForbidden,
                                    "API key \(key?.name ?? "") may not send through provider \"\(provider)\" (target \(target.redacted))")
                }
            }
        }
    }

    /// The idempotency scope a key's sends are stored with (`StoredSend.scope`): the status of a send is readable
    /// by the key that made it (or a key with `read-all`), on any instance sharing the store. Nil with `--no-auth`.
    static func sendScope(of key: APIKeyTable.Entry?) -> String? {
        key.map { "api-key:" + $0.name }
    }

    /// `error` as a caller may see it: no server path (the templates directory), and for `template/not-found` no
    /// other template's name (the library's hint lists them).
    func publicError(_ error: NorqError) -> NorqError {
        var error = error
        if error.code == .templateNotFound {
            error.hint = nil
        }
        if let directory = dependencies.templates?.library.directory, !directory.isEmpty {
            error.message = error.message.replacingOccurrences(of: directory, with: "the templates directory")
            error.hint = error.hint?.replacingOccurrences(of: directory, with: "the templates directory")
        }
        return error
    }

    // MARK: POST /v1/sends

    func send(_ request: Request, key: APIKeyTable.Entry?) async throws -> Response {
        let limits = settings.limits
        let body = try await ServerJSON.readObject(request, limit: limits.bodyBytes,
                                                   elements: SendRequest.targetLimit(maximum: limits.recipients))
        let parsed = try SendRequest(body, library: dependencies.templates?.library, maximumTargets: limits.recipients,
                                     allowedTemplates: key?.templates)
        try checkProviders(parsed.recipients, key: key)
        var options = parsed.options
        var gateKey: String?
        if let idempotencyKey = request.headers[Self.idempotencyHeader] {
            guard !idempotencyKey.isEmpty, idempotencyKey.utf8.count <= Self.maximumIdempotencyKey else {
                throw NorqError(.serverInvalidRequest, "Idempotency-Key must be 1 to \(Self.maximumIdempotencyKey) bytes")
            }
            // Keys are scoped per API key: one caller can never reach another's send through a shared key.
            let scoped = (key?.name ?? "anonymous") + ":" + idempotencyKey
            guard gate.acquire(scoped) else {
                throw NorqError(.serverIdempotencyInProgress,
                                "a request with this Idempotency-Key is being accepted right now; retry after it answers")
            }
            gateKey = scoped
            options.idempotencyKey = scoped
        }
        let receipt: DurableDelivery.Receipt
        do {
            receipt = try await dependencies.delivery.enqueue(template: parsed.template, data: parsed.data,
                                                              to: parsed.recipients, options: options,
                                                              scope: Self.sendScope(of: key))
        } catch {
            if let gateKey { gate.release(gateKey) }
            throw error
        }
        if let gateKey { gate.release(gateKey) }
        return try await accepted(receipt, request: request)
    }

    /// The answer to an accepted send: 202 with the status URL, or after `?wait=true` 200 with the outcomes
    /// (202 `pending` when the wait ran out).
    func accepted(_ receipt: DurableDelivery.Receipt, request: Request) async throws -> Response {
        var headers: HTTPFields = [:]
        if !receipt.created { headers[Self.replayedHeader] = "true" }
        let statusURL = "/v1/sends/\(receipt.sendID)"
        headers[.location] = statusURL
        var answer = Components.Schemas.Accepted(id: receipt.sendID, status: .accepted, statusUrl: statusURL,
                                                 targets: receipt.targetCount)
        guard wantsWait(request) else { return ServerJSON.encoded(202, answer, headers: headers) }
        guard let report = try await waitForOutcomes(receipt.sendID, timeout: waitTimeout(request)) else {
            answer.status = .pending
            return ServerJSON.encoded(202, answer, headers: headers)
        }
        let finished = Components.Schemas.Finished(id: receipt.sendID, status: .finished, statusUrl: statusURL,
                                                   targets: receipt.targetCount, summary: APIDocuments.summary(report),
                                                   outcomes: report.outcomes.map(APIDocuments.outcome))
        return ServerJSON.encoded(200, finished, headers: headers)
    }

    /// The send's report, or nil when it did not finish within `timeout`.
    func waitForOutcomes(_ sendID: String, timeout: Duration) async throws(NorqError) -> SendReport? {
        do {
            return try await dependencies.delivery.wait(for: sendID, timeout: timeout)
        } catch {
            if error.code == .storeDeadlineExceeded { return nil }
            throw error
        }
    }

    func wantsWait(_ request: Request) -> Bool {
        guard let value = request.uri.queryParameters.get("wait") else { return false }
        return value == "true" || value == "1"
    }

    /// `?timeout=<seconds>`, bounded by `server.limits.waitTimeout`.
    func waitTimeout(_ request: Request) -> Duration {
        let maximum = settings.limits.waitTimeout
        guard let text = request.uri.queryParameters.get("timeout"), let seconds = Double(text), seconds > 0,
              seconds.isFinite else { return maximum }
        return min(maximum, .milliseconds(Int64(min(seconds, 86_400) * 1000)))
    }

    // MARK: GET /v1/sends/{id}

    func status(id: String, request: Request, key: APIKeyTable.Entry?) async throws -> Response {
        guard !id.isEmpty, id.utf8.count <= 64, id.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) || ($0 >= 65 && $0 <= 70) }) else {
            throw NorqError(.storeSendNotFound, "no send with id \(id.prefix(64))")
        }
        // Another key's send answers as an unknown one (its existence says nothing to this key).
        if let key, !key.has("read-all") {
            guard let stored = try await dependencies.delivery.store.send(id: id),
                  stored.scope == Self.sendScope(of: key) else {
                throw NorqError(.storeSendNotFound, "no send with id \(id.prefix(64))")
            }
        }
        let offset = max(0, Int(request.uri.queryParameters.get("offset") ?? "") ?? 0)
        let limit = min(1000, max(1, Int(request.uri.queryParameters.get("limit") ?? "") ?? 100))
        // The counts and one page of rows: never every row of a large send.
        let progress = try await dependencies.delivery.progress(of: id)
        var states: [String: Int] = [:]
        for (state, count) in progress.states { states[state.rawValue] = count }
        let page = offset < progress.targetCount
            ? try await dependencies.delivery.rows(of: id, positions: offset..<(offset + min(limit, progress.targetCount - offset)))
            : []
        let next = offset + page.count < progress.targetCount && !page.isEmpty ? offset + page.count : nil
        return ServerJSON.encoded(200, Components.Schemas.SendStatus(
            id: id, targets: progress.targetCount, finished: progress.isFinished,
            states: .init(additionalProperties: states), summary: APIDocuments.summary(progress),
            rows: page.map(APIDocuments.row), page: .init(offset: offset, limit: limit, next: next)))
    }

    // MARK: POST /v1/render

    func render(_ request: Request, key: APIKeyTable.Entry?) async throws -> Response {
        let body = try await ServerJSON.readObject(request, limit: settings.limits.bodyBytes,
                                                   elements: SendRequest.targetLimit(maximum: settings.limits.recipients))
        let parsed = try SendRequest(body, library: dependencies.templates?.library, maximumTargets: settings.limits.recipients,
                                     recipientsRequired: false, allowedTemplates: key?.templates)
        try checkProviders(parsed.recipients, key: key)
        let router = dependencies.delivery.router
        guard !parsed.recipients.isEmpty else {
            guard let library = dependencies.templates?.library else {
                throw NorqError(.noTemplates, "this server has no templates directory")
            }
            let compiled = try library.template(named: parsed.template)
            let content = try compiled.render(data: parsed.data, options: RenderOptions(strict: parsed.options.strict))
            return ServerJSON.encoded(200, APIDocuments.rendered(content, template: parsed.template))
        }
        let deliveries = try router.prepare(template: parsed.template, data: parsed.data, to: parsed.recipients,
                                            options: parsed.options)
        return ServerJSON.encoded(200, APIDocuments.rendered(deliveries, template: parsed.template))
    }

    // MARK: POST /v1/validate

    /// `{"template": "<id>"}` compiles one template (and checks `data` against its schema when given);
    /// `{}` compiles every template and reports the configuration's providers.
    func validate(_ request: Request, key: APIKeyTable.Entry?) async throws -> Response {
        let body = try await ServerJSON.readObject(request, limit: settings.limits.bodyBytes)
        try ServerJSON.checkFields(body, allowed: RequestFields.validate, in: "the body")
        // `data` is an object (null: absent), as in a send.
        var data: JSONValue?
        switch body["data"] {
        case nil, .null?: data = nil
        case .object?: data = body["data"]
        default: throw NorqError(.serverInvalidRequest, "\"data\" must be a JSON object")
        }
        guard let library = dependencies.templates?.library else {
            throw NorqError(.noTemplates, "this server has no templates directory")
        }
        typealias Result = Components.Schemas.Validation.TemplatesPayloadPayload
        func problem(_ error: NorqError) -> Components.Schemas.Problem {
            .init(code: error.code.rawValue, message: error.message)
        }
        func check(_ name: String) -> Result {
            do {
                let compiled = try library.template(named: name)
                let problems = data.map { compiled.schemaErrors($0).map(problem) } ?? []
                return Result(template: name, valid: problems.isEmpty, errors: problems,
                              warnings: compiled.warnings.map(problem))
            } catch {
                return Result(template: name, valid: false, errors: [problem(error)], warnings: [])
            }
        }
        if let name = try ServerJSON.string(body, "template", in: "the body") {
            try checkTemplate(name, key: key)
            try SendRequest.checkExists(name, in: library, allowed: key?.templates)
            _ = try library.template(named: name)  // an unknown template is an error, not a result
            let result = check(name)
            return ServerJSON.encoded(200, Components.Schemas.Validation(valid: result.valid, templates: [result]))
        }
        let names = library.templateNames.filter { key?.templates?.contains($0) ?? true }
        let results = names.map(check)
        // A provider-scoped key sees its providers only.
        let providers = configuration.providers.filter { key?.providers?.contains($0.name) ?? true }.map {
            Components.Schemas.Validation.ProvidersPayloadPayload(name: $0.name, _type: $0.typeName)
        }
        return ServerJSON.encoded(200, Components.Schemas.Validation(valid: results.allSatisfy(\.valid), templates: results,
                                                                     providers: providers))
    }

    // MARK: POST /v1/tokens/invalid

    /// `{"tokens": [..]}`: which of these are invalid; `{"register": [..]}`: record re-registrations;
    /// `{}` or `{"limit": n}`: the newest entries of the registry (tokens shortened). The registry is kept per
    /// (token, provider instance, environment): `"provider"` and `"environment"` limit a query or a registration to
    /// one (default: every one).
    func tokens(_ request: Request, key: APIKeyTable.Entry?) async throws -> Response {
        let body = try await ServerJSON.readObject(request, limit: settings.limits.bodyBytes)
        try ServerJSON.checkFields(body, allowed: RequestFields.tokens, in: "the body")
        let provider = try ServerJSON.string(body, "provider", in: "the body")
        // A provider-scoped key reads and registers in its providers only.
        let allowedProviders = key?.providers
        if let provider, let allowedProviders, !allowedProviders.contains(provider) {
            throw NorqError(.serverForbidden, "API key \(key?.name ?? "") may not use provider \"\(provider.prefix(100))\"")
        }
        func inScope(_ record: InvalidTokenRecord) -> Bool {
            guard let allowedProviders, let entryProvider = record.provider else { return true }
            return allowedProviders.contains(entryProvider)
        }
        var environment: PushEnvironment?
        if let text = try ServerJSON.string(body, "environment", in: "the body") {
            guard let parsed = try? PushEnvironment.parse(text) else {
                throw NorqError(.serverInvalidRequest, "environment must be sandbox or production")
            }
            environment = parsed
        }
        func list(_ key: String) throws(NorqError) -> [String]? {
            guard let value = body[key] else { return nil }
            guard case .array(let items) = value, items.count <= settings.limits.recipients else {
                throw NorqError(.serverInvalidRequest, "\(key) must be a list of at most \(settings.limits.recipients) tokens")
            }
            var tokens: [String] = []
            for item in items {
                guard case .string(let token) = item, !token.isEmpty, token.utf8.count <= 4096 else {
                    throw NorqError(.serverInvalidRequest, "\(key) must hold non-empty token strings")
                }
                tokens.append(token)
            }
            return tokens
        }
        let store = dependencies.delivery.store
        // Every field is checked in every mode (a wrong value is an error even where the mode does not use it).
        let limit = Int(min(100_000, max(1, try ServerJSON.int(body, "limit", in: "the body") ?? 1000)))
        let wantedTokens = try list("tokens")
        if let register = try list("register") {
            // Re-registering unblocks a token: its own scope, not every key's.
            try require("register-tokens", key: key)
            let providers: [String?] = provider.map { [$0] } ?? allowedProviders.map { $0.sorted().map(Optional.some) } ?? [nil]
            // One store call (one statement in the SQL stores) per provider asked, not one per token.
            for name in providers {
                try await dependencies.delivery.registerTokens(register, provider: name, environment: environment)
            }
            return ServerJSON.encoded(200, Components.Schemas.Tokens(registered: register.count))
        }
        if let wanted = wantedTokens {
            let records = try await store.invalidTokens(limit: 100_000)
            // Per token, the newest entry that applies to the provider and environment asked (any when not
            // asked), an entry that still skips sends before one registered again.
            var byToken: [String: InvalidTokenRecord] = [:]
            for record in records where inScope(record) && DeliveryStoreRules.registryEntryMatches(
                entryProvider: record.provider, entryEnvironment: record.environment,
                provider: provider ?? record.provider, environment: environment?.rawValue ?? record.environment) {
                if let found = byToken[record.token], found.isInvalid || !record.isInvalid { continue }
                byToken[record.token] = record
            }
            let results = wanted.map { token in
                byToken[token].map(APIDocuments.token) ?? APIDocuments.unknownToken(token)
            }
            return ServerJSON.encoded(200, Components.Schemas.Tokens(tokens: results))
        }
        let records = try await store.invalidTokens(limit: limit)
        return ServerJSON.encoded(200, Components.Schemas.Tokens(tokens: records.filter(inScope).map(APIDocuments.token)))
    }

    // MARK: health, readiness, metrics

    /// Ready when the store answered its last background check (none stalled) and every provider says it can
    /// deliver to devices. Answers from memory: no store call, no provider I/O.
    func readiness() throws -> Response {
        let router = dependencies.delivery.router
        guard !router.providers.isEmpty else {
            throw NorqError(.serverNotReady, "no provider is loaded")
        }
        if let reason = storeHealth.unavailable() {
            throw NorqError(.serverNotReady, reason)
        }
        // Every provider's own word on device delivery: credentials loaded, the device endpoints' last connection
        // attempt not failed (no I/O here; channel management and a single subscriber's host do not count).
        for name in router.providers.keys.sorted() {
            guard let health = router.providers[name]?.health(), !health.isReady else { continue }
            throw NorqError(.serverNotReady, health.detail ?? "provider \(name) is not ready")
        }
        return ServerJSON.encoded(200, Components.Schemas.Health(status: "ready", providers: router.providers.count))
    }

    func metricsText() -> Response {
        // The queue depth gauges are set by the background store check (never read here, so a slow database
        // cannot slow a scrape); their age says how old they are.
        if let (_, age) = storeHealth.lastDepth() {
            let seconds: Double = Double(age.components.seconds) + Double(age.components.attoseconds) / 1e18
            Gauge(label: "norq_outbox_depth_age_seconds").record(seconds)
        }
        let text = dependencies.metrics?.emitToBuffer() ?? []
        return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: text)))
    }
}

/// A 429 with `Retry-After`.
struct RateLimited: Error, HTTPResponseError {
    var seconds: Int
    var message = "too many requests for this API key"
    var status: HTTPResponse.Status { .tooManyRequests }
    var error: NorqError { NorqError(.serverRateLimited, "\(message); retry after \(seconds) s") }
    func response(from request: Request, context: some RequestContext) throws -> Response {
        ServerJSON.error(error, headers: [.retryAfter: "\(seconds)"])
    }
}
