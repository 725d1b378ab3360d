import NorqCore
import NIOCore
import PostgresNIO

/// Reads a one-dimensional PostgreSQL array of anonymous records (`array_agg(ROW(…))`) of a result cell in the
/// binary format, field by field, straight from the cell's bytes: a claim's rows as one cell (one `DataRow` per
/// claim: postgres-nio hops executors once per row it yields), with none of postgres-nio's generic decoding.
/// Fields may be NULL.
struct BinaryRecordArrayReader {
    private var buffer: ByteBuffer
    private let column: String
    /// The number of records.
    let count: Int
    /// The fields left in the current record.
    private var fieldsLeft = 0

    /// `nil` when the cell is NULL (`array_agg` of no rows).
    init?(_ cell: PostgresCell) throws(NorqError) {
        guard var buffer = cell.bytes else { return nil }
        column = cell.columnName
        guard cell.format == .binary else {
            throw NorqError(.storeFailed, "column \(cell.columnName) arrived in text format, not binary")
        }
        guard let dimensions = buffer.readInteger(as: Int32.self), buffer.readInteger(as: Int32.self) != nil,
              let type = buffer.readInteger(as: UInt32.self) else {
            throw Self.malformed(cell.columnName)
        }
        guard type == PostgresDataType.record.rawValue else {
            throw NorqError(.storeFailed, "column \(cell.columnName) holds elements of type \(type), not records")
        }
        switch dimensions {
        case 0:
            count = 0
        case 1:
            // Each record takes at least 8 bytes (its length and its field count): a count the cell cannot hold is
            // refused before anything is reserved for it.
            guard let length = buffer.readInteger(as: Int32.self), length >= 0,
                  buffer.readInteger(as: Int32.self) != nil, Int(length) <= buffer.readableBytes / 8 else {
                throw Self.malformed(cell.columnName)
            }
            count = Int(length)
        default:
            throw NorqError(.storeFailed, "column \(cell.columnName) is an array of \(dimensions) dimensions, not 1")
        }
        self.buffer = buffer
    }

    private static func malformed(_ column: String) -> NorqError {
        NorqError(.storeFailed, "column \(column) is not a well-formed binary array of records")
    }

    /// Starts the next record, which must have `fields` fields.
    mutating func nextRecord(fields: Int) throws(NorqError) {
        guard let length = buffer.readInteger(as: Int32.self), length >= 4, length <= buffer.readableBytes,
              let count = buffer.readInteger(as: Int32.self) else {
            throw Self.malformed(column)
        }
        guard count == fields else {
            throw NorqError(.storeFailed, "a record of column \(column) has \(count) fields, not \(fields)")
        }
        fieldsLeft = fields
    }

    /// The next field's length (nil: NULL), after its type.
    private mutating func field() throws(NorqError) -> Int? {
        guard fieldsLeft > 0, buffer.readInteger(as: UInt32.self) != nil,
              let length = buffer.readInteger(as: Int32.self), length <= buffer.readableBytes else {
            throw Self.malformed(column)
        }
        fieldsLeft -= 1
        return length < 0 ? nil : Int(length)
    }

    mutating func text() throws(NorqError) -> String? {
        guard let length = try field() else { return nil }
        guard let value = buffer.readString(length: length) else { throw Self.malformed(column) }
        return value
    }

    /// An `int4` or `int8` field.
    mutating func integer() throws(NorqError) -> Int64? {
        switch try field() {
        case nil: return nil
        case 4: return buffer.readInteger(as: Int32.self).map(Int64.init)
        case 8: return buffer.readInteger(as: Int64.self)
        default: throw Self.malformed(column)
        }
    }

    mutating func bool() throws(NorqError) -> Bool? {
        switch try field() {
        case nil: return nil
        case 1: return buffer.readInteger(as: UInt8.self).map { $0 != 0 }
        default: throw Self.malformed(column)
        }
    }
}
