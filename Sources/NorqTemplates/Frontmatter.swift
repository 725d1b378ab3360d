import NorqCore
import OrderedCollections

/// A frontmatter value whose strings may hold `{{ }}`.
indirect enum FrontValue: Sendable {
    case literal(JSONValue)
    case template(Inline)
    case array([FrontValue])
    case object(OrderedDictionary<String, FrontValue>)

    var isLiteral: Bool {
        switch self {
        case .literal: return true
        case .template: return false
        case .array(let a): return a.allSatisfy(\.isLiteral)
        case .object(let o): return o.values.allSatisfy(\.isLiteral)
        }
    }

    /// The value without rendering (only meaningful when `isLiteral`).
    var literalValue: JSONValue {
        switch self {
        case .literal(let v): return v
        case .template: return .null
        case .array(let a): return .array(a.map(\.literalValue))
        case .object(let o): return .object(o.mapValues(\.literalValue))
        }
    }
}

/// Applies one rendered frontmatter value to the content being built.
struct FieldSetter: Sendable {
    var value: FrontValue
    /// Keep the JSON type when a string is exactly one `{{ }}` (data, content-state, attributes, actions).
    var typed: Bool
    var location: SourceLocation
    var apply: @Sendable (JSONValue, SourceLocation, inout PushContent) throws(NorqError) -> Void
}

extension RenderContext {
    mutating func render(_ value: FrontValue, typed: Bool) throws(NorqError) -> JSONValue {
        switch value {
        case .literal(let v): return v
        case .template(let inline):
            if typed, let e = inline.singleExpression { return try evaluateForOutput(e) }
            return .string(try render(inline))
        case .array(let items):
            var out: [JSONValue] = []
            out.reserveCapacity(items.count)
            for item in items { out.append(try render(item, typed: typed)) }
            return .array(out)
        case .object(let object):
            var out = OrderedDictionary<String, JSONValue>()
            out.reserveCapacity(object.count)
            for (k, v) in object { out[k] = try render(v, typed: typed) }
            return .object(out)
        }
    }
}

/// Compiles frontmatter into a base `PushContent` (all literal fields applied) plus setters for the rest.
struct FrontmatterCompiler {
    let file: String?
    let partials: PartialResolver
    var base = PushContent()
    var setters: [FieldSetter] = []
    var titleTemplate: Inline? = nil
    var enabled = true
    /// Findings that do not stop the template (an implausible `apns-expiration`); `norq validate` prints
    /// them and fails on them only with `--strict`.
    var warnings: [NorqError] = []

    static let topLevelKeys = ["title", "enabled", "ios", "android", "web", "headers", "data"]
    static let iosKeys = ["sound", "badge", "category", "thread-id", "mutable-content", "content-available",
                          "interruption-level", "subtitle", "relevance-score", "target-content-id",
                          "filter-criteria", "launch-image", "title-loc-key", "title-loc-args", "subtitle-loc-key",
                          "subtitle-loc-args", "loc-key", "loc-args", "event", "content-state", "timestamp",
                          "stale-date", "dismissal-date", "attributes-type", "attributes", "input-push-token",
                          "input-push-channel", "action-loc-key", "action", "url-args", "alert"]
    static let androidKeys = ["channel", "channel_id", "priority", "color", "icon", "sound", "tag", "ttl"]
    static let webKeys = ["icon", "badge", "image", "requireInteraction", "actions", "tag", "renotify"]
    static let headerKeys = ["apns-priority", "apns-push-type", "apns-collapse-id", "apns-expiration", "apns-topic"]
    /// The push types of the provider types (`TemplateRules.pushTypes`); nil: only the shape is checked here.
    let pushTypes: Set<String>?

    init(file: String?, partials: PartialResolver, pushTypes: Set<String>? = nil) {
        self.file = file
        self.partials = partials
        self.pushTypes = pushTypes
    }

    func compileValue(_ tree: YAMLTree) throws(NorqError) -> FrontValue {
        switch tree.kind {
        case .string(let s):
            guard s.contains("{{") else { return .literal(.string(s)) }
            var compiler = BodyCompiler(file: file, partials: partials)
            let lines = try compiler.extractTags(s, firstLine: tree.location.line)
            let joined = lines.map(\.text).joined(separator: "\n")
            return .template(try compiler.inline(joined, scope: Scope()))
        case .array(let items):
            var out: [FrontValue] = []
            for item in items { out.append(try compileValue(item)) }
            return .array(out)
        case .object(let object, _):
            var out = OrderedDictionary<String, FrontValue>()
            for (k, v) in object { out[k] = try compileValue(v) }
            return .object(out)
        default:
            return .literal(tree.json)
        }
    }

    func compileValueIsLiteral(_ tree: YAMLTree) -> Bool {
        (try? compileValue(tree))?.isLiteral ?? false
    }

    mutating func add(_ tree: YAMLTree, typed: Bool = false,
                      _ apply: @escaping @Sendable (JSONValue, SourceLocation, inout PushContent) throws(NorqError) -> Void)
        throws(NorqError)
    {
        let value = try compileValue(tree)
        if value.isLiteral {
            try apply(value.literalValue, tree.location, &base)
        } else {
            setters.append(FieldSetter(value: value, typed: typed, location: tree.location, apply: apply))
        }
    }

    static func unknownKey(_ code: NorqError.Code, _ block: String, _ key: String, allowed: [String],
                           at location: SourceLocation) -> NorqError {
        var hint = "allowed: " + allowed.joined(separator: ", ")
        var best: (String, Int)? = nil
        for candidate in allowed {
            let d = Pipe.editDistance(Array(key.lowercased().utf8), Array(candidate.lowercased().utf8))
            if d <= 3, d < (best?.1 ?? .max) { best = (candidate, d) }
        }
        if let best { hint = "did you mean '\(best.0)'?" }
        return NorqError(code, "unknown key '\(key)' in \(block)", at: location, hint: hint)
    }

    mutating func compile(_ tree: YAMLTree) throws(NorqError) {
        guard let top = tree.object else {
            throw NorqError(.templateInvalidFrontmatter, "frontmatter must be a mapping", at: tree.location)
        }
        for (key, value) in top {
            let keyLocation = tree.keyLocation(key)
            switch key {
            case "title":
                let v = try compileValue(value)
                switch v {
                case .template(let inline): titleTemplate = inline
                case .literal(let j): titleTemplate = Inline(segments: [.text(j.text)])
                default: throw Conv.typeError("title", "a string", value.location)
                }
            case "enabled":
                guard case .bool(let b) = value.kind else { throw Conv.typeError("enabled", "true or false", value.location) }
                enabled = b
            case "ios": try compileIOS(value, at: keyLocation)
            case "android": try compileAndroid(value, at: keyLocation)
            case "web": try compileWeb(value, at: keyLocation)
            case "headers": try compileHeaders(value, at: keyLocation)
            case "data":
                guard value.object != nil else { throw Conv.typeError("data", "a mapping", value.location) }
                try add(value, typed: true) { v, l, c throws(NorqError) in
                    guard case .object(let o) = v else { throw Conv.typeError("data", "a mapping", l) }
                    c.data = o
                }
            default:
                throw Self.unknownKey(.unknownFrontmatterKey, "frontmatter", key, allowed: Self.topLevelKeys,
                                      at: keyLocation)
            }
        }
    }

    private func block(_ tree: YAMLTree, _ name: String) throws(NorqError) -> OrderedDictionary<String, YAMLTree> {
        guard let o = tree.object else { throw Conv.typeError(name, "a mapping", tree.location) }
        return o
    }

    mutating func compileIOS(_ tree: YAMLTree, at location: SourceLocation) throws(NorqError) {
        for (key, value) in try block(tree, "ios") {
            let name = "ios." + key
            switch key {
            case "sound":
                try add(value) { v, l, c throws(NorqError) in c.ios.sound = try Conv.sound(v, l) }
            case "badge":
                try add(value) { v, l, c throws(NorqError) in c.ios.badge = Int(try Conv.int(v, name, l)) }
            case "category": try add(value) { v, l, c throws(NorqError) in c.ios.category = try Conv.string(v, name, l) }
            case "thread-id": try add(value) { v, l, c throws(NorqError) in c.ios.threadID = try Conv.string(v, name, l) }
            case "mutable-content":
                try add(value) { v, l, c throws(NorqError) in c.ios.mutableContent = try Conv.bool(v, name, l) }
            case "content-available":
                try add(value) { v, l, c throws(NorqError) in c.ios.contentAvailable = try Conv.bool(v, name, l) }
            case "interruption-level":
                try add(value) { v, l, c throws(NorqError) in
                    let s = try Conv.string(v, name, l)
                    guard ["passive", "active", "time-sensitive", "critical"].contains(s) else {
                        throw NorqError(.invalidInterruptionLevel,
                                        "interruption-level '\(s)' is not passive, active, time-sensitive or critical",
                                        at: l)
                    }
                    c.ios.interruptionLevel = s
                }
            case "subtitle": try add(value) { v, l, c throws(NorqError) in c.ios.subtitle = try Conv.string(v, name, l) }
            case "relevance-score":
                try add(value) { v, l, c throws(NorqError) in
                    let d = try Conv.double(v, name, l)
                    guard d >= 0, d <= 1 else {
                        throw NorqError(.invalidRelevanceScore, "relevance-score \(NumberFormat.plain(d)) is not between 0 and 1", at: l)
                    }
                    c.ios.relevanceScore = d
                }
            case "target-content-id":
                try add(value) { v, l, c throws(NorqError) in c.ios.targetContentID = try Conv.string(v, name, l) }
            case "filter-criteria":
                try add(value) { v, l, c throws(NorqError) in c.ios.filterCriteria = try Conv.string(v, name, l) }
            case "launch-image":
                try add(value) { v, l, c throws(NorqError) in c.ios.launchImage = try Conv.string(v, name, l) }
            case "title-loc-key":
                try add(value) { v, l, c throws(NorqError) in c.ios.titleLocKey = try Conv.string(v, name, l) }
            case "title-loc-args":
                try add(value) { v, l, c throws(NorqError) in c.ios.titleLocArgs = try Conv.strings(v, name, l) }
            case "subtitle-loc-key":
                try add(value) { v, l, c throws(NorqError) in c.ios.subtitleLocKey = try Conv.string(v, name, l) }
            case "subtitle-loc-args":
                try add(value) { v, l, c throws(NorqError) in c.ios.subtitleLocArgs = try Conv.strings(v, name, l) }
            case "loc-key": try add(value) { v, l, c throws(NorqError) in c.ios.locKey = try Conv.string(v, name, l) }
            case "loc-args": try add(value) { v, l, c throws(NorqError) in c.ios.locArgs = try Conv.strings(v, name, l) }
            case "action-loc-key":
                try add(value) { v, l, c throws(NorqError) in c.ios.actionLocKey = try Conv.string(v, name, l) }
            case "action": try add(value) { v, l, c throws(NorqError) in c.ios.action = try Conv.string(v, name, l) }
            case "url-args": try add(value) { v, l, c throws(NorqError) in c.ios.urlArgs = try Conv.strings(v, name, l) }
            case "alert": try add(value) { v, l, c throws(NorqError) in c.ios.alertText = try Conv.string(v, name, l) }
            case "event":
                try add(value) { v, l, c throws(NorqError) in
                    let s = try Conv.string(v, name, l)
                    guard ["start", "update", "end"].contains(s) else {
                        throw NorqError(.invalidLiveActivityEvent, "event '\(s)' is not start, update or end", at: l)
                    }
                    c.ios.event = s
                }
            case "content-state":
                try add(value, typed: true) { v, l, c throws(NorqError) in
                    guard case .object = v else { throw Conv.typeError(name, "a mapping", l) }
                    c.ios.contentState = v
                }
            case "attributes":
                try add(value, typed: true) { v, l, c throws(NorqError) in
                    guard case .object = v else { throw Conv.typeError(name, "a mapping", l) }
                    c.ios.attributes = v
                }
            case "timestamp": try add(value) { v, l, c throws(NorqError) in c.ios.timestamp = try Conv.epoch(v, name, l) }
            case "stale-date": try add(value) { v, l, c throws(NorqError) in c.ios.staleDate = try Conv.epoch(v, name, l) }
            case "dismissal-date":
                try add(value) { v, l, c throws(NorqError) in c.ios.dismissalDate = try Conv.epoch(v, name, l) }
            case "attributes-type":
                try add(value) { v, l, c throws(NorqError) in c.ios.attributesType = try Conv.string(v, name, l) }
            case "input-push-token":
                try add(value) { v, l, c throws(NorqError) in c.ios.inputPushToken = try Conv.bool(v, name, l) }
            case "input-push-channel":
                try add(value) { v, l, c throws(NorqError) in c.ios.inputPushChannel = try Conv.string(v, name, l) }
            default:
                throw Self.unknownKey(.unknownIOSKey, "ios", key, allowed: Self.iosKeys, at: tree.keyLocation(key))
            }
        }
    }

    mutating func compileAndroid(_ tree: YAMLTree, at location: SourceLocation) throws(NorqError) {
        for (key, value) in try block(tree, "android") {
            let name = "android." + key
            switch key {
            case "channel", "channel_id":
                try add(value) { v, l, c throws(NorqError) in c.android.channelID = try Conv.string(v, name, l) }
            case "priority":
                try add(value) { v, l, c throws(NorqError) in
                    let s = try Conv.string(v, name, l)
                    guard s == "normal" || s == "high" else {
                        throw NorqError(.invalidPriority, "android priority '\(s)' is not normal or high", at: l)
                    }
                    c.android.priority = s
                }
            case "color": try add(value) { v, l, c throws(NorqError) in c.android.color = try Conv.string(v, name, l) }
            case "icon": try add(value) { v, l, c throws(NorqError) in c.android.icon = try Conv.string(v, name, l) }
            case "sound": try add(value) { v, l, c throws(NorqError) in c.android.sound = try Conv.string(v, name, l) }
            case "tag": try add(value) { v, l, c throws(NorqError) in c.android.tag = try Conv.string(v, name, l) }
            case "ttl":
                try add(value) { v, l, c throws(NorqError) in
                    var v = v
                    if case .string(let s) = v, s.hasSuffix("s") { v = .string(String(s.dropLast())) }
                    let t = try Conv.int(v, name, l)
                    guard t >= 0 else { throw Conv.typeError(name, "a non-negative number of seconds", l) }
                    c.android.ttl = t
                }
            default:
                throw Self.unknownKey(.unknownAndroidKey, "android", key, allowed: Self.androidKeys,
                                      at: tree.keyLocation(key))
            }
        }
    }

    mutating func compileWeb(_ tree: YAMLTree, at location: SourceLocation) throws(NorqError) {
        for (key, value) in try block(tree, "web") {
            let name = "web." + key
            switch key {
            case "icon": try add(value) { v, l, c throws(NorqError) in c.web.icon = try Conv.string(v, name, l) }
            case "badge": try add(value) { v, l, c throws(NorqError) in c.web.badge = try Conv.string(v, name, l) }
            case "image": try add(value) { v, l, c throws(NorqError) in c.web.image = try Conv.string(v, name, l) }
            case "tag": try add(value) { v, l, c throws(NorqError) in c.web.tag = try Conv.string(v, name, l) }
            case "requireInteraction":
                try add(value) { v, l, c throws(NorqError) in c.web.requireInteraction = try Conv.bool(v, name, l) }
            case "renotify":
                try add(value) { v, l, c throws(NorqError) in c.web.renotify = try Conv.bool(v, name, l) }
            case "actions":
                try add(value, typed: true) { v, l, c throws(NorqError) in
                    guard case .array = v else { throw Conv.typeError(name, "a list", l) }
                    c.web.actions = v
                }
            default:
                throw Self.unknownKey(.unknownWebKey, "web", key, allowed: Self.webKeys, at: tree.keyLocation(key))
            }
        }
    }

    mutating func compileHeaders(_ tree: YAMLTree, at location: SourceLocation) throws(NorqError) {
        for (key, value) in try block(tree, "headers") {
            let name = key
            switch key {
            case "apns-priority":
                try add(value) { v, l, c throws(NorqError) in
                    let p = try Conv.int(v, name, l)
                    guard p == 1 || p == 5 || p == 10 else {
                        throw NorqError(.invalidPriority, "apns-priority \(p) is not 1, 5 or 10", at: l)
                    }
                    c.headers.priority = Int(p)
                }
            case "apns-push-type":
                let known = pushTypes
                try add(value) { v, l, c throws(NorqError) in
                    let s = try Conv.string(v, name, l)
                    if let known {
                        guard known.contains(s) else {
                            throw NorqError(.invalidPushType, "apns-push-type '\(s)' is not a push type of the providers",
                                            at: l, hint: "one of " + known.sorted().joined(separator: ", "))
                        }
                    } else {
                        guard !s.isEmpty, s.utf8.count <= 32, s.utf8.allSatisfy({ $0 >= 97 && $0 <= 122 }) else {
                            throw NorqError(.invalidPushType, "apns-push-type '\(s.prefix(40))' is not a push type name",
                                            at: l, hint: "a lowercase name such as alert or background")
                        }
                    }
                    c.headers.pushType = s
                }
            case "apns-collapse-id":
                try add(value) { v, l, c throws(NorqError) in
                    let s = try Conv.string(v, name, l)
                    guard s.utf8.count <= 64 else {
                        throw NorqError(.collapseIDTooLong, "apns-collapse-id is \(s.utf8.count) bytes; the limit is 64",
                                        at: l)
                    }
                    c.headers.collapseID = s
                }
            case "apns-expiration":
                try add(value) { v, l, c throws(NorqError) in c.headers.expiration = try Conv.expiration(v, l) }
                if let expiration = base.headers.expiration, compileValueIsLiteral(value),
                   let warning = Conv.expirationWarning(expiration, now: WallClock.epochSeconds(), at: value.location) {
                    warnings.append(warning)
                }
            case "apns-topic":
                try add(value) { v, l, c throws(NorqError) in
                    let topic = try Conv.string(v, name, l)
                    guard Conv.isTopic(topic) else {
                        throw NorqError(.invalidTopic,
                                        "apns-topic '\(topic.prefix(80))' is not a bundle identifier (letters, digits, '.', '-')",
                                        at: l, hint: "give the app's bundle id; the push type's suffix is added when sending")
                    }
                    c.headers.topic = topic
                }
            default:
                throw Self.unknownKey(.unknownHeader, "headers", key, allowed: Self.headerKeys,
                                      at: tree.keyLocation(key))
            }
        }
    }
}

/// Typed conversions of rendered frontmatter values.
enum Conv {
    static func typeError(_ name: String, _ expected: String, _ l: SourceLocation) -> NorqError {
        NorqError(.invalidFrontmatterValue, "'\(name)' must be \(expected)", at: l)
    }

    static func string(_ v: JSONValue, _ name: String, _ l: SourceLocation) throws(NorqError) -> String {
        switch v {
        case .string(let s): return s
        case .int, .double, .bool: return v.text
        default: throw typeError(name, "a string", l)
        }
    }

    static func strings(_ v: JSONValue, _ name: String, _ l: SourceLocation) throws(NorqError) -> [String] {
        guard case .array(let items) = v else { throw typeError(name, "a list of strings", l) }
        var out: [String] = []
        for item in items { out.append(try string(item, name, l)) }
        return out
    }

    static func int(_ v: JSONValue, _ name: String, _ l: SourceLocation) throws(NorqError) -> Int64 {
        switch v {
        case .int(let i): return i
        case .double(let d) where d == d.rounded() && Swift.abs(d) < 9e15: return Int64(d)
        case .string(let s): if let i = Int64(s.trimmingWhitespace()) { return i }
        default: break
        }
        throw typeError(name, "an integer", l)
    }

    static func double(_ v: JSONValue, _ name: String, _ l: SourceLocation) throws(NorqError) -> Double {
        switch v {
        case .int(let i): return Double(i)
        case .double(let d): return d
        case .string(let s): if let d = Double(s.trimmingWhitespace()), d.isFinite { return d }
        default: break
        }
        throw typeError(name, "a number", l)
    }

    static func bool(_ v: JSONValue, _ name: String, _ l: SourceLocation) throws(NorqError) -> Bool {
        switch v {
        case .bool(let b): return b
        case .int(let i) where i == 0 || i == 1: return i == 1
        case .string("true"), .string("1"): return true
        case .string("false"), .string("0"): return false
        default: throw typeError(name, "true or false", l)
        }
    }

    static func epoch(_ v: JSONValue, _ name: String, _ l: SourceLocation) throws(NorqError) -> Int64 {
        guard let d = DateValue.parse(v) else { throw typeError(name, "epoch seconds or an ISO-8601 date", l) }
        return d.epoch
    }

    static func sound(_ v: JSONValue, _ l: SourceLocation) throws(NorqError) -> PushSound {
        switch v {
        case .string(let s):
            guard !s.isEmpty else { throw NorqError(.invalidSound, "ios.sound is empty", at: l) }
            return PushSound(name: s)
        case .object(let o):
            guard let name = o["name"]?.stringValue, !name.isEmpty else {
                throw NorqError(.invalidSound, "ios.sound needs a 'name'", at: l)
            }
            for key in o.keys where !["name", "critical", "volume"].contains(key) {
                throw NorqError(.invalidSound, "unknown key '\(key)' in ios.sound (name, critical, volume)", at: l)
            }
            let critical = try o["critical"].map { v throws(NorqError) in try bool(v, "ios.sound.critical", l) } ?? false
            var volume: Double? = nil
            if let vv = o["volume"] {
                let d = try double(vv, "ios.sound.volume", l)
                guard d >= 0, d <= 1 else { throw NorqError(.invalidSound, "ios.sound.volume must be 0...1", at: l) }
                volume = d
            }
            return PushSound(name: name, critical: critical, volume: volume)
        default:
            throw NorqError(.invalidSound, "ios.sound must be a name or {name, critical, volume}", at: l)
        }
    }

    /// `apns-expiration` as Apple, hapns and node-apn define it: a number is a UNIX epoch in seconds and goes
    /// on the wire as written (`0`: deliver once or never); a duration string (`"1h"`, `"30m"`, `"3600s"`,
    /// `"2d"`) is relative to the send; an ISO-8601 date or `{at: <epoch or date>}` is absolute.
    static func expiration(_ v: JSONValue, _ l: SourceLocation) throws(NorqError) -> PushExpiration {
        let usage = "apns-expiration must be a UNIX epoch (a number, 0 for deliver-once), a duration such as \"1h\", or an ISO-8601 date"
        switch v {
        case .object(let o):
            guard o.count == 1, let at = o["at"] else { throw NorqError(.invalidExpiration, usage, at: l) }
            guard let epoch = DateValue.parse(at)?.epoch, epoch > 0 else {
                throw NorqError(.invalidExpiration, "apns-expiration 'at' must be epoch seconds or an ISO-8601 date", at: l)
            }
            return .at(epochSeconds: epoch)
        case .string(let s) where s.hasPrefix("at:"):
            return try expiration(.object(["at": .string(s.dropFirst(3).trimmingWhitespace())]), l)
        case .string(let s):
            let text = s.trimmingWhitespace()
            if let seconds = parseDuration(text) { return seconds == 0 ? .immediately : .after(seconds: seconds) }
            if let epoch = Int64(text) { return try expiration(.int(epoch), l) }
            if text.contains("-"), let date = DateValue.parse(.string(text)), date.epoch > 0 {
                return .at(epochSeconds: date.epoch)
            }
            throw NorqError(.invalidExpiration, usage + ", got \"\(text.prefix(40))\"", at: l)
        case .int(let epoch):
            guard epoch >= 0 else { throw NorqError(.invalidExpiration, "apns-expiration must not be negative", at: l) }
            return epoch == 0 ? .immediately : .at(epochSeconds: epoch)
        case .double(let d) where d == d.rounded() && d >= 0 && d < 1e15:
            return try expiration(.int(Int64(d)), l)
        default:
            throw NorqError(.invalidExpiration, usage, at: l)
        }
    }

    /// Seconds of a duration string: a number followed by `s`, `m`, `h`, `d` or `w` (`"3600s"`, `"1h"`,
    /// `"1.5h"`); nil for anything else (a bare number is an epoch, not a duration).
    static func parseDuration(_ text: String) -> Int64? {
        let units: [(Character, Double)] = [("s", 1), ("m", 60), ("h", 3600), ("d", 86_400), ("w", 604_800)]
        guard let last = text.last, let unit = units.first(where: { $0.0 == last }) else { return nil }
        let number = text.dropLast().trimmingWhitespace()
        guard !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              let value = Double(number), value.isFinite, value >= 0, value * unit.1 < 1e12 else { return nil }
        return Int64((value * unit.1).rounded())
    }

    /// A bundle identifier: 1-255 bytes of ASCII letters, digits, `.`, `-`, `_`.
    static func isTopic(_ topic: String) -> Bool {
        let bytes = Array(topic.utf8)
        guard !bytes.isEmpty, bytes.count <= 255, bytes.first != 46, bytes.last != 46 else { return false }
        return bytes.allSatisfy { ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57)
            || $0 == 46 || $0 == 45 || $0 == 95 }
    }

    /// Earliest epoch taken as a plausible absolute expiration (2001-09-09): anything smaller was almost
    /// certainly meant as seconds from now.
    static let plausibleEpochFloor: Int64 = 1_000_000_000

    /// The warning for a literal `apns-expiration` number that is neither 0 nor a plausible future epoch,
    /// with a did-you-mean (`3600 is 1970-01-01T01:00:00Z; write "1h" for an hour from now`). `now` is the
    /// wall clock in epoch seconds. Nil when the value looks intended.
    static func expirationWarning(_ expiration: PushExpiration, now: Int64,
                                         at location: SourceLocation) -> NorqError? {
        guard case .at(let epoch) = expiration else { return nil }
        let date = DateValue(epoch: epoch, offsetSeconds: 0).format("iso")
        if epoch < plausibleEpochFloor {
            let duration = durationText(epoch)
            return NorqError(.implausibleExpiration,
                             "apns-expiration \(epoch) is a UNIX epoch: \(date), long past, so APNs will not store the notification",
                             at: location, hint: "\(epoch) is \(date); write \"\(duration.text)\" for \(duration.words) from now")
        }
        if epoch <= now {
            return NorqError(.implausibleExpiration,
                             "apns-expiration \(epoch) is \(date), in the past: APNs will not store the notification",
                             at: location, hint: "write 0 to deliver once, or a duration such as \"1h\" for a relative expiry")
        }
        return nil
    }

    /// `3600` -> (`1h`, `an hour`); `90` -> (`90s`, `90 seconds`).
    static func durationText(_ seconds: Int64) -> (text: String, words: String) {
        let units: [(Int64, String, String)] = [(604_800, "w", "week"), (86_400, "d", "day"), (3600, "h", "hour"),
                                                (60, "m", "minute")]
        for (size, suffix, word) in units where seconds >= size && seconds % size == 0 {
            let count = seconds / size
            let article = word == "hour" ? "an" : "a"
            return ("\(count)\(suffix)", count == 1 ? "\(article) \(word)" : "\(count) \(word)s")
        }
        return ("\(seconds)s", seconds == 1 ? "a second" : "\(seconds) seconds")
    }
}
