import Metrics
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
