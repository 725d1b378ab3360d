public import NorqCore

extension APNsConfiguration {
    /// The default environment of this provider (`production: true|false`).
    public var defaultEnvironment: PushEnvironment { production ? .production : .sandbox }

    /// Where channel-management requests for an environment go (`api-manage-broadcast[.sandbox].push.apple.com`,
    /// port 2196 production / 2195 sandbox, unless configured).
    public func managementEndpoint(for environment: PushEnvironment) -> APNsEndpoint {
        environment == .production ? managementProductionEndpoint : managementSandboxEndpoint
    }

    /// Where broadcast sends for an environment go: the configured broadcast endpoint, else the device-push
    /// endpoint of that environment.
    public func broadcastEndpoint(for environment: PushEnvironment) -> APNsEndpoint {
        if environment == .production { return broadcastProductionEndpoint ?? productionEndpoint }
        return broadcastSandboxEndpoint ?? sandboxEndpoint
    }

    /// `broadcastEndpoint` (both environments), `broadcastSandboxEndpoint`, `broadcastProductionEndpoint`.
    static func parseBroadcastEndpoints(_ keys: [String: ConfigNode], path: String,
                                        into configuration: inout APNsConfiguration) throws(NorqError) {
        if let value = keys["broadcastEndpoint"] {
            let endpoint = try endpoint(value, path: "\(path).broadcastEndpoint", scheme: "https")
            configuration.broadcastSandboxEndpoint = endpoint
            configuration.broadcastProductionEndpoint = endpoint
        }
        if let value = keys["broadcastSandboxEndpoint"] {
            configuration.broadcastSandboxEndpoint = try endpoint(value, path: "\(path).broadcastSandboxEndpoint", scheme: "https")
        }
        if let value = keys["broadcastProductionEndpoint"] {
            configuration.broadcastProductionEndpoint = try endpoint(value, path: "\(path).broadcastProductionEndpoint",
                                                                     scheme: "https")
        }
    }
}
