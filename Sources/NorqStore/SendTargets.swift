import NorqCore

/// A send's targets as the stores write them: cut into segments of `segmentSize` targets and encoded
/// (`SegmentCodec`) as they are appended, so a send of a million targets is held as ~44 bytes per target (an APNs
/// token) instead of a million `NewDelivery` values (~220 bytes each). At most one segment's worth of values
/// (`segmentSize`, at most `SegmentLedger.maximumSize`) is held decoded while it fills.
///
/// `DurableDelivery` cuts them to the store's own size (`DeliveryStore.segmentSize`); a store given another size
/// cuts them again. Iterating decodes the targets one segment at a time.
public struct SendTargets: Sendable, Hashable, Sequence {
    /// Targets per segment.
    public let segmentSize: Int
    /// How many targets were appended.
    public private(set) var count = 0
    /// The full segments, encoded.
    package private(set) var sealed: [SendSegment] = []
    /// The segment being filled (fewer than `segmentSize` targets).
    private var filling: [NewDelivery] = []

    public init(segmentSize: Int = DeliveryStoreSettings().effectiveSegmentSize) {
        self.segmentSize = Swift.min(Swift.max(1, segmentSize), SegmentLedger.maximumSize)
    }

    public init(_ targets: some Sequence<NewDelivery>,
                segmentSize: Int = DeliveryStoreSettings().effectiveSegmentSize) {
        self.init(segmentSize: segmentSize)
        for target in targets { append(target) }
    }

    public var isEmpty: Bool { count == 0 }

    /// Appends the next target (its `position` is the caller's; sends number them 0, 1, 2, …).
    public mutating func append(_ target: NewDelivery) {
        if filling.isEmpty { filling.reserveCapacity(Swift.min(segmentSize, 1_024)) }
        filling.append(target)
        count += 1
        if filling.count == segmentSize {
            sealed.append(SendSegment(filling))
            filling.removeAll(keepingCapacity: true)
        }
    }

    /// Every segment, the one being filled last.
    package var segments: [SendSegment] {
        filling.isEmpty ? sealed : sealed + [SendSegment(filling)]
    }

    public func makeIterator() -> Iterator {
        Iterator(segments: segments)
    }

    /// The targets in order, decoded one segment at a time.
    public struct Iterator: IteratorProtocol {
        private let segments: [SendSegment]
        private var segment = 0
        private var decoded: [NewDelivery] = []
        private var index = 0

        init(segments: [SendSegment]) { self.segments = segments }

        public mutating func next() -> NewDelivery? {
            while index == decoded.count {
                guard segment < segments.count else { return nil }
                decoded = segments[segment].deliveries
                segment += 1
                index = 0
            }
            defer { index += 1 }
            return decoded[index]
        }
    }
}

/// One segment of a new send: its targets encoded, the outcomes routing decided already, and each target's
/// environment (the registry's key at enqueue; not stored).
package struct SendSegment: Sendable, Hashable {
    /// The targets' blob (`SegmentCodec.encode(targets:)`).
    package let encodedTargets: [UInt8]
    package let positions: PositionRanges
    package let count: Int
    /// Outcomes decided at enqueue (routing, a disabled template), by index in the segment.
    package let decided: [Int: StoredOutcome]
    /// Each target's environment: an index into `environmentNames`, 0 for none.
    private let environments: [UInt8]
    private let environmentNames: [String]

    init(_ deliveries: [NewDelivery]) {
        var decided: [Int: StoredOutcome] = [:]
        var names: [String] = []
        var environments: [UInt8] = []
        environments.reserveCapacity(deliveries.count)
        var targets: [SegmentTarget] = []
        targets.reserveCapacity(deliveries.count)
        for (index, delivery) in deliveries.enumerated() {
            targets.append(SegmentTarget(position: delivery.position, target: delivery.target,
                                         identity: delivery.identity, provider: delivery.provider,
                                         recipientID: delivery.recipientID, messageID: delivery.messageID))
            if let outcome = delivery.outcome { decided[index] = outcome }
            guard let environment = delivery.environment else {
                environments.append(0)
                continue
            }
            if let known = names.firstIndex(of: environment) {
                environments.append(UInt8(known + 1))
            } else if names.count < Int(UInt8.max) {
                names.append(environment)
                environments.append(UInt8(names.count))
            } else {
                // More than 254 distinct environments in one segment (providers have two): kept as unknown, which
                // matches registry entries recorded for every environment only.
                environments.append(0)
            }
        }
        self.encodedTargets = SegmentCodec.encode(targets: targets)
        self.positions = PositionRanges(positions: targets.map(\.position))
        self.count = targets.count
        self.decided = decided
        self.environments = environments
        self.environmentNames = names
    }

    /// The environment of the target at `index`.
    package func environment(at index: Int) -> String? {
        let name = Int(environments[index])
        return name == 0 ? nil : environmentNames[name - 1]
    }

    /// The targets, decoded.
    package var targets: [SegmentTarget] { (try? SegmentCodec.decodeTargets(encodedTargets)) ?? [] }

    /// The targets as they were appended.
    package var deliveries: [NewDelivery] {
        targets.enumerated().map { index, target in
            NewDelivery(position: target.position, target: target.target, identity: target.identity,
                        provider: target.provider, recipientID: target.recipientID, messageID: target.messageID,
                        outcome: decided[index], environment: environment(at: index))
        }
    }

    /// Whether a target is still open after routing (the registry may finish it).
    package var hasUndecided: Bool { decided.count < count }
}
