@_exported public import NorqCore
