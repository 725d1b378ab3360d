import Logging
import NIOCore
import NIOEmbedded
@testable import NorqHTTP2
import Synchronization
import Testing

/// Issue 30: RFC 9113 §8.2.1's field rules, checked before a request touches a connection.
@Suite("HTTP2FieldRules")
struct HTTP2FieldRulesTests {
    /// The per-byte definition the word-at-a-time scan must agree with.
    static func reference(_ bytes: [UInt8]) -> Bool {
        if let first = bytes.first, first == 0x20 || first == 0x09 { return false }
        if let last = bytes.last, last == 0x20 || last == 0x09 { return false }
        return !bytes.contains { $0 == 0x00 || $0 == 0x0A || $0 == 0x0D }
    }

    @Test("values: every byte value at every position of two words and a tail agrees with the per-byte rule")
    func valuesAgreeWithTheDefinition() {
        for length in [1, 7, 8, 9, 16, 19] {
            for position in 0..<length {
                for byte in UInt8.min...UInt8.max {
                    var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    bytes[position] = byte
                    let scanned = bytes.withUnsafeBufferPointer { HTTP2FieldRules.isValidValue($0) }
                    if scanned != Self.reference(bytes) {
                        Issue.record("byte \(byte) at \(position) of \(length): scan says \(scanned)")
                        return
                    }
                }
            }
        }
    }

    @Test("names: every byte value at every position of two words and a tail agrees with the per-byte rule")
    func namesAgreeWithTheDefinition() {
        for length in [1, 7, 8, 9, 16, 19] {
            for position in 0..<length {
                for byte in UInt8.min...UInt8.max {
                    var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    bytes[position] = byte
                    let scanned = bytes.withUnsafeBufferPointer { HTTP2FieldRules.isValidName($0) }
                    if scanned != HTTP2FieldRules.isLowercaseTokenByte(byte) {
                        Issue.record("byte \(byte) at \(position) of \(length): scan says \(scanned)")
                        return
                    }
                }
            }
        }
        #expect(!([] as [UInt8]).withUnsafeBufferPointer { HTTP2FieldRules.isValidName($0) })
    }

    @Test("values: the cases of the issue")
    func values() {
        #expect(HTTP2FieldRules.isValidValue(""))
        #expect(HTTP2FieldRules.isValidValue("order-17"))
        #expect(HTTP2FieldRules.isValidValue("a b\tc"))
        #expect(HTTP2FieldRules.isValidValue("ünïcødé, ok"))
        #expect(!HTTP2FieldRules.isValidValue("inv-A-17\r\napns-topic: evil"))
        #expect(!HTTP2FieldRules.isValidValue("x\ny"))
        #expect(!HTTP2FieldRules.isValidValue("x\u{0}y"))
        #expect(!HTTP2FieldRules.isValidValue(" x"))
        #expect(!HTTP2FieldRules.isValidValue("x\t"))
        #expect(HTTP2FieldRules.valueProblem("inv-A-17\r\napns-topic: evil") == "it contains a carriage return (CR) at byte 8")
        #expect(HTTP2FieldRules.valueProblem("x\ny") == "it contains a line feed (LF) at byte 1")
        #expect(HTTP2FieldRules.valueProblem(" x") == "it starts with whitespace")
        #expect(HTTP2FieldRules.valueProblem("ok") == nil)
    }

    @Test("names: lowercase tokens only")
    func names() {
        for name in ["apns-collapse-id", "x-a_b.c~1", "te", "!#$%&'*+-.^_`|~"] {
            #expect(HTTP2FieldRules.isValidName(name), "\(name)")
        }
        for name in ["", "Apns-Topic", "a b", "a:b", ":path", "a\r\nb", "é", "a\"b", "a(b)"] {
            #expect(!HTTP2FieldRules.isValidName(name), "\(name)")
        }
        #expect(HTTP2FieldRules.nameProblem("X-Id")?.contains("uppercase") == true)
    }

    @Test("a head: the first bad field is named, never its value; authority and path are values too")
    func heads() {
        let good = HTTP2RequestHead(authority: "push.example.com", path: "/3/device/ab",
                                    fields: [HTTP2HeaderField("apns-collapse-id", "c 1")])
        #expect(HTTP2FieldRules.problem(in: good) == nil)
        var bad = good
        bad.fields.append(HTTP2HeaderField("apns-topic", "evil\r\nx-injected: 1"))
        let problem = HTTP2FieldRules.problem(in: bad)
        #expect(problem?.contains("apns-topic") == true)
        #expect(problem?.contains("injected") == false)
        var upper = good
        upper.fields = [HTTP2HeaderField("Apns-Topic", "x")]
        #expect(HTTP2FieldRules.problem(in: upper)?.contains("name") == true)
        var path = good
        path.path = "/3/device/ab\r\n"
        #expect(HTTP2FieldRules.problem(in: path)?.contains(":path") == true)
    }

    @Test("the pool fails a bad head at once, before any connection is made or asked for")
    func poolRefusesBeforeConnecting() throws {
        let loop = EmbeddedEventLoop()
        let pool = HTTP2ConnectionPool(configuration: .init(host: "push.example.com"), eventLoopGroup: loop,
                                       logger: Logger(label: "test"))
        let head = HTTP2RequestHead(authority: "push.example.com", path: "/3/device/ab",
                                    fields: [HTTP2HeaderField("apns-collapse-id", "inv-A-17\r\napns-topic: evil")])
        let result = Mutex<Result<HTTP2Response, HTTP2ClientError>?>(nil)
        pool.execute(HTTP2Request(head: head, body: .buffer(ByteBuffer())), deadline: .now + .seconds(5)) { answer in
            result.withLock { $0 = answer }
        }
        // Completed synchronously: no connection could have been made on the way.
        guard case .failure(let error)? = result.withLock({ $0 }) else {
            Issue.record("the request did not fail at once: \(String(describing: result.withLock { $0 }))")
            return
        }
        #expect(error.kind == .invalidRequest)
        #expect(!error.possiblyProcessed && !error.isUnprocessed)
        #expect(error.message.contains("apns-collapse-id"))
        #expect(pool.health.readyConnections == 0 && pool.health.consecutiveFailures == 0)
    }

    @Test("which client errors are unprocessed (free to re-queue)")
    func unprocessedKinds() {
        #expect(HTTP2ClientError(.goAway, possiblyProcessed: false, "above last").isUnprocessed)
        #expect(HTTP2ClientError(.streamReset, possiblyProcessed: false, "REFUSED_STREAM").isUnprocessed)
        #expect(HTTP2ClientError(.connectionLost, possiblyProcessed: false, "closed before written").isUnprocessed)
        #expect(!HTTP2ClientError(.connectionLost, possiblyProcessed: true, "lost after the write").isUnprocessed)
        #expect(!HTTP2ClientError(.streamReset, possiblyProcessed: true, "INTERNAL_ERROR").isUnprocessed)
        #expect(!HTTP2ClientError(.connectFailed, possiblyProcessed: false, "refused").isUnprocessed)
        #expect(!HTTP2ClientError(.deadlineExceeded, possiblyProcessed: false, "late").isUnprocessed)
        #expect(!HTTP2ClientError(.shutDown, possiblyProcessed: false, "down").isUnprocessed)
    }
}

/// The one rule of a request's time (``HTTP2Request/time(within:timeout:now:)``), which the bridge and Web Push over
/// HTTP/1.1 apply: the request's own timeout within the send's deadline.
@Suite struct HTTP2RequestTimeTests {
    @Test("a request has its timeout, or what is left of the send's deadline when that is shorter; none once it passed")
    func timeoutWithinDeadline() {
        let now = ContinuousClock.now
        #expect(HTTP2Request.time(within: now + .seconds(30), timeout: .seconds(10), now: now) == .seconds(10))
        #expect(HTTP2Request.time(within: now + .seconds(3), timeout: .seconds(10), now: now) == .seconds(3))
        #expect(HTTP2Request.time(within: now + .seconds(30), timeout: nil, now: now) == .seconds(30))
        #expect(HTTP2Request.time(within: now - .seconds(1), timeout: .seconds(10), now: now) == .zero)
        #expect(HTTP2Request.time(within: now + .milliseconds(1500), timeout: .seconds(2), now: now) == .milliseconds(1500))
    }
}
