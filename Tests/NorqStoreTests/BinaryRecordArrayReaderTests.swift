import NorqCore
@testable import NorqStorePostgres
import PostgresNIO
import Testing

/// The claim's one-cell decoder, on bytes made here: PostgreSQL's binary array of records, and cells that are not
/// one (a broken or hostile server), which end in `store/failed`, never a crash or an allocation the cell cannot back.
@Suite struct BinaryRecordArrayReaderTests {
    /// `ndim`, no-null flag, element type `record`, then per dimension its length and lower bound, then the records.
    static func array(records: [[(type: UInt32, bytes: [UInt8]?)]], count: Int32? = nil) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(Int32(1))
        buffer.writeInteger(Int32(0))
        buffer.writeInteger(PostgresDataType.record.rawValue)
        buffer.writeInteger(count ?? Int32(records.count))
        buffer.writeInteger(Int32(1))
        for fields in records {
            var record = ByteBuffer()
            record.writeInteger(Int32(fields.count))
            for field in fields {
                record.writeInteger(field.type)
                if let bytes = field.bytes {
                    record.writeInteger(Int32(bytes.count))
                    record.writeBytes(bytes)
                } else {
                    record.writeInteger(Int32(-1))
                }
            }
            buffer.writeInteger(Int32(record.readableBytes))
            buffer.writeBuffer(&record)
        }
        return buffer
    }

    static func cell(_ bytes: ByteBuffer?) -> PostgresCell {
        PostgresCell(bytes: bytes, dataType: .init(2287), format: .binary, columnName: "rows", columnIndex: 0)
    }

    static func int8(_ value: Int64) -> (UInt32, [UInt8]?) {
        (20, withUnsafeBytes(of: value.bigEndian) { Array($0) })
    }

    @Test func recordsWithNullsReadFieldByField() throws {
        let bytes = Self.array(records: [
            [Self.int8(7), (25, Array("héllo".utf8)), (16, [1])],
            [Self.int8(-1), (25, nil), (16, nil)],
        ])
        var reader = try #require(try BinaryRecordArrayReader(Self.cell(bytes)))
        #expect(reader.count == 2)
        try reader.nextRecord(fields: 3)
        #expect(try reader.integer() == 7)
        #expect(try reader.text() == "héllo")
        #expect(try reader.bool() == true)
        try reader.nextRecord(fields: 3)
        #expect(try reader.integer() == -1)
        #expect(try reader.text() == nil)
        #expect(try reader.bool() == nil)
    }

    @Test func aNullCellIsNoRows() throws {
        #expect(try BinaryRecordArrayReader(Self.cell(nil)) == nil)
    }

    @Test func brokenCellsAreStoreErrors() throws {
        func code(_ body: () throws -> Void) -> NorqError.Code? {
            do { try body(); return nil } catch { return (error as? NorqError)?.code ?? "not a NorqError" }
        }
        // A count of two billion records in a cell of a few bytes: refused before anything is reserved.
        let huge = Self.array(records: [[Self.int8(1)]], count: Int32.max)
        #expect(code { _ = try BinaryRecordArrayReader(Self.cell(huge)) } == .storeFailed)
        // Cut short anywhere: every prefix of a good cell is an error or fewer fields, never a crash.
        let good = Self.array(records: [[Self.int8(7), (25, Array("abc".utf8))]])
        for length in 0..<good.readableBytes {
            let prefix = good.getSlice(at: 0, length: length)!
            _ = code {
                guard var reader = try BinaryRecordArrayReader(Self.cell(prefix)) else { return }
                for _ in 0..<reader.count {
                    try reader.nextRecord(fields: 2)
                    _ = try reader.integer()
                    _ = try reader.text()
                }
            }
        }
        // A record with another field count, a field longer than the cell, an integer of 3 bytes.
        var reader = try #require(try BinaryRecordArrayReader(Self.cell(good)))
        #expect(code { try reader.nextRecord(fields: 3) } == .storeFailed)
        let long = Self.array(records: [[(25, Array("abc".utf8))]])
        var patched = long
        patched.setInteger(Int32(1_000), at: patched.writerIndex - 7)  // the field's length
        var longReader = try #require(try BinaryRecordArrayReader(Self.cell(patched)))
        #expect(code { try longReader.nextRecord(fields: 1); _ = try longReader.text() } == .storeFailed)
        var odd = try #require(try BinaryRecordArrayReader(Self.cell(Self.array(records: [[(23, [0, 0, 1])]]))))
        #expect(code { try odd.nextRecord(fields: 1); _ = try odd.integer() } == .storeFailed)
        // Text format, two dimensions.
        let text = PostgresCell(bytes: good, dataType: .init(2287), format: .text, columnName: "rows", columnIndex: 0)
        #expect(code { _ = try BinaryRecordArrayReader(text) } == .storeFailed)
        var twoDimensions = good
        twoDimensions.setInteger(Int32(2), at: twoDimensions.readerIndex)
        #expect(code { _ = try BinaryRecordArrayReader(Self.cell(twoDimensions)) } == .storeFailed)
    }
}
