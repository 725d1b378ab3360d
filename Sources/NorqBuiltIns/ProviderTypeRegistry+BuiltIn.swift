import NorqAPNs
public import NorqConfig
import NorqConsole
import NorqExpo
import NorqFCM
import NorqWebPush

extension ProviderTypeRegistry {
    /// Every provider type built into Norq: `apns`, `fcm`, `webpush`, `expo` and `console` (which prints each prepared
    /// request on standard output). The registry `norq` itself uses; register third-party types on a copy:
    ///
    /// ```swift
    /// var registry = ProviderTypeRegistry.builtIn
    /// registry.register(MyProviderType())
    /// ```
    public static var builtIn: ProviderTypeRegistry { builtIn(consoleOutput: { print($0, terminator: "") }) }

    /// Every built-in provider type, with the `console` provider writing its text to `consoleOutput` (for example
    /// standard error, when standard output must stay one JSON document).
    public static func builtIn(consoleOutput: @escaping @Sendable (String) -> Void) -> ProviderTypeRegistry {
        ProviderTypeRegistry([APNsProviderType(), FCMProviderType(), WebPushProviderType(), ExpoProviderType(),
                              ConsoleProviderType(output: consoleOutput)])
    }
}
