public import NorqCore
import NIOCore
import OrderedCollections

/// Broadcast channel management (`api-manage-broadcast[.sandbox].push.apple.com`, ports 2196 / 2195): create,
/// read, delete and list the app's channels with the provider's own JWT or client certificate. Every request
/// carries an `apns-request-id` (the caller's, else a generated one); every answer returns the one APNs echoed.
/// Failures throw a `NorqError` whose code is the APNs reason (`apns/channel-not-registered`,
/// `apns/cannot-create-channel-config`, ...); these calls never retry.
extension APNsProvider {
    /// The exact management request (pure; `norq channels --dry-run` prints it).
    /// - Parameters:
    ///   - environment: the provider's default environment when nil (channels are environment-scoped).
    ///   - requestID: `apns-request-id`, a UUID; generated when nil.
    public func prepareChannelRequest(_ operation: APNsChannelOperation, environment: PushEnvironment? = nil,
                                      requestID: String? = nil) throws(NorqError) -> PreparedRequest {
        let environment = environment ?? configuration.defaultEnvironment
        let id: String
        if let requestID {
            id = requestID.lowercased()
            guard APNsRequestID.isValid(id) else {
                throw NorqError(.apnsBadMessageID, "apns-request-id must be a UUID (8-4-4-4-12 hex digits), got \"\(requestID.prefix(40))\"")
            }
        } else {
            id = APNsRequestID.random()
        }
        let base = "/1/apps/" + configuration.bundleID
        var headers: [HTTPHeader] = []
        var method = "GET"
        var path = base + "/channels"
        var body: [UInt8] = []
        var channel = ""
        switch operation {
        case .create(let policy):
            _ = try policy.validated()
            method = "POST"
            let object: OrderedDictionary<String, JSONValue> = [
                "message-storage-policy": .int(Int64(policy.rawValue)), "push-type": "LiveActivity",
            ]
            body = JSONValue.object(object).serialized()
            headers.append(HTTPHeader("content-type", "application/json"))
        case .read(let channelID):
            try APNsChannelID.validate(channelID)
            channel = channelID
            headers.append(HTTPHeader("apns-channel-id", channelID))
        case .delete(let channelID):
            try APNsChannelID.validate(channelID)
            method = "DELETE"
            channel = channelID
            headers.append(HTTPHeader("apns-channel-id", channelID))
        case .list:
            path = base + "/all-channels"
        }
        headers.append(HTTPHeader("apns-request-id", id))
        var redactions: [String: String] = [:]
        if let token = currentToken(), let display = authorizationDisplay {
            headers.append(HTTPHeader("authorization", token.headerValue))
            redactions["authorization"] = display
        }
        return PreparedRequest(method: method, authority: configuration.managementEndpoint(for: environment).authority,
                               path: path, headers: headers, body: body, provider: name,
                               target: .channel(ChannelRecipient(channel: channel, provider: name, environment: environment)),
                               environment: environment, requestID: id, redactions: redactions)
    }

    /// Creates a channel (`POST /1/apps/<bundleId>/channels`, 201 with `apns-channel-id`) and remembers its
    /// storage policy for later broadcasts.
    public func createChannel(storagePolicy: APNsChannelStoragePolicy = .mostRecentMessageStored,
                              environment: PushEnvironment? = nil, requestID: String? = nil,
                              timeout: Duration? = nil) async throws(NorqError) -> APNsChannelInfo {
        let request = try prepareChannelRequest(.create(storagePolicy), environment: environment, requestID: requestID)
        let response = try await sendChannelRequest(request, operation: "create", expecting: 201, timeout: timeout)
        guard let id = response.header("apns-channel-id"), !id.isEmpty else {
            throw NorqError(.apnsUnexpectedChannelResponse, "APNs answered 201 to a channel create without apns-channel-id")
        }
        let environment = request.environment ?? configuration.defaultEnvironment
        channelPolicies.remember(id, environment: environment, policy: storagePolicy)
        return APNsChannelInfo(id: id, storagePolicy: storagePolicy, pushType: "LiveActivity", environment: environment,
                               requestID: response.header("apns-request-id"), status: response.status)
    }

    /// Reads a channel's configuration (`GET /1/apps/<bundleId>/channels`, channel id in `apns-channel-id`).
    public func readChannel(_ channelID: String, environment: PushEnvironment? = nil, requestID: String? = nil,
                            timeout: Duration? = nil) async throws(NorqError) -> APNsChannelInfo {
        let request = try prepareChannelRequest(.read(channelID: channelID), environment: environment, requestID: requestID)
        let response = try await sendChannelRequest(request, operation: "read", expecting: 200, timeout: timeout)
        let environment = request.environment ?? configuration.defaultEnvironment
        var info = APNsChannelInfo(id: response.header("apns-channel-id") ?? channelID, environment: environment,
                                   requestID: response.header("apns-request-id"), status: response.status)
        if !response.body.isEmpty {
            guard let json = try? JSONValue(parsing: response.body), case .object = json else {
                throw NorqError(.apnsUnexpectedChannelResponse, "APNs answered a channel read with a body that is not a JSON object")
            }
            switch json["message-storage-policy"] {
            case .int(let value)?: info.storagePolicy = APNsChannelStoragePolicy(rawValue: Int(value))
            case .double(let value)?: info.storagePolicy = APNsChannelStoragePolicy(rawValue: Int(value))
            default: break
            }
            info.pushType = json["push-type"]?.stringValue
        }
        if let policy = info.storagePolicy { channelPolicies.remember(channelID, environment: environment, policy: policy) }
        return info
    }

    /// Deletes a channel (`DELETE /1/apps/<bundleId>/channels`, 204).
    @discardableResult
    public func deleteChannel(_ channelID: String, environment: PushEnvironment? = nil, requestID: String? = nil,
                              timeout: Duration? = nil) async throws(NorqError) -> APNsChannelDeletion {
        let request = try prepareChannelRequest(.delete(channelID: channelID), environment: environment, requestID: requestID)
        let response = try await sendChannelRequest(request, operation: "delete", expecting: 204, timeout: timeout)
        let environment = request.environment ?? configuration.defaultEnvironment
        channelPolicies.remember(channelID, environment: environment, policy: nil)
        return APNsChannelDeletion(id: channelID, environment: environment, requestID: response.header("apns-request-id"))
    }

    /// Lists the app's channels in an environment (`GET /1/apps/<bundleId>/all-channels`).
    public func listChannels(environment: PushEnvironment? = nil, requestID: String? = nil,
                             timeout: Duration? = nil) async throws(NorqError) -> APNsChannelList {
        let request = try prepareChannelRequest(.list, environment: environment, requestID: requestID)
        let response = try await sendChannelRequest(request, operation: "list", expecting: 200, timeout: timeout)
        guard let json = try? JSONValue(parsing: response.body), case .array(let items)? = json["channels"] else {
            throw NorqError(.apnsUnexpectedChannelResponse, "APNs answered a channel list without a \"channels\" array")
        }
        var channels: [String] = []
        channels.reserveCapacity(items.count)
        for item in items {
            if case .string(let id) = item {
                channels.append(id)
            } else if let id = item["apns-channel-id"]?.stringValue ?? item["channel-id"]?.stringValue {
                channels.append(id)
            }
        }
        return APNsChannelList(channels: channels, environment: request.environment ?? configuration.defaultEnvironment,
                               requestID: response.header("apns-request-id"))
    }

    /// Sends one management request to the management endpoint of its environment, once.
    func sendChannelRequest(_ request: PreparedRequest, operation: String, expecting status: Int,
                            timeout: Duration?) async throws(NorqError) -> DeliveryResponse {
        let environment = request.environment ?? configuration.defaultEnvironment
        // `prepare` addressed it to the management endpoint of its environment.
        let (head, usedJWT) = requestHead(for: request)
        let logID = request.header("apns-channel-id").map { "channel:" + String($0.prefix(8)) } ?? "channels"
        let answer = try await transport.execute(head: head, body: ByteBuffer(bytes: request.body), label: logID,
                                                 timeout: timeout ?? configuration.requestTimeout)
        let response = received(answer, usedJWT: usedJWT)
        if response.status == status { return response }
        let code = APNsResponseTable.code(status: response.status, reason: response.reason) ?? .apnsUnexpectedChannelResponse
        let answered = response.header("apns-request-id").map { ", apns-request-id \($0)" } ?? ""
        throw NorqError(code, "APNs refused the channel \(operation) in \(environment): \(response.status) \(response.reason ?? "without a reason")\(answered)")
    }
}
