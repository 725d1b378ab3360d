/// A device platform a push token belongs to. An open set; Norq knows `ios`, `android` and `web`.
public struct Platform: Sendable, Hashable, RawRepresentable, Codable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let ios = Platform(rawValue: "ios")
    public static let android = Platform(rawValue: "android")
    public static let web = Platform(rawValue: "web")

    /// The platforms Norq understands.
    public static let known: [Platform] = [.ios, .android, .web]

    public var description: String { rawValue }
}

/// The APNs environment a device token was issued for.
public struct PushEnvironment: Sendable, Hashable, RawRepresentable, Codable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let sandbox = PushEnvironment(rawValue: "sandbox")
    public static let production = PushEnvironment(rawValue: "production")

    /// Parses `sandbox` or `production`; anything else is `push/invalid-environment`.
    public static func parse(_ text: String) throws(NorqError) -> PushEnvironment {
        switch text {
        case "sandbox": return .sandbox
        case "production": return .production
        default:
            throw NorqError(.invalidEnvironment,
                            "environment must be \"sandbox\" or \"production\", got \"\(text.prefix(40))\"")
        }
    }

    public var description: String { rawValue }
}
