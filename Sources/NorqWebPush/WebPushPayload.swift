public import NorqCore
import OrderedCollections

/// The JSON document a service worker receives (`event.data.json()`), built from the rendered content.
///
/// ```json
/// {"title":"…","body":"…","icon":"…","image":"…","badge":"…","url":"…","tag":"…",
///  "requireInteraction":true,"renotify":true,"actions":[…],"data":{…}}
/// ```
/// Keys without a value are left out. `image` is the `web:` block's, else the content's hero image; `url` is the
/// action URL (`::: action` or the first link). A `push.json` template (native mode) is sent as written.
public enum WebPushPayload {
    public static func encode(_ content: PushContent) -> [UInt8] {
        if let native = content.nativePayload { return native.serialized() }
        var object = OrderedDictionary<String, JSONValue>()
        object["title"] = .string(content.title)
        if !content.body.isEmpty { object["body"] = .string(content.body) }
        if let icon = content.web.icon { object["icon"] = .string(icon) }
        if let image = content.web.image ?? content.image { object["image"] = .string(image) }
        if let badge = content.web.badge { object["badge"] = .string(badge) }
        if let url = content.actionURL { object["url"] = .string(url) }
        if let tag = content.web.tag { object["tag"] = .string(tag) }
        if let requireInteraction = content.web.requireInteraction { object["requireInteraction"] = .bool(requireInteraction) }
        if let renotify = content.web.renotify { object["renotify"] = .bool(renotify) }
        if let actions = content.web.actions, actions != .null { object["actions"] = actions }
        if !content.data.isEmpty { object["data"] = .object(content.data) }
        return JSONValue.object(object).serialized()
    }
}
