import NorqStore

// Tests edit a send's targets by index after building it (`send.targets[1].provider = nil`): `SendTargets` holds
// them encoded, so an edit decodes, changes and encodes them again (fine at test sizes, never on a hot path).
extension SendTargets {
    subscript(index: Int) -> NewDelivery {
        get { Array(self)[index] }
        set {
            var all = Array(self)
            all[index] = newValue
            self = SendTargets(all, segmentSize: segmentSize)
        }
    }
}
