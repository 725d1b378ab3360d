import Foundation
import Hummingbird
import NorqAPI
import NorqAPNs
import NorqCore

/// Live Activity broadcast channels (iOS 18), mirrored from `norq channels`: create, list, read, delete through the
/// configured APNs provider's management API, with its own credentials.
extension NorqServer {
    func addChannelRoutes(to router: Router<ServerRequestContext>) {
        router.post("/v1/channels") { request, context in
            var context = context
            let key = try self.authorize(request, &context)
            let body = try await ServerJSON.readObject(request, limit: self.settings.limits.bodyBytes)
            try ServerJSON.checkFields(body, allowed: RequestFields.channelCreate, in: "the body")
            let provider = try self.channelProvider(try ServerJSON.string(body, "provider", in: "the body"), key: key)
            let environment = try ServerJSON.string(body, "environment", in: "the body").map { name throws(NorqError) in
                try PushEnvironment.parse(name)
            }
            var policy = APNsChannelStoragePolicy.mostRecentMessageStored
            if let value = try ServerJSON.int(body, "storagePolicy", in: "the body") {
                guard value == 0 || value == 1 else {
                    throw NorqError(.serverInvalidRequest, "storagePolicy must be 0 (no message stored) or 1 (most recent)")
                }
                policy = APNsChannelStoragePolicy(rawValue: Int(value))
            }
            let info = try await provider.createChannel(storagePolicy: policy, environment: environment)
            return ServerJSON.encoded(201, APIDocuments.channel(info))
        }
        router.get("/v1/channels") { request, context in
            var context = context
            let key = try self.authorize(request, &context)
            let provider = try self.channelProvider(request.uri.queryParameters.get("provider"), key: key)
            let list = try await provider.listChannels(environment: try Self.environment(request))
            return ServerJSON.encoded(200, Components.Schemas.ChannelList(channels: list.channels,
                                                                          environment: list.environment.rawValue))
        }
        router.get("/v1/channels/:id") { request, context in
            var context = context
            let key = try self.authorize(request, &context)
            let provider = try self.channelProvider(request.uri.queryParameters.get("provider"), key: key)
            let info = try await provider.readChannel(try Self.channelID(context), environment: try Self.environment(request))
            return ServerJSON.encoded(200, APIDocuments.channel(info))
        }
        router.delete("/v1/channels/:id") { request, context in
            var context = context
            let key = try self.authorize(request, &context)
            let provider = try self.channelProvider(request.uri.queryParameters.get("provider"), key: key)
            let deleted = try await provider.deleteChannel(try Self.channelID(context), environment: try Self.environment(request))
            return ServerJSON.encoded(200, Components.Schemas.ChannelDeleted(deleted: deleted.id,
                                                                             environment: deleted.environment.rawValue))
        }
    }

    /// The APNs provider named `name` (`routing/unknown-provider` when there is none of that name), else the only
    /// one; `server/invalid-request` when that is ambiguous or none, `server/forbidden` when the key may not use it.
    func channelProvider(_ name: String?, key: APIKeyTable.Entry?) throws(NorqError) -> APNsProvider {
        let providers = dependencies.delivery.router.providers
        let apns = providers.values.compactMap { $0 as? APNsProvider }.sorted { $0.name < $1.name }
        let chosen: APNsProvider
        if let name {
            guard let found = providers[name] as? APNsProvider else {
                // Semantic, like an unknown template: the request is well-formed (422, not 400).
                throw NorqError(.unknownProvider, "no APNs provider named \"\(name.prefix(100))\"")
            }
            chosen = found
        } else {
            guard apns.count == 1, let only = apns.first else {
                throw NorqError(.serverInvalidRequest, apns.isEmpty ? "no APNs provider is configured"
                                : "several APNs providers: name one with \"provider\"")
            }
            chosen = only
        }
        if let allowed = key?.providers, !allowed.contains(chosen.name) {
            throw NorqError(.serverForbidden, "API key \(key?.name ?? "") may not use provider \"\(chosen.name)\"")
        }
        return chosen
    }

    static func environment(_ request: Request) throws(NorqError) -> PushEnvironment? {
        guard let name = request.uri.queryParameters.get("environment") else { return nil }
        return try PushEnvironment.parse(name)
    }

    /// The channel id of the path (base64: `/`, `+` and `=` arrive percent-encoded).
    static func channelID(_ context: ServerRequestContext) throws(NorqError) -> String {
        let raw = context.parameters.get("id") ?? ""
        let id = raw.removingPercentEncoding ?? raw
        guard !id.isEmpty, id.utf8.count <= 256 else { throw NorqError(.serverInvalidRequest, "a channel id is 1 to 256 bytes") }
        return id
    }
}
