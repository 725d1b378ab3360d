import Metrics
import NorqHTTP2
import Synchronization

/// swift-metrics instruments of the APNs transport.
enum Metrics {
    private static let openConnections = Atomic<Int>(0)
    static let connectionsGauge = Gauge(label: "norq_apns_open_connections")
    static let streamsOpened = Counter(label: "norq_apns_streams_opened_total")
    static let streamsCompleted = Counter(label: "norq_apns_streams_completed_total")
    static let streamsRequeued = Counter(label: "norq_apns_streams_requeued_total")
    static let streamsCancelled = Counter(label: "norq_apns_streams_cancelled_total")

    static func connectionOpened() {
        let value = openConnections.add(1, ordering: .relaxed).newValue
        connectionsGauge.record(value)
    }

    static func connectionClosed() {
        let value = openConnections.subtract(1, ordering: .relaxed).newValue
        connectionsGauge.record(value)
    }
}

/// The APNs names of NorqHTTP2's connection and stream events.
struct APNsTransportMetrics: HTTP2ClientObserver {
    func connectionOpened() { Metrics.connectionOpened() }
    func connectionClosed() { Metrics.connectionClosed() }
    func streams(opened: Int, completed: Int, requeued: Int, cancelled: Int) {
        if opened > 0 { Metrics.streamsOpened.increment(by: opened) }
        if completed > 0 { Metrics.streamsCompleted.increment(by: completed) }
        if requeued > 0 { Metrics.streamsRequeued.increment(by: requeued) }
        if cancelled > 0 { Metrics.streamsCancelled.increment(by: cancelled) }
    }
}
