import NIOCore
import NIOHPACK
import NorqHTTP2
import Synchronization

/// Frames as a server would send them, and a reader of what the client wrote.
enum Wire {
    typealias T = HTTP2Wire.FrameType

    struct Frame {
        var type: UInt8
        var flags: UInt8
        var streamID: Int32
        var payload: ByteBuffer
    }

    /// Takes every whole frame out of `buffer`.
    static func frames(_ buffer: inout ByteBuffer) -> [Frame] {
        var frames: [Frame] = []
        while buffer.readableBytes >= 9 {
            let length = Int(buffer.getInteger(at: buffer.readerIndex, as: UInt8.self)!) << 16
                | Int(buffer.getInteger(at: buffer.readerIndex + 1, as: UInt16.self)!)
            guard buffer.readableBytes >= 9 + length else { break }
            buffer.moveReaderIndex(forwardBy: 3)
            let type = buffer.readInteger(as: UInt8.self)!
            let flags = buffer.readInteger(as: UInt8.self)!
            let streamID = Int32(bitPattern: buffer.readInteger(as: UInt32.self)! & 0x7fff_ffff)
            frames.append(Frame(type: type, flags: flags, streamID: streamID, payload: buffer.readSlice(length: length)!))
        }
        return frames
    }

    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: Int32 = 0, _ payload: [UInt8] = []) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt8(truncatingIfNeeded: payload.count >> 16))
        buffer.writeInteger(UInt16(truncatingIfNeeded: payload.count))
        buffer.writeInteger(type)
        buffer.writeInteger(flags)
        buffer.writeInteger(UInt32(stream))
        buffer.writeBytes(payload)
        return buffer
    }

    static func settings(_ pairs: [(UInt16, UInt32)] = []) -> ByteBuffer {
        var payload: [UInt8] = []
        for (id, value) in pairs {
            payload += [UInt8(id >> 8), UInt8(id & 0xff)]
            payload += withUnsafeBytes(of: value.bigEndian) { Array($0) }
        }
        return frame(T.settings, payload)
    }

    static func u32(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }

    static func windowUpdate(stream: Int32, _ increment: UInt32) -> ByteBuffer {
        frame(T.windowUpdate, stream: stream, u32(increment))
    }

    static func rst(stream: Int32, _ code: UInt32) -> ByteBuffer { frame(T.rstStream, stream: stream, u32(code)) }

    static func goAway(last: Int32, _ code: UInt32 = 0, debug: String = "") -> ByteBuffer {
        frame(T.goAway, u32(UInt32(last)) + u32(code) + Array(debug.utf8))
    }

    static func block(_ encoder: inout HPACKEncoder, _ fields: [(String, String)]) -> [UInt8] {
        var headers = HPACKHeaders()
        for (name, value) in fields { headers.add(name: name, value: value) }
        var block = ByteBuffer()
        try! encoder.encode(headers: headers, to: &block)
        return Array(block.readableBytesView)
    }

    static func headers(_ encoder: inout HPACKEncoder, stream: Int32, status: String?, _ extra: [(String, String)] = [],
                        endStream: Bool = true) -> ByteBuffer {
        let fields = (status.map { [(":status", $0)] } ?? []) + extra
        return frame(T.headers, flags: 0x4 | (endStream ? 0x1 : 0), stream: stream, block(&encoder, fields))
    }

    static func data(stream: Int32, _ bytes: [UInt8], endStream: Bool = true) -> ByteBuffer {
        frame(T.data, flags: endStream ? 0x1 : 0, stream: stream, bytes)
    }

    static func concat(_ buffers: ByteBuffer...) -> ByteBuffer {
        var out = ByteBuffer()
        for var buffer in buffers { out.writeBuffer(&buffer) }
        return out
    }
}

/// The outcomes of requests, recorded from their completions.
final class Outcomes: Sendable {
    private let results = Mutex<[Int: Result<HTTP2Response, HTTP2ClientError>]>([:])
    private let counts = Mutex<[Int: Int]>([:])

    func record(_ index: Int, _ result: Result<HTTP2Response, HTTP2ClientError>) {
        results.withLock { $0[index] = result }
        counts.withLock { $0[index, default: 0] += 1 }
    }

    subscript(index: Int) -> Result<HTTP2Response, HTTP2ClientError>? { results.withLock { $0[index] } }
    var completedCount: Int { results.withLock { $0.count } }
    var completedOnce: Bool { counts.withLock { $0.values.allSatisfy { $0 == 1 } } }

    func status(_ index: Int) -> Int? {
        if case .success(let response)? = self[index] { return response.status }
        return nil
    }

    func error(_ index: Int) -> HTTP2ClientError? {
        if case .failure(let error)? = self[index] { return error }
        return nil
    }
}

/// A connection state machine with a clock and the other end's HPACK encoder; actions are carried out as the
/// handler would, requeues recorded instead of going to a pool.
struct MachineHarness {
    var machine: HTTP2ConnectionStateMachine
    var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
    var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
    let outcomes = Outcomes()
    var requests: [HTTP2RequestContext] = []
    var requeued: [(index: Int, error: HTTP2ClientError)] = []
    var ready = false
    var goingAway: [String] = []
    var closed = false
    /// What `writeAndResume` had the handler write.
    var flushed = ByteBuffer()

    init(_ configuration: HTTP2ConnectionStateMachine.Configuration = .init(), settings: [(UInt16, UInt32)]? = []) {
        machine = HTTP2ConnectionStateMachine(configuration: configuration, now: now)
        _ = written()  // the preface
        if let settings {
            receive(Wire.settings(settings))
            _ = written()  // the SETTINGS ack
        }
    }

    static func head(_ n: Int) -> HTTP2RequestHead {
        HTTP2RequestHead(authority: "push.example.com", path: "/send/\(n)",
                         fields: [HTTP2HeaderField("x-id", "\(n)", indexing: .neverIndexed)])
    }

    /// Enqueues request number `requests.count`; returns its index.
    @discardableResult
    mutating func send(body: Int = 100, timeout: TimeAmount = .seconds(10)) -> Int {
        let index = requests.count
        let outcomes = self.outcomes
        let request = HTTP2RequestContext(head: Self.head(index), body: ByteBuffer(repeating: 1, count: body),
                                          deadline: now + timeout) { outcomes.record(index, $0) }
        requests.append(request)
        machine.enqueue(request, now: now)
        run()
        return index
    }

    mutating func receive(_ bytes: ByteBuffer) {
        var bytes = bytes
        machine.receive(&bytes, now: now)
        run()
    }

    mutating func readComplete() {
        machine.readComplete()
        run()
    }

    mutating func tick(advance: TimeAmount) {
        now = now + advance
        machine.tick(now: now)
        run()
    }

    mutating func run() {
        while let action = machine.popAction() {
            switch action {
            case .succeed(let request, let response): request.complete(.success(response))
            case .fail(let request, let error): request.fail(error)
            case .requeue(let request, let error, _):
                requeued.append((requests.firstIndex { $0 === request }!, error))
            case .ready: ready = true
            case .goingAway(let reason): goingAway.append(reason)
            case .close: closed = true
            case .writeAndResume:
                var bytes = machine.outbound
                flushed.writeBuffer(&bytes)
                machine.outbound.clear()
                machine.resumeStreams(now: now)
            }
        }
    }

    /// The frames written since the last call.
    mutating func written() -> [Wire.Frame] {
        var out = flushed
        flushed.clear()
        var rest = machine.outbound
        out.writeBuffer(&rest)
        machine.outbound.clear()
        if out.readableBytes >= 24, out.getBytes(at: out.readerIndex, length: 24) == HTTP2Wire.preface {
            out.moveReaderIndex(forwardBy: 24)
        }
        return Wire.frames(&out)
    }

    /// The error code of the GOAWAY written since the last call, if any.
    mutating func goAwayCode() -> UInt32? {
        written().last { $0.type == HTTP2Wire.FrameType.goAway }.map { $0.payload.getInteger(at: $0.payload.readerIndex + 4, as: UInt32.self)! }
    }
}

extension Wire.Frame {
    var errorCode: UInt32? {
        switch type {
        case HTTP2Wire.FrameType.rstStream: payload.getInteger(at: payload.readerIndex, as: UInt32.self)
        case HTTP2Wire.FrameType.goAway: payload.getInteger(at: payload.readerIndex + 4, as: UInt32.self)
        default: nil
        }
    }
}
