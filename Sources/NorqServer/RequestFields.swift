/// The fields each JSON request body accepts, by the name of its schema in docs/openapi.yaml: the one list the
/// handlers check bodies against (`ServerJSON.checkFields`: an unknown field is `server/invalid-request`, so a typo
/// is never silently ignored). `RequestFieldsTests` checks that each set is exactly its schema's `properties`, and
/// that every request body schema of the spec is here.
enum RequestFields {
    /// `POST /v1/sends` (`SendRequest`) and `POST /v1/render` (`RenderRequest`).
    static let send: Set<String> = ["template", "data", "sample", "to", "options"]
    /// Their `options` (`SendOptions`).
    static let sendOptions: Set<String> = ["environment", "topic", "priority", "collapseId", "collapse", "strict",
                                           "sendTime", "deadlineSeconds"]
    /// `POST /v1/validate` (`ValidateRequest`).
    static let validate: Set<String> = ["template", "data"]
    /// `POST /v1/tokens/invalid` (`TokensRequest`).
    static let tokens: Set<String> = ["tokens", "register", "limit", "provider", "environment"]
    /// `POST /v1/channels` (`ChannelCreate`).
    static let channelCreate: Set<String> = ["provider", "environment", "storagePolicy"]

    /// Every set above by its schema's name in docs/openapi.yaml.
    static let bySchema: [String: Set<String>] = [
        "SendRequest": send, "RenderRequest": send, "SendOptions": sendOptions, "ValidateRequest": validate,
        "TokensRequest": tokens, "ChannelCreate": channelCreate,
    ]
}
