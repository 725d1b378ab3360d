import NorqCore

// `APNsConfiguration+Parsing.swift` (config engineer) uses this code, which is declared public in NorqConfig,
// a module NorqAPNs cannot import. Declared internally here so NorqAPNs compiles; remove once the code moves
// to NorqCore.
extension NorqError.Code {
    static let configConflictingKeys: Self = "config/conflicting-keys"
}
