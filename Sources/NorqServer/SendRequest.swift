import Norq
import NorqCore
import NorqTemplates

/// The body of `POST /v1/sends` and `POST /v1/render`, checked:
/// `{"template": "<id>", "data": {...} | "sample": "<name>", "to": <recipients>, "options": {...}}`.
/// `to` takes the same JSON as `norq send --to`: a recipient object, a list of them, `{"recipients": [...]}`,
/// or a list of token objects or hex strings (iOS tokens).
struct SendRequest: Sendable {
    var template: String
    var data: JSONValue
    var recipients: [Recipient]
    var options: RouterSendOptions

    /// `template/not-found` naming only `name` (never the templates directory), with a suggestion taken from the
    /// templates `allowed` (nil: all) when one is close.
    static func checkExists(_ name: String, in library: TemplateLibrary, allowed: Set<String>?) throws(NorqError) {
        guard !library.templateNames.contains(name) else { return }
        let candidates = library.templateNames.filter { allowed?.contains($0) ?? true }
        let suggestion = ConfigNode.suggestion(for: name, among: candidates)
        throw NorqError(.templateNotFound, "no template \"\(name.prefix(100))\" on this server",
                        hint: suggestion.map { "did you mean \"\($0)\"?" })
    }

    /// The recipients of `to` counted while the body is parsed, so that a body naming far more targets than
    /// `maximum` is refused at the first one past it instead of being parsed whole. Two lower bounds of the count
    /// that `init` makes exactly: the elements of the list at `to` (or `to.recipients`; each a token, or a recipient
    /// that needs at least one target), and every recipient's `push.tokens` and `push.channels` elements.
    static func targetLimit(maximum: Int) -> JSONElementLimit {
        typealias Step = JSONElementLimit.Step
        let lists: [[Step]] = [[.key("to"), .index], [.key("to"), .key("recipients"), .index]]
        let recipients: [[Step]] = [[.key("to")], [.key("to"), .index], [.key("to"), .key("recipients"), .index]]
        let targets = recipients.flatMap { prefix in
            [prefix + [.key("push"), .key("tokens"), .index], prefix + [.key("push"), .key("channels"), .index]]
        }
        return JSONElementLimit(groups: [lists, targets], maximum: maximum, error: tooManyTargets(
            "more than \(maximum)", maximum: maximum))
    }

    static func tooManyTargets(_ count: String, maximum: Int) -> NorqError {
        NorqError(.serverTooManyRecipients,
                  "the send has \(count) targets; this server takes at most \(maximum) per request (server.limits.recipients)")
    }

    /// The body's fields (`RequestFields.send`: docs/openapi.yaml's `SendRequest` and `RenderRequest`).
    static var fields: Set<String> { RequestFields.send }
    /// The fields of `options` (`RequestFields.sendOptions`: docs/openapi.yaml's `SendOptions`).
    static var optionFields: Set<String> { RequestFields.sendOptions }

    /// - Parameter allowedTemplates: the templates the caller's key may use (nil: all); another one is
    ///   `server/forbidden` before anything is looked up, so the answer names nothing outside the key's scope.
    init(_ body: [String: JSONValue], library: TemplateLibrary?, maximumTargets: Int,
         recipientsRequired: Bool = true, allowedTemplates: Set<String>? = nil) throws(NorqError) {
        try ServerJSON.checkFields(body, allowed: Self.fields, in: "the body")
        guard let template = try ServerJSON.string(body, "template", in: "the body") else {
            throw NorqError(.serverInvalidRequest, "the body needs \"template\": the template id")
        }
        if let allowedTemplates, !allowedTemplates.contains(template) {
            throw NorqError(.serverForbidden, "this API key may not use template \"\(template.prefix(100))\"")
        }
        self.template = template
        guard let library else { throw NorqError(.noTemplates, "this server has no templates directory") }
        try Self.checkExists(template, in: library, allowed: allowedTemplates)
        let compiled = try library.template(named: template)
        // The data: the named sample (or the first one when no data is given), with `data` merged on top.
        var base: JSONValue?
        if let sample = try ServerJSON.string(body, "sample", in: "the body") {
            guard let found = Self.findSample(sample, in: compiled) else {
                throw NorqError(.serverUnknownSample, "template \"\(template)\" has no sample \"\(sample.prefix(100))\"",
                                hint: compiled.samples.isEmpty ? "it has no data.samples.yaml"
                                    : "samples: " + compiled.samples.keys.joined(separator: ", "))
            }
            base = found
        } else if body["data"] == nil {
            base = compiled.defaultSample
        }
        var data = base ?? .object([:])
        if let given = body["data"], given != .null {
            guard case .object = given else { throw NorqError(.serverInvalidRequest, "\"data\" must be a JSON object") }
            data = Self.merge(base ?? .object([:]), given)
        }
        let errors = compiled.schemaErrors(data)
        if var first = errors.first {
            if errors.count > 1 { first.message += " (and \(errors.count - 1) more)" }
            throw first
        }
        self.data = data

        if let to = body["to"], to != .null {
            recipients = try Self.recipients(to)
        } else {
            recipients = []
        }
        let count = recipients.reduce(0) { $0 + $1.tokens.count + $1.channels.count }
        if recipientsRequired && count == 0 {
            throw NorqError(.serverInvalidRequest, "the body needs \"to\": at least one recipient with a token or channel")
        }
        guard count <= maximumTargets else { throw Self.tooManyTargets("\(count)", maximum: maximumTargets) }
        options = try Self.options(body["options"])
    }

    static func recipients(_ json: JSONValue) throws(NorqError) -> [Recipient] {
        if case .array(let items) = json, !items.isEmpty,
           items.allSatisfy({ item in
               if case .string = item { return true }
               return item["token"] != nil
           }) {
            var tokens: [PushToken] = []
            for item in items {
                if case .string(let token) = item {
                    guard !token.isEmpty else { throw NorqError(.emptyToken, "a token in \"to\" is empty") }
                    tokens.append(PushToken(token: token, platform: .ios))
                } else {
                    tokens.append(try PushToken(json: item))
                }
            }
            return [Recipient(tokens: tokens)]
        }
        return try Recipient.list(from: json)
    }

    static func options(_ json: JSONValue?) throws(NorqError) -> RouterSendOptions {
        var options = RouterSendOptions()
        guard let json, json != .null else { return options }
        guard case .object(let ordered) = json else {
            throw NorqError(.serverInvalidRequest, "\"options\" must be a JSON object")
        }
        var object: [String: JSONValue] = [:]
        for (key, value) in ordered { object[key] = value }
        try ServerJSON.checkFields(object, allowed: optionFields, in: "options")
        if let environment = try ServerJSON.string(object, "environment", in: "options") {
            options.environment = try PushEnvironment.parse(environment)
        }
        options.topic = try ServerJSON.string(object, "topic", in: "options")
        if let priority = try ServerJSON.int(object, "priority", in: "options") {
            guard (0...10).contains(priority) else {
                throw NorqError(.serverInvalidRequest, "options.priority must be from 0 to 10")
            }
            options.priority = Int(priority)
        }
        options.collapseID = try ServerJSON.string(object, "collapseId", in: "options")
        if let collapse = try ServerJSON.string(object, "collapse", in: "options") {
            guard collapse == "template" || collapse == "idempotency" else {
                throw NorqError(.serverInvalidRequest, "options.collapse must be template or idempotency")
            }
            options.collapse = RouterSendOptions.CollapseMode(rawValue: collapse)
        }
        if let strict = try ServerJSON.bool(object, "strict", in: "options") { options.strict = strict }
        if let sendTime = try ServerJSON.int(object, "sendTime", in: "options") {
            guard sendTime > 0 else { throw NorqError(.serverInvalidRequest, "options.sendTime must be a UNIX time in seconds") }
            options.sendTime = sendTime
        }
        if let seconds = try ServerJSON.int(object, "deadlineSeconds", in: "options") {
            guard (1...3600).contains(seconds) else {
                throw NorqError(.serverInvalidRequest, "options.deadlineSeconds must be from 1 to 3600")
            }
            options.deadline = .seconds(seconds)
        }
        return options
    }

    /// Exact name, then case-insensitive with spaces and underscores as dashes (as `norq send --sample`).
    static func findSample(_ name: String, in template: CompiledTemplate) -> JSONValue? {
        if let exact = template.samples[name] { return exact }
        func slug(_ s: String) -> String { String(s.lowercased().map { $0 == " " || $0 == "_" ? "-" : $0 }) }
        let wanted = slug(name)
        for (key, value) in template.samples where slug(key) == wanted { return value }
        return nil
    }

    /// Deep merge: objects merge key by key, anything else in `top` wins.
    static func merge(_ base: JSONValue, _ top: JSONValue) -> JSONValue {
        guard case .object(var result) = base, case .object(let overlay) = top else { return top }
        for (key, value) in overlay {
            result[key] = result[key].map { merge($0, value) } ?? value
        }
        return .object(result)
    }
}
