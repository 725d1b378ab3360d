// swift-tools-version: 6.1
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "norq-swift",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Norq", targets: ["Norq"]),
        .library(name: "NorqCore", targets: ["NorqCore"]),
        .library(name: "NorqStore", targets: ["NorqStore"]),
        .library(name: "NorqConfig", targets: ["NorqConfig"]),
        .library(name: "NorqTemplates", targets: ["NorqTemplates"]),
        .library(name: "NorqAPNs", targets: ["NorqAPNs"]),
        .library(name: "NorqTesting", targets: ["NorqTesting"]),
        .library(name: "NorqConsole", targets: ["NorqConsole"]),
        .library(name: "NorqStoreSQLite", targets: ["NorqStoreSQLite"]),
        .library(name: "NorqStorePostgres", targets: ["NorqStorePostgres"]),
        .library(name: "NorqFCM", targets: ["NorqFCM"]),
        .library(name: "NorqProviderTesting", targets: ["NorqProviderTesting"]),
        .library(name: "NorqWebPush", targets: ["NorqWebPush"]),
        .library(name: "NorqExpo", targets: ["NorqExpo"]),
        .library(name: "NorqZlib", targets: ["NorqZlib"]),
        .executable(name: "norq", targets: ["norq"]),
        .library(name: "NorqServer", targets: ["NorqServer"]),
        .library(name: "NorqBuiltIns", targets: ["NorqBuiltIns"]),
        .library(name: "NorqLocalEmulators", targets: ["NorqLocalEmulators"]),
        .library(name: "NorqAPI", targets: ["NorqAPI"]),
        .library(name: "NorqClient", targets: ["NorqClient"]),
        // Norq's OTLP/HTTP tracer and exporter (the one `telemetry: { traces: otlp }` uses), for library users who
        // give `NotificationRouter` a tracer.
        .library(name: "NorqOTLP", targets: ["NorqOTLP"]),
    ],
    // `swift build --traits OTLP`: `norq serve` can export spans through swift-otel (`telemetry: { traces: swift-otel }`);
    // without the trait such a configuration fails at load (`config/otlp-not-built`). `traces: otlp` (NorqOTLP,
    // Norq's own exporter) needs no trait.
    traits: [
        .trait(name: "OTLP", description: "norq serve exports spans with swift-otel (OTLP/HTTP)"),
    ],
    dependencies: [
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        // `swift package generate-documentation --target Norq`: the DocC catalog in Sources/Norq/Norq.docc. A plugin
        // only: nothing of it is built by `swift build`.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // Durable delivery (issue 18): the embedded SQLite store and the PostgreSQL store.
        .package(url: "https://github.com/vapor/sqlite-nio.git", from: "1.13.2"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        // `norq serve` (issue 19): the HTTP API and its Prometheus metrics.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // Web Push to push services that speak HTTP/1.1 only (issue 16; see providers/webpush.md).
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        // `norq serve` (issue 19): the request-body deadline handler sees HTTP parts as swift-http-types.
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        // Spec-first API (issue 33): the code generated from docs/openapi.yaml (scripts/generate-openapi.sh, committed,
        // so no build compiles the generator) needs its runtime; the client's transport is AsyncHTTPClient's, which
        // the package already builds for Web Push.
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client.git", from: "1.5.0"),
        // Tracing (issue 33): spans of the API request, the enqueue, the worker's claim and each provider attempt.
        // Hummingbird already builds it (its TracingMiddleware).
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        // The swift-otel exporter of `telemetry: { traces: swift-otel }` (issue 33): only with the `OTLP` trait (it adds minutes
        // to a fresh build, so the default build and CI do not compile it). Its OTLP/HTTP exporter only (no gRPC).
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
        // Tests only: property-based round trips of the stored values (issue 29).
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
    ],
    targets: [
        .target(
            name: "NorqCore",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "OrderedCollections", package: "swift-collections"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        // NorqStore (issue 29): the durable kit: the DeliveryStore protocol, its rules (leases, retries, pruning),
        // group commit, the in-memory store and the PostgreSQL connection settings (a value type, so that the
        // configuration loader validates `store.postgres` without linking PostgresNIO). No I/O of its own.
        .target(
            name: "NorqStore",
            dependencies: [
                "NorqCore",
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "NorqConfig",
            dependencies: ["NorqCore", "NorqStore", .product(name: "Yams", package: "Yams")],
            swiftSettings: strict
        ),
        .target(
            name: "NorqTemplates",
            dependencies: [
                "NorqCore", .product(name: "Yams", package: "Yams"),
                .product(name: "OrderedCollections", package: "swift-collections"),
            ],
            swiftSettings: strict
        ),
        // NorqHTTP2: the provider-neutral HTTP/2 client (issue 14). NIO only, no Norq target.
        .target(
            name: "NorqHTTP2",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "NorqHTTP2Tests",
            dependencies: [
                "NorqHTTP2", "NorqTesting",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "NorqAPNs",
            dependencies: [
                "NorqCore", "NorqHTTP2",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "OrderedCollections", package: "swift-collections"),
            ],
            swiftSettings: strict
        ),
        // Web Push (issue 16): RFC 8030/8291/8292 provider; the push-service emulator lives in NorqTesting.
        .target(
            name: "NorqWebPush",
            dependencies: [
                "NorqCore", "NorqHTTP2",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "OrderedCollections", package: "swift-collections"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "NorqWebPushTests",
            dependencies: [
                "NorqWebPush", "NorqCore", "NorqHTTP2", "NorqTesting", "Norq", "NorqConfig", "NorqProviderTesting",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // The system zlib (issue 31): gzip of Expo request bodies, and its inverse in the Expo emulator. A module map,
        // no package: zlib ships with every Linux distribution's dev packages and with the macOS SDK.
        .systemLibrary(name: "CNorqZlib", path: "Sources/CNorqZlib"),
        // Gzip and gunzip over CNorqZlib, shared by the Expo provider and the Expo emulator (neither depends on the other).
        .target(name: "NorqZlib", dependencies: ["CNorqZlib"], swiftSettings: strict),
        .testTarget(name: "NorqZlibTests", dependencies: ["NorqZlib"], swiftSettings: strict),
        // Expo (issue 31): batched sends (<= 100 recipients of one project), tickets and receipts, on NorqHTTP2.
        .target(
            name: "NorqExpo",
            dependencies: [
                "NorqCore", "NorqHTTP2", "NorqZlib",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "OrderedCollections", package: "swift-collections"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "NorqExpoTests",
            dependencies: [
                "NorqExpo", "NorqCore", "NorqTesting", "NorqProviderTesting", "Norq", "NorqConfig", "NorqBuiltIns",
                "NorqStore", "NorqHTTP2",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "OrderedCollections", package: "swift-collections"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "Norq",
            dependencies: ["NorqStore", 
                "NorqCore", "NorqConfig", "NorqTemplates", "NorqSpanAttributes",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "OrderedCollections", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strict
        ),
        // The list Norq's spans hand their attributes over in (no dictionary per span), and the protocol of a span
        // that takes it (NorqOTLP's); other tracers get `SpanAttributes`. Package-only.
        .target(
            name: "NorqSpanAttributes",
            dependencies: [.product(name: "Tracing", package: "swift-distributed-tracing")],
            swiftSettings: strict
        ),
        .testTarget(
            name: "NorqSpanAttributesTests",
            dependencies: ["NorqSpanAttributes", .product(name: "Tracing", package: "swift-distributed-tracing")],
            swiftSettings: strict
        ),
        // Norq's OTLP tracer (issue 33): spans of swift-distributed-tracing exported over OTLP/HTTP (protobuf) with
        // a bounded buffer and no task hop per span; `telemetry.traces: otlp` of norq serve.
        .target(
            name: "NorqOTLP",
            dependencies: [
                "NorqSpanAttributes",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "NorqOTLPTests",
            dependencies: [
                "NorqOTLP", "NorqSpanAttributes",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // Tests only (issue 33): a tracer that speaks W3C `traceparent` and keeps its finished spans in memory, to
        // check the parent-child chain of a send across the store.
        .target(
            name: "NorqTracingTesting",
            dependencies: [.product(name: "Tracing", package: "swift-distributed-tracing")],
            swiftSettings: strict
        ),
        .target(
            name: "NorqTesting",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                // RS256 verification of the FCM emulator's OAuth assertions (issue 15).
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOHTTP1", package: "swift-nio"),  // Web Push emulator: HTTP/1.1 mode and the HTTP/2 stream codec
                "NorqZlib",  // Expo emulator: gzip request bodies
            ],
            swiftSettings: strict
        ),
        // The misbehaving raw-frame HTTP/2 server of the hardening tests: test-only (no product, so the shipped `norq`
        // binary does not link it).
        .target(
            name: "NorqHostileTesting",
            dependencies: [
                "NorqTesting",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "norq",
            dependencies: ["NorqStore", 
                "Norq", "NorqCore", "NorqConfig", "NorqTemplates", "NorqAPNs", "NorqTesting", "NorqFCM",
                "NorqWebPush", "NorqBuiltIns", "NorqLocalEmulators",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                "NorqStoreSQLite", "NorqStorePostgres",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                "NorqServer", "NorqPreview", "NorqOTLP",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OTel", package: "swift-otel", condition: .when(traits: ["OTLP"])),
            ],
            // Not `Sources/norq`: it would differ from `Sources/Norq` only by case (macOS file systems).
            path: "Sources/NorqCLI",
            swiftSettings: strict
        ),
        // Every built-in provider type in one registry (`ProviderTypeRegistry.builtIn`, issue 34): the CLI's, and the
        // one-call registry for library users. NorqConfig and Norq know no provider, so it lives here.
        .target(
            name: "NorqBuiltIns",
            dependencies: ["NorqConfig", "NorqAPNs", "NorqFCM", "NorqWebPush", "NorqConsole", "NorqExpo"],
            swiftSettings: strict
        ),
        // The in-process emulators (NorqTesting) started for a configuration, its providers pointed at them: what
        // `norq send --emulator` and the library example use (issue 34). Not for production.
        .target(
            name: "NorqLocalEmulators",
            dependencies: [
                "NorqCore", "NorqConfig", "NorqAPNs", "NorqFCM", "NorqWebPush", "NorqExpo", "NorqTesting",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        // README.md's "Library use", runnable (issue 34): `swift run norq-example-library --emulator`.
        .executableTarget(
            name: "norq-example-library",
            dependencies: [
                "Norq", "NorqBuiltIns", "NorqConfig", "NorqLocalEmulators", "NorqTemplates",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "examples/library",
            swiftSettings: strict
        ),
        // Every example in README.md and docs/ runs as written (issue 34): the runnable shell blocks against the
        // emulators or a local `norq serve`, and the library example; both executables are run, not linked.
        .testTarget(
            name: "NorqExamplesTests",
            dependencies: ["norq", "norq-example-library"],
            swiftSettings: strict
        ),
        // The `console` provider (Norq's): prints each prepared request instead of sending it (issue 17).
        .target(
            name: "NorqConsole",
            dependencies: ["NorqCore", .product(name: "OrderedCollections", package: "swift-collections")],
            swiftSettings: strict
        ),
        .testTarget(name: "NorqConsoleTests", dependencies: ["NorqConsole", "NorqCore"], swiftSettings: strict),
        .testTarget(name: "NorqCoreTests", dependencies: ["NorqCore"], swiftSettings: strict),
        .testTarget(name: "NorqConfigTests", dependencies: ["NorqConfig", "NorqCore"],
                    resources: [.copy("Fixtures")], swiftSettings: strict),
        .testTarget(name: "NorqTemplatesTests", dependencies: ["NorqTemplates", "NorqCore"], swiftSettings: strict),
        .testTarget(
            name: "NorqAPNsTests",
            dependencies: ["NorqAPNs", "NorqCore", "NorqHTTP2", "NorqTesting", "NorqProviderTesting",
                           .product(name: "Crypto", package: "swift-crypto"),
                           .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strict
        ),
        .testTarget(
            name: "NorqTests",
            dependencies: ["NorqHostileTesting", 
                "Norq", "NorqCore", "NorqAPNs", "NorqConfig", "NorqTemplates", "NorqTesting", "NorqProviderTesting",
                "NorqSpanAttributes", "NorqTracingTesting",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "NorqTestingTests",
            dependencies: ["NorqHostileTesting", 
                "NorqTesting",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "NorqCLITests",
            dependencies: ["NorqHostileTesting", 
                "norq", "NorqCore", "NorqTesting",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        // Durable delivery (issue 18): the DeliveryStore protocol and the in-memory store live in NorqCore; each
        // database is its own target so a user who does not need PostgreSQL does not link it.
        .target(
            name: "NorqStoreSQLite",
            dependencies: ["NorqStore", 
                "NorqCore",
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "NorqStorePostgres",
            dependencies: ["NorqStore", 
                "NorqCore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "NorqStoreTests",
            dependencies: ["NorqStore", 
                "norq", "NorqCore", "NorqConfig", "NorqStoreSQLite", "NorqStorePostgres", "Norq", "NorqAPNs", "NorqTesting",
                "NorqProviderTesting", "NorqExpo",
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "OrderedCollections", package: "swift-collections"),
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        // `norq serve` (issue 19): the router as an authenticated HTTP service on Hummingbird 2.
        .target(
            name: "NorqServer",
            dependencies: ["NorqStore", 
                "Norq", "NorqCore", "NorqConfig", "NorqTemplates", "NorqAPNs", "NorqSpanAttributes",
                "NorqAPI",  // the documents it answers with, generated from docs/openapi.yaml (issue 33)
                // The generated documents' free-form parts (OpenAPIObjectContainer, OpenAPIValueContainer).
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "OrderedCollections", package: "swift-collections"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "NorqServerTests",
            dependencies: [
                "NorqServer", "NorqTracingTesting", "NorqStoreSQLite",
                "NorqAPI",  // OpenAPISpecTieTests: the generated documents
                .product(name: "Tracing", package: "swift-distributed-tracing"), "NorqCore", "NorqStore", "NorqConfig", "norq", "NorqTesting",
                "NorqLocalEmulators", "NorqBuiltIns", "NorqAPNs", "NorqWebPush", "Norq",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        // The request and response types of docs/openapi.yaml, generated (Generated/, scripts/generate-openapi.sh):
        // what the server answers with and the client reads (issue 33).
        .target(
            name: "NorqAPI",
            dependencies: [.product(name: "OpenAPIRuntime", package: "swift-openapi-runtime")],
            exclude: ["Generated/openapi.yaml.sha256"],
            swiftSettings: strict
        ),
        // A Swift client of a norq server (issue 33): the generated client of docs/openapi.yaml over AsyncHTTPClient,
        // with the API key as a bearer token.
        .target(
            name: "NorqClient",
            dependencies: [
                "NorqAPI",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "NorqClientTests",
            dependencies: [
                "NorqClient", "NorqAPI", "NorqServer", "Norq", "NorqConfig", "NorqStore", "NorqTemplates", "NorqConsole",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // `norq preview` (issue 32): the template author's local page (127.0.0.1 only) showing a template as each
        // platform draws it, the exact request per routed provider and the findings; re-rendered on save (SSE).
        // Its own target so that NorqServer stays the API server.
        .target(
            name: "NorqPreview",
            dependencies: [
                "Norq", "NorqCore", "NorqConfig", "NorqTemplates",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "OrderedCollections", package: "swift-collections"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "NorqPreviewTests",
            dependencies: [
                "NorqPreview", "Norq", "NorqCore", "NorqConfig", "NorqTemplates", "NorqBuiltIns", "norq",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        // The fake provider and the provider conformance suite, for our tests and third-party providers (issue 15).
        .target(name: "NorqProviderTesting", dependencies: ["NorqCore"], swiftSettings: strict),
        // FCM HTTP v1 provider (issue 15).
        .target(
            name: "NorqFCM",
            dependencies: [
                "NorqCore",
                // The apns block of an FCM message reuses the APNs payload rules.
                "NorqAPNs",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "OrderedCollections", package: "swift-collections"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                "NorqHTTP2",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "NorqFCMTests",
            dependencies: [
                "NorqFCM", "NorqCore", "NorqAPNs", "NorqTesting", "NorqProviderTesting", "Norq", "NorqHTTP2",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // Templates' payload_bytes and size checks measured by the providers' own payload code (issue 15).
        .testTarget(
            name: "NorqTemplatePayloadTests",
            dependencies: ["NorqTemplates", "NorqCore", "NorqConfig", "NorqAPNs", "NorqFCM", "NorqWebPush"],
            swiftSettings: strict
        ),
    ]
)
