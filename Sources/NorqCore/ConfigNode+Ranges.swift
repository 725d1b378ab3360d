extension ConfigNode {
    /// An integer within `range`.
    public func int(path: String, in range: ClosedRange<Int>) throws(NorqError) -> Int {
        let value = try int(path: path)
        guard range.contains(value) else {
            throw NorqError(.configInvalidValue, "\(path) must be between \(range.lowerBound) and \(range.upperBound)",
                            at: location)
        }
        return value
    }

    /// A duration within `range`.
    public func duration(path: String, in range: ClosedRange<Duration>) throws(NorqError) -> Duration {
        let value = try duration(path: path)
        guard range.contains(value) else {
            throw NorqError(.configInvalidValue, "\(path) must be between \(Self.notation(range.lowerBound)) and "
                                + "\(Self.notation(range.upperBound)), found \(describe)", at: location)
        }
        return value
    }

    /// `d` in the largest of h, m, s and ms that writes it whole (`1h`, `90s`, `1500ms`): the notation the
    /// config file takes.
    static func notation(_ duration: Duration) -> String {
        let millis = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        for (unit, size) in [("h", Int64(3_600_000)), ("m", 60_000), ("s", 1000)] where millis >= size && millis % size == 0 {
            return "\(millis / size)\(unit)"
        }
        return "\(millis)ms"
    }
}
