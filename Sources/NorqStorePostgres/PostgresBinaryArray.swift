import NorqCore
import NIOCore
import PostgresNIO

/// Reads a one-dimensional PostgreSQL array of a result cell in the binary format, element by element, straight
/// from the cell's bytes (a claim's column arrays: no intermediate Swift array per column, none of postgres-nio's
/// generic array decoding, measured as most of a claim's decoding). Elements must not be NULL (the claim turns
/// NULL into '' or -1).
struct BinaryArrayReader {
    private var buffer: ByteBuffer
    private let elementType: PostgresDataType
    /// The number of elements.
    let count: Int

    /// `nil` when the cell is NULL (`array_agg` of no rows).
    init?(_ cell: PostgresCell, of elementType: PostgresDataType) throws(NorqError) {
        guard var buffer = cell.bytes else { return nil }
        guard cell.format == .binary else {
            throw NorqError(.storeFailed, "column \(cell.columnName) arrived in text format, not binary")
        }
        guard let dimensions = buffer.readInteger(as: Int32.self), buffer.readInteger(as: Int32.self) != nil,
              let type = buffer.readInteger(as: UInt32.self) else {
            throw Self.malformed(cell.columnName)
        }
        guard type == elementType.rawValue else {
            throw NorqError(.storeFailed, "column \(cell.columnName) holds elements of type \(type), not \(elementType)")
        }
        switch dimensions {
        case 0:
            count = 0
        case 1:
            guard let length = buffer.readInteger(as: Int32.self), length >= 0,
                  buffer.readInteger(as: Int32.self) != nil else {
                throw Self.malformed(cell.columnName)
            }
            count = Int(length)
        default:
            throw NorqError(.storeFailed, "column \(cell.columnName) is an array of \(dimensions) dimensions, not 1")
        }
        self.buffer = buffer
        self.elementType = elementType
    }

    private static func malformed(_ column: String) -> NorqError {
        NorqError(.storeFailed, "column \(column) is not a well-formed binary array")
    }

    /// The next element's bytes (its length read and checked).
    private mutating func element(length expected: Int32?) throws(NorqError) -> Int {
        guard let length = buffer.readInteger(as: Int32.self), length >= 0, length <= buffer.readableBytes,
              expected.map({ $0 == length }) ?? true else {
            throw NorqError(.storeFailed, "a \(elementType) array element is NULL or truncated")
        }
        return Int(length)
    }

    mutating func nextString() throws(NorqError) -> String {
        let length = try element(length: nil)
        guard let value = buffer.readString(length: length) else { throw Self.malformed("\(elementType)") }
        return value
    }

    mutating func nextInt64() throws(NorqError) -> Int64 {
        _ = try element(length: 8)
        guard let value = buffer.readInteger(as: Int64.self) else { throw Self.malformed("\(elementType)") }
        return value
    }

    mutating func nextBool() throws(NorqError) -> Bool {
        _ = try element(length: 1)
        guard let value = buffer.readInteger(as: UInt8.self) else { throw Self.malformed("\(elementType)") }
        return value != 0
    }
}
