public import NorqCore
import OrderedCollections

extension NorqError.Code {
    /// A sample's rendered payload is over a configured provider's limit (`norq validate`).
    public static let templatePayloadTooLarge: Self = "template/payload-too-large"
}

extension TemplateRules {
    /// The payloads sent for `content`: every payload of every sizer's provider type (`ProviderType.payloadSizes`,
    /// the provider's own payload code and limits). When no provider measures one (no sizer, as in a bare library
    /// call, or only providers without a limit such as `console`), one measurement of the provider-neutral
    /// output without limit (``neutralPayload(_:)``). Throws the first provider's error when a provider cannot
    /// build a payload for the content.
    public func payloadSizes(of content: PushContent,
                             options: SendOptions = SendOptions()) throws(NorqError) -> [PayloadSize] {
        var sizes: [PayloadSize] = []
        for sizer in payloadSizers { sizes.append(contentsOf: try sizer.sizes(of: content, options: options)) }
        if sizes.isEmpty {
            sizes.append(PayloadSize(provider: "template", what: "output (no provider rules)",
                                     bytes: Self.neutralPayload(content).serialized().count, limit: nil))
        }
        return sizes
    }

    /// Throws `template/payload-too-large` naming the provider, the payload and the bytes over its limit when a
    /// payload of `content` does not fit; else the provider's own error when it cannot build one.
    public func checkPayloadSize(_ content: PushContent, options: SendOptions = SendOptions()) throws(NorqError) {
        let over = try payloadSizes(of: content, options: options).filter { !$0.fits }
        guard let first = over.first else { return }
        var message = "payload too large: " + first.description
        if over.count > 1 { message += "; also " + over.dropFirst().map(\.description).joined(separator: "; ") }
        throw NorqError(.templatePayloadTooLarge, message,
                        hint: "shorten the text or the custom data; each provider's limit is in docs/templates.md")
    }

    /// The provider-neutral rendered output Norq's compiler produces (`title`, `body`, `image`, `action_url`, and
    /// the custom `data` when there is any), or a `push.json` payload as written: what `payload_bytes` measures
    /// when no provider rules are given.
    public static func neutralPayload(_ content: PushContent) -> JSONValue {
        if let native = content.nativePayload { return native }
        var object: OrderedDictionary<String, JSONValue> = [:]
        object["title"] = .string(content.title)
        object["body"] = .string(content.body)
        object["image"] = content.image.map(JSONValue.string) ?? .null
        object["action_url"] = content.actionURL.map(JSONValue.string) ?? .null
        if !content.data.isEmpty { object["data"] = .object(content.data) }
        return .object(object)
    }
}
