@testable import Norq
import NorqCore
import NorqSpanAttributes
import NorqTracingTesting
import Testing
import Tracing

/// The attributes of a provider attempt's span (`DeliveryTracing.endAttempt`): each key once, the error code the
/// outcome's when it has one, else the failed answer's.
@Suite("DeliveryTracing: an attempt's span")
struct AttemptSpanTests {
    static func ended(answer: Result<DeliveryResponse, NorqError>,
                      step: NotificationRouter.AttemptStep) throws -> RecordingTracer.FinishedSpan {
        let tracer = RecordingTracer()
        let recorder = SpanAttributeRecorder(tracer: tracer)
        let span = recorder.startSpan(DeliveryTracing.attemptSpan, context: .topLevel, ofKind: .client)
        let attempt = DeliveryTracing.AttemptSpan(span: span, recorder: recorder,
                                                  provider: "apns", position: 3, attempt: 2, platform: "ios",
                                                  sendID: "send-1")
        DeliveryTracing.endAttempt(attempt, answer: answer, step: step)
        return try #require(tracer.finishedSpans.first)
    }

    @Test("rejected: the status, the outcome and the provider's reason code; the span failed")
    func rejected() throws {
        let rejected = PushOutcome.Rejected(status: 400, reason: "BadDeviceToken", code: NorqError.Code(rawValue: "apns/BadDeviceToken"),
                                            classification: .permanent)
        let span = try Self.ended(answer: .success(DeliveryResponse(status: 400, classification: .permanent)),
                                  step: .done(.rejected(rejected), lastResponse: nil))
        #expect(span.attributes.get("http.response.status_code") == .int64(400))
        #expect(span.attributes.get("norq.outcome") == .string("rejected"))
        #expect(span.attributes.get("norq.error.code") == .string("apns/BadDeviceToken"))
        #expect(span.attributes.get("norq.provider") == .string("apns") && span.attributes.get("norq.platform") == .string("ios"))
        #expect(span.attributes.get("norq.target.position") == .int64(3) && span.attributes.get("norq.attempt") == .int64(2))
        #expect(span.attributes.get("norq.send.id") == .string("send-1"))
        #expect(span.status?.code == .error)
    }

    @Test("a transport failure that is retried: the failure's code, the retry's delay; the span did not fail")
    func failedThenRetried() throws {
        let failure = NorqError(.transportFailed, "reset")
        let span = try Self.ended(answer: .failure(failure),
                                  step: .retry(after: .milliseconds(1_500), lastResponse: nil, lastError: failure,
                                               possiblyProcessed: false))
        #expect(span.attributes.get("norq.error.code") == .string(failure.code.rawValue))
        #expect(span.attributes.get("norq.outcome") == .string("retry"))
        #expect(span.attributes.get("norq.retry.delay_ms") == .int64(1_500))
        #expect(span.attributes.get("http.response.status_code") == nil && span.status == nil)
    }

    @Test("a failure that ends the target: the outcome's code replaces the answer's, once")
    func failedForGood() throws {
        let answer = NorqError(.transportFailed, "reset")
        let final = NorqError(.deadlineExceeded, "gave up")
        let span = try Self.ended(answer: .failure(answer), step: .done(.failed(final), lastResponse: nil))
        #expect(span.attributes.get("norq.error.code") == .string(final.code.rawValue))
        #expect(span.attributes.get("norq.outcome") == .string("failed") && span.status?.code == .error)
    }
}
