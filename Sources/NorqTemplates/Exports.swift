public import NorqCore
