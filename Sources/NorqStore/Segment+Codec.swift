package import NorqCore

// The binary forms of the segment values: one `write` and one `read` per value, each field in the same order on
// both sides (`SegmentCodecTests` round-trips every field). Version byte first, so a later layout can be told apart.

package enum SegmentCodec {
    /// 2: targets with a presence byte, hex identities as bytes and a table of provider names (1 still read).
    static let version: UInt8 = 2

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

    /// Version 1's layout of a target: every field in turn, strings whole (still read).
    static func readTargetVersion1(_ reader: inout SegmentReader) throws(NorqError) -> SegmentTarget {
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

    /// The presence bits of version 2's target layout (one byte before the fields).
    private enum TargetFlag {
        static let recipientID: UInt8 = 1 << 0
        static let messageID: UInt8 = 1 << 1
        static let last: UInt8 = 1 << 2
        static let mayHaveBeenDelivered: UInt8 = 1 << 3
        static let attempts: UInt8 = 1 << 4
        /// When the service accepted it (a target waiting for its receipt); absent from blobs before stop 33.
        static let acceptedAt: UInt8 = 1 << 5
    }

    /// Version 2's layout of a target: a presence byte, the position, the target, the identity (a hex token as its
    /// bytes: half the size), the provider (an index into the blob's table of names, or inline), then only the
    /// fields present. A fresh APNs target is about 40 bytes instead of ~190.
    static func write(_ target: SegmentTarget, into writer: inout SegmentWriter, providers: inout ProviderTable) {
        var flags: UInt8 = 0
        if target.recipientID != nil { flags |= TargetFlag.recipientID }
        if target.messageID != nil { flags |= TargetFlag.messageID }
        if target.last != nil { flags |= TargetFlag.last }
        if target.mayHaveBeenDelivered { flags |= TargetFlag.mayHaveBeenDelivered }
        if target.attempts != 0 { flags |= TargetFlag.attempts }
        if target.acceptedAt != nil { flags |= TargetFlag.acceptedAt }
        writer.byte(flags)
        writer.int(target.position)
        writer.string(target.target)
        writer.identity(target.identity)
        providers.write(target.provider, into: &writer)
        if let recipientID = target.recipientID { writer.string(recipientID) }
        if let messageID = target.messageID { writer.string(messageID) }
        if target.attempts != 0 { writer.int(target.attempts) }
        if let last = target.last { write(last, into: &writer) }
        if let acceptedAt = target.acceptedAt { writer.int(acceptedAt) }
    }

    static func readTarget(_ reader: inout SegmentReader, providers: ProviderTable) throws(NorqError) -> SegmentTarget {
        let flags = try reader.byte()
        let position = try reader.int()
        let target = try reader.string()
        let identity = try reader.identity()
        let provider = try providers.read(&reader)
        let recipientID = flags & TargetFlag.recipientID != 0 ? try reader.string() : nil
        let messageID = flags & TargetFlag.messageID != 0 ? try reader.string() : nil
        let attempts = flags & TargetFlag.attempts != 0 ? try reader.int() : 0
        let last = flags & TargetFlag.last != 0 ? try readOutcome(&reader) : nil
        let acceptedAt = flags & TargetFlag.acceptedAt != 0 ? try reader.int64() : nil
        return SegmentTarget(position: position, target: target, identity: identity, provider: provider,
                             recipientID: recipientID, messageID: messageID, attempts: attempts,
                             mayHaveBeenDelivered: flags & TargetFlag.mayHaveBeenDelivered != 0, last: last,
                             acceptedAt: acceptedAt)
    }

    /// A segment's targets as one blob: the version, the count, the table of provider names, the targets.
    package static func encode(targets: [SegmentTarget]) -> [UInt8] {
        var providers = ProviderTable(names: targets.map(\.provider))
        var writer = SegmentWriter(capacity: targets.count * 48 + 32)
        writer.byte(version)
        writer.varint(UInt64(targets.count))
        providers.writeTable(into: &writer)
        for target in targets { write(target, into: &writer, providers: &providers) }
        return writer.bytes
    }

    package static func decodeTargets(_ bytes: [UInt8]) throws(NorqError) -> [SegmentTarget] {
        var reader = SegmentReader(bytes)
        let layout = try reader.byte()
        guard layout == 1 || layout == version else { throw unknownVersion() }
        let count = try reader.count()
        var targets: [SegmentTarget] = []
        targets.reserveCapacity(count)
        if layout == 1 {
            for _ in 0..<count { targets.append(try readTargetVersion1(&reader)) }
            return targets
        }
        let providers = try ProviderTable.readTable(&reader)
        for _ in 0..<count { targets.append(try readTarget(&reader, providers: providers)) }
        return targets
    }

    // MARK: progress

    package static func encode(progress: SegmentProgress) -> [UInt8] {
        var writer = SegmentWriter(capacity: progress.done.count + 8 + progress.entries.count * 64)
        var inline = ProviderTable.inline
        writer.byte(version)
        writer.raw(progress.done)
        writer.varint(UInt64(progress.entries.count))
        for (index, entry) in progress.entries.sorted(by: { $0.key < $1.key }) {
            writer.varint(UInt64(index))
            switch entry {
            case .finished(let outcome, let target, let at):
                writer.byte(0)
                write(outcome, into: &writer)
                write(target, into: &writer, providers: &inline)
                writer.int(at)
            case .moved:
                writer.byte(1)
            case .delivered(let messageID, let status, let may, let accepted):
                // 3: only accepted by the service (a ticket); the same fields.
                writer.byte(accepted ? 3 : 2)
                writer.optional(messageID) { $0.string($1) }
                writer.optional(status) { $0.int($1) }
                writer.bool(may)
            }
        }
        return writer.bytes
    }

    package static func decodeProgress(_ bytes: [UInt8]) throws(NorqError) -> SegmentProgress {
        var reader = SegmentReader(bytes)
        let layout = try reader.byte()
        guard layout == 1 || layout == version else { throw unknownVersion() }
        var progress = SegmentProgress(count: 0)
        progress.done = try reader.raw()
        let count = try reader.count()
        for _ in 0..<count {
            let index = Int(try reader.varint())
            switch try reader.byte() {
            case 0:
                let outcome = try readOutcome(&reader)
                let target = layout == 1 ? try readTargetVersion1(&reader)
                    : try readTarget(&reader, providers: .inline)
                progress.entries[index] = .finished(outcome, target, at: try reader.int64())
            case 1:
                progress.entries[index] = .moved
            case let kind where kind == 2 || kind == 3:
                let messageID = try reader.optional { (r: inout SegmentReader) throws(NorqError) in try r.string() }
                let status = try reader.optional { (r: inout SegmentReader) throws(NorqError) in try r.int() }
                progress.entries[index] = .delivered(messageID: messageID, status: status,
                                                     mayHaveBeenDelivered: try reader.bool(), accepted: kind == 3)
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
        let layout = try reader.byte()
        guard layout == 1 || layout == version else { throw unknownVersion() }
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

/// The provider names of a targets blob: each distinct name once at the blob's start, each target an index into
/// it (0: none). `inline` writes the name itself at each target (a progress entry's lone target).
struct ProviderTable {
    private var names: [String]
    private var indexes: [String: Int]
    private let isInline: Bool

    static var inline: ProviderTable { ProviderTable(names: [], inline: true) }

    init(names all: [String?]) {
        var names: [String] = []
        var indexes: [String: Int] = [:]
        for case let name? in all where indexes[name] == nil {
            names.append(name)
            indexes[name] = names.count
        }
        self.names = names
        self.indexes = indexes
        self.isInline = false
    }

    private init(names: [String], inline: Bool) {
        self.names = names
        self.indexes = [:]
        self.isInline = inline
    }

    func writeTable(into writer: inout SegmentWriter) {
        writer.varint(UInt64(names.count))
        for name in names { writer.string(name) }
    }

    static func readTable(_ reader: inout SegmentReader) throws(NorqError) -> ProviderTable {
        let count = try reader.count()
        var names: [String] = []
        names.reserveCapacity(count)
        for _ in 0..<count { names.append(try reader.string()) }
        return ProviderTable(names: names, inline: false)
    }

    mutating func write(_ name: String?, into writer: inout SegmentWriter) {
        if isInline {
            writer.optional(name) { $0.string($1) }
            return
        }
        guard let name else { return writer.varint(0) }
        if let index = indexes[name] { return writer.varint(UInt64(index)) }
        // Not in the table (not expected: the table is made from the same targets): appended is not possible
        // after the table was written, so the name goes inline behind an escape index.
        writer.varint(UInt64(names.count + 1))
        writer.string(name)
    }

    func read(_ reader: inout SegmentReader) throws(NorqError) -> String? {
        if isInline {
            return try reader.optional { (r: inout SegmentReader) throws(NorqError) in try r.string() }
        }
        let index = Int(try reader.varint())
        if index == 0 { return nil }
        if index <= names.count { return names[index - 1] }
        guard index == names.count + 1 else {
            throw NorqError(.storeCorrupt, "a stored segment is damaged (a provider index out of range)",
                            hint: "restore the database from a backup")
        }
        return try reader.string()
    }
}
