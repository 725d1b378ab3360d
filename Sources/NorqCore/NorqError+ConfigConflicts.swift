extension NorqError.Code {
    /// Two config keys that exclude each other are both present (`keyPath` and `keyPem`, token and
    /// certificate auth, one platform routed twice). Shared by `NorqConfig` and provider config parsers.
    public static let configConflictingKeys: Self = "config/conflicting-keys"
}
