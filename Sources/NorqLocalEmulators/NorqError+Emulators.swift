package import NorqCore

extension NorqError.Code {
    /// `--emulator` (or `norq emulator --config`, or `LocalEmulators.start`) with a configuration that has no
    /// provider the emulators serve.
    package static let cliNoAPNsProvider: Self = "cli/no-apns-provider"
    /// An emulator could not start (port in use, bad key).
    package static let cliEmulatorFailed: Self = "cli/emulator-failed"
    /// An option value the command cannot use (a bad key file, an out-of-range fault option).
    package static let cliInvalidOption: Self = "cli/invalid-option"
}
