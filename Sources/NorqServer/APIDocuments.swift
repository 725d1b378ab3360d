import Norq
import NorqAPI
import NorqAPNs
import NorqCore
import NorqStore
import OpenAPIRuntime

/// The answers' documents as values of the types generated from docs/openapi.yaml (NorqAPI), built from the router's
/// and the store's values: a property renamed or retyped in the spec no longer compiles here. The spec's free-form
/// parts (a target, a rendered request's body, the custom data ...) come from the `JSONValue` the library already
/// builds for them, through `freeForm` and `anyValue`.
enum APIDocuments {
    // MARK: free-form parts

    /// A JSON object as the generated free-form object container (anything but an object: an empty one).
    static func freeForm(_ json: JSONValue?) -> OpenAPIObjectContainer {
        guard case .object(let object)? = json else { return OpenAPIObjectContainer() }
        var values: [String: (any Sendable)?] = [:]
        for (key, value) in object { values[key] = plain(value) }
        return (try? OpenAPIObjectContainer(unvalidatedValue: values)) ?? OpenAPIObjectContainer()
    }

    /// Any JSON value as the generated free-form value container.
    static func anyValue(_ json: JSONValue) -> OpenAPIValueContainer {
        (try? OpenAPIValueContainer(unvalidatedValue: plain(json))) ?? OpenAPIValueContainer(nilLiteral: ())
    }

    /// The values the containers take: `String`, `Int`, `Double`, `Bool`, arrays and string-keyed dictionaries of
    /// them, nil for null.
    private static func plain(_ json: JSONValue) -> (any Sendable)? {
        switch json {
        case .null: return nil
        case .bool(let flag): return flag
        case .int(let number): return Int(number)
        case .double(let number): return number
        case .string(let text): return text
        case .array(let items): return items.map(plain) as [(any Sendable)?]
        case .object(let object):
            var values: [String: (any Sendable)?] = [:]
            for (key, value) in object { values[key] = plain(value) }
            return values
        }
    }

    // MARK: sends

    /// A direct send's counts.
    static func summary(_ report: SendReport) -> Components.Schemas.Summary {
        .init(delivered: report.delivered, accepted: report.accepted, rejected: report.rejected, failed: report.failed,
              skipped: report.skipped, duplicates: report.duplicates, allDelivered: report.allDelivered)
    }

    /// The same summary from a durable send's counts by state (a final state other than delivered, accepted,
    /// rejected or skipped is a failure, as `DurableCodec` reads it; durable outcomes are never duplicates).
    /// `accepted`: tickets whose receipts the worker has still to fetch (they count as delivered for
    /// `allDelivered`, as in a direct send's report).
    static func summary(_ progress: DurableDelivery.Progress) -> Components.Schemas.Summary {
        let delivered = progress.states[.delivered] ?? 0, rejected = progress.states[.rejected] ?? 0
        let skipped = progress.states[.skipped] ?? 0, accepted = progress.awaitingReceipts
        let failed = progress.finished - delivered - accepted - rejected - skipped
        return .init(delivered: delivered, accepted: accepted, rejected: rejected, failed: failed, skipped: skipped,
                     duplicates: 0, allDelivered: delivered + accepted == progress.finished)
    }

    /// An outcome with its target (the token shortened); the result's `kind` and `mayHaveBeenDelivered` typed, its
    /// kind's own fields (`DryRunJSON.outcomeJSON`) free-form.
    static func outcome(_ outcome: PushOutcome) -> Components.Schemas.Outcome {
        .init(target: freeForm(DryRunJSON.targetJSON(outcome.target, redactTokens: true)),
              recipient: outcome.recipientID, provider: outcome.provider, attempts: outcome.attempts,
              requeues: outcome.requeues, result: result(outcome.result))
    }

    static func result(_ result: PushOutcome.Result) -> Components.Schemas.Outcome.ResultPayload {
        var json = DryRunJSON.outcomeJSON(result)
        let kind = json["kind"]?.stringValue ?? result.kind
        if case .object(var object) = json {
            object["kind"] = nil
            object["mayHaveBeenDelivered"] = nil
            json = .object(object)
        }
        return .init(kind: kind, mayHaveBeenDelivered: result.mayHaveBeenDelivered, additionalProperties: freeForm(json))
    }

    /// A durable target's row (the token shortened). A state the spec does not list (none today) shows as
    /// `failed` when final, as the summary counts it, else `pending`.
    static func row(_ row: OutboxRow) -> Components.Schemas.Row {
        let state = Components.Schemas.Row.StatePayload(rawValue: row.state.rawValue)
            ?? (row.state.isFinal ? .failed : .pending)
        return .init(position: row.position, token: PushToken.redact(row.identity), recipient: row.recipientID,
                     provider: row.provider, state: state, attempts: row.attempts, messageId: row.messageID,
                     status: row.last?.status, code: row.last?.code, reason: row.last?.reason,
                     mayHaveBeenDelivered: row.mayHaveBeenDelivered)
    }

    // MARK: render

    /// `POST /v1/render` without recipients: the rendered content.
    static func rendered(_ content: PushContent, template: String) -> Components.Schemas.Rendered {
        let json = DryRunJSON.contentJSON(content, template: template)
        return .init(content: .init(template: template, title: content.title, body: content.body, image: content.image,
                                    actionUrl: content.actionURL, headers: freeForm(json["headers"]),
                                    ios: freeForm(json["ios"]), data: freeForm(json["data"]),
                                    nativePayload: content.nativePayload.map(anyValue)))
    }

    /// `POST /v1/render` with recipients: the exact request of each target (authorization redacted, tokens
    /// shortened), or the outcome of a target that gets none.
    static func rendered(_ deliveries: [PreparedDelivery], template: String) -> Components.Schemas.Rendered {
        typealias Delivery = Components.Schemas.Rendered.DeliveriesPayloadPayload
        let items: [Delivery] = deliveries.map { delivery in
            var item = Delivery(recipient: delivery.recipientID,
                                target: freeForm(DryRunJSON.targetJSON(delivery.target, redactTokens: true)),
                                provider: delivery.provider, routing: delivery.routing)
            switch delivery.plan {
            case .request(let request):
                let body = (try? JSONValue(parsing: request.body)) ?? .string(DryRunJSON.bodyText(request.body))
                item.request = .init(method: request.method, url: request.url, authority: request.authority,
                                     path: request.path, environment: request.environment?.rawValue,
                                     headers: request.displayHeaders.map { .init(name: $0.name, value: $0.value) },
                                     body: anyValue(body), bodyText: DryRunJSON.bodyText(request.body),
                                     bodyBytes: request.body.count, payloadLimit: request.payloadLimit)
            case .noRequest(let result):
                item.outcome = freeForm(DryRunJSON.outcomeJSON(result))
            }
            return item
        }
        let requests = deliveries.count { $0.request != nil }
        return .init(template: template, requests: requests, withoutRequest: deliveries.count - requests,
                     deliveries: items)
    }

    // MARK: tokens and channels

    /// A registry entry (the token shortened).
    static func token(_ record: InvalidTokenRecord) -> Components.Schemas.Tokens.TokensPayloadPayload {
        .init(token: PushToken.redact(record.token), invalid: record.isInvalid, provider: record.provider,
              environment: record.environment, reason: record.reason, invalidSince: Int(record.invalidSince),
              registeredAt: record.registeredAt.map { Int($0) })
    }

    /// A token the registry has no entry for: its shortened form and `invalid: false` only (`nullProperties`).
    static func unknownToken(_ token: String) -> Components.Schemas.Tokens.TokensPayloadPayload {
        .init(token: PushToken.redact(token), invalid: false)
    }

    static func channel(_ info: APNsChannelInfo) -> Components.Schemas.Channel {
        .init(channel: info.id, environment: info.environment.rawValue,
              messageStoragePolicy: info.storagePolicy.map { Int($0.rawValue) }, pushType: info.pushType,
              requestId: info.requestID)
    }

    // MARK: nulls

    /// The properties each answer writes as `null` when it has no value (`SpecJSONEncoder`): exactly those whose
    /// `type` lists `null` in docs/openapi.yaml, by the schema that holds them (`schema`: its name, then `.property`
    /// for a nested object and `[]` for an array's items). `ResponseNullsTests` checks the list against the spec.
    static let nullable: [(schema: String, type: ObjectIdentifier, properties: Set<String>)] = [
        ("Outcome", ObjectIdentifier(Components.Schemas.Outcome.self), ["recipient", "provider"]),
        ("SendStatus.page", ObjectIdentifier(Components.Schemas.SendStatus.PagePayload.self), ["next"]),
        ("Row", ObjectIdentifier(Components.Schemas.Row.self), ["recipient", "provider", "messageId", "status", "code", "reason"]),
        ("Rendered.content", ObjectIdentifier(Components.Schemas.Rendered.ContentPayload.self), ["image", "actionUrl"]),
        ("Rendered.deliveries[]", ObjectIdentifier(Components.Schemas.Rendered.DeliveriesPayloadPayload.self), ["recipient", "provider"]),
        ("Rendered.deliveries[].request", ObjectIdentifier(Components.Schemas.Rendered.DeliveriesPayloadPayload.RequestPayload.self),
         ["environment", "payloadLimit"]),
        ("Tokens.tokens[]", ObjectIdentifier(Components.Schemas.Tokens.TokensPayloadPayload.self), ["provider", "environment", "registeredAt"]),
        ("Channel", ObjectIdentifier(Components.Schemas.Channel.self), ["messageStoragePolicy", "pushType", "requestId"]),
    ]

    /// `nullable` by type.
    static let nullableByType: [ObjectIdentifier: Set<String>] = Dictionary(
        nullable.map { ($0.type, $0.properties) }, uniquingKeysWith: { $0.union($1) })

    /// The properties of `value` the encoder writes as `null` when nil (`SpecJSONEncoder`): its type's `nullable`
    /// ones, but none for the entry of a token the registry does not know (`unknownToken`: no `reason`, which every
    /// registry entry has), which is `{"token", "invalid": false}` alone, as it has always been.
    static func nullProperties(of value: any Encodable) -> Set<String> {
        if let entry = value as? Components.Schemas.Tokens.TokensPayloadPayload, entry.reason == nil { return [] }
        return nullableByType[ObjectIdentifier(type(of: value))] ?? []
    }
}
