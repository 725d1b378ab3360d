public import NorqCore

// The binary forms of the segment values: one `write` and one `read` per value, each field in the same order on
// both sides (`SegmentCodecTests` round-trips every field). Version byte first, so a later layout can be told apart.

package enum SegmentCodec {
    static let version: UInt8 = 1

    // MARK: outcome

    static func write(_ outcome: StoredOutcome, into writer: inout SegmentWriter) {
        writer.string(outcome.state.rawValue)
        writer.optional(outcome.status) { $0.int($1) }
        writer.optional(outcome.reason) { $0.string($1) }
        writer.optional(outcome.code) { $0.string($1) }
        writer.optional(outcome.classification) { $0.string($1) }
        writer.optional(outcome.invalidSince) { $0.int($1) }
        writer.optional(outcome.messageID) { $0.string($1) }
        writer.bool(outcome.mayHaveBeenDelivered)
        // The environment is the registry's, never stored with the outcome.
    }

    static func readOutcome(_ reader: inout SegmentReader) throws(NorqError) -> StoredOutcome {
        let state = DeliveryState(rawValue: try reader.string())
        let status = try reader.optional { (r: inout SegmentReader) throws(NorqError) in try r.int() }
        let reason = try reader.optional { (r: inout SegmentReader) throws(NorqError) in try r.string() }
        let code = try reader.optional { (r: inout SegmentReader) throws(NorqError) in try r.string() }
        let classification = try reader.optional { (r: inout SegmentReader) throws(NorqError) in try r.string() }
        let invalidSince = try reader.optional { (r: inout SegmentReader) throws(NorqError) in try r.int64() }
        let messageID = try reader.optional { (r: inout SegmentReader) throws(NorqError) in try r.string() }
        let may = try reader.bool()
        return StoredOutcome(state: state, status: status, reason: reason, code: code, classification: classification,
                             invalidSince: invalidSince, messageID: messageID, mayHaveBeenDelivered: may)
    }

    // MARK: target

    static func write(_ target: SegmentTarget, into writer: inout SegmentWriter) {
        writer.int(target.position)
        writer.string(target.target)
        writer.string(target.identity)
        writer.optional(target.provider) { $0.string($1) }
        writer.optional(target.recipientID) { $0.string($1) }
        writer.optional(target.messageID) { $0.string($1) }
        writer.int(target.attempts)
        writer.bool(target.mayHaveBeenDelivered)
        writer.optional(target.last) { write($1, into: &$0) }
    }

    static func readTarget(_ reader: inout SegmentReader) throws(NorqError) -> SegmentTarget {
        let position = try reader.int()
        let target = try reader.string()
        let identity = try reader.string()
        let provider = try reader.optional { (r: inout SegmentReader) throws(NorqError) in try r.string() }
        let recipientID = try reader.optional { (r: inout SegmentReader) throws(NorqError) in try r.string() }
        let messageID = try reader.optional { (r: inout SegmentReader) throws(NorqError) in try r.string() }
        let attempts = try reader.int()
        let may = try reader.bool()
        let last = try reader.optional { (r: inout SegmentReader) throws(NorqError) in try readOutcome(&r) }
        return SegmentTarget(position: position, target: target, identity: identity, provider: provider,
                             recipientID: recipientID, messageID: messageID, attempts: attempts,
                             mayHaveBeenDelivered: may, last: last)
    }

    /// A segment's targets as one blob.
    package static func encode(targets: [SegmentTarget]) -> [UInt8] {
        var writer = SegmentWriter(capacity: targets.count * 160 + 8)
        writer.byte(version)
        writer.varint(UInt64(targets.count))
        for target in targets { write(target, into: &writer) }
        return writer.bytes
    }

    package static func decodeTargets(_ bytes: [UInt8]) throws(NorqError) -> [SegmentTarget] {
        var reader = SegmentReader(bytes)
        guard try reader.byte() == version else { throw unknownVersion() }
        let count = try reader.count()
        var targets: [SegmentTarget] = []
        targets.reserveCapacity(count)
        for _ in 0..<count { targets.append(try readTarget(&reader)) }
        return targets
    }

    // MARK: progress

    package static func encode(progress: SegmentProgress) -> [UInt8] {
        var writer = SegmentWriter(capacity: progress.done.count + 8 + progress.entries.count * 64)
        writer.byte(version)
        writer.raw(progress.done)
        writer.varint(UInt64(progress.entries.count))
        for (index, entry) in progress.entries.sorted(by: { $0.key < $1.key }) {
            writer.varint(UInt64(index))
            switch entry {
            case .finished(let outcome, let target, let at):
                writer.byte(0)
                write(outcome, into: &writer)
                write(target, into: &writer)
                writer.int(at)
            case .moved:
                writer.byte(1)
            case .delivered(let messageID, let status, let may):
                writer.byte(2)
                writer.optional(messageID) { $0.string($1) }
                writer.optional(status) { $0.int($1) }
                writer.bool(may)
            }
        }
        return writer.bytes
    }

    package static func decodeProgress(_ bytes: [UInt8]) throws(NorqError) -> SegmentProgress {
        var reader = SegmentReader(bytes)
        guard try reader.byte() == version else { throw unknownVersion() }
        var progress = SegmentProgress(count: 0)
        progress.done = try reader.raw()
        let count = try reader.count()
        for _ in 0..<count {
            let index = Int(try reader.varint())
            switch try reader.byte() {
            case 0:
                let outcome = try readOutcome(&reader)
                let target = try readTarget(&reader)
                progress.entries[index] = .finished(outcome, target, at: try reader.int64())
            case 1:
                progress.entries[index] = .moved
            case 2:
                let messageID = try reader.optional { (r: inout SegmentReader) throws(NorqError) in try r.string() }
                let status = try reader.optional { (r: inout SegmentReader) throws(NorqError) in try r.int() }
                progress.entries[index] = .delivered(messageID: messageID, status: status,
                                                     mayHaveBeenDelivered: try reader.bool())
            default:
                throw unknownVersion()
            }
        }
        return progress
    }

    // MARK: positions

    package static func encode(positions: PositionRanges) -> [UInt8] {
        var writer = SegmentWriter(capacity: 8 + positions.ranges.count * 4)
        writer.byte(version)
        writer.varint(UInt64(positions.ranges.count))
        var previous = 0
        for range in positions.ranges {
            writer.int(range.lowerBound - previous)  // deltas: small numbers for a retry segment's scattered positions
            writer.varint(UInt64(range.count))
            previous = range.upperBound
        }
        return writer.bytes
    }

    package static func decodePositions(_ bytes: [UInt8]) throws(NorqError) -> PositionRanges {
        var reader = SegmentReader(bytes)
        guard try reader.byte() == version else { throw unknownVersion() }
        let count = try reader.count()
        var ranges: [Range<Int>] = []
        var previous = 0
        for _ in 0..<count {
            let start = previous + (try reader.int())
            let length = Int(try reader.varint())
            guard length > 0, length < 1 << 24 else { throw unknownVersion() }
            ranges.append(start..<(start + length))
            previous = start + length
        }
        return PositionRanges(ranges)
    }

    private static func unknownVersion() -> NorqError {
        NorqError(.storeCorrupt, "a stored segment has an unknown layout",
                  hint: "it was written by a newer norq, or the database is damaged")
    }
}
