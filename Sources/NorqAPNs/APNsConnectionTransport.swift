import NorqCore
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// The HTTP/2 transport: one connection pool per endpoint, TLS 1.2+ with ALPN h2, certificate verification on.
final class APNsConnectionTransport: APNsTransport {
    private let settings: APNsConnectionSettings
    private let logger: Logger
    private let group: any EventLoopGroup
    /// The pools of the configured endpoints (sandbox, production, broadcast), made at init: found without a lock.
    private let configuredPools: [APNsConnectionPool]
    /// Pools of any other endpoint, made on first use.
    private let pools = Mutex<[APNsEndpoint: APNsConnectionPool]>([:])
    private let outstanding = Atomic<Int>(0)
    private let isShutDown = Atomic<Bool>(false)

    init(configuration: APNsConfiguration, logger: Logger,
         group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) throws(NorqError) {
        self.logger = logger
        self.group = group
        self.settings = APNsConnectionSettings(
            sslContext: try Self.makeSSLContext(configuration),
            proxy: configuration.proxy,
            tokenAuth: configuration.authentication.isToken,
            connectionsPerEndpoint: max(1, configuration.connectionsPerEndpoint),
            maxStreamsPerConnection: max(1, configuration.maxConcurrentStreamsPerConnection),
            pingInterval: configuration.pingInterval)
        var configured: [APNsConnectionPool] = []
        for endpoint in [configuration.sandboxEndpoint, configuration.productionEndpoint,
                         configuration.broadcastEndpoint(for: .sandbox), configuration.broadcastEndpoint(for: .production)]
        where !configured.contains(where: { $0.endpoint == endpoint }) {
            configured.append(APNsConnectionPool(endpoint: endpoint, settings: settings, logger: logger, group: group))
        }
        self.configuredPools = configured
    }

    static func makeSSLContext(_ configuration: APNsConfiguration) throws(NorqError) -> NIOSSLContext {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        tls.certificateVerification = .fullVerification
        if let pem = configuration.additionalTrustRootsPEM {
            do {
                // Bundles concatenated without a trailing newline are common; keep each block on its own lines.
                let normalized = pem.replacing("-----END CERTIFICATE-----", with: "-----END CERTIFICATE-----\n")
                let certificates = try NIOSSLCertificate.fromPEMBytes(Array(normalized.utf8))
                guard !certificates.isEmpty else { throw NorqError(.apnsInvalidTrustRoots, "no certificate") }
                tls.additionalTrustRoots = [.certificates(certificates)]
            } catch {
                throw NorqError(.apnsInvalidTrustRoots,
                                "the extra CA certificates\(configuration.caPath.map { " (\($0))" } ?? "") are not PEM certificates")
            }
        }
        if case .certificate(let credentials) = configuration.authentication {
            do {
                switch credentials.material {
                case .pem(let chainPEM, let keyPEM):
                    let chain = try NIOSSLCertificate.fromPEMBytes(Array(chainPEM.utf8))
                    guard !chain.isEmpty else { throw NorqError(.apnsInvalidCertificate, "empty chain") }
                    let key: NIOSSLPrivateKey
                    if let passphrase = credentials.passphrase {
                        let bytes = Array(passphrase.utf8)
                        key = try NIOSSLPrivateKey(bytes: Array(keyPEM.utf8), format: .pem) { provide in provide(bytes) }
                    } else {
                        key = try NIOSSLPrivateKey(bytes: Array(keyPEM.utf8), format: .pem)
                    }
                    tls.certificateChain = chain.map { .certificate($0) }
                    tls.privateKey = .privateKey(key)
                case .pkcs12(let bytes):
                    let bundle = try NIOSSLPKCS12Bundle(buffer: bytes, passphrase: credentials.passphrase.map { Array($0.utf8) })
                    tls.certificateChain = bundle.certificateChain.map { .certificate($0) }
                    tls.privateKey = .privateKey(bundle.privateKey)
                }
            } catch {
                throw NorqError(.apnsInvalidCertificate,
                                "cannot load the APNs client certificate from \(credentials.source): wrong format or passphrase")
            }
        }
        do {
            return try NIOSSLContext(configuration: tls)
        } catch {
            throw NorqError(.apnsInvalidCertificate, "cannot build the TLS context: \(error)")
        }
    }

    private func pool(for endpoint: APNsEndpoint) -> APNsConnectionPool {
        for pool in configuredPools where pool.endpoint == endpoint { return pool }
        return pools.withLock { pools in
            if let pool = pools[endpoint] { return pool }
            let pool = APNsConnectionPool(endpoint: endpoint, settings: settings, logger: logger, group: group)
            pools[endpoint] = pool
            return pool
        }
    }

    func start(_ request: APNsWireRequest, deadline: ContinuousClock.Instant, completion: @escaping APNsCompletion) {
        guard !isShutDown.load(ordering: .relaxed) else {
            completion(.failure(NorqError(.providerShutDown, "the APNs provider is shut down")))
            return
        }
        let pool = pool(for: request.endpoint)
        outstanding.add(1, ordering: .relaxed)
        let remaining = ContinuousClock.now.duration(to: deadline)
        let (seconds, attoseconds) = remaining.components
        let nioDeadline = NIODeadline.now() + .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        let box = APNsRequestBox(request: request, deadline: nioDeadline) { result in
            self.outstanding.subtract(1, ordering: .relaxed)
            completion(result)
        }
        guard remaining > .zero else {
            box.deadlineExceeded()
            return
        }
        // The deadline timer is armed by the connection's event loop when it takes the request.
        pool.submit(box)
    }

    func shutdown() async {
        isShutDown.store(true, ordering: .relaxed)
        let all = configuredPools + pools.withLock { Array($0.values) }
        for pool in all {
            await pool.shutdown(outstanding: { self.outstanding.load(ordering: .relaxed) })
        }
    }
}
