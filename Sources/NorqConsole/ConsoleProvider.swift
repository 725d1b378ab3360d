public import NorqCore
import OrderedCollections

/// The `console` provider, as in Norq: instead of sending, it prints the prepared request (the rendered
/// notification as JSON, addressed to the redacted token) and reports it delivered. Handy in development and
/// in CI, for every platform. `config: {}` takes no keys.
public final class ConsoleProvider: PushProvider {
    public let name: String
    public var typeName: String { ConsoleProviderType.name }
    public let platforms: Set<Platform>
    public let policy: DeliveryPolicy
    /// Where the printed requests go (standard output by default). Called once per delivered request.
    let output: @Sendable (String) -> Void

    public init(name: String, policy: DeliveryPolicy = DeliveryPolicy(),
                platforms: Set<Platform> = Set(Platform.known),
                output: @escaping @Sendable (String) -> Void = { print($0, terminator: "") }) {
        self.name = name
        var policy = policy
        policy.idempotency.serverDeduplicates = false
        self.policy = policy
        self.platforms = platforms
        self.output = output
    }

    /// `POST console://<provider>/<platform>` with the rendered notification as a JSON body, the shape Norq's
    /// compiled push output has (`title`, `body`, `image`, `action_url`) plus headers and custom data.
    public func prepare(_ content: PushContent, for token: PushToken, options: SendOptions) throws(NorqError) -> PreparedRequest {
        guard !token.token.isEmpty else { throw NorqError(.emptyToken, "the device token is empty") }
        var body: OrderedDictionary<String, JSONValue> = [:]
        body["platform"] = .string(token.platform.rawValue)
        body["token"] = .string(token.redacted)
        if let template = content.templateName { body["template"] = .string(template) }
        if let native = content.nativePayload {
            body["payload"] = native
        } else {
            body["title"] = .string(content.title)
            body["body"] = .string(content.body)
            body["image"] = content.image.map(JSONValue.string) ?? .null
            body["action_url"] = content.actionURL.map(JSONValue.string) ?? .null
            if !content.data.isEmpty { body["data"] = .object(content.data) }
        }
        var headers: [HTTPHeader] = [HTTPHeader("content-type", "application/json")]
        if let topic = options.topic ?? content.headers.topic { headers.append(HTTPHeader("x-norq-topic", topic)) }
        if let requestID = options.requestID { headers.append(HTTPHeader("x-norq-request-id", requestID)) }
        return PreparedRequest(method: "POST", scheme: "console", authority: name, path: "/" + token.platform.rawValue,
                               headers: headers, body: JSONValue.object(body).serialized(), provider: name,
                               target: .token(token), environment: token.environment, requestID: options.requestID)
    }

    /// Prints the request and answers 200.
    public func deliver(_ request: PreparedRequest, deadline: ContinuousClock.Instant) async throws(NorqError) -> DeliveryResponse {
        output(Self.describe(request))
        return DeliveryResponse(status: 200, messageID: request.requestID, classification: .delivered)
    }

    public func startDelivery(_ request: PreparedRequest, deadline: ContinuousClock.Instant,
                              completion: @escaping @Sendable (Result<DeliveryResponse, NorqError>) -> Void) {
        output(Self.describe(request))
        completion(.success(DeliveryResponse(status: 200, messageID: request.requestID, classification: .delivered)))
    }

    /// `console <provider>: POST console://…` then the headers and the pretty-printed body.
    public static func describe(_ request: PreparedRequest) -> String {
        var text = "console \(request.provider): \(request.method) \(request.url) to \(request.target.redacted)\n"
        for header in request.displayHeaders { text += "  \(header.name): \(header.value)\n" }
        if let json = try? JSONValue(parsing: request.body) {
            text += json.prettyPrinted().split(separator: "\n", omittingEmptySubsequences: false)
                .map { "  " + $0 }.joined(separator: "\n") + "\n"
        }
        return text
    }
}

/// The `console` provider type: `providers: {console: {config: {}}}`. No env-var fallback (Norq's has none).
public struct ConsoleProviderType: ProviderType {
    public static let name = "console"
    public var typeName: String { Self.name }
    public var environmentPrefix: String { "NORQ_CONSOLE_" }
    public var platforms: Set<Platform> { Set(Platform.known) }
    let output: @Sendable (String) -> Void

    public init(output: @escaping @Sendable (String) -> Void = { print($0, terminator: "") }) {
        self.output = output
    }

    public func parseConfiguration(_ node: ConfigNode, context: ProviderConfigurationContext) throws(NorqError) -> any ProviderConfiguration {
        _ = try node.mapping(allowedKeys: [], path: "providers.\(context.instanceName).config")
        return ConsoleConfiguration()
    }

    public func configurationFromEnvironment(_ environment: [String: String],
                                             context: ProviderConfigurationContext) throws(NorqError) -> (any ProviderConfiguration)? {
        nil
    }

    public func makeProvider(name: String, configuration: any ProviderConfiguration, policy: DeliveryPolicy,
                             context: ProviderContext) throws(NorqError) -> any PushProvider {
        ConsoleProvider(name: name, policy: policy, output: output)
    }
}

/// The console provider's (empty) configuration.
public struct ConsoleConfiguration: ProviderConfiguration, Hashable {
    public init() {}
    public var summary: [(key: String, value: String)] { [("prints", "each prepared request on standard output")] }
}
