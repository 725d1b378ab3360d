public import NorqCore

extension NorqError.Code {
    /// A folder holds both `norq.yaml` and `norq.config.yaml` (found by discovery or given as `--config FOLDER`).
    public static let configBothFiles: Self = "config/both-config-files"
    /// The YAML text does not parse, is not UTF-8, is too large or nests too deeply.
    public static let configInvalidYAML: Self = "config/invalid-yaml"
    /// `${VAR}` names an environment variable that is not set, and has no `:-default`.
    public static let configUnsetVariable: Self = "config/unset-variable"
    /// A `${...}` expression is malformed (unterminated, or not a variable name).
    public static let configInvalidInterpolation: Self = "config/invalid-interpolation"
    /// No config file was found (explicit path missing, or none found walking up, and no env fallback).
    public static let configNotFound: Self = "config/not-found"
    /// `routing:` names a provider instance that is not declared (nor registered from env vars).
    public static let configUnknownProvider: Self = "config/unknown-provider"
    /// A provider's `type:` is not a registered provider type.
    public static let configUnknownProviderType: Self = "config/unknown-provider-type"
    /// A routing entry for a platform names a provider that does not serve that platform.
    public static let configRoutingPlatformMismatch: Self = "config/routing-platform-mismatch"
    /// `routing.push` names a provider this router does not serve (a Norq provider of another channel, or
    /// a push provider without an implementation here, such as `expo`).
    public static let configProviderNotServed: Self = "config/provider-not-served"
    /// `retry.ambiguous` is not `never`, `collapsible` or `always`.
    public static let configInvalidAmbiguousRetry: Self = "config/invalid-ambiguous-retry"
}
