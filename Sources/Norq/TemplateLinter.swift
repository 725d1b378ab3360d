import NorqConfig
public import NorqCore
public import NorqTemplates

import Dispatch
import Foundation
import Synchronization

/// What `norq lint` and `norq validate` check, as a library: compile every template (its warnings:
/// `template/raw-expression`, `template/nullable-access`, `push/implausible-expiration`), validate each sample
/// against `data.schema.yaml`, render it with each sample, measure the payload against every configured
/// provider's limit (`template/payload-too-large`), and run each routed provider's own `prepare` on every sample
/// for each platform routing sends it, so that what a send would refuse (`apns/bad-priority` for a background
/// push at priority 10, `apns/push-type-requires-certificate` for MDM on a token key, a header value that cannot be
/// written, ...) is reported first, with the template's path and the line of the key to change.
///
/// Structured findings (``LintFinding``) for tools; the CLI prints them as `path:line:col: severity[code]: message`.
public struct TemplateLinter: Sendable {
    /// Options of a lint run.
    public struct Options: Sendable, Hashable {
        /// Send time for relative expirations and past-expiration checks (nil: now).
        public var sendTime: Int64?
        public init(sendTime: Int64? = nil) { self.sendTime = sendTime }
    }

    public let library: TemplateLibrary
    public let providers: LintProviders
    public let options: Options

    /// - Parameters:
    ///   - library: the templates (with the rules of the configured providers, for payload sizes).
    ///   - providers: the configured providers, made (``LintProviders/make(configuration:registry:logger:)``).
    ///   - options: the send time that expirations are checked against (nil: now).
    public init(library: TemplateLibrary, providers: LintProviders = LintProviders(), options: Options = Options()) {
        self.library = library
        self.providers = providers
        self.options = options
    }

    /// The templates named by `ids` (every template and every notification without a push template when nil or
    /// empty), linted; configuration findings first. An unknown id is a `template/not-found` finding.
    public func lint(_ ids: [String]? = nil) -> LintReport {
        var report = LintReport(configuration: providers.failures)
        let names = (ids?.isEmpty ?? true) ? library.templateNames : ids!
        // Templates are independent: linted on every core, results kept in id order.
        let results = Mutex<[TemplateLintResult?]>(Array(repeating: nil, count: names.count))
        DispatchQueue.concurrentPerform(iterations: names.count) { index in
            let name = names[index]
            let result: TemplateLintResult
            if ids?.isEmpty == false, let channels = library.otherChannelNotifications[name] {
                result = otherChannelResult(name, channels: channels)
            } else {
                result = lint(template: name)
            }
            results.withLock { $0[index] = result }
        }
        report.templates = results.withLock { $0.compactMap { $0 } }
        if ids?.isEmpty ?? true {
            for (name, channels) in library.otherChannelNotifications {
                report.templates.append(otherChannelResult(name, channels: channels))
            }
        }
        report.templates.sort { $0.template < $1.template }
        return report
    }

    func otherChannelResult(_ name: String, channels: [String]) -> TemplateLintResult {
        var result = TemplateLintResult(template: name, otherChannels: channels)
        if let error = library.invalidIDs[name] {
            result.findings.append(LintFinding(error, severity: .error, template: name))
        }
        return result
    }

    /// One template by id: compiled from disk (a compile error is its one finding), then ``lint(compiled:data:dataName:)``.
    public func lint(template name: String) -> TemplateLintResult {
        let compiled: CompiledTemplate
        do throws(NorqError) {
            compiled = try library.compile(name)
        } catch {
            return TemplateLintResult(template: name, findings: [LintFinding(error, severity: .error, template: name)])
        }
        return lint(compiled: compiled)
    }

    /// One compiled template, with its own samples, or with `data` (pasted data, as a preview page has) named
    /// `dataName` instead.
    public func lint(compiled: CompiledTemplate, data: JSONValue? = nil,
                     dataName: String = "data") -> TemplateLintResult {
        let name = compiled.name
        var result = TemplateLintResult(template: name, file: compiled.file)
        var findings: [LintFinding] = compiled.warnings.map { LintFinding($0, severity: .warning, template: name) }
        let samples: [(name: String, data: JSONValue, strict: Bool)]
        if let data {
            samples = [(dataName, data, true)]
        } else if compiled.samples.isEmpty {
            // Norq lints a template without samples with `{}` (its payload phase); so do we, leniently, and say so.
            findings.append(LintFinding(
                severity: .warning, code: .templateNoSamples,
                message: "template \"\(name)\" has no data.samples.yaml: checked with empty data, missing variables rendered empty",
                hint: "add data.samples.yaml beside it so that lint renders what a send renders",
                file: compiled.file, line: compiled.file == nil ? 0 : 1, column: compiled.file == nil ? 0 : 1,
                template: name))
            samples = [("(no sample: empty data)", .object([:]), false)]
        } else {
            samples = compiled.samples.map { ($0.key, $0.value, true) }
        }
        for sample in samples {
            result.samples.append(sample.name)
            findings += lint(compiled, sample: sample.name, data: sample.data, strict: sample.strict,
                             checkSchema: data != nil || !compiled.samples.isEmpty)
        }
        result.findings = Self.unique(findings)
        return result
    }

    /// The findings of one sample: schema, render, payload sizes, and every routed provider's `prepare`.
    func lint(_ compiled: CompiledTemplate, sample: String, data: JSONValue, strict: Bool,
              checkSchema: Bool) -> [LintFinding] {
        let name = compiled.name
        var findings: [LintFinding] = []
        if checkSchema {
            for var error in compiled.schemaErrors(data) {
                error.message += " (sample \"\(sample)\")"
                findings.append(LintFinding(error, severity: .error, template: name, sample: sample))
            }
            for var warning in compiled.schema?.formatMismatches(data) ?? [] {
                warning.message += " (sample \"\(sample)\")"
                findings.append(LintFinding(warning, severity: .warning, template: name, sample: sample))
            }
        }
        let content: PushContent
        do throws(NorqError) {
            content = try compiled.render(data: data, options: RenderOptions(strict: strict))
        } catch {
            var error = error
            error.message += " (sample \"\(sample)\")"
            findings.append(located(LintFinding(error, severity: .error, template: name, sample: sample), compiled))
            return findings
        }
        guard compiled.enabled else { return findings }
        var sizeChecked = false
        do throws(NorqError) {
            try library.rules.checkPayloadSize(content, options: SendOptions(sendTime: options.sendTime))
            sizeChecked = true
        } catch {
            // A provider that cannot build the payload at all says so below, per provider, when there are any.
            if error.code == .templatePayloadTooLarge || providers.entries.isEmpty {
                var error = error
                error.message = "template \"\(name)\", sample \"\(sample)\": " + error.message
                findings.append(located(LintFinding(error, severity: .error, template: name, sample: sample),
                                        compiled))
            } else {
                sizeChecked = true
            }
        }
        var content2 = content
        if content2.templateName == nil { content2.templateName = name }
        let plan = SendPlan(content: content2, templateName: name,
                            options: RouterSendOptions(idempotencyKey: "norq-lint", sendTime: options.sendTime))
        // The refusals, one per distinct error: the same error from several providers or platforms is one finding.
        var refusals: [(error: NorqError, who: [String], first: (entry: LintProviders.Entry, platform: Platform))] = []
        var accepted = 0
        for entry in providers.entries {
            for platform in entry.platforms {
                let token = Self.sampleToken(for: platform)
                var sendOptions = plan.sendOptions
                sendOptions.requestID = RequestID.make(idempotencyKey: plan.key, token: token.token)
                do throws(NorqError) {
                    _ = try entry.provider.prepare(plan.deliverable, for: token, options: sendOptions)
                    accepted += 1
                } catch {
                    if Self.sampleTokenCodes.contains(error.code) { continue }
                    // The size was reported once as template/payload-too-large, with every provider over.
                    if !sizeChecked, error.code.rawValue.hasSuffix("/payload-too-large") { continue }
                    let who = "\(entry.name) for \(platform) tokens"
                    if let index = refusals.firstIndex(where: { $0.error.code == error.code && $0.error.message == error.message }) {
                        refusals[index].who.append(who)
                    } else {
                        refusals.append((error, [who], (entry, platform)))
                    }
                }
            }
        }
        // A native payload (`push.json`) is written for one platform's service (`{"aps": ...}` for iOS): another
        // platform's refusal, while some platform takes it, is a warning (route its tokens accordingly).
        let nativeElsewhere = content.nativePayload != nil && accepted > 0
        for refusal in refusals {
            var error = refusal.error
            let also = refusal.who.count > 1 ? " (also " + refusal.who.dropFirst().joined(separator: ", ") + ")" : ""
            error.message = "provider \(refusal.who[0]) refuses template \"\(name)\"\(also) (sample \"\(sample)\"): "
                + error.message
            let severity: LintFinding.Severity = refusal.first.entry.routed && !nativeElsewhere ? .error : .warning
            findings.append(located(LintFinding(error, severity: severity, template: name, sample: sample,
                                                provider: refusal.first.entry.name, platform: refusal.first.platform),
                                    compiled))
        }
        return findings
    }

    /// A finding without a place of its own gets the template's path and the line of the key it is about (see
    /// ``keys(for:)``), else the template's first line.
    func located(_ finding: LintFinding, _ compiled: CompiledTemplate) -> LintFinding {
        guard finding.file == nil, let file = compiled.file else { return finding }
        var finding = finding
        let at = TemplateSourceLocator.locate(keys: Self.keys(for: finding), in: file)
            ?? SourceLocation(file: file, line: 1, column: 1)
        finding.file = at.file
        finding.line = at.line
        finding.column = at.column
        return finding
    }

    /// The frontmatter keys a provider's finding is about, most specific first: from its code, then any
    /// `header-like-name` its message names.
    static func keys(for finding: LintFinding) -> [String] {
        let code = finding.code.rawValue
        var keys: [String] = []
        if code.hasSuffix("priority") { keys += ["apns-priority", "priority"] }
        if code.contains("requires-certificate") || code.contains("requires-token") || code.hasSuffix("push-type") {
            keys += ["apns-push-type"]
        }
        if code.contains("expiration") || code.hasSuffix("ttl") { keys += ["apns-expiration", "ttl", "TTL"] }
        if code.contains("collapse") { keys += ["apns-collapse-id", "collapse-id", "collapse_key"] }
        if code.hasSuffix("topic") { keys += ["apns-topic"] }
        if code.contains("live-activity") {
            keys += ["live-activity", "event", "content-state", "timestamp", "apns-push-type"]
        }
        if code.hasSuffix("invalid-payload") { keys += ["content-available", "apns-push-type"] }
        // `header apns-collapse-id of template ...`, `priority 10 is not allowed for push type background`.
        var word = ""
        for character in finding.message + " " {
            if character.isLetter || character.isNumber || character == "-" || character == "_" {
                word.append(character)
            } else {
                if word.contains("-"), word.first?.isLetter == true, !keys.contains(word) { keys.append(word) }
                word = ""
            }
        }
        return keys
    }

    /// A device token of `platform` that every built-in provider accepts, so that what `prepare` refuses is the
    /// template's doing: 64 hex digits for iOS, a registration-token shape for Android, a push-service endpoint
    /// with RFC 8291's example keys for the web.
    public static func sampleToken(for platform: Platform) -> PushToken {
        switch platform {
        case .ios: PushToken(token: String(repeating: "0123456789abcdef", count: 4), platform: .ios)
        case .web:
            PushToken(token: "https://fcm.googleapis.com/fcm/send/norq-lint-sample", platform: .web,
                      keys: WebPushKeys(p256dh: "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4",
                                        auth: "BTBZMqHH6r4Tts7J_aSIgg"))
        default: PushToken(token: "norq-lint:APA91b" + String(repeating: "x", count: 140), platform: platform)
        }
    }

    /// Codes about the sample token itself, not the template (a push service host outside `allowedHosts`, a
    /// provider's token format): not reported.
    static let sampleTokenCodes: Set<NorqError.Code> = [
        "apns/invalid-token-format", "fcm/invalid-token-format", "webpush/endpoint-not-allowed",
        "webpush/invalid-endpoint", "webpush/invalid-p256dh", "webpush/invalid-auth-secret", "expo/invalid-token",
        .emptyToken,
    ]

    /// Drops repeats: the same code and message at the same place from another sample (the first sample's
    /// finding is kept; its message names that sample).
    static func unique(_ findings: [LintFinding]) -> [LintFinding] {
        var seen = Set<String>()
        return findings.filter { finding in
            var key = finding
            if let sample = finding.sample {
                key.message = key.message.replacingOccurrences(of: " (sample \"\(sample)\")", with: "")
                    .replacingOccurrences(of: ", sample \"\(sample)\"", with: "")
            }
            key.sample = nil
            let text = key.description + (key.provider ?? "") + (key.platform?.rawValue ?? "")
            return seen.insert(text).inserted
        }
    }
}

extension NorqError.Code {
    /// A template without `data.samples.yaml`: linted with empty data (a warning).
    public static let templateNoSamples: Self = "template/no-samples"
}
