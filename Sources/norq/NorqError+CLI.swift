import NorqCore

extension NorqError.Code {
    /// `--data`, `--to` or `--key` names a file that does not exist (and is not inline JSON).
    static let cliFileNotFound: Self = "cli/file-not-found"
    /// `--sample` names a sample the template's `data.samples.yaml` does not have.
    static let cliUnknownSample: Self = "cli/unknown-sample"
    /// `norq send` without `--to`, or a recipient list with no tokens.
    static let cliMissingRecipients: Self = "cli/missing-recipients"
    /// `--emulator` (or `norq emulator --config`) with a configuration that has no APNs provider.
    static let cliNoAPNsProvider: Self = "cli/no-apns-provider"
    /// The APNs emulator could not start (port in use, bad key).
    static let cliEmulatorFailed: Self = "cli/emulator-failed"
    /// An option value the command cannot use (a bad key file, an out-of-range fault option).
    static let cliInvalidOption: Self = "cli/invalid-option"
}

extension NorqError.Code {
    /// `norq new` or `norq init` would overwrite a file that exists.
    static let cliAlreadyExists: Self = "cli/already-exists"
    /// `norq new` or `norq init` cannot write a file (permissions, a file where a folder must be).
    static let cliWriteFailed: Self = "cli/write-failed"
}
