package import NIOCore

/// The wire constants of RFC 9113 this client uses.
package enum HTTP2Wire {
    package enum FrameType {
        package static let data: UInt8 = 0x0
        package static let headers: UInt8 = 0x1
        package static let priority: UInt8 = 0x2
        package static let rstStream: UInt8 = 0x3
        package static let settings: UInt8 = 0x4
        package static let pushPromise: UInt8 = 0x5
        package static let ping: UInt8 = 0x6
        package static let goAway: UInt8 = 0x7
        package static let windowUpdate: UInt8 = 0x8
        package static let continuation: UInt8 = 0x9
    }

    package enum Flags {
        package static let endStream: UInt8 = 0x1
        package static let ack: UInt8 = 0x1
        package static let endHeaders: UInt8 = 0x4
        package static let padded: UInt8 = 0x8
        package static let priority: UInt8 = 0x20
    }

    package enum Setting {
        package static let headerTableSize: UInt16 = 0x1
        package static let enablePush: UInt16 = 0x2
        package static let maxConcurrentStreams: UInt16 = 0x3
        package static let initialWindowSize: UInt16 = 0x4
        package static let maxFrameSize: UInt16 = 0x5
        package static let maxHeaderListSize: UInt16 = 0x6
    }

    package enum ErrorCode {
        package static let noError: UInt32 = 0x0
        package static let protocolError: UInt32 = 0x1
        package static let internalError: UInt32 = 0x2
        package static let flowControlError: UInt32 = 0x3
        package static let streamClosed: UInt32 = 0x5
        package static let frameSizeError: UInt32 = 0x6
        package static let refusedStream: UInt32 = 0x7
        package static let cancel: UInt32 = 0x8
        package static let compressionError: UInt32 = 0x9
        package static let enhanceYourCalm: UInt32 = 0xb

        /// RFC 9113 7: the names of the codes, for logs and error messages.
        static let names = ["NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
                            "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR",
                            "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED"]

        /// `CANCEL (0x8)`; an unknown code as its hex value.
        package static func name(_ code: UInt32) -> String {
            let hex = "0x" + String(code, radix: 16)
            return code < names.count ? "\(names[Int(code)]) (\(hex))" : hex
        }
    }

    package static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    /// The largest frame payload this client accepts: the protocol's default, never raised.
    package static let localMaxFrameSize = 16_384
    package static let maxWindow = Int(Int32.max)

    package static func writeFrameHeader(length: Int, type: UInt8, flags: UInt8, streamID: Int32,
                                         into buffer: inout ByteBuffer) {
        let header = frameHeader(length: length, type: type, flags: flags, streamID: streamID)
        withUnsafeBytes(of: header) { _ = buffer.writeBytes($0) }
    }

    package static func setFrameHeader(at index: Int, length: Int, type: UInt8, flags: UInt8, streamID: Int32,
                                       in buffer: inout ByteBuffer) {
        let header = frameHeader(length: length, type: type, flags: flags, streamID: streamID)
        withUnsafeBytes(of: header) { _ = buffer.setBytes($0, at: index) }
    }

    /// The nine bytes of a frame header (RFC 9113 4.1), written with one buffer access instead of five (each
    /// access checks the buffer's uniqueness and capacity).
    static func frameHeader(length: Int, type: UInt8, flags: UInt8,
                            streamID: Int32) -> (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) {
        let stream = UInt32(bitPattern: streamID)
        return (UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8),
                UInt8(truncatingIfNeeded: length), type, flags,
                UInt8(truncatingIfNeeded: stream >> 24), UInt8(truncatingIfNeeded: stream >> 16),
                UInt8(truncatingIfNeeded: stream >> 8), UInt8(truncatingIfNeeded: stream))
    }
}

/// A violation of RFC 9113 by the peer: a connection error (the connection ends with GOAWAY) or, with a
/// stream id, a stream error (that stream ends with RST_STREAM).
package struct HTTP2ProtocolError: Error, Sendable, Hashable, CustomStringConvertible {
    package var errorCode: UInt32
    /// Nil for a connection error.
    package var streamID: Int32?
    package var message: String

    package init(_ errorCode: UInt32, stream streamID: Int32? = nil, _ message: String) {
        self.errorCode = errorCode
        self.streamID = streamID
        self.message = message
    }

    package var description: String { "\(message) (\(HTTP2Wire.ErrorCode.name(errorCode)))" }
}

/// One frame as received, checked for what the frame alone can tell (sizes, stream 0 rules, padding); header
/// blocks arrive whole (HEADERS with its CONTINUATION frames), not yet decoded.
package enum HTTP2Frame: Sendable {
    /// DATA without padding; `flowControlledLength` (padding included) counts against the receive windows.
    case data(streamID: Int32, payload: ByteBuffer, endStream: Bool, flowControlledLength: Int)
    /// A complete header block (HEADERS + CONTINUATION), padding and priority removed.
    case headers(streamID: Int32, block: ByteBuffer, endStream: Bool)
    /// PRIORITY (deprecated, ignored); a wrong length is a stream error the state machine raises.
    case priority(streamID: Int32, validLength: Bool)
    case rstStream(streamID: Int32, errorCode: UInt32)
    case settings([(identifier: UInt16, value: UInt32)])
    case settingsAck
    case ping(UInt64, ack: Bool)
    case goAway(lastStreamID: Int32, errorCode: UInt32, debugData: ByteBuffer)
    case windowUpdate(streamID: Int32, increment: Int)
    case pushPromise(streamID: Int32)
    /// An extension frame type, ignored (RFC 9113 5.5).
    case unknown(type: UInt8, streamID: Int32)
}
