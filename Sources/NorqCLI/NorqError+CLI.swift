import NorqCore

extension NorqError.Code {
    /// `--data`, `--to` or `--key` names a file that does not exist (and is not inline JSON).
    static let cliFileNotFound: Self = "cli/file-not-found"
    /// `--sample` names a sample the template's `data.samples.yaml` does not have.
    static let cliUnknownSample: Self = "cli/unknown-sample"
    /// `norq send` without `--to`, or a recipient list with no tokens.
    static let cliMissingRecipients: Self = "cli/missing-recipients"
    // cli/no-apns-provider, cli/emulator-failed and cli/invalid-option are declared in NorqLocalEmulators (which
    // throws them too).
}

extension NorqError.Code {
    /// `norq new` or `norq init` would overwrite a file that exists.
    static let cliAlreadyExists: Self = "cli/already-exists"
    /// `norq new` or `norq init` cannot write a file (permissions, a file where a folder must be).
    static let cliWriteFailed: Self = "cli/write-failed"
}
