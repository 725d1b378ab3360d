@_exported public import NorqCore
@_exported public import NorqStore
