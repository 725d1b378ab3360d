public import NorqConfig
public import NorqCore
import NorqAPNs
package import NorqTesting

/// The in-process emulators of the built-in providers (APNs, FCM, Expo and a Web Push push service, HTTP/2 + TLS on
/// 127.0.0.1, from `NorqTesting`), started for one configuration: what `norq send --emulator` uses, for trying the
/// library with the demo keys in `examples/keys` and nothing leaving the machine. Not for production.
///
/// The APNs emulator accepts the JWTs of the configuration's APNs keys, the FCM emulator the OAuth assertions of its
/// service accounts; the push-service emulator adopts the recipients' web subscriptions (and decrypts messages to the
/// demo subscription of `examples/quickstart/recipients.json`).
public struct LocalEmulators: Sendable {
    /// The configuration given to `start`, with every APNs, FCM and Web Push provider pointed at the emulators
    /// (their endpoints, and the emulators' CA as a trust root).
    public let configuration: NorqConfiguration

    /// One line per emulator started: which one, and its address.
    public let descriptions: [String]

    private let attached: EmulatorSetup.Attached?
    private let webPush: WebPushEmulator?

    /// The emulators started (for tests in this package).
    package var apnsEmulator: APNsEmulator? { attached?.apns }
    package var fcmEmulator: FCMEmulator? { attached?.fcm }
    package var expoEmulator: ExpoEmulator? { attached?.expo }
    package var webPushEmulator: WebPushEmulator? { webPush }

    /// Starts the emulators `configuration`'s providers need (the push-service one only when `recipients` has a
    /// web token) and points the providers at them. Throws `cli/no-apns-provider` when the configuration has no
    /// APNs, FCM or Web Push provider to point at them, `cli/emulator-failed` when one cannot start.
    public static func start(for configuration: NorqConfiguration,
                             recipients: [Recipient]) async throws(NorqError) -> LocalEmulators {
        var descriptions: [String] = []
        let (rewritten, webPush) = try await WebPushEmulatorSetup.attach(to: configuration, recipients: recipients)
        if let webPush {
            descriptions.append("Web Push emulator (in-process) at \(webPush.origin); it decrypts what it receives")
        }
        // The APNs and FCM emulators, unless the only providers are Web Push ones.
        var attached: EmulatorSetup.Attached?
        if webPush == nil || rewritten.providers.contains(where: {
            $0.configuration is APNsConfiguration || $0.typeName == "fcm" || $0.typeName == "expo"
        }) {
            do throws(NorqError) {
                attached = try await EmulatorSetup.attach(to: rewritten)
            } catch {
                try? await webPush?.shutdown()
                throw error
            }
        }
        if let apns = attached?.apns {
            descriptions.append("APNs emulator (in-process) at https://localhost:\(apns.port); nothing leaves this machine")
        }
        if let fcm = attached?.fcm {
            descriptions.append("FCM emulator (in-process) at https://localhost:\(fcm.port); nothing leaves this machine")
        }
        if let expo = attached?.expo {
            descriptions.append("Expo emulator (in-process) at https://localhost:\(expo.port); nothing leaves this machine")
        }
        return LocalEmulators(configuration: attached?.configuration ?? rewritten, descriptions: descriptions,
                              attached: attached, webPush: webPush)
    }

    /// Starts every emulator `configuration`'s providers need, for `norq serve --emulator`: APNs (device pushes and
    /// broadcast-channel management) for its APNs providers, FCM for its FCM providers, and the push-service one for
    /// its Web Push providers, which accepts any subscription the served API names (checked, not decrypted; the
    /// quick start's demo subscription decrypted). Each keeps at most 10,000 records, the newest, so a long run
    /// stays within a few MB. `requestLog` gets one line per request the APNs emulator answers (`norq serve
    /// --emulator --verbose` prints them). Throws as ``start(for:recipients:)``.
    public static func startForServing(_ configuration: NorqConfiguration,
                                       requestLog: (@Sendable (String) -> Void)? = nil) async throws(NorqError) -> LocalEmulators {
        var descriptions: [String] = []
        let webPush = try await WebPushEmulatorSetup.startForServing(configuration)
        let rewritten = webPush.map { WebPushEmulatorSetup.point(configuration, at: $0) } ?? configuration
        if let webPush {
            descriptions.append("Web Push emulator (in-process) at \(webPush.origin); it accepts every subscription")
        }
        var attached: EmulatorSetup.Attached?
        if webPush == nil || rewritten.providers.contains(where: {
            $0.configuration is APNsConfiguration || $0.typeName == "fcm" || $0.typeName == "expo"
        }) {
            var onRequest: (@Sendable (RecordedRequest) -> Void)?
            if let requestLog {
                onRequest = { request in
                    requestLog("APNs emulator: \(request.method) \(request.path) \(request.status)"
                               + (request.reason.map { " \($0)" } ?? ""))
                }
            }
            do throws(NorqError) {
                attached = try await EmulatorSetup.attach(to: rewritten, onAPNsRequest: onRequest)
            } catch {
                try? await webPush?.shutdown()
                throw error
            }
        }
        if let apns = attached?.apns {
            descriptions.append("APNs emulator (in-process) at https://localhost:\(apns.port) (device pushes and channel management); nothing leaves this machine")
        }
        if let fcm = attached?.fcm {
            descriptions.append("FCM emulator (in-process) at https://localhost:\(fcm.port); nothing leaves this machine")
        }
        if let expo = attached?.expo {
            descriptions.append("Expo emulator (in-process) at https://localhost:\(expo.port); nothing leaves this machine")
        }
        return LocalEmulators(configuration: attached?.configuration ?? rewritten, descriptions: descriptions,
                              attached: attached, webPush: webPush)
    }

    /// `configuration` (one reloaded while the emulators run) with its providers pointed at the running emulators,
    /// as ``configuration`` is.
    public func pointed(_ configuration: NorqConfiguration) -> NorqConfiguration {
        var configuration = configuration
        if let webPush { configuration = WebPushEmulatorSetup.point(configuration, at: webPush) }
        if let attached { configuration = attached.pointed(configuration) }
        return configuration
    }

    /// Stops every emulator started (after the router using them has shut down).
    public func shutdown() async {
        await attached?.shutdown()
        try? await webPush?.shutdown()
    }
}
